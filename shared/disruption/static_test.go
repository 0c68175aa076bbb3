package disruption

import (
	"strings"
	"testing"
)

// TestStaticPoolNeverConsolidated: an empty node of a static NodePool (spec.replicas) is no
// candidate, whatever its consolidation policy, as Karpenter's emptiness and consolidation skip
// OwnedByStaticNodePool candidates; the same node in a dynamic pool is deleted as empty.
func TestStaticPoolNeverConsolidated(t *testing.T) {
	c := csNewCluster(t, csT0)
	np := c.pool("default", csM5OnDemand()...)
	c.node("a", "default", "m5.xlarge", "on-demand")
	c.node("b", "default", "m5.large", "on-demand")
	c.pod("p1", "a", "500m", "1Gi")
	two := int64(2)
	np.Spec.Replicas = &two
	d, r := Consolidate(c.state(), Options{})
	if d != nil {
		t.Fatalf("static pool consolidated: %s", d)
	}
	if len(r.Skipped) != 2 || !strings.Contains(r.Skipped[0].Reason, "is static (spec.replicas 2): never consolidated") {
		t.Fatalf("skipped %+v, want both nodes skipped as static", r.Skipped)
	}
	np.Spec.Replicas = nil
	if d, _ := Consolidate(c.state(), Options{}); d == nil || csNames(d) != "[b]" {
		t.Fatalf("dynamic pool: decision %v, want b deleted as empty", d)
	}
}
