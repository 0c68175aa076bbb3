package kube

import (
	"strconv"
	"testing"
)

func TestRevisionsChangedSince(t *testing.T) {
	r := NewRevisions(1000)
	r1 := r.Bump(KindNode, "n1", OpAdd)    // 1001
	r2 := r.Bump(KindPod, "a/p", OpAdd)    // 1002
	r3 := r.Bump(KindNode, "n1", OpUpdate) // 1003
	if r1 != 1001 || r2 != 1002 || r3 != 1003 || r.Current() != 1003 {
		t.Fatalf("revisions %d %d %d current %d, want 1001..1003 (base 1000 + one per event)", r1, r2, r3, r.Current())
	}
	checks := []struct {
		kind, key string
		rev       int64
		want      bool
	}{
		{KindNode, "n1", 1002, true},  // updated at 1003
		{KindNode, "n1", 1003, false}, // nothing after 1003
		{KindPod, "a/p", 1002, false},
		{KindPod, "a/p", 1001, true},
		{KindPod, "a/other", 1001, false}, // never seen since base
		{KindNode, "n1", 999, true},       // before this tracker's history
		{KindNode, "n1", 5000, true},      // from the future: unknown
	}
	for _, c := range checks {
		if got := r.ChangedSince(c.kind, c.key, c.rev); got != c.want {
			t.Errorf("ChangedSince(%s, %s, %d) = %v, want %v", c.kind, c.key, c.rev, got, c.want)
		}
	}
	if !r.CreatedSince(KindNode, "n1", 1000) || r.CreatedSince(KindNode, "n1", 1001) {
		t.Errorf("CreatedSince(n1): added at 1001, so true for 1000 and false for 1001")
	}
	r.PodBound("n1", r.Current())
	if !r.NodePodsChangedSince("n1", 1002) || r.NodePodsChangedSince("n1", 1003) || r.NodePodsChangedSince("n2", 1001) {
		t.Errorf("NodePodsChangedSince: pod bound to n1 at 1003 only")
	}
}

func TestRevisionsTombstonePruning(t *testing.T) {
	r := NewRevisions(0)
	// maxTombstones+1 deletions force a prune of the oldest half.
	for i := 0; i <= maxTombstones; i++ {
		r.Bump(KindPod, "ns/p"+strconv.Itoa(i), OpDelete)
	}
	// p0 was deleted at revision 1 and forgotten: a question from revision 0 must still say
	// "changed" (conservative), one from after the forgotten range must not.
	if !r.ChangedSince(KindPod, "ns/p0", 0) {
		t.Errorf("forgotten deletion at revision 1 must count as a change since 0")
	}
	if r.ChangedSince(KindPod, "ns/never", r.Current()) {
		t.Errorf("unknown key at the current revision has not changed")
	}
	if got := len(r.tombstones); got > maxTombstones {
		t.Errorf("tombstones %d, want <= %d", got, maxTombstones)
	}
}

// A leader advances its revisions once it holds the Lease, possibly after its informers handled
// events; the count of events handled must go on from there (the local-dev settle check read
// Current − Base and lost the events before the advance).
func TestBumpsSurviveAdvance(t *testing.T) {
	r := NewRevisions(100)
	r.Bump("Node", "n1", OpAdd)
	r.Bump("Pod", "default/p1", OpAdd)
	if got := r.Advance(1 << 40); got != 1<<40 {
		t.Fatalf("Advance returned %d, want %d", got, int64(1<<40))
	}
	r.Bump("Pod", "default/p1", OpUpdate)
	if got := r.Bumps(); got != 3 {
		t.Fatalf("Bumps %d after 2 events, an advance and 1 event; want 3", got)
	}
	if got := r.Current() - r.Base(); got != 1 {
		t.Fatalf("Current − Base %d, want 1 (the advance restarts it)", got)
	}
}
