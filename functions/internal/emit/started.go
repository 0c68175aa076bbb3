package emit

import (
	"sort"
	"sync"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// Started remembers the voluntary disruptions a handler started (a consolidation, a drifted
// node's replacement) until a snapshot shows them.
//
// A disruption's taint commands (and its replacements' CreateNodeClaim) reach the cluster
// through the agent a moment after the decision; the snapshots published meanwhile show
// neither, so the next message would find nothing in flight and start the same nodes again.
// When that start launches replacements, the launch step's cloud check may refuse it
// (launch.ErrBehindCloud), but a delete leaves no trace in the cloud, and a second start
// launches capacity for pods the first is already moving; make scale (N = 1,000,
// docs/scale.md) launched four replacements for nine nodes that way, and every surplus node was
// consolidated again. So a handler waits, for the nodes of a disruption it started, until a
// snapshot shows it (one of its nodes tainted karpenter.sh/disrupted, being deleted or gone)
// or disruption.ReplacementLock has passed (its taints refused by the agent's ledger, say).
//
// It is a hint kept in memory, like Decided: a new process (a cold start) has none and decides
// as before, relying on the launch step's check and the agent's ledger; it only ever makes a
// handler wait, never act. The zero value is ready to use.
type Started struct {
	mu sync.Mutex
	by map[string]startedOne
}

type startedOne struct {
	nodes []string
	at    time.Time
}

// Record notes the disruption id started at (the function's clock) over nodes.
func (s *Started) Record(id string, nodes []string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]startedOne{}
	}
	s.by[id] = startedOne{nodes: append([]string(nil), nodes...), at: at}
}

// Unseen returns, for each node of a disruption started here that snap does not show yet, the
// disruption's ID; disruptions snap shows, or started disruption.ReplacementLock or more before
// now, are forgotten.
func (s *Started) Unseen(snap *events.Snapshot, now time.Time) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.by) == 0 {
		return nil
	}
	shows := map[string]bool{}
	present := map[string]bool{}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		present[n.Name] = true
		shows[n.Name] = disruption.MarkedForDeletion(n, nil)
	}
	ids := make([]string, 0, len(s.by))
	for id := range s.by {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := map[string]string{}
	for _, id := range ids {
		one := s.by[id]
		seen := now.Sub(one.at) >= disruption.ReplacementLock
		for _, n := range one.nodes {
			seen = seen || shows[n] || !present[n]
		}
		if seen {
			delete(s.by, id)
			continue
		}
		for _, n := range one.nodes {
			if _, ok := out[n]; !ok {
				out[n] = id
			}
		}
	}
	return out
}
