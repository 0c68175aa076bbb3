package disruption

import (
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// balancedPool is the pool of the Balanced tests: m5 on-demand (large 0.096, xlarge 0.192,
// 2xlarge 0.384 USD/h), two m5.2xlarge nodes b and c that a 7900m pod each fills (7910m
// allocatable), and the candidate a the test adds. b and c cost 0.768 together and 2 + 2 in
// disruption (base 1 + one default-priority pod each).
func balancedPool(t *testing.T, policy string) *csCluster {
	c := csNewCluster(t, csT0)
	np := c.pool("default", csM5OnDemand()...)
	np.Spec.Disruption.ConsolidationPolicy = policy
	for _, n := range []string{"b", "c"} {
		c.node(n, "default", "m5.2xlarge", "on-demand")
		c.pod("fill-"+n, n, "7900m", "1Gi")
	}
	return c
}

// The churn the Balanced policy exists to stop: a is an m5.xlarge with 4 × 200m pods that an
// m5.large (1930m) holds, saving 0.192 − 0.096 = 0.096 USD/h.
//
//	pool cost       = 0.192 + 2 × 0.384 = 0.96;   savings fraction    = 0.096 / 0.96 = 0.1
//	pool disruption = (1 + 4) + 2 + 2   = 9;      disruption fraction = 5 / 9       = 0.5556
//	score = 0.1 / 0.5556 = 0.18 < 1/BalancedK = 0.5: rejected.
//
// WhenEmptyOrUnderutilized takes the same move.
func TestBalancedRejectsMarginalReplace(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   bool
	}{{apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, true}, {apisv1.ConsolidationPolicyBalanced, false}} {
		c := balancedPool(t, tc.policy)
		c.node("a", "default", "m5.xlarge", "on-demand")
		for _, p := range []string{"p1", "p2", "p3", "p4"} {
			c.pod(p, "a", "200m", "256Mi")
		}
		s := c.state()
		if got := s.PoolTotals("default"); !csNear(got.Cost, 0.96) || got.DisruptionCost != 9 {
			t.Fatalf("pool totals %+v, want cost 0.96, disruption 9", got)
		}
		d, r := Consolidate(s, Options{})
		if (d != nil) != tc.want {
			t.Fatalf("%s: decision %v, want one: %v", tc.policy, d, tc.want)
		}
		if d != nil && (csNames(d) != "[a]" || d.Method != MethodReplace || !csNear(d.Savings, 0.096)) {
			t.Fatalf("%s: %s; want a replaced, saving 0.096", tc.policy, d)
		}
		if !tc.want && !strings.Contains(strings.Join(r.Tried, "\n"), "Balanced") {
			t.Errorf("the report does not say the Balanced score stopped it: %v", r.Tried)
		}
	}
}

// A move that saves enough: a is an m5.2xlarge with 2 × 500m pods, replaced by an m5.large.
//
//	pool cost       = 3 × 0.384   = 1.152;  savings fraction    = (0.384 − 0.096) / 1.152 = 0.25
//	pool disruption = (1 + 2) + 2 + 2 = 7;  disruption fraction = 3 / 7                   = 0.4286
//	score = 0.25 / 0.4286 = 0.5833 ≥ 0.5: approved.
func TestBalancedApprovesWorthwhileReplace(t *testing.T) {
	c := balancedPool(t, apisv1.ConsolidationPolicyBalanced)
	c.node("a", "default", "m5.2xlarge", "on-demand")
	c.pod("p1", "a", "500m", "1Gi")
	c.pod("p2", "a", "500m", "1Gi")
	s := c.state()
	d, r := Consolidate(s, Options{})
	if d == nil {
		t.Fatalf("no decision: %v", r.Tried)
	}
	if csNames(d) != "[a]" || d.Method != MethodReplace || !csNear(d.Savings, 0.288) {
		t.Fatalf("%s; want a replaced by an m5.large, saving 0.288", d)
	}
	sc := ScoreMove("default", 0.288, 3, s.PoolTotals("default"))
	if !csNear(sc.SavingsFraction, 0.25) || !csNear(sc.DisruptionFraction, 3.0/7) || !csNear(sc.Value(), 0.25*7/3) || !sc.Approved() {
		t.Errorf("score %+v (%.4f), want 0.25 / 0.4286 = 0.5833, approved", sc, sc.Value())
	}
}

// Empty nodes are deleted under every policy, Balanced included (Karpenter's emptiness runs
// before, and without, the score).
func TestBalancedDeletesEmptyNodes(t *testing.T) {
	c := balancedPool(t, apisv1.ConsolidationPolicyBalanced)
	c.node("a", "default", "m5.large", "on-demand")
	d, r := Consolidate(c.state(), Options{})
	if d == nil || csNames(d) != "[a]" || d.Strategy != StrategyEmptiness {
		t.Fatalf("decision %v (%v); want the empty a deleted", d, r.Tried)
	}
}

// The score's edge cases, as Karpenter's ScoreResult guards them.
func TestScoreMoveEdges(t *testing.T) {
	for _, tc := range []struct {
		name        string
		savings, dc float64
		totals      PoolTotals
		value       float64
		approved    bool
	}{
		{"no priced node", 0.1, 2, PoolTotals{Cost: 0, DisruptionCost: 4}, 0, false},
		{"no saving", 0, 2, PoolTotals{Cost: 1, DisruptionCost: 4}, 0, false},
		{"negative saving", -0.1, 2, PoolTotals{Cost: 1, DisruptionCost: 4}, 0, false},
		// 0.1 / (2/4) = 0.2
		{"below", 0.1, 2, PoolTotals{Cost: 1, DisruptionCost: 4}, 0.2, false},
		// 0.25 / (2/4) = 0.5: the threshold itself passes (score ≥ 1/k)
		{"at threshold", 0.25, 2, PoolTotals{Cost: 1, DisruptionCost: 4}, 0.5, true},
		// nothing disrupted: +Inf
		{"no disruption", 0.1, 0, PoolTotals{Cost: 1, DisruptionCost: 4}, math.Inf(1), true},
	} {
		sc := ScoreMove("p", tc.savings, tc.dc, tc.totals)
		if !csNear(sc.Value(), tc.value) && sc.Value() != tc.value || sc.Approved() != tc.approved {
			t.Errorf("%s: score %v approved %v, want %v %v", tc.name, sc.Value(), sc.Approved(), tc.value, tc.approved)
		}
	}
}

// A move across two pools gives each Balanced pool the share of the savings its candidates'
// prices make, and a pool with another policy is not scored.
//
//	"bal": a (m5.xlarge 0.192, 1 pod: disruption 2), b (m5.2xlarge 0.384, 1 pod: 2)
//	       → cost 0.576, disruption 4
//	"std": x (m5.xlarge 0.192, 1 pod: 2), WhenEmptyOrUnderutilized
//	move {a, x} saving 0.3: bal's share = 0.3 × 0.192 / 0.384 = 0.15
//	       → savings fraction 0.15 / 0.576 = 0.2604, disruption fraction 2 / 4 = 0.5, score 0.521: approved
//	move {a, x} saving 0.2: bal's share 0.1 → 0.1736 / 0.5 = 0.347: rejected, naming "bal" only.
func TestBalancedGateAcrossPools(t *testing.T) {
	c := csNewCluster(t, csT0)
	bal := c.pool("bal", csM5OnDemand()...)
	bal.Spec.Disruption.ConsolidationPolicy = apisv1.ConsolidationPolicyBalanced
	c.pool("std", csM5OnDemand()...)
	c.node("a", "bal", "m5.xlarge", "on-demand")
	c.pod("pa", "a", "100m", "128Mi")
	c.node("b", "bal", "m5.2xlarge", "on-demand")
	c.pod("pb", "b", "7900m", "128Mi")
	c.node("x", "std", "m5.xlarge", "on-demand")
	c.pod("px", "x", "100m", "128Mi")
	s := c.state()
	set := []*Candidate{{Node: s.Node("a")}, {Node: s.Node("x")}}
	if why := s.balancedGate(set, 0.3); why != "" {
		t.Errorf("saving 0.3: %s; want approved (score 0.521)", why)
	}
	why := s.balancedGate(set, 0.2)
	if !strings.Contains(why, `"bal"`) || strings.Contains(why, `"std"`) || !strings.Contains(why, "0.347") {
		t.Errorf("saving 0.2: %q; want bal rejected at 0.347, std not scored", why)
	}
}

// consolidateAfter applies to destinations: a's pod does not move onto b while b's pods
// changed within b's pool's consolidateAfter (10m), so a is replaced (m5.xlarge 0.192 → m5.large
// 0.096, saving 0.096); once b's last pod event is older than that, a's pod goes onto b and a is
// deleted (saving 0.192). b is annotated do-not-disrupt so that it is never a candidate itself.
func TestConsolidateAfterClosesDestinations(t *testing.T) {
	for _, tc := range []struct {
		bChanged time.Duration
		method   string
		savings  float64
	}{{2 * time.Minute, MethodReplace, 0.096}, {30 * time.Minute, MethodDelete, 0.192}} {
		c := csNewCluster(t, csT0)
		np := c.pool("default", csM5OnDemand()...)
		after := apisv1.MustParseNillableDuration("10m")
		np.Spec.Disruption.ConsolidateAfter = &after
		c.node("a", "default", "m5.xlarge", "on-demand")
		c.pod("pa", "a", "500m", "1Gi")
		b := c.node("b", "default", "m5.2xlarge", "on-demand")
		b.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
		pb := c.pod("pb", "b", "500m", "1Gi")
		st := metav1.NewTime(csT0.Add(-tc.bChanged))
		pb.Status.StartTime, pb.CreationTimestamp = &st, st
		d, r := Consolidate(c.state(), Options{})
		if d == nil {
			t.Fatalf("b changed %s ago: no decision: %v", tc.bChanged, r.Tried)
		}
		if csNames(d) != "[a]" || d.Method != tc.method || !csNear(d.Savings, tc.savings) {
			t.Errorf("b changed %s ago: %s; want a %s saving %.3f", tc.bChanged, d, tc.method, tc.savings)
		}
	}
}
