package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Hand-worked expectations use the m5 on-demand list prices in us-east-1 (aws.amazon.com/ec2/pricing,
// as embedded in the catalog): m5.large 0.096, m5.xlarge 0.192, m5.2xlarge 0.384 USD/h, and the
// EKS allocatable CPU of m5.large 1930m, m5.xlarge 3920m (kube-reserved 70m / 80m, see
// shared/catalog overhead rules).

func TestCsEmptiness(t *testing.T) {
	c := csNewCluster(t, csT0)
	c.pool("default", csM5OnDemand()...)
	c.node("a", "default", "m5.xlarge", "on-demand")
	c.node("b", "default", "m5.large", "on-demand")
	c.pod("p1", "a", "500m", "1Gi")
	d, r := Consolidate(c.state(), Options{})
	if d == nil {
		t.Fatalf("no decision: %v", r.Tried)
	}
	if d.Reason != apisv1.DisruptionReasonEmpty || d.Method != MethodDelete || csNames(d) != "[b]" {
		t.Fatalf("decision %s", d)
	}
	if !csNear(d.Savings, 0.096) || d.Strategy != StrategyEmptiness {
		t.Errorf("savings %.6f via %s, want 0.096 (m5.large) via emptiness", d.Savings, d.Strategy)
	}
}

func TestCsSingleNodeDelete(t *testing.T) {
	// Two m5.xlarge with one 1-CPU pod each: either pod fits beside the other (2000m < 3920m),
	// so deleting one saves 0.192. Replacing both by one node would need an m5.xlarge again
	// (2000m > m5.large's 1930m), which the same-type rule refuses.
	c := csNewCluster(t, csT0)
	c.pool("default", csM5OnDemand()...)
	c.node("a", "default", "m5.xlarge", "on-demand")
	c.node("b", "default", "m5.xlarge", "on-demand")
	c.pod("p1", "a", "1", "1Gi")
	c.pod("p2", "b", "1", "1Gi")
	for _, mode := range []Mode{ModePrefix, ModeSearch} {
		d, r := Consolidate(c.state(), Options{Mode: mode})
		if d == nil {
			t.Fatalf("mode %d: no decision: %v", mode, r.Tried)
		}
		if d.Method != MethodDelete || csNames(d) != "[a]" || !csNear(d.Savings, 0.192) {
			t.Fatalf("mode %d: %s; want delete [a] saving 0.192", mode, d)
		}
		if len(d.Placements) != 1 || d.Placements[0].Node != "b" {
			t.Errorf("placements %+v, want p1 on b", d.Placements)
		}
	}
}

func TestCsSingleNodeReplace(t *testing.T) {
	// One m5.2xlarge holding 2 × 500m: an m5.large (1930m) takes both: 0.384 → 0.096.
	c := csNewCluster(t, csT0)
	c.pool("default", csM5OnDemand()...)
	c.node("a", "default", "m5.2xlarge", "on-demand")
	c.pod("p1", "a", "500m", "1Gi")
	c.pod("p2", "a", "500m", "1Gi")
	d, r := Consolidate(c.state(), Options{})
	if d == nil {
		t.Fatalf("no decision: %v", r.Tried)
	}
	if d.Method != MethodReplace || len(d.Replacements) != 1 || !csNear(d.Savings, 0.288) {
		t.Fatalf("%s; want replace saving 0.288", d)
	}
	if got := d.Replacements[0].Cheapest().InstanceType.Name; got != "m5.large" {
		t.Errorf("replacement %s, want m5.large", got)
	}
	for _, o := range d.Replacements[0].Offerings {
		if o.PricePerHour >= 0.384 {
			t.Errorf("offering %s at %.4f would not be cheaper than the node", o.InstanceType.Name, o.PricePerHour)
		}
	}
	if d.MaxPriceAfter >= d.PriceBefore {
		t.Errorf("worst-case price %.4f not below %.4f", d.MaxPriceAfter, d.PriceBefore)
	}
}

func TestCsMultiNode(t *testing.T) {
	// Three m5.xlarge with one 1500m pod each. Deleting one node saves 0.192 (its pod fits
	// beside another: 3000m ≤ 3920m). Taking two: one pod goes beside the third node, the
	// other onto a new m5.large (1500m ≤ 1930m): 0.384 → 0.096, saving 0.288. All three need
	// two new nodes (0.192 + 0.096): the same 0.288, with more pods moved.
	c := csNewCluster(t, csT0)
	c.pool("default", csM5OnDemand()...)
	for _, n := range []string{"a", "b", "c"} {
		c.node(n, "default", "m5.xlarge", "on-demand")
		c.pod("p-"+n, n, "1500m", "2Gi")
	}
	for _, mode := range []Mode{ModePrefix, ModeSearchOnly} {
		d, r := Consolidate(c.state(), Options{Mode: mode})
		if d == nil {
			t.Fatalf("mode %d: no decision: %v", mode, r.Tried)
		}
		if len(d.Candidates) != 2 || len(d.Replacements) != 1 || !csNear(d.Savings, 0.288) {
			t.Fatalf("mode %d: %s; want 2 nodes replaced by one m5.large saving 0.288", mode, d)
		}
	}
}

func TestCsBudgets(t *testing.T) {
	mk := func(budgets ...apisv1.Budget) *State {
		c := csNewCluster(t, csT0)
		np := c.pool("default", csM5OnDemand()...)
		np.Spec.Disruption.Budgets = budgets
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			c.node(n, "default", "m5.large", "on-demand")
		}
		return c.state()
	}
	// 5 empty nodes. "40%" of 5 = 2; "10%" of 5 rounds up to 1; "0" blocks.
	for _, tc := range []struct {
		budgets []apisv1.Budget
		want    int
	}{
		{[]apisv1.Budget{{Nodes: "40%"}}, 2},
		{[]apisv1.Budget{{Nodes: "10%"}}, 1},
		{[]apisv1.Budget{{Nodes: "3"}, {Nodes: "2"}}, 2},
		{[]apisv1.Budget{{Nodes: "0"}}, 0},
		{[]apisv1.Budget{{Nodes: "0", Reasons: []string{apisv1.DisruptionReasonDrifted}}, {Nodes: "4"}}, 4},
		// Monday 12:00 UTC is inside "0 9 * * mon-fri" for 8h: nodes 0 wins.
		{[]apisv1.Budget{{Nodes: "0", Schedule: csPtr("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 8 * time.Hour}}, {Nodes: "5"}}, 0},
		// ... but not for 2h (9:00-11:00).
		{[]apisv1.Budget{{Nodes: "0", Schedule: csPtr("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 2 * time.Hour}}, {Nodes: "5"}}, 5},
	} {
		d, r := Consolidate(mk(tc.budgets...), Options{})
		got := 0
		if d != nil {
			got = len(d.Candidates)
		}
		if got != tc.want {
			t.Errorf("budgets %+v: %d nodes disrupted, want %d (%v)", tc.budgets, got, tc.want, r.Tried)
		}
	}
}

func TestCsAllowedDisruptions(t *testing.T) {
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "10%"}}
	for _, tc := range []struct{ nodes, disrupting, want int }{
		{19, 0, 2}, // ceil(1.9)
		{20, 0, 2},
		{21, 0, 3}, // ceil(2.1)
		{5, 0, 1},  // ceil(0.5): Karpenter rounds up, never blocks a small pool at 10%
		{21, 1, 2}, // nodes already disrupting hold budget
		{5, 3, 0},  // never negative
		{0, 0, 0},
	} {
		got, err := AllowedDisruptions(np, apisv1.DisruptionReasonUnderutilized, tc.nodes, tc.disrupting, csT0)
		if err != nil || got != tc.want {
			t.Errorf("10%% of %d with %d disrupting: %d (%v), want %d", tc.nodes, tc.disrupting, got, err, tc.want)
		}
	}
	// Schedule edges: "0 9 * * mon-fri" for 8h is active from 09:00 (inclusive) to 17:00 (exclusive).
	b := apisv1.Budget{Nodes: "0", Schedule: csPtr("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 8 * time.Hour}}
	for at, want := range map[string]bool{"08:59": false, "09:00": true, "16:59": true, "17:00": false} {
		tm, _ := time.Parse("2006-01-02 15:04", "2026-03-02 "+at)
		if got, err := BudgetActive(b, tm); err != nil || got != want {
			t.Errorf("active at Monday %s = %v (%v), want %v", at, got, err, want)
		}
	}
	if got, _ := BudgetActive(b, time.Date(2026, 3, 7, 10, 0, 0, 0, time.UTC)); got {
		t.Errorf("active on Saturday")
	}
	np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "1", Schedule: csPtr("not cron"), Duration: &metav1.Duration{Duration: time.Hour}}}
	if got, err := AllowedDisruptions(np, apisv1.DisruptionReasonEmpty, 10, 0, csT0); err == nil || got != 0 || !strings.Contains(err.Error(), "spec.disruption.budgets[0].schedule") {
		t.Errorf("bad schedule: %d, %v; want 0 and an error naming the field", got, err)
	}
}

func TestCsSpotToSpot(t *testing.T) {
	// A spot m5.2xlarge with two 500m pods. A pool limited to m5 spot has only m5.large and
	// m5.xlarge cheaper than it: 2 < 15 types, refused. A pool of c/m/r generation > 5 has
	// dozens of cheaper spot types: replaced, launching from exactly the 15 cheapest.
	for _, tc := range []struct {
		name string
		reqs []apisv1.NodeSelectorRequirementWithMinValues
		ok   bool
	}{
		{"m5 only", []apisv1.NodeSelectorRequirementWithMinValues{
			csReq(apisv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5"),
			csReq(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot")}, false},
		{"broad", []apisv1.NodeSelectorRequirementWithMinValues{
			csReq(apisv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
			csReq(apisv1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "4"),
			csReq(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot")}, true},
	} {
		c := csNewCluster(t, csT0)
		c.pool("default", tc.reqs...)
		c.node("a", "default", "m5.2xlarge", "spot")
		c.pod("p1", "a", "500m", "1Gi")
		c.pod("p2", "a", "500m", "1Gi")
		d, r := Consolidate(c.state(), Options{})
		if !tc.ok {
			if d != nil {
				t.Errorf("%s: %s, want no spot-to-spot replacement", tc.name, d)
			} else if !strings.Contains(strings.Join(r.Tried, ";"), "spot-to-spot consolidation needs 15") {
				t.Errorf("%s: reasons %v do not name the spot-to-spot rule", tc.name, r.Tried)
			}
			continue
		}
		if d == nil {
			t.Fatalf("%s: no decision: %v", tc.name, r.Tried)
		}
		o := d.Replacements[0]
		if n := len(o.InstanceTypeOptions()); n != MinSpotToSpotTypes {
			t.Errorf("%s: replacement launches from %d types, want %d", tc.name, n, MinSpotToSpotTypes)
		}
		for _, off := range o.Offerings {
			if off.CapacityType != apisv1.CapacityTypeSpot || off.PricePerHour >= d.PriceBefore {
				t.Errorf("%s: offering %s %s %.4f not a cheaper spot offering", tc.name, off.InstanceType.Name, off.CapacityType, off.PricePerHour)
			}
		}
	}
}

func TestCsConsolidateAfter(t *testing.T) {
	for _, tc := range []struct {
		started time.Duration
		want    bool
	}{{5 * time.Minute, false}, {15 * time.Minute, true}} {
		c := csNewCluster(t, csT0)
		np := c.pool("default", csM5OnDemand()...)
		after := apisv1.MustParseNillableDuration("10m")
		np.Spec.Disruption.ConsolidateAfter = &after
		c.node("a", "default", "m5.2xlarge", "on-demand")
		p := c.pod("p1", "a", "500m", "1Gi")
		st := metav1.NewTime(csT0.Add(-tc.started))
		p.Status.StartTime, p.CreationTimestamp = &st, st
		d, r := Consolidate(c.state(), Options{})
		if (d != nil) != tc.want {
			t.Errorf("pod started %s ago with consolidateAfter 10m: decision %v, want %v (%v)", tc.started, d, tc.want, r.Skipped)
		}
	}
	// Never disables consolidation, even of empty nodes.
	c := csNewCluster(t, csT0)
	np := c.pool("default", csM5OnDemand()...)
	never := apisv1.MustParseNillableDuration("Never")
	np.Spec.Disruption.ConsolidateAfter = &never
	c.node("a", "default", "m5.large", "on-demand")
	if d, _ := Consolidate(c.state(), Options{}); d != nil {
		t.Errorf("consolidateAfter Never: %s", d)
	}
}

func TestCsBlockers(t *testing.T) {
	// Each case: an m5.2xlarge (replaceable by an m5.large) plus one blocker; no decision, and
	// the skip reason names the rule; a PDB or do-not-disrupt blocker carries Karpenter's
	// DisruptionBlocked message (the others none).
	for _, tc := range []struct {
		name, reason, blocker string
		edit                  func(c *csCluster, n *corev1.Node, p *corev1.Pod)
	}{
		{"pod do-not-disrupt", "do-not-disrupt", `Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/p1)`, func(c *csCluster, n *corev1.Node, p *corev1.Pod) {
			p.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
		}},
		{"node do-not-disrupt", "do-not-disrupt", `Node has "karpenter.sh/do-not-disrupt" annotation`, func(c *csCluster, n *corev1.Node, p *corev1.Pod) {
			n.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
		}},
		// Duration values protect from the pod's start (Karpenter) and the node's creation: 2h,
		// started or created 1h before csT0, holds for another hour.
		{"pod do-not-disrupt 2h", "do-not-disrupt", `Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/p1)`, func(c *csCluster, n *corev1.Node, p *corev1.Pod) {
			p.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "2h"}
			p.Status.StartTime = &metav1.Time{Time: csT0.Add(-time.Hour)}
		}},
		{"node do-not-disrupt 2h", "do-not-disrupt", `Node has "karpenter.sh/do-not-disrupt" annotation`, func(c *csCluster, n *corev1.Node, p *corev1.Pod) {
			n.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "2h"}
			n.CreationTimestamp = metav1.Time{Time: csT0.Add(-time.Hour)}
		}},
		{"bare pod", "no controller owner", "", func(c *csCluster, n *corev1.Node, p *corev1.Pod) { p.OwnerReferences = nil }},
		{"pdb", "PodDisruptionBudget default/pdb allows 0", "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])",
			func(c *csCluster, n *corev1.Node, p *corev1.Pod) { c.pdb("pdb", "app", 0) }},
		{"WhenEmpty", "WhenEmpty", "", func(c *csCluster, n *corev1.Node, p *corev1.Pod) {
			c.snap.NodePools[0].Spec.Disruption.ConsolidationPolicy = apisv1.ConsolidationPolicyWhenEmpty
		}},
		{"disrupting", "already being disrupted", "", func(c *csCluster, n *corev1.Node, p *corev1.Pod) {
			n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
		}},
		{"not initialized", "not initialized", "", func(c *csCluster, n *corev1.Node, p *corev1.Pod) {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		}},
	} {
		c := csNewCluster(t, csT0)
		c.pool("default", csM5OnDemand()...)
		n := c.node("a", "default", "m5.2xlarge", "on-demand")
		p := c.pod("p1", "a", "500m", "1Gi")
		tc.edit(c, n, p)
		d, r := Consolidate(c.state(), Options{})
		if d != nil {
			t.Errorf("%s: %s", tc.name, d)
			continue
		}
		if len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Reason, tc.reason) || r.Skipped[0].Blocker != tc.blocker {
			t.Errorf("%s: skipped %+v, want a reason containing %q and blocker %q", tc.name, r.Skipped, tc.reason, tc.blocker)
		}
	}
}

// A do-not-disrupt duration that has run out (30m on a pod started an hour ago, 45m on a node
// created an hour ago) protects nothing, nor does an invalid value: the node consolidates.
func TestCsDoNotDisruptExpired(t *testing.T) {
	for _, v := range []struct{ pod, node string }{{"30m", ""}, {"", "45m"}, {"forever", ""}} {
		c := csNewCluster(t, csT0)
		c.pool("default", csM5OnDemand()...)
		n := c.node("a", "default", "m5.2xlarge", "on-demand")
		p := c.pod("p1", "a", "500m", "1Gi")
		p.Status.StartTime = &metav1.Time{Time: csT0.Add(-time.Hour)}
		n.CreationTimestamp = metav1.Time{Time: csT0.Add(-time.Hour)}
		if v.pod != "" {
			p.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: v.pod}
		}
		if v.node != "" {
			n.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: v.node}
		}
		if d, r := Consolidate(c.state(), Options{}); d == nil {
			t.Errorf("pod %q node %q: no decision, skipped %+v", v.pod, v.node, r.Skipped)
		}
	}
}

func TestCsPDBAcrossNodes(t *testing.T) {
	// PDB allows 1 disruption of app=web. Two under-used m5.xlarge each hold one web pod: each
	// node alone may go, but not both in one decision.
	c := csNewCluster(t, csT0)
	c.pool("default", csM5OnDemand()...)
	for _, n := range []string{"a", "b", "c"} {
		c.node(n, "default", "m5.xlarge", "on-demand")
	}
	c.pod("w1", "a", "1500m", "2Gi", "app", "web")
	c.pod("w2", "b", "1500m", "2Gi", "app", "web")
	c.pod("x", "c", "1500m", "2Gi")
	c.pdb("web", "web", 1)
	s := c.state()
	if err := s.PDBs.Check([]*corev1.Pod{&c.snap.Pods[0], &c.snap.Pods[1]}); err == nil {
		t.Errorf("evicting both web pods passed a PDB allowing 1")
	}
	d, r := Consolidate(s, Options{})
	if d == nil {
		t.Fatalf("no decision: %v", r.Tried)
	}
	web := 0
	for _, cr := range d.Candidates {
		for _, p := range cr.Pods {
			if strings.HasPrefix(p, "default/w") {
				web++
			}
		}
	}
	if web > 1 {
		t.Errorf("%s evicts %d web pods, PDB allows 1", d, web)
	}
}

func TestCsPendingPodsWait(t *testing.T) {
	c := csNewCluster(t, csT0)
	c.pool("default", csM5OnDemand()...)
	c.node("a", "default", "m5.large", "on-demand")
	p := c.pod("pending", "", "100m", "100Mi")
	c.snap.PendingPods = append(c.snap.PendingPods, *p)
	c.snap.Pods = nil
	if d, _ := Consolidate(c.state(), Options{}); d != nil {
		t.Errorf("decided %s while a pod is pending", d)
	}
}

// A pending pod no type can hold (4000 CPUs) does not stop consolidation: the empty m5.large is
// still deleted. Before, one such pod (a typo in a request) stopped every consolidation of the
// cluster for as long as it existed.
func TestCsUnplaceablePendingPodDoesNotBlock(t *testing.T) {
	c := csNewCluster(t, csT0)
	c.pool("default", csM5OnDemand()...)
	c.node("a", "default", "m5.large", "on-demand")
	p := c.pod("too-big", "", "4000", "100Mi")
	c.snap.PendingPods = append(c.snap.PendingPods, *p)
	c.snap.Pods = nil
	d, r := Consolidate(c.state(), Options{})
	if d == nil || csNames(d) != "[a]" || d.Reason != apisv1.DisruptionReasonEmpty {
		t.Fatalf("decision %v (tried %v), want the empty node a deleted", d, r.Tried)
	}
}
