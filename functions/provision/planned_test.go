package provision_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// A pod that arrives after a NodeClaim was launched, and that the next plan puts in the spare
// room of that NodeClaim's registered node while the node still carries its dovetail.dev/planned
// taint (its own planned pods are not bound yet), is nominated to the node with the taint's
// toleration; without it the taint keeps the pod off the room the plan counted on, and it races
// every other pending pod for it once the taint goes. The cluster is the scenarios' in-memory
// World (fake cloud over the real catalog, the real lifecycle function), which applies commands
// as the agent does.
//
// Hand calculation: m5.xlarge has 4 vCPUs; Karpenter's kube-reserved for 4 cores is 80m
// (6 % of the first core, 1 % of the second, 0.5 % of the third and fourth), so 3,920m is
// allocatable. Two 1,500m pods leave 920m: the late 500m pod fits, and no other type is allowed.
func TestLatePodOnAPlannedNodeIsNominated(t *testing.T) {
	ctx := context.Background()
	w := m5xlargeWorld()
	pod := sizedPod
	w.AddPods(pod("web-0", "1500m"), pod("web-1", "1500m"))
	d, err := w.Provision(ctx)
	if err != nil || len(d.Launched) != 1 {
		t.Fatalf("first decision: %d launched, %v; want one m5.xlarge", len(d.Launched), err)
	}
	claim := d.Launched[0].NodeClaim.Name
	// The instance boots and the lifecycle function registers it; nothing binds the pods yet,
	// so the node keeps its planned taint.
	w.Clock.Step(30 * time.Second)
	if err := w.Cloud.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Lifecycle(ctx); err != nil {
		t.Fatal(err)
	}
	var node *corev1.Node
	for _, n := range w.Snapshot().Nodes {
		for _, tt := range n.Spec.Taints {
			if tt.Key == apisv1.TaintKeyPlanned && tt.Value == claim {
				node = n.DeepCopy()
			}
		}
	}
	if node == nil {
		t.Fatalf("no node carries %s=%s after registration", apisv1.TaintKeyPlanned, claim)
	}

	w.AddPods(pod("late-0", "500m"))
	before := len(w.Commands)
	d, err = w.Provision(ctx)
	if err != nil || len(d.Launched) != 0 {
		t.Fatalf("second decision: %d launched, %v; want the late pod in the node's spare room", len(d.Launched), err)
	}
	var noms []events.Command
	for _, c := range w.Commands[before:] {
		if c.Kind == events.CommandNominatePods {
			noms = append(noms, c)
		}
	}
	if len(noms) != 1 {
		t.Fatalf("second decision sent %d NominatePods commands, want 1: %+v", len(noms), w.Commands[before:])
	}
	c := noms[0]
	want := apisv1.PlannedToleration(claim)
	if c.NodeName != node.Name || len(c.Pods) != 1 || c.Pods[0].Name != "late-0" || c.Pods[0].UID != "uid-late-0" ||
		c.Toleration == nil || *c.Toleration != want {
		t.Fatalf("NominatePods %+v (toleration %+v), want late-0 onto %s tolerating %+v", c, c.Toleration, node.Name, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the command does not validate: %v", err)
	}
	// The World applied it as the agent does: the pod tolerates the taint, and is not nominated.
	for _, p := range w.Snapshot().PendingPods {
		if p.Name == "late-0" && (p.Status.NominatedNodeName != "" || len(p.Spec.Tolerations) == 0 || p.Spec.Tolerations[len(p.Spec.Tolerations)-1] != want) {
			t.Fatalf("late-0 after the command: nominated %q, tolerations %+v", p.Status.NominatedNodeName, p.Spec.Tolerations)
		}
	}
	// The next decision on the same state sends nothing new for it: it tolerates the taint.
	before = len(w.Commands)
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Commands[before:] {
		if c.Kind == events.CommandNominatePods {
			t.Fatalf("a later decision nominated again: %+v", c)
		}
	}
}

// m5xlargeWorld is a World whose one NodePool launches m5.xlarge on demand only.
func m5xlargeWorld() *scenarios.World {
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	w.AddPools([]apisv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"}}},
		}}}}}}, nil)
	return w
}

// sizedPod is a pending pod in default requesting cpu and 256Mi, its UID "uid-<name>".
func sizedPod(name, cpu string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}}
}

// The pods a NodeClaim is launched for are given its planned taint's toleration by the launching
// decision itself: one NominatePods naming the NodeClaim, published behind its CreateNodeClaim
// (same ordering key), so the pods tolerate the taint before the node exists and kube-scheduler
// binds them once the registration lifts karpenter.sh/unregistered. The lifecycle function's
// registration then has no pod left to give it, and still puts the planned taint on the node.
// (Hand calculation as above: two 1,500m pods fill one m5.xlarge's 3,920m.)
func TestLaunchedPodsTolerateBeforeTheNodeRegisters(t *testing.T) {
	ctx := context.Background()
	w := m5xlargeWorld()
	w.AddPods(sizedPod("web-0", "1500m"), sizedPod("web-1", "1500m"))
	d, err := w.Provision(ctx)
	if err != nil || len(d.Launched) != 1 {
		t.Fatalf("decision: %d launched, %v; want one m5.xlarge", len(d.Launched), err)
	}
	claim := d.Launched[0].NodeClaim.Name
	created, nominated := -1, -1
	for i, c := range w.Commands {
		switch {
		case c.Kind == events.CommandCreateNodeClaim && c.NodeClaim.Name == claim:
			created = i
		case c.Kind == events.CommandNominatePods:
			if nominated >= 0 {
				t.Fatalf("a second NominatePods: %+v", c)
			}
			nominated = i
		}
	}
	if created < 0 || nominated < created {
		t.Fatalf("CreateNodeClaim at %d, NominatePods at %d: want the nomination after the create", created, nominated)
	}
	c := w.Commands[nominated]
	want := apisv1.PlannedToleration(claim)
	if c.NodeName != "" || c.NodeClaim == nil || c.NodeClaim.Name != claim || len(c.Pods) != 2 || c.Toleration == nil || *c.Toleration != want {
		t.Fatalf("NominatePods %+v (toleration %+v), want web-0 and web-1 for NodeClaim %s tolerating %+v", c, c.Toleration, claim, want)
	}
	if got, create := c.OrderingKey(), w.Commands[created].OrderingKey(); got != create {
		t.Errorf("ordering key %q, the create's %q: want the same, so the agent applies it after the create", got, create)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the command does not validate: %v", err)
	}
	for _, p := range w.Snapshot().PendingPods {
		if !apisv1.HasPlannedToleration(&p, claim) || p.Status.NominatedNodeName != "" {
			t.Fatalf("%s after the command: tolerations %+v, nominated %q; want the planned toleration and no nomination", p.Name, p.Spec.Tolerations, p.Status.NominatedNodeName)
		}
	}
	// The node registers: the planned taint goes on it, and no pod is nominated again.
	before := len(w.Commands)
	w.Clock.Step(30 * time.Second)
	if err := w.Cloud.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Lifecycle(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Commands[before:] {
		if c.Kind == events.CommandNominatePods {
			t.Fatalf("the registration nominated again: %+v", c)
		}
	}
	tainted := false
	for _, n := range w.Snapshot().Nodes {
		tainted = tainted || slices.Contains(n.Spec.Taints, apisv1.PlannedTaint(claim))
	}
	if !tainted {
		t.Errorf("no node carries %s=%s:NoSchedule after registration", apisv1.TaintKeyPlanned, claim)
	}
}
