package disruption

import (
	"strings"
	"testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func riM5(typ string, count int) *apisv1.Commitments {
	return &apisv1.Commitments{Reservations: []apisv1.Reservation{{Name: "ri", InstanceType: typ, Region: "us-east-1", Count: count}}}
}

// TestCsCommitmentMoveOffReservedSavesNothing is TestCsSingleNodeDelete's cluster (two m5.xlarge,
// 0.192 USD/h each at list, a 1-CPU pod on each) under a Reserved Instance for 2 × m5.xlarge:
// both nodes cost 0, so deleting either moves a pod and saves nothing, and nothing is decided.
// With the reservation for one instance, a (first by name) takes it and b costs 0.192: deleting
// b saves 0.192, deleting a would save nothing.
func TestCsCommitmentMoveOffReservedSavesNothing(t *testing.T) {
	build := func(count int) *csCluster {
		c := csNewCluster(t, csT0)
		c.pool("default", csM5OnDemand()...)
		c.node("a", "default", "m5.xlarge", "on-demand")
		c.node("b", "default", "m5.xlarge", "on-demand")
		c.pod("p1", "a", "1", "1Gi")
		c.pod("p2", "b", "1", "1Gi")
		c.snap.Commitments = riM5("m5.xlarge", count)
		return c
	}
	for _, mode := range []Mode{ModePrefix, ModeSearch} {
		s := build(2).state()
		if s.Node("a").Price != 0 || s.Node("b").Price != 0 {
			t.Fatalf("prices a=%v b=%v, want 0 under the reservation", s.Node("a").Price, s.Node("b").Price)
		}
		if d, r := Consolidate(s, Options{Mode: mode}); d != nil {
			t.Fatalf("mode %d: %s; want none (moving off a paid reservation saves nothing)", mode, d)
		} else if !strings.Contains(strings.Join(r.Tried, "\n"), "saves nothing") {
			t.Errorf("mode %d: tried %v, want a \"saves nothing\" reason", mode, r.Tried)
		}
		d, r := Consolidate(build(1).state(), Options{Mode: mode})
		if d == nil {
			t.Fatalf("mode %d, one reserved instance: no decision: %v", mode, r.Tried)
		}
		if d.Method != MethodDelete || csNames(d) != "[b]" || !csNear(d.Savings, 0.192) {
			t.Fatalf("mode %d: %s; want delete [b] saving 0.192", mode, d)
		}
	}
}

// TestCsCommitmentReplacementPricing is TestCsSingleNodeReplace's cluster (an m5.2xlarge holding
// 2 × 500m, which an m5.large takes): under a Reserved Instance for the m5.2xlarge the node costs
// 0 and no replacement is cheaper; under a 1.00 USD/h Savings Plan at 30 % the node costs
// 0.384 × 0.7 = 0.2688 and the m5.large, with the commitment the node frees, 0.096 × 0.7 =
// 0.0672: the replacement saves 0.2016 (list prices: 0.288).
func TestCsCommitmentReplacementPricing(t *testing.T) {
	build := func(com *apisv1.Commitments) *State {
		c := csNewCluster(t, csT0)
		c.pool("default", csM5OnDemand()...)
		c.node("a", "default", "m5.2xlarge", "on-demand")
		c.pod("p1", "a", "500m", "1Gi")
		c.pod("p2", "a", "500m", "1Gi")
		c.snap.Commitments = com
		return c.state()
	}
	if d, _ := Consolidate(build(riM5("m5.2xlarge", 1)), Options{}); d != nil {
		t.Fatalf("reserved: %s; want none", d)
	}
	sp := &apisv1.Commitments{SavingsPlans: []apisv1.SavingsPlan{{Name: "compute", Type: apisv1.SavingsPlanCompute, CommitmentPerHour: 1, DiscountRate: 0.3}}}
	d, r := Consolidate(build(sp), Options{})
	if d == nil {
		t.Fatalf("savings plan: no decision: %v", r.Tried)
	}
	if d.Method != MethodReplace || len(d.Replacements) != 1 || d.Replacements[0].Cheapest().InstanceType.Name != "m5.large" ||
		!csNear(d.PriceBefore, 0.2688) || !csNear(d.PriceAfter, 0.0672) || !csNear(d.Savings, 0.2016) {
		t.Fatalf("%s (before %.6f after %.6f); want replace by m5.large 0.2688 → 0.0672, saving 0.2016", d, d.PriceBefore, d.PriceAfter)
	}
}
