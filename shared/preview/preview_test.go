package preview

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// The capacity type of a node comes from the label its autoscaler writes: Karpenter's, an EKS
// managed node group's (eks.amazonaws.com/capacityType: ON_DEMAND, SPOT, CAPACITY_BLOCK) or an
// AKS Spot pool's (kubernetes.azure.com/scalesetpriority: spot); none means on-demand.
func TestNodeOfferingAndOwner(t *testing.T) {
	node := func(labels map[string]string) *corev1.Node {
		l := map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a"}
		for k, v := range labels {
			l[k] = v
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: l}}
	}
	for _, c := range []struct {
		labels            map[string]string
		ct, kind, ownerOf string
	}{
		{map[string]string{apisv1.LabelCapacityType: "spot", apisv1.LabelNodePool: "default"}, "spot", OwnerNodePool, "default"},
		{map[string]string{LabelEKSCapacityType: "SPOT", LabelEKSNodeGroup: "ng-1"}, "spot", OwnerNodeGroup, "ng-1"},
		{map[string]string{LabelEKSCapacityType: "ON_DEMAND", LabelEKSNodeGroup: "ng-1"}, "on-demand", OwnerNodeGroup, "ng-1"},
		{map[string]string{LabelEKSCapacityType: "CAPACITY_BLOCK", LabelEksctlNodeGroup: "gpu"}, "reserved", OwnerNodeGroup, "gpu"},
		{map[string]string{apisv1.AKSLabelScaleSetPriority: "spot", LabelAKSAgentPool: "spotpool"}, "spot", OwnerNodeGroup, "spotpool"},
		{map[string]string{apisv1.AKSLabelScaleSetPriority: "regular", apisv1.AKSLabelLegacyAgentPool: "nodepool1"}, "on-demand", OwnerNodeGroup, "nodepool1"},
		{nil, "on-demand", OwnerNone, ""},
	} {
		n := node(c.labels)
		key := NodeOffering(n, nil)
		kind, name := NodeOwner(n)
		if key.CapacityType != c.ct || key.InstanceType != "m5.large" || kind != c.kind || name != c.ownerOf {
			t.Errorf("%v: %+v owner %s %s; want %s, %s %s", c.labels, key, kind, name, c.ct, c.kind, c.ownerOf)
		}
	}
	// A node registering without labels yet is described by its NodeClaim.
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{corev1.LabelInstanceTypeStable: "c5.large",
		corev1.LabelTopologyZone: "us-east-1b", apisv1.LabelCapacityType: "spot"}}}
	if key := NodeOffering(bare, nc); key != (events.OfferingKey{InstanceType: "c5.large", Zone: "us-east-1b", CapacityType: "spot"}) {
		t.Errorf("from the NodeClaim: %+v", key)
	}
}

// Prices come from the catalog's offering; a zone the data lacks takes the type's cheapest
// offering of the same capacity type, said in the source.
func TestOfferingPrice(t *testing.T) {
	cat := catalog.MustAWS()
	p, src, ok := OfferingPrice(cat, events.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"})
	if !ok || p != 0.096 || src != string(catalog.PriceSourceEmbedded) {
		t.Errorf("m5.large on-demand: %v %s %v; want the list price 0.096", p, src, ok)
	}
	p, src, ok = OfferingPrice(cat, events.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1z", CapacityType: "on-demand"})
	if !ok || p != 0.096 || src != string(catalog.PriceSourceEmbedded)+"-other-zone" {
		t.Errorf("unknown zone: %v %s %v", p, src, ok)
	}
	if _, _, ok := OfferingPrice(cat, events.OfferingKey{InstanceType: "m99.huge", Zone: "us-east-1a", CapacityType: "on-demand"}); ok {
		t.Error("an unknown type has no price")
	}
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func caNode(name, group, itype string, taints ...corev1.Taint) corev1.Node {
	it := catalog.MustAWS().Get(itype)
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-48 * time.Hour)), Labels: map[string]string{
			corev1.LabelInstanceTypeStable: itype, corev1.LabelTopologyZone: "us-east-1a", corev1.LabelHostname: name,
			corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", LabelEKSNodeGroup: group, LabelEKSCapacityType: "ON_DEMAND"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name, Taints: taints},
		Status: corev1.NodeStatus{Capacity: it.Capacity, Allocatable: it.Allocatable(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func caPod(name, node, cpu, mem string, annotations map[string]string) corev1.Pod {
	yes := true
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", Annotations: annotations, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// A Cluster-Autoscaler cluster (node groups, no NodePool) is previewed against the assumed
// getting-started NodePool: its node groups are drained onto it, except the nodes a pod holds
// (do-not-disrupt) or has no place elsewhere (a node selector only its node group matches).
//
// Hand calculation: node group "apps" runs three m5.xlarge (0.192 each) with one 500m/512Mi pod
// each, and a fourth with a do-not-disrupt pod (kept); node group "system" one m5.large (0.096)
// tainted CriticalAddonsOnly with coredns, which selects its node group (kept: no place on the
// NodePool). Today: 4 × 0.192 + 0.096 = 0.864. The three pods (1500m) go to the kept app-4's
// free room (3920m − 100m), the first node the solver tries: no new node, the three drained
// nodes go, converged 0.192 + 0.096 = 0.288.
func TestClusterAutoscalerClusterMigratesToTheAssumedNodePool(t *testing.T) {
	crit := corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	snap := &events.Snapshot{Time: metav1.NewTime(t0), Nodes: []corev1.Node{
		caNode("app-1", "apps", "m5.xlarge"), caNode("app-2", "apps", "m5.xlarge"), caNode("app-3", "apps", "m5.xlarge"),
		caNode("app-4", "apps", "m5.xlarge"), caNode("sys-1", "system", "m5.large", crit)}}
	for i := 1; i <= 3; i++ {
		snap.Pods = append(snap.Pods, caPod("web-"+strconv.Itoa(i), "app-"+strconv.Itoa(i), "500m", "512Mi", nil))
	}
	snap.Pods = append(snap.Pods, caPod("batch", "app-4", "100m", "128Mi", map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}))
	dns := caPod("coredns", "sys-1", "100m", "70Mi", nil)
	dns.Spec.NodeSelector = map[string]string{LabelEKSNodeGroup: "system"}
	dns.Spec.Tolerations = []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}
	snap.Pods = append(snap.Pods, dns)

	res, err := Run(snap, Options{Catalog: catalog.MustAWS()})
	if err != nil {
		t.Fatal(err)
	}
	if res.AssumedPool != "default" || !strings.Contains(res.AssumedWhat, "getting-started") {
		t.Errorf("assumed %q: %q", res.AssumedPool, res.AssumedWhat)
	}
	if math.Abs(res.Today.PricePerHour-0.864) > 1e-9 || math.Abs(res.Converged.PricePerHour-0.288) > 1e-9 {
		t.Errorf("today %.6f (want 0.864), converged %.6f (want 0.288)", res.Today.PricePerHour, res.Converged.PricePerHour)
	}
	if len(res.Today.Groups) != 2 || res.Today.Groups[0].Owner != "apps" || res.Today.Groups[0].PricePerHour != 0.768 {
		t.Errorf("today's node groups: %+v", res.Today.Groups)
	}
	d := res.Rounds[0].Decisions[0]
	if d.Function != FunctionMigration || len(d.Nodes) != 3 || d.PricePerHourBefore != 0.576 || len(d.Launched) != 0 || len(d.Moved) != 3 {
		t.Fatalf("migration: %+v", d)
	}
	for _, m := range d.Moved {
		if m.To != "app-4" {
			t.Errorf("%s -> %s, want the kept app-4's free room", m.Pod, m.To)
		}
	}
	kept := map[string]disruption.BlockerKind{}
	for _, b := range res.Rounds[0].Blocked {
		if b.Function == FunctionMigration {
			kept[b.Node] = b.Kind
		}
	}
	if kept["app-4"] != disruption.BlockerDoNotDisrupt || kept["sys-1"] != disruption.BlockerNoPlace || len(kept) != 2 {
		t.Errorf("kept node group nodes: %v", kept)
	}
}

// Without room on kept nodes, the drained pods get a NodeClaim of the assumed NodePool: the
// cheapest on-demand offering of a c, m or r type of generation > 2 (amd64, linux) that holds
// the three 500m/512Mi pods, found here by scanning the catalog.
func TestClusterAutoscalerMigrationLaunchesTheCheapestFittingType(t *testing.T) {
	snap := &events.Snapshot{Time: metav1.NewTime(t0), Nodes: []corev1.Node{
		caNode("app-1", "apps", "m5.xlarge"), caNode("app-2", "apps", "m5.xlarge"), caNode("app-3", "apps", "m5.xlarge")}}
	for i := 1; i <= 3; i++ {
		snap.Pods = append(snap.Pods, caPod("web-"+strconv.Itoa(i), "app-"+strconv.Itoa(i), "500m", "512Mi", nil))
	}
	cat := catalog.MustAWS()
	best, bestType := math.Inf(1), ""
	for _, it := range cat.Types() {
		l := it.Labels
		gen, _ := strconv.Atoi(l[apisv1.LabelInstanceGeneration])
		cat := l[apisv1.LabelInstanceCategory]
		if (cat != "c" && cat != "m" && cat != "r") || gen <= 2 || l[corev1.LabelArchStable] != "amd64" || l[corev1.LabelOSStable] != "linux" {
			continue
		}
		a := it.Allocatable()
		if a.Cpu().MilliValue() < 1500 || a.Memory().Value() < 3*512<<20 || a.Pods().Value() < 3 {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == "on-demand" && o.Available && o.PricePerHour < best {
				best, bestType = o.PricePerHour, it.Name
			}
		}
	}
	res, err := Run(snap, Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Rounds[0].Decisions[0]
	if d.Function != FunctionMigration || len(d.Nodes) != 3 || len(d.Launched) != 1 || len(d.Launched[0].Pods) != 3 {
		t.Fatalf("migration: %+v", d)
	}
	if l := d.Launched[0]; l.PricePerHour != best || l.CapacityType != "on-demand" {
		t.Errorf("launched %s at %.4f, want the cheapest fitting %s at %.4f", l.InstanceType, l.PricePerHour, bestType, best)
	}
	if math.Abs(res.Converged.PricePerHour-best) > 1e-9 || math.Abs(res.Today.PricePerHour-0.576) > 1e-9 {
		t.Errorf("today %.4f (want 0.576), converged %.4f (want %.4f)", res.Today.PricePerHour, res.Converged.PricePerHour, best)
	}
	if res.LowerBoundPerHour > res.Converged.PricePerHour+1e-9 || res.LowerBoundPerHour <= 0 {
		t.Errorf("lower bound %.4f, converged %.4f", res.LowerBoundPerHour, res.Converged.PricePerHour)
	}
}
