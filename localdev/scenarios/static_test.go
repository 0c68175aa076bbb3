package scenarios

import (
	"bytes"
	"context"
	"testing"
)

// The static NodePool end to end, by hand (see Static): replicas 3 gives 3 nodes; a node deleted
// is replaced by one launch (4 in all); a new AMI rolls the 3 nodes one at a time; the 4-CPU pod, which no m5.large holds, stays pending; replicas 3 → 1 deletes 2
// NodeClaims and leaves 1 node, on which both 500m pods run (2 × 500m ≤ 1930m); no pod is lost.
func TestStaticScenario(t *testing.T) {
	var out bytes.Buffer
	res, err := Static(context.Background(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.NodesBefore != 3 || res.NodesAfterDeletion != 3 || !res.Replaced {
		t.Fatalf("nodes %d, then %d after deleting %s (replaced %v): want 3 and 3, replaced", res.NodesBefore, res.NodesAfterDeletion, res.Deleted, res.Replaced)
	}
	// The AMI roll-out replaces the 3 nodes one for one within the Drifted budget of 1: at most 1
	// tainted, at most 3 + 1 NodeClaims not being deleted at once, 3 more launches.
	if res.DriftRolled != 3 || res.MaxDriftDisrupting != 1 {
		t.Fatalf("drift rolled %d, at most %d at once: want 3 and 1", res.DriftRolled, res.MaxDriftDisrupting)
	}
	if res.Launches != 3+1+3 || res.MostNodeClaims != 4 {
		t.Fatalf("%d launches, at most %d NodeClaims: want 7 (3 + the deleted node's + 3 drift replacements) and 4", res.Launches, res.MostNodeClaims)
	}
	if !res.BigPodPending {
		t.Fatal("the 4-CPU pod was bound: pods must not size a static pool")
	}
	if res.NodesAfterScaleDown != 1 || res.ScaleDownDeletes != 2 {
		t.Fatalf("after replicas 1: %d nodes, %d NodeClaims deleted; want 1 and 2", res.NodesAfterScaleDown, res.ScaleDownDeletes)
	}
	// 3 pods; the 2 small ones bound, the big one pending.
	if res.Lost != 0 || res.Bound != 2 || res.Total != 3 {
		t.Fatalf("lost %d, bound %d/%d: want 0 lost, 2/3 bound", res.Lost, res.Bound, res.Total)
	}
}
