package consolidate

import (
	"fmt"
	"sync"
	"time"

	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// started remembers the last consolidation this handler started until a snapshot shows it.
//
// A decision's taint commands (and its replacements' CreateNodeClaim) reach the cluster through
// the agent a moment after the decision; the snapshots published meanwhile show neither, so the
// next message would find nothing in flight and decide again over the same candidates. When
// that decision launches replacements, the launch step's cloud check refuses it
// (launch.ErrBehindCloud), but a decision that launched nothing (a delete) leaves no trace in
// the cloud: a replace decided after it would launch capacity for pods the delete is already
// moving, and the surplus is consolidated again later. So the handler waits, until its last
// decision shows (a candidate tainted, being deleted or gone) or disruption.ReplacementLock
// has passed (its taints refused by the agent's ledger, say).
//
// It is a hint kept in memory, like emit.Decided: a new process (a cold start) has none and
// decides as before, relying on the launch step's check and the agent's ledger; it only ever
// makes the handler wait, never act.
type started struct {
	mu    sync.Mutex
	id    string
	nodes []string
	at    time.Time
}

// record notes a decision started at (the function's clock) over the candidate nodes.
func (s *started) record(d *disruption.Decision, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.nodes, s.at = d.ID, d.NodeNames(), at
}

// unseen returns why a new decision must wait on st: the last decision started does not show in
// it yet; "" when there is none to wait for (and the memory is cleared once it shows).
func (s *started) unseen(st *disruption.State) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == "" {
		return ""
	}
	if st.Now.Sub(s.at) >= disruption.ReplacementLock {
		s.id = ""
		return ""
	}
	for _, name := range s.nodes {
		if n := st.Node(name); n == nil || n.TaintValue != "" || n.Disrupting {
			s.id = ""
			return ""
		}
	}
	return fmt.Sprintf("consolidation %s, started at %s, does not show in revision %d yet (none of its candidates is tainted)",
		s.id, s.at.UTC().Format(time.RFC3339), st.Snapshot.Revision)
}
