package scenarios

import (
	"bytes"
	"context"
	"testing"
)

// The AMI roll-out end to end. By hand: 8 pods of 800m on "large" types (1930m allocatable for
// m5.large/c5.large in the catalog) fit two per node, so 4 nodes; budget "1" lets one node roll
// at a time; every node ends on the new AMI with no pod lost.
func TestDriftScenario(t *testing.T) {
	var out bytes.Buffer
	res, err := Drift(context.Background(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.NodesBefore != 4 {
		t.Fatalf("want 4 nodes before the roll-out, got %d", res.NodesBefore)
	}
	if res.MaxDisrupting > res.Budget {
		t.Fatalf("%d nodes disrupting at once exceeds the budget %d", res.MaxDisrupting, res.Budget)
	}
	if res.Rolled != res.NodesBefore || res.OldImagesLeft != 0 {
		t.Fatalf("want all %d nodes rolled and none on the old AMI, got %d rolled, %d left", res.NodesBefore, res.Rolled, res.OldImagesLeft)
	}
	if res.Lost != 0 || res.Bound != res.Total {
		t.Fatalf("want no pod lost and all bound: lost %d, bound %d/%d", res.Lost, res.Bound, res.Total)
	}
}
