package provisioning

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Expectations below follow the kube-scheduler rules (PodTopologySpread: skew = count(domain)+1
// − global minimum over eligible domains ≤ maxSkew; InterPodAffinity) worked out by hand.

var zonesABC = req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b", "us-east-1c")

func labelled(name string, app string) *corev1.Pod {
	p := pod(name, "100m", "100Mi")
	p.Labels = map[string]string{"app": app}
	return p
}

func selector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

func spread(p *corev1.Pod, key string, skew int32, when corev1.UnsatisfiableConstraintAction) *corev1.Pod {
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
		MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: selector(p.Labels["app"])})
	return p
}

// zoneCounts returns pods per zone of the NodeClaims' pinned zones and existing placements.
func zoneCounts(t *testing.T, p *Plan) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, c := range p.NodeClaims {
		zones := map[string]bool{}
		for _, o := range c.Offerings {
			zones[o.Zone] = true
		}
		if len(zones) != 1 {
			t.Fatalf("NodeClaim with topology-constrained pods spans zones %v", zones)
		}
		out[c.Cheapest().Zone] += len(c.Pods)
	}
	return out
}

func TestZoneSpreadEvenAcrossZones(t *testing.T) {
	np := nodePool("default", append(onDemand("m5.large"), zonesABC)...)
	var ps []*corev1.Pod
	for i := 0; i < 6; i++ {
		ps = append(ps, spread(labelled(fmt.Sprintf("web-%d", i), "web"), corev1.LabelTopologyZone, 1, corev1.DoNotSchedule))
	}
	p := solve(t, Input{Pods: ps, NodePools: []*apisv1.NodePool{np}})
	got := zoneCounts(t, p)
	// 6 pods over 3 eligible zones with maxSkew 1: 2 per zone.
	if got["us-east-1a"] != 2 || got["us-east-1b"] != 2 || got["us-east-1c"] != 2 {
		t.Fatalf("pods per zone = %v, want 2/2/2", got)
	}
}

func TestZoneSpreadCountsRunningPodsAndEmptyZones(t *testing.T) {
	np := nodePool("default", append(onDemand("m5.large"), req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b"))...)
	n := existingNode("node-a")
	n.Labels[corev1.LabelTopologyZone] = "us-east-1a"
	n.Spec.Taints = []corev1.Taint{{Key: "full", Effect: corev1.TaintEffectNoSchedule}}
	var bound []*corev1.Pod
	for i := 0; i < 2; i++ {
		b := labelled(fmt.Sprintf("old-%d", i), "web")
		b.Spec.NodeName = "node-a"
		bound = append(bound, b)
	}
	ps := []*corev1.Pod{spread(labelled("new-0", "web"), corev1.LabelTopologyZone, 1, corev1.DoNotSchedule),
		spread(labelled("new-1", "web"), corev1.LabelTopologyZone, 1, corev1.DoNotSchedule)}
	p := solve(t, Input{Pods: ps, Nodes: []*corev1.Node{n}, BoundPods: bound, NodePools: []*apisv1.NodePool{np}})
	// Zone a has 2, zone b (empty, but the pool can launch there) 0: the minimum is 0, so a
	// third pod in a would make skew 3 > 1; both new pods must go to b (b=1 then b=2, skew 0).
	if got := zoneCounts(t, p); got["us-east-1b"] != 2 || got["us-east-1a"] != 0 {
		t.Fatalf("pods per zone = %v, want both in us-east-1b", got)
	}
}

func TestHostnameSpreadOnePerNode(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	var ps []*corev1.Pod
	for i := 0; i < 3; i++ {
		ps = append(ps, spread(labelled(fmt.Sprintf("w-%d", i), "w"), corev1.LabelHostname, 1, corev1.DoNotSchedule))
	}
	p := solve(t, Input{Pods: ps, NodePools: []*apisv1.NodePool{np}})
	// A new node is always an empty domain (minimum 0), so maxSkew 1 allows one pod per node.
	wantClaims(t, p, "m5.large", "m5.large", "m5.large")
}

func TestZoneAffinityFollowsRunningPod(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	n := existingNode("node-c")
	n.Labels[corev1.LabelTopologyZone] = "us-east-1c"
	n.Spec.Taints = []corev1.Taint{{Key: "db", Effect: corev1.TaintEffectNoSchedule}}
	db := labelled("db-0", "db")
	db.Spec.NodeName = "node-c"
	app := labelled("app-0", "app")
	app.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelTopologyZone, LabelSelector: selector("db")}}}}
	p := solve(t, Input{Pods: []*corev1.Pod{app}, Nodes: []*corev1.Node{n}, BoundPods: []*corev1.Pod{db}, NodePools: []*apisv1.NodePool{np}})
	if got := zoneCounts(t, p); got["us-east-1c"] != 1 {
		t.Fatalf("the pod must follow the db into us-east-1c: %v", got)
	}
	// Without any db pod, a pod that does not match its own term cannot be placed.
	p = solve(t, Input{Pods: []*corev1.Pod{app}, NodePools: []*apisv1.NodePool{np}})
	if len(p.Unschedulable) != 1 {
		t.Fatalf("want app-0 unschedulable without a db pod, got %d claims", len(p.NodeClaims))
	}
}

func TestZoneAntiAffinityOnePerZone(t *testing.T) {
	np := nodePool("default", append(onDemand("m5.large"), zonesABC)...)
	var ps []*corev1.Pod
	for i := 0; i < 4; i++ {
		x := labelled(fmt.Sprintf("zk-%d", i), "zk")
		x.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelTopologyZone, LabelSelector: selector("zk")}}}}
		ps = append(ps, x)
	}
	p := solve(t, Input{Pods: ps, NodePools: []*apisv1.NodePool{np}})
	got := zoneCounts(t, p)
	// Three zones, one replica each; the fourth has nowhere to go.
	if len(got) != 3 || got["us-east-1a"] != 1 || got["us-east-1b"] != 1 || got["us-east-1c"] != 1 || len(p.Unschedulable) != 1 {
		t.Fatalf("pods per zone = %v, unschedulable %d; want 1/1/1 and 1", got, len(p.Unschedulable))
	}
}

func TestPreferredNodeAffinityHonouredThenRelaxed(t *testing.T) {
	np := nodePool("default", req(apisv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5", "m6g"), req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"))
	x := pod("x", "1", "1Gi")
	x.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		{Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
		{Weight: 90, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"m4"}}}}},
	}}}
	p := solve(t, Input{Pods: []*corev1.Pod{x}, NodePools: []*apisv1.NodePool{np}})
	// Both preferences together (amd64 and family m4) cannot be met: m4 is outside the pool.
	// The lowest weight (amd64, 10) is dropped first, then m4 (90); with both gone the pod takes
	// the cheapest type: m6g.large (0.077 on demand) over m5.large (0.096).
	if len(p.NodeClaims) != 1 || p.NodeClaims[0].Cheapest().InstanceType.Name != "m6g.large" {
		t.Fatalf("want the pod placed on m6g.large after relaxing, got %+v", p.Unschedulable)
	}
	// With a satisfiable preference (amd64 only), it is kept: m5.large, though arm64 is cheaper.
	x.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = x.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[:1]
	p = solve(t, Input{Pods: []*corev1.Pod{x}, NodePools: []*apisv1.NodePool{np}})
	for _, o := range p.NodeClaims[0].Offerings {
		if o.InstanceType.Labels[corev1.LabelArchStable] != "amd64" {
			t.Fatalf("preference dropped although satisfiable: %s", o.InstanceType.Name)
		}
	}
}

func TestScheduleAnywaySpreadRelaxedOnlyWhenNeeded(t *testing.T) {
	// One zone only: a ScheduleAnyway spread across zones is honoured (trivially) and nothing is
	// refused; a DoNotSchedule hostname spread still gives one pod per node.
	np := nodePool("default", append(onDemand("m5.large"), req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a"))...)
	var ps []*corev1.Pod
	for i := 0; i < 2; i++ {
		ps = append(ps, spread(labelled(fmt.Sprintf("s-%d", i), "s"), corev1.LabelTopologyZone, 1, corev1.ScheduleAnyway))
	}
	p := solve(t, Input{Pods: ps, NodePools: []*apisv1.NodePool{np}})
	if len(p.Unschedulable) != 0 || zoneCounts(t, p)["us-east-1a"] != 2 {
		t.Fatalf("ScheduleAnyway must not leave pods pending: %+v", p.Unschedulable)
	}
}

func withHostPort(p *corev1.Pod, port int32) *corev1.Pod {
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
	return p
}

func TestHostPorts(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	p := solve(t, Input{Pods: []*corev1.Pod{withHostPort(pod("a", "100m", "100Mi"), 8080), withHostPort(pod("b", "100m", "100Mi"), 8080)}, NodePools: []*apisv1.NodePool{np}})
	// Both bind 0.0.0.0:8080/TCP: they cannot share a node.
	wantClaims(t, p, "m5.large", "m5.large")

	// A DaemonSet that binds 9100 on every node (node-exporter) leaves no node for a pod that
	// needs 9100 too.
	ds := daemonSet("node-exporter", "10m")
	ds.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}
	p = solve(t, Input{Pods: []*corev1.Pod{withHostPort(pod("c", "100m", "100Mi"), 9100)}, NodePools: []*apisv1.NodePool{np}, DaemonSets: []*appsv1.DaemonSet{ds}})
	if len(p.Unschedulable) != 1 || len(p.NodeClaims) != 0 {
		t.Fatalf("the pod clashes with the DaemonSet's host port on every node: %d claims", len(p.NodeClaims))
	}
}

func TestVolumeTopology(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	sc := "gp3"
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	pvcBound := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", StorageClassName: &sc}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}}}}}}}}}
	pvcNew := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-1", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: sc}, VolumeBindingMode: &wffc,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: []string{"us-east-1d"}}}}}}
	withPVC := func(name, claim string) *corev1.Pod {
		x := pod(name, "100m", "100Mi")
		x.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		return x
	}
	in := Input{Pods: []*corev1.Pod{withPVC("bound", "data-0"), withPVC("fresh", "data-1")}, NodePools: []*apisv1.NodePool{np},
		PVCs: []*corev1.PersistentVolumeClaim{pvcBound, pvcNew}, PVs: []*corev1.PersistentVolume{pv}, StorageClasses: []*storagev1.StorageClass{class}}
	p := solve(t, in)
	// The bound PV pins us-east-1b; the unbound WaitForFirstConsumer claim follows its class's
	// allowedTopologies, us-east-1d: two NodeClaims, one per zone.
	zones := map[string]bool{}
	for _, c := range p.NodeClaims {
		for _, o := range c.Offerings {
			zones[o.Zone+"/"+c.Pods[0].Name] = true
		}
	}
	if len(p.NodeClaims) != 2 || !zones["us-east-1b/bound"] || !zones["us-east-1d/fresh"] || len(zones) != 2 {
		t.Fatalf("zones = %v", zones)
	}
	// A missing claim is refused with its name.
	p = solve(t, Input{Pods: []*corev1.Pod{withPVC("lost", "nope")}, NodePools: []*apisv1.NodePool{np}})
	if len(p.Unschedulable) != 1 || !strings.Contains(p.Unschedulable[0].Reason, `"nope" not found`) {
		t.Fatalf("want the missing claim named: %+v", p.Unschedulable)
	}
}

func TestAttachLimit(t *testing.T) {
	np := nodePool("default", onDemand("m5.xlarge")...)
	sc := "gp3"
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: sc}, VolumeBindingMode: &wffc}
	var ps []*corev1.Pod
	var pvcs []*corev1.PersistentVolumeClaim
	for i := 0; i < 26; i++ {
		name := fmt.Sprintf("v-%02d", i)
		x := pod(name, "10m", "10Mi")
		x.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
		ps = append(ps, x)
		pvcs = append(pvcs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}})
	}
	p := solve(t, Input{Pods: ps, NodePools: []*apisv1.NodePool{np}, PVCs: pvcs, StorageClasses: []*storagev1.StorageClass{class}})
	// 26 volumes, 25 per Nitro node (EBS CSI default): two nodes, though 58 pods would fit one.
	wantClaims(t, p, "m5.xlarge", "m5.xlarge")
	if n := len(p.NodeClaims[0].Pods); n != 25 {
		t.Fatalf("first node has %d volume pods, want 25", n)
	}
}

func TestPreferNoScheduleTaintIsAPreference(t *testing.T) {
	soft := nodePool("soft", onDemand("m5.large")...)
	soft.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "spot-only", Effect: corev1.TaintEffectPreferNoSchedule}}
	w50, w10 := int32(50), int32(10)
	soft.Spec.Weight = &w50
	plain := nodePool("plain", onDemand("c5.large")...)
	plain.Spec.Weight = &w10
	p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{soft, plain}})
	// The untolerated PreferNoSchedule taint is avoided while another pool can take the pod.
	if p.NodeClaims[0].NodePool.Name != "plain" {
		t.Fatalf("want the untainted pool, got %s", p.NodeClaims[0].NodePool.Name)
	}
	p = solve(t, Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi")}, NodePools: []*apisv1.NodePool{soft}})
	if len(p.NodeClaims) != 1 {
		t.Fatal("a PreferNoSchedule taint must not leave the pod pending when it is the only pool")
	}
}

// TestMatchingIndexAgreesWithEverySelector checks the label index of topology.matching against
// testing every group's selector and namespaces directly, over selectors of each operator
// (In, =, Exists, NotIn, DoesNotExist, several expressions, empty) and pods of every label
// combination in two namespaces.
func TestMatchingIndexAgreesWithEverySelector(t *testing.T) {
	topo := newTopology()
	owner := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}}
	expr := func(key string, op metav1.LabelSelectorOperator, vals ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: vals}
	}
	sels := []*metav1.LabelSelector{
		{MatchLabels: map[string]string{"app": "web"}},
		{MatchLabels: map[string]string{"app": "web", "tier": "x"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{expr("app", metav1.LabelSelectorOpIn, "web", "db")}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{expr("tier", metav1.LabelSelectorOpExists)}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{expr("app", metav1.LabelSelectorOpNotIn, "web")}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{expr("tier", metav1.LabelSelectorOpDoesNotExist), expr("app", metav1.LabelSelectorOpIn, "db")}},
		{},
	}
	for i, sel := range sels {
		for _, ns := range [][]string{nil, {"b"}} {
			if _, err := topo.groupFor(corev1.LabelHostname, sel, nil, owner, ns, nil); err != nil {
				t.Fatalf("selector %d: %v", i, err)
			}
		}
	}
	if _, err := topo.groupFor(corev1.LabelTopologyZone, sels[0], map[string]string{"rev": "2"}, owner, nil, nil); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, ns := range []string{"a", "b"} {
		for _, app := range []string{"", "web", "db", "cache"} {
			for _, tier := range []string{"", "x", "y"} {
				for _, rev := range []string{"", "2"} {
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{}}}
					for k, v := range map[string]string{"app": app, "tier": tier, "rev": rev} {
						if v != "" {
							p.Labels[k] = v
						}
					}
					var want []*group
					for _, g := range topo.list {
						if g.matches(p) {
							want = append(want, g)
						}
					}
					got := topo.matching(p)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("pod %s %v: matching gave %d groups, the selectors %d", ns, p.Labels, len(got), len(want))
					}
					checked += len(want)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no pod matched any group: the test checks nothing")
	}
}
