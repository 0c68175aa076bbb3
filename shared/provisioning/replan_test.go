package provisioning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

var replanAt = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

// plannedClaim is an in-flight NodeClaim of instance type it in zone, created at, whose planned
// pods are planned ("namespace/name", comma-separated).
func plannedClaim(t *testing.T, name, it, zone string, at time.Time, planned string) *apisv1.NodeClaim {
	t.Helper()
	typ := cat(t).Get(it)
	return &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(at),
		Annotations: map[string]string{apisv1.AnnotationPlannedPods: planned},
		Labels: map[string]string{corev1.LabelInstanceTypeStable: it, apisv1.LabelNodePool: "default", corev1.LabelTopologyZone: zone,
			apisv1.LabelCapacityType: apisv1.CapacityTypeOnDemand, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"}},
		Status: apisv1.NodeClaimStatus{ProviderID: "aws:///" + zone + "/i-" + name, Allocatable: typ.Allocatable()}}
}

// placedOn maps each pod the plan puts on an existing node or in-flight NodeClaim to its name.
func placedOn(p *Plan) map[string]string {
	got := map[string]string{}
	for _, e := range p.ExistingNodes {
		for _, q := range e.Pods {
			got[q.Name] = e.Name
		}
	}
	return got
}

// A pod planned twice goes to its newest home first. big-b was planned onto NodeClaim "old"
// (its node registered, big-b nominated there), whose room a bound pod has since taken (2500m
// of its 3920m; big-b asks 2000m), so a later decision planned it onto the in-flight NodeClaim
// "new" (m5.xlarge: room for one 2000m pod). The re-plan keeps big-b there; big-a, planned
// nowhere, gets the new NodeClaim. With the nomination taken first, big-b missed "new", big-a
// (first in compile order: same size, name first) took it in first fit, and big-b was planned
// onto a third NodeClaim: the make scale run where one pod had four NodeClaims in a minute.
func TestReplanTakesTheNewestPlan(t *testing.T) {
	c := cat(t)
	np := nodePool("default", onDemand("m5.xlarge")...)
	old := plannedClaim(t, "old", "m5.xlarge", "us-east-1a", replanAt, "default/big-b")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: old.Labels},
		Spec:   corev1.NodeSpec{ProviderID: old.Status.ProviderID},
		Status: corev1.NodeStatus{Allocatable: c.Get("m5.xlarge").Allocatable()}}
	filler := pod("filler", "2500m", "1Gi")
	filler.Spec.NodeName = "old"
	bigA, bigB := pod("big-a", "2000m", "1Gi"), pod("big-b", "2000m", "1Gi")
	bigB.Status.NominatedNodeName = "old"
	in := Input{Catalog: c, Pods: []*corev1.Pod{bigA, bigB}, BoundPods: []*corev1.Pod{filler}, NodePools: []*apisv1.NodePool{np}, Nodes: []*corev1.Node{node},
		NodeClaims: []*apisv1.NodeClaim{old, plannedClaim(t, "new", "m5.xlarge", "us-east-1b", replanAt.Add(time.Minute), "default/big-b")}}
	p := solve(t, in)
	got := placedOn(p)
	if got["big-b"] != "new" || got["big-a"] != "" || len(p.NodeClaims) != 1 || len(p.NodeClaims[0].Pods) != 1 || p.NodeClaims[0].Pods[0].Name != "big-a" {
		t.Fatalf("placements %v, %d new NodeClaims; want big-b on new, big-a on one new NodeClaim", got, len(p.NodeClaims))
	}
}

// Planned pods whose spread constraint refuses their home only until their group's other
// planned pods are placed get it in a later sweep. s1 and s2 were planned onto "x" (zone a),
// s3 onto "y" (zone b), maxSkew 1 over the two zones: in compile order s2 comes before s3, and
// on its own would make zone a 2 against b's 0. Placed after s3, it makes 2 against 1. Without
// the second sweep s2 fell to first fit behind q0 (planned nowhere, first by name), which took
// x's last room, and s2 got a new NodeClaim; now q0 does.
func TestReplanPlacesASpreadGroupsPlannedPodsTogether(t *testing.T) {
	np := nodePool("default", append(onDemand("m5.large", "m5.xlarge"),
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b"))...)
	spread := func(name string) *corev1.Pod {
		p := pod(name, "1500m", "1Gi")
		p.Labels = map[string]string{"app": "s"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "s"}}}}
		return p
	}
	in := Input{Pods: []*corev1.Pod{pod("q0", "1500m", "1Gi"), spread("s1"), spread("s2"), spread("s3")}, NodePools: []*apisv1.NodePool{np},
		NodeClaims: []*apisv1.NodeClaim{
			plannedClaim(t, "x", "m5.xlarge", "us-east-1a", replanAt, "default/s1,default/s2"),
			plannedClaim(t, "y", "m5.large", "us-east-1b", replanAt, "default/s3"),
		}}
	p := solve(t, in)
	got := placedOn(p)
	if got["s1"] != "x" || got["s2"] != "x" || got["s3"] != "y" || len(p.NodeClaims) != 1 || p.NodeClaims[0].Pods[0].Name != "q0" {
		t.Fatalf("placements %v, %d new NodeClaims; want s1, s2 on x, s3 on y, q0 on a new NodeClaim", got, len(p.NodeClaims))
	}
}

// A planned pod that its spread constraint refuses until pods planned nowhere are placed (a
// drain's simulation: the consolidation sized replacement "r" for p2 and moved p1 to an existing
// node) tries its home again after them. Zone b holds one of the group's pods already, so p2 on
// r (zone b) alone makes b 2 against a's 0; once p1 is on "na" (zone a) it is 2 against 1.
// Without the late try, p2 (first in compile order: 1500m) fell to first fit, took na's room,
// and p1 (3.5Gi: more than r's c5.large holds) needed a new NodeClaim, the "drain waits: the
// pods need 1 more NodeClaim(s)" that rolled back make scale's consolidations.
func TestReplanGivesAPlannedPodItsHomeAfterItsGroup(t *testing.T) {
	c := cat(t)
	np := nodePool("default", append(onDemand("c5.large", "m5.large", "m5.xlarge"),
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b"))...)
	group := func(p *corev1.Pod) *corev1.Pod {
		p.Labels = map[string]string{"app": "s"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "s"}}}}
		return p
	}
	node := func(name, it, zone string) *corev1.Node {
		nc := plannedClaim(t, name, it, zone, replanAt, "")
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelInstanceTypeStable: it,
			apisv1.LabelNodePool: "default", corev1.LabelTopologyZone: zone, apisv1.LabelCapacityType: apisv1.CapacityTypeOnDemand,
			corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", corev1.LabelHostname: name}},
			Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}, Status: corev1.NodeStatus{Allocatable: c.Get(it).Allocatable()}}
	}
	bound := func(p *corev1.Pod, on string) *corev1.Pod { p.Spec.NodeName = on; return p }
	// na (m5.xlarge, 3920m) keeps 1600m free; nb (m5.large, 1930m) 230m.
	in := Input{Catalog: c, NodePools: []*apisv1.NodePool{np},
		Nodes: []*corev1.Node{node("na", "m5.xlarge", "us-east-1a"), node("nb", "m5.large", "us-east-1b")},
		BoundPods: []*corev1.Pod{bound(pod("fill-a", "2320m", "1Gi"), "na"), bound(pod("fill-b", "1600m", "1Gi"), "nb"),
			bound(group(pod("g1", "100m", "128Mi")), "nb")},
		Pods:       []*corev1.Pod{group(pod("p1", "1000m", "3584Mi")), group(pod("p2", "1500m", "1Gi"))},
		NodeClaims: []*apisv1.NodeClaim{plannedClaim(t, "r", "c5.large", "us-east-1b", replanAt, "default/p2")}}
	p := solve(t, in)
	got := placedOn(p)
	if got["p1"] != "na" || got["p2"] != "r" || len(p.NodeClaims) != 0 {
		t.Fatalf("placements %v, %d new NodeClaims; want p1 on na, p2 on r, nothing new", got, len(p.NodeClaims))
	}
}
