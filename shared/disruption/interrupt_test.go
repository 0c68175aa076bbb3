package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/ec2class"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

func intrPod(name string, grace *int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: grace}}
}

// The DrainSchedule docstring's example, by hand: a 2-minute notice at 12:00:00, margin 15 s.
func TestPlanDrainRule(t *testing.T) {
	notice := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	deadline := notice.Add(2 * time.Minute)
	s := PlanDrain([]*corev1.Pod{intrPod("a", nil), intrPod("b", driftPtr[int64](10))}, deadline, notice, 15*time.Second)
	if want := notice.Add(75 * time.Second); !s.Start.Equal(want) || s.LongestGrace != 30*time.Second || len(s.Unfit) != 0 {
		t.Fatalf("default 30 s grace: start 12:02:00 − 15 s − 30 s = 12:01:15, got %+v", s)
	}
	if s.MustDrainBy(notice.Add(74*time.Second)) || !s.MustDrainBy(notice.Add(75*time.Second)) {
		t.Fatal("the drain must start exactly at 12:01:15")
	}
	s = PlanDrain([]*corev1.Pod{intrPod("a", nil), intrPod("slow", driftPtr[int64](90))}, deadline, notice, 15*time.Second)
	if want := notice.Add(15 * time.Second); !s.Start.Equal(want) || len(s.Unfit) != 0 {
		t.Fatalf("90 s grace: start 12:02:00 − 15 s − 90 s = 12:00:15, got %+v", s)
	}
	s = PlanDrain([]*corev1.Pod{intrPod("a", nil), intrPod("slower", driftPtr[int64](120))}, deadline, notice, 15*time.Second)
	if !s.Start.Equal(notice) || len(s.Unfit) != 1 || s.Unfit[0] != "default/slower (grace 2m0s)" {
		t.Fatalf("120 s grace cannot fit: drain now, slower unfit; got %+v", s)
	}
	// No deadline (rebalance, drift): no forced start.
	if s = PlanDrain([]*corev1.Pod{intrPod("a", nil)}, time.Time{}, notice, 15*time.Second); s.MustDrainBy(notice.Add(time.Hour)) {
		t.Fatal("no deadline: never forced")
	}
}

// intrCluster builds a snapshot of m5.large spot nodes (allocatable 1930m / 7 GiB / 29 pods, the
// catalog's figures) each holding the given pods of 500m / 512Mi.
func intrCluster(podsPerNode []int, dsOnFirst bool) *events.Snapshot {
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}},
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"m", "c", "r"}}},
		}}}}}
	snap := &events.Snapshot{Cluster: "c", Revision: 5, Time: metav1.NewTime(driftNow), NodePools: []apisv1.NodePool{np}}
	for i, k := range podsPerNode {
		name := fmt.Sprintf("node-%d", i)
		node, nc := driftNode(name, &np, driftNow.Add(-time.Duration(i+1)*time.Hour))
		node.Spec.ProviderID = fmt.Sprintf("aws:///us-east-1a/i-%017x", i+1)
		nc.Status.ProviderID = node.Spec.ProviderID
		snap.Nodes = append(snap.Nodes, node)
		snap.NodeClaims = append(snap.NodeClaims, nc)
		for j := 0; j < k; j++ {
			p := driftBoundPod(fmt.Sprintf("p-%d-%d", i, j), name)
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}
			snap.Pods = append(snap.Pods, p)
		}
	}
	if dsOnFirst {
		ds := driftBoundPod("ds-0", "node-0")
		ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "logs", Controller: driftPtr(true)}}
		snap.Pods = append(snap.Pods, ds)
	}
	return snap
}

func TestEvacuationInput(t *testing.T) {
	cat := catalog.MustAWS()
	// node-0 holds 3 pods (1500m) and a DaemonSet pod; node-1 holds 1 pod (500m) and has
	// 1930 − 500 = 1430m free: two of node-0's pods fit there (1000m), the third needs a new node.
	snap := intrCluster([]int{3, 1}, true)
	mark := events.UnavailableOfferingMark{OfferingKey: events.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}, Expires: metav1.NewTime(driftNow.Add(3 * time.Minute))}
	in, pods := EvacuationInput(snap, cat, cloud.NodeSettingsFor, []string{"node-0"}, []events.UnavailableOfferingMark{mark})
	if len(pods) != 3 {
		t.Fatalf("the DaemonSet pod stays: want 3 pods to move, got %d", len(pods))
	}
	for _, n := range in.Nodes {
		if n.Name == "node-0" {
			t.Fatal("the leaving node must not be a place for its own pods")
		}
	}
	if len(in.NodeClaims) != 1 || in.NodeClaims[0].Name != "nc-node-1" {
		t.Fatalf("the leaving node's NodeClaim must be left out, got %d claims", len(in.NodeClaims))
	}
	if !in.Unavailable("m5.large", "us-east-1a", "spot", "") {
		t.Fatal("the interrupted offering must be unavailable")
	}
	if snap.Pods[0].Spec.NodeName != "node-0" {
		t.Fatal("the snapshot must not be modified")
	}
	plan, err := provisioning.Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	onNode1 := 0
	for _, e := range plan.ExistingNodes {
		if e.Name == "node-1" {
			onNode1 += len(e.Pods)
		}
	}
	if onNode1 != 2 || len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].Pods) != 1 {
		t.Fatalf("want 2 pods on node-1 and 1 on a new NodeClaim, got %d and %d claims", onNode1, len(plan.NodeClaims))
	}
	for _, o := range plan.NodeClaims[0].Offerings {
		if o.InstanceType.Name == "m5.large" && o.Zone == "us-east-1a" && o.CapacityType == "spot" {
			t.Fatal("the replacement must not offer the interrupted offering")
		}
	}
	if ReadyPlacement(plan) {
		t.Fatal("a plan with a new NodeClaim is not a ready placement")
	}
}

// Property: for any cluster of m5.large nodes holding up to 3 pods each, interrupting any node
// leaves every one of its evacuable pods with a place — an existing other node or a replacement
// NodeClaim of the plan — never the interrupted node and never the interrupted offering; and a
// plan is a "ready placement" (drain at once) only when no pod waits for a new NodeClaim.
func TestPropertyInterruptedPodsHavePlace(t *testing.T) {
	cat := catalog.MustAWS()
	rapid.Check(t, func(rt *rapid.T) {
		counts := rapid.SliceOfN(rapid.IntRange(0, 3), 1, 6).Draw(rt, "podsPerNode")
		victim := rapid.IntRange(0, len(counts)-1).Draw(rt, "victim")
		snap := intrCluster(counts, rapid.Bool().Draw(rt, "daemonset"))
		name := fmt.Sprintf("node-%d", victim)
		mark := events.UnavailableOfferingMark{OfferingKey: events.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}, Expires: metav1.NewTime(driftNow.Add(3 * time.Minute))}
		in, pods := EvacuationInput(snap, cat, cloud.NodeSettingsFor, []string{name}, []events.UnavailableOfferingMark{mark})
		if len(pods) != counts[victim] {
			rt.Fatalf("want %d pods to move, got %d", counts[victim], len(pods))
		}
		plan, err := provisioning.Solve(in)
		if err != nil {
			rt.Fatal(err)
		}
		placed := map[string]string{}
		for _, e := range plan.ExistingNodes {
			for _, p := range e.Pods {
				if e.Name == name {
					rt.Fatalf("pod %s placed on the interrupted node", p.Name)
				}
				placed[p.Name] = e.Name
			}
		}
		for i, c := range plan.NodeClaims {
			for _, o := range c.Offerings {
				if o.InstanceType.Name == mark.InstanceType && o.Zone == mark.Zone && o.CapacityType == mark.CapacityType {
					rt.Fatalf("replacement %d offers the interrupted offering", i)
				}
			}
			for _, p := range c.Pods {
				placed[p.Name] = fmt.Sprintf("replacement-%d", i)
			}
		}
		for _, p := range pods {
			if _, ok := placed[p.Name]; !ok {
				rt.Fatalf("pod %s has no place (unschedulable: %+v)", p.Name, plan.Unschedulable)
			}
		}
		if ReadyPlacement(plan) != (len(plan.NodeClaims) == 0) {
			rt.Fatalf("ready placement %v with %d new NodeClaims", ReadyPlacement(plan), len(plan.NodeClaims))
		}
	})
}

// Property: whatever the budgets and the drifted nodes, PlanDrift never selects more nodes of a
// pool than AllowedDisruptions gives for Drifted (the active budget minus those disrupting).
func TestPropertyDriftWithinBudget(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		budget := rapid.SampledFrom([]string{"0", "1", "2", "5", "10%", "34%", "100%"}).Draw(rt, "budget")
		np := driftPool("default", apisv1.Budget{Nodes: budget})
		class := driftClass()
		snap := &events.Snapshot{Cluster: "c", Time: metav1.NewTime(driftNow), NodePools: []apisv1.NodePool{np}, NodeClasses: []apisv1.NodeClass{{EC2: &class}}}
		n := rapid.IntRange(1, 12).Draw(rt, "nodes")
		for i := 0; i < n; i++ {
			node, nc := driftNode(fmt.Sprintf("n%02d", i), &np, driftNow.Add(-time.Duration(rapid.IntRange(1, 1000).Draw(rt, "age"))*time.Hour))
			if rapid.Bool().Draw(rt, "drifted") {
				nc.Status.ImageID = "ami-old"
			}
			if rapid.IntRange(0, 4).Draw(rt, "tainted") == 0 {
				node.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Value: TaintValueDrifted, Effect: corev1.TaintEffectNoSchedule}}
			}
			snap.Nodes = append(snap.Nodes, node)
			snap.NodeClaims = append(snap.NodeClaims, nc)
		}
		counts := CountPoolNodes(snap)
		allowed, err := AllowedDisruptions(&np, apisv1.DisruptionReasonDrifted, counts["default"].Nodes, counts["default"].Disrupting, driftNow)
		if err != nil {
			rt.Fatal(err)
		}
		plan := PlanDrift(snap, ec2class.Rules{})
		if len(plan.Selected) > allowed {
			rt.Fatalf("budget %s over %d nodes (%d disrupting) allows %d, selected %d", budget, counts["default"].Nodes, counts["default"].Disrupting, allowed, len(plan.Selected))
		}
		for i := 1; i < len(plan.Selected); i++ {
			a, b := plan.Selected[i-1], plan.Selected[i]
			if len(a.Pods) == 0 && len(b.Pods) == 0 && b.NodeClaim.CreationTimestamp.Before(&a.NodeClaim.CreationTimestamp) {
				rt.Fatalf("not oldest first: %s before %s", a.Name(), b.Name())
			}
		}
	})
}
