// Package absence holds the two-snapshot rule for acting on what a snapshot does not hold
// (DESIGN.md invariant 7): a thing absent on a complete snapshot becomes action only when it
// was already absent on an earlier complete snapshot seen by this process. Orphan collection
// (provision: instances no NodeClaim names) and garbage collection (lifecycle: NodeClaims whose
// instance the cloud no longer lists) both use it.
package absence

import "sync"

// Sightings remembers, by id, the revision of the snapshot on which each suspect was first seen.
// The zero value is ready; it is safe for concurrent use. It only delays action: a cold process
// waits one more snapshot.
type Sightings struct {
	mu    sync.Mutex
	first map[string]int64
}

// Confirm records the suspects of the snapshot at revision and returns, in the order given, the
// ones first seen on an earlier revision (confirmed: act on them). A suspect first seen now, or
// on this or a later revision (a redelivered or older snapshot), waits; an id not among suspects
// any more is forgotten (it came back, or it is gone).
func (s *Sightings) Confirm(revision int64, suspects []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == nil {
		s.first = map[string]int64{}
	}
	seen := make(map[string]bool, len(suspects))
	var out []string
	for _, id := range suspects {
		seen[id] = true
		rev, ok := s.first[id]
		switch {
		case !ok:
			s.first[id] = revision
		case rev < revision:
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
