package provision_test

import (
	"context"
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
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	w.AddPools([]apisv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"}}},
		}}}}}}, nil)
	pod := func(name, cpu string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}}
	}
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
