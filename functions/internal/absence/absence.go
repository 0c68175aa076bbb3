// Package absence holds the two-snapshot rule for acting on what a snapshot does not hold
// (DESIGN.md invariant 7): a thing absent on a complete snapshot becomes action only when it
// was already absent on an earlier complete snapshot seen by this process. Orphan collection
// (provision: instances no NodeClaim names) and garbage collection (lifecycle: NodeClaims whose
// instance the cloud no longer lists) both use it.
package absence

import (
	"sync"
	"time"
)

// Sightings remembers, by id, the snapshot on which each suspect was first seen. The zero value
// is ready; it is safe for concurrent use. It only delays action: a cold process waits one more
// snapshot.
type Sightings struct {
	mu    sync.Mutex
	first map[string]sighting
}

// sighting names a snapshot: its revision and its time. The agent publishes its periodic
// snapshot of an unchanged cluster under the same revision at a later time; that is a second
// look (the function lists the cloud again for it), while a redelivered snapshot has both the
// same revision and the same time.
type sighting struct {
	revision int64
	at       time.Time
}

// later reports whether s was taken after f: a higher revision, or the same revision at a later
// time.
func (s sighting) later(f sighting) bool {
	return s.revision > f.revision || (s.revision == f.revision && s.at.After(f.at))
}

// Confirm records the suspects of the snapshot at revision, taken at (the snapshot's time), and
// returns, in the order given, the ones first seen on an earlier snapshot (confirmed: act on
// them). A suspect first seen now, or on this snapshot or a later one (a redelivered or older
// snapshot), waits; an id not among suspects any more is forgotten (it came back, or it is gone).
func (s *Sightings) Confirm(revision int64, at time.Time, suspects []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == nil {
		s.first = map[string]sighting{}
	}
	now := sighting{revision: revision, at: at}
	seen := make(map[string]bool, len(suspects))
	var out []string
	for _, id := range suspects {
		seen[id] = true
		first, ok := s.first[id]
		switch {
		case !ok:
			s.first[id] = now
		case now.later(first):
			out = append(out, id)
		}
	}
	for id := range s.first {
		if !seen[id] {
			delete(s.first, id)
		}
	}
	return out
}
