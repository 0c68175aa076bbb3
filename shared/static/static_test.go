package static

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

type world struct{ snap *events.Snapshot }

func newWorld() *world {
	return &world{snap: &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: "test", Revision: 9, Time: metav1.NewTime(t0), Complete: true}}
}

// pool adds a NodePool; replicas < 0 leaves it dynamic.
func (w *world) pool(name string, replicas int64) *apisv1.NodePool {
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	np.Spec.Template.Spec.NodeClassRef = &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
		Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}
	np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "10%"}}
	if replicas >= 0 {
		np.Spec.Replicas = &replicas
	}
	apis.SetDefaults(&np) // as the API server defaults it from the CRD
	w.snap.NodePools = append(w.snap.NodePools, np)
	return &w.snap.NodePools[len(w.snap.NodePools)-1]
}

// claim adds a NodeClaim of the pool; launched gives it a provider ID and a Ready Node of the
// same name.
func (w *world) claim(name, pool string, launched bool) *apisv1.NodeClaim {
	nc := apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		Labels: map[string]string{apisv1.LabelNodePool: pool}, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}}
	if launched {
		nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
		nc.Status.NodeName = name
		w.snap.Nodes = append(w.snap.Nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apisv1.LabelNodePool: pool}},
			Spec:   corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	w.snap.NodeClaims = append(w.snap.NodeClaims, nc)
	return &w.snap.NodeClaims[len(w.snap.NodeClaims)-1]
}

func (w *world) node(name string) *corev1.Node {
	for i := range w.snap.Nodes {
		if w.snap.Nodes[i].Name == name {
			return &w.snap.Nodes[i]
		}
	}
	panic("no node " + name)
}

// pod binds a pod to the node; ds makes it a DaemonSet's.
func (w *world) pod(name, node string, ds bool, annotations map[string]string) *corev1.Pod {
	ctrl := true
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: &ctrl}
	if ds {
		owner.Kind = "DaemonSet"
	}
	w.snap.Pods = append(w.snap.Pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations,
		OwnerReferences: []metav1.OwnerReference{owner}}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	return &w.snap.Pods[len(w.snap.Pods)-1]
}

func only(t *testing.T, d Decision) Pool {
	t.Helper()
	if len(d.Pools) != 1 {
		t.Fatalf("pools = %d, want 1 (dynamic pools are not listed): %+v", len(d.Pools), d.Pools)
	}
	return d.Pools[0]
}

func removed(p Pool) string {
	var names []string
	for _, r := range p.Remove {
		names = append(names, r.NodeClaim.Name)
	}
	return strings.Join(names, ",")
}

func TestScaleUpFromNothing(t *testing.T) {
	w := newWorld()
	w.pool("dynamic", -1)
	w.pool("fixed", 3)
	w.claim("dyn-1", "dynamic", true)
	p := only(t, Decide(w.snap))
	// 0 active, replicas 3, no limit: launch 3 − 0 = 3.
	if p.NodePool.Name != "fixed" || p.Active != 0 || p.Launch != 3 || len(p.Remove) != 0 || p.LimitReached {
		t.Fatalf("got %+v, want 3 launches", p)
	}
	if got := Decide(w.snap).Launches(); len(got) != 1 || got[0].Launch != 3 {
		t.Fatalf("Launches = %+v", got)
	}
}

func TestScaleUpCountsDisruptingAndDeleting(t *testing.T) {
	w := newWorld()
	np := w.pool("fixed", 3)
	w.claim("a", "fixed", true)
	w.claim("b", "fixed", true)
	w.node("b").Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
	del := metav1.NewTime(t0)
	w.claim("c", "fixed", true).DeletionTimestamp = &del
	p := only(t, Decide(w.snap))
	// active a=1, pending disruption b=1, deleting c=1. 1+1 < 3, so launch replicas − active =
	// 3 − 1 = 2 (Karpenter's static provisioning asks for desired − running).
	if p.Active != 1 || p.PendingDisruption != 1 || p.Deleting != 1 || p.Launch != 2 {
		t.Fatalf("got %+v, want active 1, pending 1, deleting 1, launch 2", p)
	}
	// limits.nodes 4: room = 4 − (1 + 1 + 1) = 1, so 1 of the 2.
	np.Spec.Limits = corev1.ResourceList{"nodes": resource.MustParse("4")}
	if p := only(t, Decide(w.snap)); p.Launch != 1 || p.LimitReached {
		t.Fatalf("with limits.nodes 4 got %+v, want launch 1", p)
	}
	// limits.nodes 3: room = 3 − 3 = 0: nothing, and the limit is reported.
	np.Spec.Limits = corev1.ResourceList{"nodes": resource.MustParse("3")}
	if p := only(t, Decide(w.snap)); p.Launch != 0 || !p.LimitReached {
		t.Fatalf("with limits.nodes 3 got %+v, want no launch and LimitReached", p)
	}
}

func TestDriftReplacementInFlightIsNotLaunchedTwice(t *testing.T) {
	w := newWorld()
	w.pool("fixed", 2)
	w.claim("a", "fixed", true)
	w.claim("b", "fixed", true)
	w.node("b").Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
	// b is being replaced: active 1 + pending 1 = 2 = replicas: no launch, no removal.
	if p := only(t, Decide(w.snap)); p.Launch != 0 || len(p.Remove) != 0 {
		t.Fatalf("got %+v, want nothing", p)
	}
}

func TestScaleDownOrder(t *testing.T) {
	w := newWorld()
	np := w.pool("fixed", 1)
	w.claim("a-busy", "fixed", true)
	w.pod("p1", "a-busy", false, nil)
	w.pod("p2", "a-busy", false, nil)
	w.claim("b-pinned", "fixed", true)
	w.pod("p3", "b-pinned", false, map[string]string{apisv1.AnnotationDoNotDisrupt: "true"})
	w.claim("c-daemons", "fixed", true)
	w.pod("ds1", "c-daemons", true, nil)
	w.claim("d-unlaunched", "fixed", false)
	w.claim("e-light", "fixed", true)
	w.pod("p4", "e-light", false, nil)
	// 5 active, replicas 1: 4 go. Order: d (no provider ID), c (DaemonSet pods only: empty),
	// e (cost 1 pod × 1.0 = 1) before a (2 pods: 2), b (do-not-disrupt) last and kept.
	p := only(t, Decide(w.snap))
	if p.Active != 5 || p.Launch != 0 {
		t.Fatalf("got %+v", p)
	}
	if got, want := removed(p), "d-unlaunched,c-daemons,e-light,a-busy"; got != want {
		t.Fatalf("removed %s, want %s", got, want)
	}
	// replicas 4: one goes, the not-launched one.
	four := int64(4)
	np.Spec.Replicas = &four
	if got := removed(only(t, Decide(w.snap))); got != "d-unlaunched" {
		t.Fatalf("replicas 4 removed %s, want d-unlaunched", got)
	}
	cmds := Decide(w.snap).Commands("test", 9)
	if len(cmds) != 1 || cmds[0].Kind != events.CommandDeleteNodeClaim || cmds[0].NodeClaim.Name != "d-unlaunched" ||
		!strings.Contains(cmds[0].Reason, ReasonOverprovisioned) {
		t.Fatalf("commands = %+v", cmds)
	}
}

func TestScaleDownDaemonSetDoNotDisruptIsNotEmpty(t *testing.T) {
	w := newWorld()
	w.pool("fixed", 1)
	w.claim("a", "fixed", true)
	w.pod("ds-pinned", "a", true, map[string]string{apisv1.AnnotationDoNotDisrupt: "true"})
	w.claim("b", "fixed", true)
	w.pod("p", "b", false, nil)
	// a's only pod is a DaemonSet's but carries do-not-disrupt: not empty, and ranked after b.
	if got := removed(only(t, Decide(w.snap))); got != "b" {
		t.Fatalf("removed %s, want b", got)
	}
}

func TestScaleDownCostScaledByLifetime(t *testing.T) {
	w := newWorld()
	w.pool("fixed", 1)
	ten := 10 * time.Hour
	old := w.claim("a-old", "fixed", true)
	old.Spec.ExpireAfter = apisv1.NillableDuration{Duration: &ten}
	old.CreationTimestamp = metav1.NewTime(t0.Add(-6 * time.Hour))
	w.pod("p1", "a-old", false, nil)
	w.pod("p2", "a-old", false, nil)
	w.claim("b-young", "fixed", true)
	w.pod("p3", "b-young", false, nil)
	// a: 2 pods × (10h − 6h)/10h = 2 × 0.4 = 0.8; b: 1 pod × 1 (never expires) = 1. a goes.
	if got := removed(only(t, Decide(w.snap))); got != "a-old" {
		t.Fatalf("removed %s, want a-old", got)
	}
}

func TestSkipped(t *testing.T) {
	w := newWorld()
	np := w.pool("fixed", 2)
	weight := int32(10)
	np.Spec.Weight = &weight
	p := only(t, Decide(w.snap))
	if p.Launch != 0 || !strings.Contains(p.Skipped, "spec.weight") || !strings.Contains(p.Skipped, "'weight' is not supported on static NodePools") {
		t.Fatalf("got %+v, want skipped for weight", p)
	}
	np.Spec.Weight = nil
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}
	if p := only(t, Decide(w.snap)); p.Launch != 0 || !strings.Contains(p.Skipped, "spec.limits[cpu]") {
		t.Fatalf("got %+v, want skipped for limits.cpu", p)
	}
	np.Spec.Limits = nil
	del := metav1.NewTime(t0)
	np.DeletionTimestamp = &del
	if p := only(t, Decide(w.snap)); p.Launch != 0 || p.Skipped == "" {
		t.Fatalf("got %+v, want skipped while deleted", p)
	}
}

func TestZeroReplicasRemovesAll(t *testing.T) {
	w := newWorld()
	w.pool("fixed", 0)
	w.claim("a", "fixed", true)
	w.claim("b", "fixed", true)
	if got := removed(only(t, Decide(w.snap))); got != "a,b" {
		t.Fatalf("removed %s, want a,b (both empty, by name)", got)
	}
}

// A drift replacement (disruption.AnnotationReplaces) makes the node it replaces pending
// disruption before the node's taint lands: replicas 2 with a, b and b's replacement r counts
// active a + r = 2, pending b = 1; nothing launched, nothing removed.
func TestReplacementBeforeItsTaintIsNoSurplus(t *testing.T) {
	w := newWorld()
	w.pool("fixed", 2)
	w.claim("a", "fixed", true)
	w.claim("b", "fixed", true)
	r := w.claim("r", "fixed", true)
	r.Annotations = map[string]string{disruption.AnnotationReplaces: "b"}
	p := only(t, Decide(w.snap))
	if p.Active != 2 || p.PendingDisruption != 1 || p.Launch != 0 || len(p.Remove) != 0 {
		t.Fatalf("got %+v, want active 2, pending 1, nothing done", p)
	}
}

func TestGateDrift(t *testing.T) {
	cand := func(w *world, node string) disruption.DriftCandidate {
		var np *apisv1.NodePool
		for i := range w.snap.NodePools {
			if w.snap.NodePools[i].Name == "fixed" {
				np = &w.snap.NodePools[i]
			}
		}
		return disruption.DriftCandidate{Target: disruption.Target{Node: w.node(node), NodePool: np}, Reason: apisv1.DisruptionReasonDrifted}
	}
	names := func(cs []disruption.DriftCandidate) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name())
		}
		return strings.Join(out, ",")
	}
	t.Run("within limits.nodes", func(t *testing.T) {
		w := newWorld()
		np := w.pool("fixed", 3)
		np.Spec.Limits = corev1.ResourceList{"nodes": resource.MustParse("4")}
		for _, n := range []string{"a", "b", "c"} {
			w.claim(n, "fixed", true)
		}
		plan := disruption.DriftPlan{Selected: []disruption.DriftCandidate{cand(w, "a"), cand(w, "b")}}
		// room = 4 − (3 active + 0 + 0) = 1: a is replaced, b waits naming limits.nodes.
		got := GateDrift(w.snap, plan)
		if names(got.Selected) != "a" || len(got.OverBudget) != 1 || got.OverBudget[0].Node != "b" ||
			!strings.Contains(got.OverBudget[0].Reason, "limits.nodes 4") {
			t.Fatalf("selected %s, over budget %+v: want a, then b held by limits.nodes", names(got.Selected), got.OverBudget)
		}
	})
	t.Run("scale-down first", func(t *testing.T) {
		w := newWorld()
		w.pool("fixed", 1)
		w.claim("a", "fixed", true)
		w.claim("b", "fixed", true)
		// active 2 > replicas 1: no drift until the surplus is gone.
		got := GateDrift(w.snap, disruption.DriftPlan{Selected: []disruption.DriftCandidate{cand(w, "a")}})
		if len(got.Selected) != 0 || len(got.OverBudget) != 1 || !strings.Contains(got.OverBudget[0].Reason, "scale-down goes before drift") {
			t.Fatalf("selected %s, over budget %+v", names(got.Selected), got.OverBudget)
		}
	})
	t.Run("dynamic pools pass", func(t *testing.T) {
		w := newWorld()
		w.pool("fixed", -1)
		w.claim("a", "fixed", true)
		got := GateDrift(w.snap, disruption.DriftPlan{Selected: []disruption.DriftCandidate{cand(w, "a")}})
		if names(got.Selected) != "a" || len(got.OverBudget) != 0 {
			t.Fatalf("selected %s, over budget %+v", names(got.Selected), got.OverBudget)
		}
	})
}
