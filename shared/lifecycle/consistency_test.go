package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// initializedClaim is registered() past initialization, with status.capacity 2 CPU and 4Gi (the
// offering's) and the Node's capacity set to what its kubelet reports.
func initializedClaim(nodeCPU, nodeMem string) (apisv1.NodeClaim, corev1.Node) {
	nc, n := registered()
	nc.Status.Conditions = []metav1.Condition{
		{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(t0)},
		{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: ReasonRegistered, LastTransitionTime: metav1.NewTime(t0)},
		{Type: apisv1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: ReasonInitialized, LastTransitionTime: metav1.NewTime(t0)},
		{Type: apisv1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReady, LastTransitionTime: metav1.NewTime(t0)},
	}
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	n.Labels[apisv1.LabelNodeInitialized] = "true"
	n.Spec.Taints = n.Spec.Taints[:1] // the startup taint removed
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(nodeCPU), corev1.ResourceMemory: resource.MustParse(nodeMem)}
	return nc, n
}

func consistencyCmd(t *testing.T, d Decision) (events.Command, *metav1.Condition) {
	t.Helper()
	for _, c := range d.Commands {
		if c.Kind == events.CommandSetNodeClaimStatus {
			if cond := condOf(c, ConditionConsistentStateFound); cond != nil {
				return c, cond
			}
		}
	}
	return events.Command{}, nil
}

// Node shape: the NodeClaim requests cpu and memory (claim(): 1 CPU, 1Gi) and expects 2 CPU and
// 4Gi. A node reporting 1900m CPU (95 %) and 3.6Gi (90 %, at the bound, not below) is
// consistent; one reporting 1 CPU is 50 % of expected, an issue spelled as Karpenter's.
func TestConsistentStateFoundNodeShape(t *testing.T) {
	at := t0.Add(time.Hour)
	nc, n := initializedClaim("1900m", "3686.4Mi")
	c, cond := consistencyCmd(t, Decide(snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n}), Options{}))
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ConditionConsistentStateFound || len(c.Events) != 0 {
		t.Fatalf("95%% cpu, 90%% memory: %+v events %v, want True without events", cond, c.Events)
	}
	// Already True: nothing written.
	nc.Status.Conditions = append(nc.Status.Conditions, *cond)
	if _, again := consistencyCmd(t, Decide(snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n}), Options{})); again != nil {
		t.Fatalf("True again: wrote %+v", again)
	}

	nc, n = initializedClaim("1", "4Gi")
	nc.Status.Conditions = append(nc.Status.Conditions, *cond) // True before the node shrank
	c, cond = consistencyCmd(t, Decide(snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n}), Options{}))
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "ConsistencyCheckFailed" || cond.Message != "Consistency Check Failed" {
		t.Fatalf("half the CPU: %+v", cond)
	}
	if len(c.Events) != 1 || c.Events[0].Reason != "FailedConsistencyCheck" || c.Events[0].Type != corev1.EventTypeWarning ||
		c.Events[0].Object.Kind != "NodeClaim" || c.Events[0].Message != "expected 2 of resource cpu, but found 1 (50.0% of expected)" {
		t.Fatalf("events %+v", c.Events)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the command the agent receives is invalid: %v", err)
	}
	// Still False: neither the condition nor the event written again.
	nc.Status.Conditions = append(nc.Status.Conditions[:4], *cond)
	if _, again := consistencyCmd(t, Decide(snapshot(at.Add(time.Minute), []apisv1.NodeClaim{nc}, []corev1.Node{n}), Options{})); again != nil {
		t.Fatalf("False again: wrote %+v", again)
	}
	// Not initialized yet: the shape is not checked (the node may still be coming up).
	nc, n = registered()
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	if _, cond := consistencyCmd(t, Decide(snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n}), Options{})); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("uninitialized: %+v, want True (no check applies)", cond)
	}
}

// Termination: a NodeClaim being deleted whose node holds a pod a PDB allows no disruption of
// (minAvailable 1 of 1 pod: 1 healthy − 1 desired = 0) is inconsistent, naming the PDB; the
// condition rides on the termination path's own status write (one SetNodeClaimStatus).
func TestConsistentStateFoundBlockedTermination(t *testing.T) {
	at := t0.Add(time.Hour)
	nc, n := initializedClaim("2", "4Gi")
	del := metav1.NewTime(at.Add(-time.Minute))
	nc.DeletionTimestamp = &del
	p := pod("web-0", n.Name, 30)
	p.Labels = map[string]string{"app": "web"}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	one := intstr.FromInt32(1)
	s := snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n}, p)
	s.PDBs = []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
	d := Decide(s, Options{})
	c, cond := consistencyCmd(t, d)
	if cond == nil || cond.Status != metav1.ConditionFalse || len(c.Events) != 1 ||
		c.Events[0].Message != `can't drain node, PDB "default/web" is blocking evictions` {
		t.Fatalf("blocked drain: %+v events %+v", cond, c.Events)
	}
	statusWrites := 0
	for _, x := range d.Commands {
		if x.Kind == events.CommandSetNodeClaimStatus {
			statusWrites++
		}
	}
	if statusWrites != 1 || condOf(c, apisv1.ConditionDrained) == nil {
		t.Errorf("%d status writes (%s), want one carrying Drained and ConsistentStateFound", statusWrites, kinds(d.Commands))
	}
	// maxUnavailable 1 allows the eviction: consistent.
	s.PDBs[0].Spec = policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: s.PDBs[0].Spec.Selector}
	if _, cond := consistencyCmd(t, Decide(s, Options{})); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("eviction allowed: %+v", cond)
	}
}
