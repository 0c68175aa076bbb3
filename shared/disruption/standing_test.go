package disruption

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Standing runs Candidates' rules without a catalog and leaves out those that pass by
// themselves: on a node that is being disrupted, not initialized, under its consolidateAfter
// countdown and of an offering the catalog does not price, Blockers names those four first, and
// Standing names only the pod's do-not-disrupt annotation after them.
func TestStandingLeavesOutPassingStates(t *testing.T) {
	c := csNewCluster(t, csT0)
	pool := c.pool("default", csM5OnDemand()...)
	hour := apisv1.MustParseNillableDuration("1h")
	pool.Spec.Disruption.ConsolidateAfter = &hour
	n := c.node("a", "default", "m5.2xlarge", "on-demand")
	p := c.pod("p1", "a", "500m", "1Gi")
	p.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
	dnd := Blocker{BlockerDoNotDisrupt, ObjectRef{Kind: "Pod", Namespace: "default", Name: "p1"}, "pod default/p1 is annotated karpenter.sh/do-not-disrupt"}

	// Initialized, 30 minutes into a 1h consolidateAfter, in a zone the catalog has no price for.
	n.Labels[corev1.LabelTopologyZone] = "us-east-1z"
	c.snap.NodeClaims[0].Labels[corev1.LabelTopologyZone] = "us-east-1z"
	kinds := func(bs []Blocker) []BlockerKind {
		var out []BlockerKind
		for _, b := range bs {
			out = append(out, b.Kind)
		}
		return out
	}
	s := c.state()
	if got, want := kinds(s.Blockers(s.Node("a"))), []BlockerKind{BlockerConsolidateAfter, BlockerUnknownPrice, BlockerDoNotDisrupt}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Blockers %v, want %v", got, want)
	}
	if got := NewStanding(c.snap).Blockers("a"); !reflect.DeepEqual(got, []Blocker{dnd}) {
		t.Fatalf("Standing %+v, want only %+v", got, dnd)
	}
	// Being disrupted and not initialized.
	n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	s = c.state()
	if got, want := kinds(s.Blockers(s.Node("a"))), []BlockerKind{BlockerDisrupting, BlockerNotInitialized, BlockerUnknownPrice, BlockerDoNotDisrupt}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Blockers %v, want %v", got, want)
	}
	if got := NewStanding(c.snap).Blockers("a"); !reflect.DeepEqual(got, []Blocker{dnd}) {
		t.Fatalf("Standing %+v, want only %+v", got, dnd)
	}
	// consolidateAfter Never stands.
	never := apisv1.MustParseNillableDuration("Never")
	pool.Spec.Disruption.ConsolidateAfter = &never
	want := []Blocker{{BlockerConsolidateAfter, ObjectRef{Kind: "NodePool", Name: "default"}, `nodepool "default" has consolidateAfter Never`}, dnd}
	if got := NewStanding(c.snap).Blockers("a"); !reflect.DeepEqual(got, want) {
		t.Fatalf("Standing %+v, want %+v", got, want)
	}
	// No NodePool in the snapshot, an unknown node, a node without a NodeClaim: none.
	c.snap.NodePools = nil
	if got := NewStanding(c.snap).Blockers("a"); got != nil {
		t.Errorf("pool not in the snapshot: %+v", got)
	}
	c.snap.NodePools = []apisv1.NodePool{*pool}
	if got := NewStanding(c.snap).Blockers("b"); got != nil {
		t.Errorf("unknown node: %+v", got)
	}
	c.snap.NodeClaims = nil
	if got := NewStanding(c.snap).Blockers("a"); got != nil {
		t.Errorf("no NodeClaim: %+v", got)
	}
}
