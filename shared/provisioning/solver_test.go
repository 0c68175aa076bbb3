package provisioning

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// Expected numbers in these tests come from the embedded us-east-1 catalog's public list prices
// (m5.large 0.096, m5.xlarge 0.192, m5.2xlarge 0.384, m5.4xlarge 0.768 USD/h) and the EKS
// allocatable rules: m5.large 2 vCPU → 1930m, 29 pods; m5.xlarge 4 vCPU → 3920m, 58 pods;
// m5.2xlarge 8 vCPU → 7910m; m5.4xlarge 16 vCPU → 15890m (kube-reserved 6%/1%/0.5%/0.25% per core).

func cat(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, err := catalog.AWS()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) apisv1.NodeSelectorRequirementWithMinValues {
	return apisv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}}
}

func nodePool(name string, reqs ...apisv1.NodeSelectorRequirementWithMinValues) *apisv1.NodePool {
	return &apisv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimSpec{
			Requirements: reqs,
			NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
		}}},
	}
}

func onDemand(types ...string) []apisv1.NodeSelectorRequirementWithMinValues {
	return []apisv1.NodeSelectorRequirementWithMinValues{
		req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, types...),
		req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeOnDemand),
	}
}

func pod(name, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
}

func pods(n int, cpu, mem string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("p-%02d", i), cpu, mem)
	}
	return out
}

func daemonSet(name, cpu string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: pod("x", cpu, "0").Spec}}}
}

func solve(t *testing.T, in Input) *Plan {
	t.Helper()
	if in.Catalog == nil {
		in.Catalog = cat(t)
	}
	p, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantClaims(t *testing.T, p *Plan, types ...string) {
	t.Helper()
	var got []string
	for _, c := range p.NodeClaims {
		got = append(got, c.Cheapest().InstanceType.Name)
	}
	if !reflect.DeepEqual(got, types) {
		var reasons []string
		for _, u := range p.Unschedulable {
			reasons = append(reasons, u.Pod.Name+": "+u.Reason)
		}
		t.Fatalf("NodeClaims' first offerings = %v, want %v (unschedulable: %v)", got, types, reasons)
	}
}

func TestCheapestFittingType(t *testing.T) {
	np := nodePool("default", onDemand("m5.large", "m5.xlarge", "m5.2xlarge")...)
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{np}})
	wantClaims(t, p, "m5.large")
	c := p.NodeClaims[0]
	if got := c.Cheapest().PricePerHour; got != 0.096 {
		t.Fatalf("price = %v, want 0.096 (m5.large on-demand list price)", got)
	}
	if got := c.InstanceTypeOptions(); !reflect.DeepEqual(got, []string{"m5.large", "m5.xlarge", "m5.2xlarge"}) {
		t.Fatalf("options = %v, want every fitting type, cheapest first", got)
	}
	if n := len(c.Offerings); n != 15 {
		t.Fatalf("offerings = %d, want 3 types × 5 zones (nitro types skip us-east-1e) = 15", n)
	}
}

func TestPodLargerThanSmallTypeGetsNextSize(t *testing.T) {
	np := nodePool("default", onDemand("m5.large", "m5.xlarge")...)
	// 2000m > m5.large's 1930m allocatable.
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "2", "1Gi")}, NodePools: []*apisv1.NodePool{np}})
	wantClaims(t, p, "m5.xlarge")
}

func TestNineVCPUPod(t *testing.T) {
	// Cluster Autoscaler's 8-vCPU group cannot take a 9-vCPU pod; the catalog can:
	// m5.2xlarge has 7910m allocatable, m5.4xlarge 15890m.
	np := nodePool("default", append(onDemand(), req(apisv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5"))[1:]...)
	p := solve(t, Input{Pods: []*corev1.Pod{pod("big", "9", "8Gi")}, NodePools: []*apisv1.NodePool{np}})
	wantClaims(t, p, "m5.4xlarge")
	if got := p.TotalPricePerHour(); got != 0.768 {
		t.Fatalf("$/h = %v, want 0.768", got)
	}
}

func TestMaxPodsSplitsNodes(t *testing.T) {
	// m5.large takes 3×(10−1)+2 = 29 pods: 30 tiny pods need two nodes.
	np := nodePool("default", onDemand("m5.large")...)
	p := solve(t, Input{Pods: pods(30, "10m", "10Mi"), NodePools: []*apisv1.NodePool{np}})
	wantClaims(t, p, "m5.large", "m5.large")
	if a, b := len(p.NodeClaims[0].Pods), len(p.NodeClaims[1].Pods); a != 29 || b != 1 {
		t.Fatalf("pods per node = %d, %d; want 29, 1", a, b)
	}
}

func TestDaemonSetOverhead(t *testing.T) {
	np := nodePool("default", onDemand("m5.large", "m5.xlarge")...)
	// 1850m + 100m DaemonSet = 1950m > 1930m: m5.large no longer fits.
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1850m", "1Gi")}, NodePools: []*apisv1.NodePool{np},
		DaemonSets: []*appsv1.DaemonSet{daemonSet("kube-proxy", "100m")}})
	wantClaims(t, p, "m5.xlarge")

	// A DaemonSet that only runs on arm64 adds nothing to amd64 types.
	arm := daemonSet("arm-only", "100m")
	arm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
	p = solve(t, Input{Pods: []*corev1.Pod{pod("a", "1850m", "1Gi")}, NodePools: []*apisv1.NodePool{np},
		DaemonSets: []*appsv1.DaemonSet{arm}})
	wantClaims(t, p, "m5.large")
}

func TestTaintsAndStartupTaints(t *testing.T) {
	np := nodePool("gpu", onDemand("m5.large")...)
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{np}})
	if len(p.NodeClaims) != 0 || len(p.Unschedulable) != 1 || !strings.Contains(p.Unschedulable[0].Reason, "dedicated=gpu:NoSchedule") {
		t.Fatalf("an untolerated taint must leave the pod unschedulable with the taint named: %+v", p.Unschedulable)
	}
	np.Spec.Template.Spec.StartupTaints, np.Spec.Template.Spec.Taints = np.Spec.Template.Spec.Taints, nil
	p = solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{np}})
	wantClaims(t, p, "m5.large")
}

func existingNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", corev1.LabelInstanceTypeStable: "m5.large"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"),
			corev1.ResourceMemory: resource.MustParse("6903Mi"), corev1.ResourcePods: resource.MustParse("29")}}}
}

func TestExistingCapacityFirst(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	bound := pod("running", "1", "1Gi")
	bound.Spec.NodeName = "node-a"
	// node-a has 1930 − 1000 = 930m free: a 900m pod fits there, the 1000m pod does not.
	p := solve(t, Input{Pods: []*corev1.Pod{pod("small", "900m", "1Gi"), pod("big", "1", "1Gi")},
		Nodes: []*corev1.Node{existingNode("node-a")}, BoundPods: []*corev1.Pod{bound}, NodePools: []*apisv1.NodePool{np}})
	if len(p.ExistingNodes) != 1 || len(p.ExistingNodes[0].Pods) != 1 || p.ExistingNodes[0].Pods[0].Name != "small" {
		t.Fatalf("existing placements = %+v, want small on node-a", p.ExistingNodes)
	}
	wantClaims(t, p, "m5.large")
	if p.NodeClaims[0].Pods[0].Name != "big" {
		t.Fatal("the big pod must get the new NodeClaim")
	}
}

func TestInFlightNodeClaimAbsorbsPods(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{
		apisv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64",
		corev1.LabelOSStable: "linux", apisv1.LabelCapacityType: "on-demand", corev1.LabelTopologyZone: "us-east-1a"}},
		Status: apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}}
	p := solve(t, Input{Pods: pods(2, "900m", "1Gi"), NodeClaims: []*apisv1.NodeClaim{nc}, NodePools: []*apisv1.NodePool{np}})
	if len(p.NodeClaims) != 0 || len(p.ExistingNodes) != 1 || !p.ExistingNodes[0].InFlight || len(p.ExistingNodes[0].Pods) != 2 {
		t.Fatalf("2×900m must land on the in-flight m5.large (1930m): %+v / %d new claims", p.ExistingNodes, len(p.NodeClaims))
	}
}

func TestWeightOrder(t *testing.T) {
	low := nodePool("c5", onDemand("c5.large")...)
	high := nodePool("m5", onDemand("m5.large")...)
	w10, w50 := int32(10), int32(50)
	low.Spec.Weight, high.Spec.Weight = &w10, &w50
	// c5.large (0.085) is cheaper, but the higher-weight pool is tried first.
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{low, high}})
	wantClaims(t, p, "m5.large")
	if p.NodeClaims[0].NodePool.Name != "m5" {
		t.Fatal("want the weight-50 pool")
	}
}

func TestLimits(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	// One m5.large has 2 vCPU of capacity: the limit allows one node; the second pod has no room.
	p := solve(t, Input{Pods: pods(2, "1500m", "1Gi"), NodePools: []*apisv1.NodePool{np}})
	wantClaims(t, p, "m5.large")
	if len(p.Unschedulable) != 1 || !strings.Contains(p.Unschedulable[0].Reason, "limits") {
		t.Fatalf("want one pod refused for limits, got %+v", p.Unschedulable)
	}
	// Existing nodes of the pool count against the limit.
	n := existingNode("node-a")
	n.Labels[apisv1.LabelNodePool] = "default"
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	n.Spec.Taints = []corev1.Taint{{Key: "full", Effect: corev1.TaintEffectNoSchedule}}
	p = solve(t, Input{Pods: pods(1, "1500m", "1Gi"), Nodes: []*corev1.Node{n}, NodePools: []*apisv1.NodePool{np}})
	if len(p.NodeClaims) != 0 || len(p.Unschedulable) != 1 {
		t.Fatalf("the pool's 2 vCPU are used by node-a; want no launch, got %d claims", len(p.NodeClaims))
	}
}

func TestGtLtAndCategory(t *testing.T) {
	np := nodePool("default",
		req(apisv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "m"),
		req(apisv1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "5"),
		req(apisv1.LabelInstanceGeneration, corev1.NodeSelectorOpLt, "7"),
		req(apisv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "5"))
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{np}})
	if len(p.NodeClaims) != 1 {
		t.Fatalf("want one claim, got %+v", p.Unschedulable)
	}
	for _, o := range p.NodeClaims[0].Offerings {
		l := o.InstanceType.Labels
		if l[apisv1.LabelInstanceCategory] != "m" || l[apisv1.LabelInstanceGeneration] != "6" || l[apisv1.LabelInstanceCPU] > "4" {
			t.Fatalf("offering %s violates category m, generation 6, cpu < 5", o.InstanceType.Name)
		}
	}
}

func TestArchAndZoneSelectors(t *testing.T) {
	np := nodePool("default", req(apisv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m"))
	a := pod("a", "1", "1Gi")
	a.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64", corev1.LabelTopologyZone: "us-east-1c"}
	p := solve(t, Input{Pods: []*corev1.Pod{a}, NodePools: []*apisv1.NodePool{np}})
	if len(p.NodeClaims) != 1 {
		t.Fatalf("want one claim: %+v", p.Unschedulable)
	}
	for _, o := range p.NodeClaims[0].Offerings {
		if o.InstanceType.Labels[corev1.LabelArchStable] != "arm64" || o.Zone != "us-east-1c" {
			t.Fatalf("offering %s/%s violates arm64 in us-east-1c", o.InstanceType.Name, o.Zone)
		}
	}
}

func TestSpotPreferredWhenCheaper(t *testing.T) {
	np := nodePool("default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"),
		req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"))
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{np}})
	first := p.NodeClaims[0].Cheapest()
	// The spot model prices m5.large near 0.426 × 0.096 ≈ 0.041, below on-demand.
	if first.CapacityType != apisv1.CapacityTypeSpot || !first.IsEstimate() || first.PricePerHour >= 0.096 {
		t.Fatalf("first offering = %+v, want an estimated spot price below 0.096", first.Offering)
	}
	last := p.NodeClaims[0].Offerings[len(p.NodeClaims[0].Offerings)-1]
	if last.CapacityType != apisv1.CapacityTypeOnDemand {
		t.Fatal("on-demand must remain in the list as the fallback")
	}
}

func TestCustomLabels(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	a := pod("a", "1", "1Gi")
	a.Spec.NodeSelector = map[string]string{"team": "payments"}
	p := solve(t, Input{Pods: []*corev1.Pod{a}, NodePools: []*apisv1.NodePool{np}})
	if len(p.Unschedulable) != 1 || !strings.Contains(p.Unschedulable[0].Reason, `label "team" is not defined`) {
		t.Fatalf("a label no pool defines must be refused: %+v", p.Unschedulable)
	}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "payments"}
	p = solve(t, Input{Pods: []*corev1.Pod{a}, NodePools: []*apisv1.NodePool{np}})
	wantClaims(t, p, "m5.large")
	if p.NodeClaims[0].Labels["team"] != "payments" {
		t.Fatal("the template label must be on the NodeClaim")
	}
}

func TestUnavailableOfferingsSkipped(t *testing.T) {
	np := nodePool("default", onDemand("m5.large", "m5.xlarge")...)
	ice := func(it, zone, ct, _ string) bool { return it == "m5.large" }
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{np}, Unavailable: ice})
	wantClaims(t, p, "m5.xlarge")
}

func TestDeterministic(t *testing.T) {
	np := nodePool("default", req(apisv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"))
	in := Input{Pods: pods(40, "350m", "700Mi"), NodePools: []*apisv1.NodePool{np}}
	a, b := solve(t, in), solve(t, in)
	if len(a.NodeClaims) != len(b.NodeClaims) {
		t.Fatal("plans differ")
	}
	for i := range a.NodeClaims {
		if !reflect.DeepEqual(a.NodeClaims[i].InstanceTypeOptions(), b.NodeClaims[i].InstanceTypeOptions()) {
			t.Fatal("plans differ")
		}
	}
}

func TestHostnameAntiAffinity(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	anti := func(name string) *corev1.Pod {
		p := pod(name, "100m", "100Mi")
		p.Labels = map[string]string{"app": "karpenter"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "karpenter"}}}}}}
		return p
	}
	// Two replicas that refuse each other's host need two nodes, though both would fit on one.
	p := solve(t, Input{Pods: []*corev1.Pod{anti("k-0"), anti("k-1"), pod("other", "100m", "100Mi")}, NodePools: []*apisv1.NodePool{np}})
	wantClaims(t, p, "m5.large", "m5.large")

	// A running replica on an existing node keeps the new one off that node (symmetric check).
	running := anti("k-running")
	running.Spec.NodeName = "node-a"
	p = solve(t, Input{Pods: []*corev1.Pod{anti("k-new")}, Nodes: []*corev1.Node{existingNode("node-a")},
		BoundPods: []*corev1.Pod{running}, NodePools: []*apisv1.NodePool{np}})
	if len(p.ExistingNodes) != 0 || len(p.NodeClaims) != 1 {
		t.Fatalf("the new replica must not join its sibling on node-a: existing=%d claims=%d", len(p.ExistingNodes), len(p.NodeClaims))
	}
}

func TestAcceleratorNodesTakeNoPassengers(t *testing.T) {
	np := nodePool("default", req(apisv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "g4dn", "m5"), req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"))
	gpu := func(name string) *corev1.Pod {
		p := pod(name, "4", "16Gi")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		return p
	}
	p := solve(t, Input{Pods: []*corev1.Pod{gpu("train-0"), gpu("train-1"), pod("web", "500m", "512Mi")}, NodePools: []*apisv1.NodePool{np}})
	// Each GPU pod needs 4 vCPU and a GPU: g4dn.xlarge (3920m allocatable) is too small, so each
	// takes a g4dn.2xlarge (on demand 0.752 USD/h), cheaper than both on one g4dn.12xlarge
	// (3.912); the web pod does not ride on a GPU node but gets the cheapest m5 (m5.large 0.096).
	var gpuNodes, other int
	for _, c := range p.NodeClaims {
		switch c.Cheapest().InstanceType.Name {
		case "g4dn.2xlarge":
			gpuNodes++
			if len(c.Pods) != 1 || c.Pods[0].Name == "web" {
				t.Fatalf("a GPU node carries %v", c.Pods)
			}
		case "m5.large":
			other++
		default:
			t.Fatalf("unexpected type %s", c.Cheapest().InstanceType.Name)
		}
	}
	if gpuNodes != 2 || other != 1 {
		t.Fatalf("want 2 g4dn.2xlarge and 1 m5.large, got %d and %d", gpuNodes, other)
	}
}

func TestNodeClassVolumeSizesEphemeralStorage(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	x := pod("logs", "100m", "100Mi")
	x.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("50Gi")
	// The default 20Gi root volume leaves 17Gi allocatable (− 1Gi kube-reserved, − 10% eviction):
	// the pod fits nowhere.
	p := solve(t, Input{Pods: []*corev1.Pod{x}, NodePools: []*apisv1.NodePool{np}})
	if len(p.Unschedulable) != 1 {
		t.Fatalf("a 50Gi ephemeral request must not fit a 20Gi root volume: %d claims", len(p.NodeClaims))
	}
	// A 100Gi root volume on the EC2NodeClass gives 100 − 1 − 10 = 89Gi: m5.large fits.
	size := resource.MustParse("100Gi")
	dev := "/dev/xvda"
	nc := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.EC2NodeClassSpec{
		AMISelectorTerms:    []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		BlockDeviceMappings: []apisv1.BlockDeviceMapping{{DeviceName: &dev, RootVolume: true, EBS: &apisv1.BlockDevice{VolumeSize: &size}}}}}
	p = solve(t, Input{Pods: []*corev1.Pod{x}, NodePools: []*apisv1.NodePool{np}, NodeClasses: []apisv1.NodeClass{{EC2: nc}},
		NodeSettings: cloud.NodeSettingsFor})
	wantClaims(t, p, "m5.large")
}

// A re-plan while capacity boots keeps the plan: each pending pod goes to the in-flight
// NodeClaim whose planned pods list it (first fit alone puts both 1.5-CPU pods on the first
// claim by name, "a", moving big-b off the claim launched for it), and a pod nominated to a node
// goes there.
func TestReplanKeepsPlannedPlacements(t *testing.T) {
	c := cat(t)
	inFlight := func(name, planned string) *apisv1.NodeClaim {
		it := c.Get("m5.xlarge")
		return &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{apisv1.AnnotationPlannedPods: planned},
			Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.xlarge", apisv1.LabelNodePool: "default", corev1.LabelTopologyZone: "us-east-1a",
				apisv1.LabelCapacityType: apisv1.CapacityTypeOnDemand, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"}},
			Status: apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-" + name, Allocatable: it.Allocatable()}}
	}
	np := nodePool("default", onDemand("m5.xlarge")...)
	bigA, bigB := pod("big-a", "1500m", "1Gi"), pod("big-b", "1500m", "1Gi")
	in := Input{Catalog: c, Pods: []*corev1.Pod{bigA, bigB}, NodePools: []*apisv1.NodePool{np},
		NodeClaims: []*apisv1.NodeClaim{inFlight("a", "default/big-a"), inFlight("b", "default/big-b")}}
	p := solve(t, in)
	got := map[string]string{}
	for _, e := range p.ExistingNodes {
		for _, q := range e.Pods {
			got[q.Name] = e.Name
		}
	}
	if got["big-a"] != "a" || got["big-b"] != "b" || len(p.NodeClaims) != 0 {
		t.Fatalf("placements %v, %d new claims; want big-a on a, big-b on b, nothing new", got, len(p.NodeClaims))
	}
	// Without the annotations first fit puts both on "a" (3 of its 3.92 vCPU).
	for _, nc := range in.NodeClaims {
		nc.Annotations = nil
	}
	got = map[string]string{}
	for _, e := range solve(t, in).ExistingNodes {
		for _, q := range e.Pods {
			got[q.Name] = e.Name
		}
	}
	if got["big-a"] != "a" || got["big-b"] != "a" {
		t.Fatalf("without plans: %v; the test no longer shows what the plans change", got)
	}
	// A pod nominated to "b" goes there.
	bigA.Status.NominatedNodeName = "b"
	in.NodeClaims[1].Status.ProviderID = ""
	in.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: in.NodeClaims[1].Labels},
		Status: corev1.NodeStatus{Allocatable: c.Get("m5.xlarge").Allocatable()}}}
	in.NodeClaims = in.NodeClaims[:1]
	got = map[string]string{}
	for _, e := range solve(t, in).ExistingNodes {
		for _, q := range e.Pods {
			got[q.Name] = e.Name
		}
	}
	if got["big-a"] != "b" {
		t.Fatalf("nominated pod: %v, want big-a on b", got)
	}
}

// A NodePool whose NodeClass the lifecycle function found not Ready launches nothing, with the
// class's reason; the same pods fall to another pool whose class is Ready.
func TestNodeClassNotReadyLaunchesNothing(t *testing.T) {
	broken := nodePool("broken", onDemand("c5.large")...)
	w := int32(50)
	broken.Spec.Weight = &w
	broken.Spec.Template.Spec.NodeClassRef.Name = "no-subnets"
	class := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "no-subnets"}, Status: apisv1.EC2NodeClassStatus{Conditions: []metav1.Condition{
		{Type: apisv1.ConditionSubnetsReady, Status: metav1.ConditionFalse, Reason: apisv1.ReasonSubnetsNotFound, Message: "spec.subnetSelectorTerms (1 terms) matched no subnets"},
		{Type: apisv1.ConditionReady, Status: metav1.ConditionFalse, Reason: apisv1.ReasonUnhealthyDependents, Message: "SubnetsReady=False"},
	}}}
	in := Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{broken}, NodeClasses: []apisv1.NodeClass{apisv1.NodeClassOf(class)}}
	p := solve(t, in)
	if len(p.NodeClaims) != 0 || len(p.Unschedulable) != 1 {
		t.Fatalf("claims %d unschedulable %d, want 0 and 1", len(p.NodeClaims), len(p.Unschedulable))
	}
	want := `nodepool "broken": EC2NodeClass no-subnets is not ready (Ready=False, UnhealthyDependents: SubnetsReady=False; SubnetsReady: spec.subnetSelectorTerms (1 terms) matched no subnets)`
	if r := p.Unschedulable[0].Reason; !strings.Contains(r, want) {
		t.Errorf("reason %q, want it to contain %q", r, want)
	}
	// A second pool with a Ready class (here: a class not resolved yet, no Ready condition)
	// takes the pod, though the broken pool has the higher weight.
	in.NodePools = append(in.NodePools, nodePool("default", onDemand("m5.large")...))
	wantClaims(t, solve(t, in), "m5.large")
}

// A request the int64 math cannot hold is refused by name, not wrapped to 0 and planned onto the
// smallest node.
func TestOverflowingRequestIsRefused(t *testing.T) {
	np := nodePool("default", onDemand("m5.large", "m5.xlarge")...)
	huge := pod("huge", "1", "1Gi")
	huge.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1e30")
	p := solve(t, Input{Pods: []*corev1.Pod{huge, pod("ok", "1", "1Gi")}, NodePools: []*apisv1.NodePool{np}})
	if len(p.Unschedulable) != 1 || p.Unschedulable[0].Pod.Name != "huge" || !strings.Contains(p.Unschedulable[0].Reason, "requests.cpu: 1e30 is too large") {
		t.Fatalf("unschedulable %+v, want the 1e30-CPU pod refused by its field", p.Unschedulable)
	}
	wantClaims(t, p, "m5.large")
}

// Where NodeClasses are resolved by the lifecycle function (RequireResolvedNodeClasses), a pool
// whose class has no Ready condition yet launches nothing, and the pods it turned away are marked
// as waiting for that class, not as failing; a pod turned away only by a resolved pool's own
// rule (a taint here) is not waiting.
func TestPodsWaitForAnUnresolvedNodeClass(t *testing.T) {
	pending := nodePool("default", onDemand("m5.large")...) // EC2NodeClass "default", no status
	tainted := nodePool("tainted", onDemand("m5.large")...)
	tainted.Spec.Template.Spec.NodeClassRef.Name = "resolved"
	tainted.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	resolved := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "resolved"}, Status: apisv1.EC2NodeClassStatus{Conditions: []metav1.Condition{
		{Type: apisv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"},
	}}}
	unresolved := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	in := Input{
		Pods:                       []*corev1.Pod{pod("a", "1", "1Gi"), pod("b", "1", "1Gi")},
		NodePools:                  []*apisv1.NodePool{pending, tainted},
		NodeClasses:                []apisv1.NodeClass{apisv1.NodeClassOf(unresolved), apisv1.NodeClassOf(resolved)},
		RequireResolvedNodeClasses: true,
	}
	p := solve(t, in)
	if len(p.NodeClaims) != 0 || len(p.Unschedulable) != 2 {
		t.Fatalf("claims %d unschedulable %d, want 0 and 2", len(p.NodeClaims), len(p.Unschedulable))
	}
	for _, u := range p.Unschedulable {
		if !u.Waiting() || !slices.Equal(u.AwaitingNodeClasses, []string{"EC2NodeClass default"}) {
			t.Errorf("pod %s: awaiting %v, want [EC2NodeClass default]", u.Pod.Name, u.AwaitingNodeClasses)
		}
		if !strings.Contains(u.Reason, "EC2NodeClass default has no status yet") || !strings.Contains(u.Reason, "taint dedicated=gpu:NoSchedule is not tolerated") {
			t.Errorf("pod %s: reason %q, want both pools' reasons", u.Pod.Name, u.Reason)
		}
	}

	// Without the unresolved pool only the taint refuses the pods: they are not waiting.
	in.NodePools = []*apisv1.NodePool{tainted}
	for _, u := range solve(t, in).Unschedulable {
		if u.Waiting() {
			t.Errorf("pod %s refused by a taint alone is waiting for %v", u.Pod.Name, u.AwaitingNodeClasses)
		}
	}
}
