package provisioning

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// The input shape of Karpenter core's scheduling benchmark (kubernetes-sigs/karpenter,
// pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go, with the instance types
// of pkg/cloudprovider/fake/instancetype.go, InstanceTypes(400)), rebuilt from its description:
//
//   - 400 instance types; type i (0-based) "fake-it-<i>" has i+1 vCPU, 2·(i+1) GiB and 10·(i+1)
//     pods of capacity, and Karpenter's fake overhead of kube-reserved 100m CPU and 10Mi memory
//     (so allocatable = capacity − 100m − 10Mi);
//   - price per hour 0.1 per vCPU + 0.1 per 10⁹ bytes of memory (fake.PriceFromResources divides
//     the byte count by 1e9, so a GiB costs 0.1074), the same for every offering;
//   - offerings: spot in test-zone-1 and test-zone-2, on-demand in test-zone-1, 2 and 3;
//   - one NodePool without requirements or limits.
//
// The pods follow issue 3 rather than any one Karpenter version (which split in sixths or
// sevenths, included pod affinity on hostname, and drew CPU from {100, 250, 500, 1000, 1500}m and
// memory from {100, 256, …, 4096}Mi): fifths, CPU uniform in 100–1500m and memory uniform in
// 100–4096Mi, fixed seed 42 (Karpenter's seed). Labels mirror Karpenter's: each constrained pod
// carries one of seven values a–g; the anti-affinity pods all carry app=nginx and repel each
// other, as in Karpenter. Two deliberate differences keep the constraints checkable on the final
// plan: a pod's selector matches its own value (Karpenter draws the selector's value
// independently), and each fifth has its own label key (Karpenter's generic and spread pods share
// "my-label", so generic pods would count towards the spreads in an order-dependent way).

const (
	ksZoneSpreadKey   = "zone-spread"
	ksHostSpreadKey   = "host-spread"
	ksZoneAffinityKey = "my-affinity"
	ksGenericKey      = "my-label"
	ksAntiKey         = "app"
	ksAntiValue       = "nginx"
)

var (
	ksZones       = []string{"test-zone-1", "test-zone-2", "test-zone-3"}
	ksLabelValues = []string{"a", "b", "c", "d", "e", "f", "g"}
	ksFifths      = []string{"generic", "zone-spread", "hostname-spread", "zone-affinity", "hostname-anti-affinity"}
)

// karpenterShapeCatalog builds the 400 synthetic types.
func karpenterShapeCatalog() *catalog.Catalog {
	types := make([]*catalog.InstanceType, 0, 400)
	for i := range 400 {
		cpu, memGiB, pods := int64(i+1), int64(2*(i+1)), int64(10*(i+1))
		price := 0.1*float64(cpu) + 0.1*float64(memGiB<<30)/1e9
		name := fmt.Sprintf("fake-it-%d", i)
		var offs []catalog.Offering
		for _, z := range ksZones {
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: apisv1.CapacityTypeOnDemand, PricePerHour: price, PriceSource: catalog.PriceSourceEmbedded, Available: true})
			if z != "test-zone-3" {
				offs = append(offs, catalog.Offering{Zone: z, CapacityType: apisv1.CapacityTypeSpot, PricePerHour: price, PriceSource: catalog.PriceSourceEmbedded, Available: true})
			}
		}
		catalog.SortOfferings(offs)
		types = append(types, &catalog.InstanceType{
			Name: name,
			Labels: map[string]string{
				corev1.LabelInstanceTypeStable: name,
				corev1.LabelArchStable:         "amd64",
				corev1.LabelOSStable:           "linux",
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(memGiB<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
			},
			Overhead: catalog.Overhead{KubeReserved: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")}},
			Offerings: offs,
		})
	}
	return catalog.New("", types)
}

// karpenterShapePods makes n pods: n/5 of each constrained fifth, the rest generic. fifthOf maps
// a pod name to its fifth's index in ksFifths.
func karpenterShapePods(n int, discrete bool) (pods []*corev1.Pod, fifthOf map[string]int) {
	rng := rand.New(rand.NewPCG(42, 42))
	fifthOf = make(map[string]int, n)
	counts := []int{n - 4*(n/5), n / 5, n / 5, n / 5, n / 5}
	for f, count := range counts {
		for i := range count {
			name := fmt.Sprintf("ks-%s-%d", ksFifths[f], i)
			cpu := fmt.Sprintf("%dm", 100+rng.IntN(1401))
			mem := fmt.Sprintf("%dMi", 100+rng.IntN(3997))
			if discrete {
				cpu = fmt.Sprintf("%dm", ksDiscreteMilliCPU[rng.IntN(len(ksDiscreteMilliCPU))])
				mem = fmt.Sprintf("%dMi", ksDiscreteMiB[rng.IntN(len(ksDiscreteMiB))])
			}
			v := ksLabelValues[rng.IntN(len(ksLabelValues))]
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
			}
			ksConstrain(p, f, v)
			pods = append(pods, p)
			fifthOf[name] = f
		}
	}
	return pods, fifthOf
}

// ksConstrain gives a pod of fifth f (ksFifths) with label value v its labels and constraint.
func ksConstrain(p *corev1.Pod, f int, v string) {
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	switch f {
	case 0:
		p.Labels = map[string]string{ksGenericKey: v}
	case 1, 2:
		key, topo := ksZoneSpreadKey, corev1.LabelTopologyZone
		if f == 2 {
			key, topo = ksHostSpreadKey, corev1.LabelHostname
		}
		p.Labels = map[string]string{key: v}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: topo, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel(key, v)}}
	case 3:
		p.Labels = map[string]string{ksZoneAffinityKey: v}
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: sel(ksZoneAffinityKey, v), TopologyKey: corev1.LabelTopologyZone}}}}
	case 4:
		p.Labels = map[string]string{ksAntiKey: ksAntiValue}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: sel(ksAntiKey, ksAntiValue), TopologyKey: corev1.LabelHostname}}}}
	}
}

// ksDiscreteMilliCPU and ksDiscreteMiB are the requests Karpenter v1.15's makeDiversePods draws
// from (scheduling_benchmark_test.go): 30 pod shapes, few enough for the pattern LP to run.
var (
	ksDiscreteMilliCPU = []int{100, 250, 500, 1000, 1500}
	ksDiscreteMiB      = []int{100, 256, 512, 1024, 2048, 4096}
)

func karpenterShapeInput(n int) (Input, map[string]int) {
	return karpenterShapeInputOf(n, false)
}

func karpenterShapeInputOf(n int, discrete bool) (Input, map[string]int) {
	pods, fifthOf := karpenterShapePods(n, discrete)
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	return Input{Pods: pods, NodePools: []*apisv1.NodePool{np}, Catalog: karpenterShapeCatalog()}, fifthOf
}

// BenchmarkKarpenterShape solves the Karpenter benchmark shape at each size. Metrics: pods/s
// (pods per second of Solve), nodes (NodeClaims of the plan), $/h (the plan's price),
// unschedulable pods, and with -benchmem B/op (total bytes allocated per Solve, an upper bound on
// the heap it needs).
// Issue 14's targets: N = 10,000 in ≤ 100 ms, N = 100,000 in ≤ 5 s and < 2 GiB (B/op), on 2 cores.
func BenchmarkKarpenterShape(b *testing.B) {
	for _, n := range []int{1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000, 100000} {
		in, _ := karpenterShapeInput(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var nodes, unsched int
			var cost float64
			for b.Loop() {
				p, err := Solve(in)
				if err != nil {
					b.Fatal(err)
				}
				nodes, unsched, cost = len(p.NodeClaims), len(p.Unschedulable), p.TotalPricePerHour()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			b.ReportMetric(float64(nodes), "nodes")
			b.ReportMetric(cost, "$/h")
			b.ReportMetric(float64(unsched), "unschedulable")
		})
	}
}

// BenchmarkKarpenterDiscrete is BenchmarkKarpenterShape with Karpenter's own request sizes
// (ksDiscreteMilliCPU × ksDiscreteMiB), the input of hack/karpenter-compare: with 30 shapes the
// pattern LP runs for the plan and for its bound, so this measures their time budgets. The
// same targets hold: N = 10,000 in ≤ 100 ms.
func BenchmarkKarpenterDiscrete(b *testing.B) {
	for _, n := range []int{50, 1000, 10000} {
		in, _ := karpenterShapeInputOf(n, true)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var cost, bound float64
			for b.Loop() {
				p, err := Solve(in)
				if err != nil {
					b.Fatal(err)
				}
				cost, bound = p.TotalPricePerHour(), p.LowerBoundPerHour
			}
			b.ReportMetric(cost, "$/h")
			b.ReportMetric(bound, "bound$/h")
		})
	}
}

// TestKarpenterShapeValid checks the plan for 500 pods of the Karpenter shape against each
// fifth's constraint, as kube-scheduler would judge the nodes once they exist (every new node
// is a hostname domain; the zone domains are test-zone-1..3, the zones the pool's types are
// offered in, including empty ones):
//
//   - every pod is placed;
//   - zone spread, maxSkew 1: per label value, the pod counts of the three zones differ by at
//     most 1. (Necessary: when the last pod went to the fullest zone, its count then minus the
//     smallest count then was ≤ 1, and counts only grow. Sufficient: binding round-robin
//     over the zones in count order keeps every step within the skew.) Pods with a zone
//     constraint must be on NodeClaims pinned to one zone, else the zone is the fleet's choice;
//   - hostname spread, maxSkew 1: per value, the counts over ALL new nodes differ by at most 1,
//     for the same reason — so while some node has none of a value, no node may have two;
//   - zone affinity to their own value: per value, all pods in one zone (the first one is
//     allowed anywhere because it matches its own term), on zone-pinned NodeClaims;
//   - hostname anti-affinity among app=nginx pods: at most one per node.
func TestKarpenterShapeValid(t *testing.T) {
	in, fifthOf := karpenterShapeInput(500)
	p, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("500 pods: %d NodeClaims, %d unschedulable, $%.2f/h", len(p.NodeClaims), len(p.Unschedulable), p.TotalPricePerHour())
	bad := karpenterShapeViolations(p, fifthOf)
	for f, name := range ksFifths {
		t.Run(name, func(t *testing.T) {
			if len(bad[f]) > 0 {
				t.Errorf("constraint violated:\n  %s", strings.Join(bad[f], "\n  "))
			}
		})
	}
}

// TestKarpenterShapeChecker feeds the checker hand-made plans, one violation per fifth, so a
// passing TestKarpenterShapeValid means something.
func TestKarpenterShapeChecker(t *testing.T) {
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels}}
	}
	claim := func(zone string, pods ...*corev1.Pod) *NodeClaimPlan {
		return &NodeClaimPlan{Labels: map[string]string{corev1.LabelTopologyZone: zone}, Pods: pods}
	}
	zs := func(i int) *corev1.Pod { return pod(fmt.Sprint("zs", i), map[string]string{ksZoneSpreadKey: "a"}) }
	hs := func(i int) *corev1.Pod { return pod(fmt.Sprint("hs", i), map[string]string{ksHostSpreadKey: "a"}) }
	za := func(i int) *corev1.Pod { return pod(fmt.Sprint("za", i), map[string]string{ksZoneAffinityKey: "a"}) }
	aa := func(i int) *corev1.Pod { return pod(fmt.Sprint("aa", i), map[string]string{ksAntiKey: ksAntiValue}) }
	fifthOf := map[string]int{"g0": 0}
	for i := range 4 {
		fifthOf[fmt.Sprint("zs", i)], fifthOf[fmt.Sprint("hs", i)], fifthOf[fmt.Sprint("za", i)], fifthOf[fmt.Sprint("aa", i)] = 1, 2, 3, 4
	}
	// Valid: zone spread 1/1/1, hostname spread one per node on all three nodes, zone affinity
	// all in zone 2, anti-affinity one per node.
	ok := &Plan{NodeClaims: []*NodeClaimPlan{
		claim("test-zone-1", zs(0), hs(0), aa(0), pod("g0", nil)),
		claim("test-zone-2", zs(1), hs(1), za(0), za(1), aa(1)),
		claim("test-zone-3", zs(2), hs(2), aa(2)),
	}}
	for f, b := range karpenterShapeViolations(ok, fifthOf) {
		if len(b) > 0 {
			t.Errorf("valid plan: %s reported %v", ksFifths[f], b)
		}
	}
	// Invalid: zone spread 2/0/1 (skew 2); two host-spread pods on a node while another has none;
	// zone affinity across zones 1 and 2; two app=nginx pods on one node; one pod unschedulable.
	bad := &Plan{NodeClaims: []*NodeClaimPlan{
		claim("test-zone-1", zs(0), zs(1), hs(0), hs(1), za(0), aa(0), aa(1)),
		claim("test-zone-2", za(1)),
		claim("test-zone-3", zs(2)),
	}, Unschedulable: []Unschedulable{{Pod: pod("g0", nil), Reason: "test"}}}
	got := karpenterShapeViolations(bad, fifthOf)
	for f := range ksFifths {
		if len(got[f]) != 1 {
			t.Errorf("invalid plan: %s reported %v, want exactly one violation", ksFifths[f], got[f])
		}
	}
}

// karpenterShapeViolations returns, per fifth, what breaks its constraint (see
// TestKarpenterShapeValid for the rules).
func karpenterShapeViolations(p *Plan, fifthOf map[string]int) [][]string {
	bad := make([][]string, len(ksFifths))
	unsched := make([][]string, len(ksFifths))
	for _, u := range p.Unschedulable {
		f := fifthOf[u.Pod.Name]
		unsched[f] = append(unsched[f], u.Pod.Name+": "+u.Reason)
	}
	for f, u := range unsched {
		if len(u) > 0 {
			bad[f] = append(bad[f], fmt.Sprintf("%d pods unschedulable, e.g. %s", len(u), u[0]))
		}
	}
	type placed struct {
		node int
		zone string // "" when the NodeClaim is not pinned to one zone
		pod  *corev1.Pod
	}
	byFifth := make([][]placed, len(ksFifths))
	for i, nc := range p.NodeClaims {
		zone := nc.Labels[corev1.LabelTopologyZone]
		if r := nc.Requirements[corev1.LabelTopologyZone]; zone == "" && r != nil {
			zone, _ = r.Single()
		}
		for _, pod := range nc.Pods {
			f := fifthOf[pod.Name]
			byFifth[f] = append(byFifth[f], placed{node: i, zone: zone, pod: pod})
		}
	}
	nodes := len(p.NodeClaims)
	// Zone spread (1) and zone affinity (3).
	for _, f := range []int{1, 3} {
		key := ksZoneSpreadKey
		if f == 3 {
			key = ksZoneAffinityKey
		}
		perZone := map[string]map[string]int{} // value → zone → count
		unpinned := 0
		for _, pl := range byFifth[f] {
			if pl.zone == "" {
				unpinned++
				continue
			}
			v := pl.pod.Labels[key]
			if perZone[v] == nil {
				perZone[v] = map[string]int{}
			}
			perZone[v][pl.zone]++
		}
		if unpinned > 0 {
			bad[f] = append(bad[f], fmt.Sprintf("%d pods on NodeClaims not pinned to one zone", unpinned))
		}
		for _, v := range ksLabelValues {
			counts := make([]int, len(ksZones))
			used := 0
			for i, z := range ksZones {
				counts[i] = perZone[v][z]
				if counts[i] > 0 {
					used++
				}
			}
			if f == 1 && maxInt(counts)-minInt(counts) > 1 {
				bad[f] = append(bad[f], fmt.Sprintf("%s=%s per zone %v: skew %d > 1", key, v, counts, maxInt(counts)-minInt(counts)))
			}
			if f == 3 && used > 1 {
				bad[f] = append(bad[f], fmt.Sprintf("%s=%s spans zones %v", key, v, counts))
			}
		}
	}
	// Hostname spread (2): every new node is a domain.
	for _, v := range ksLabelValues {
		if nodes == 0 {
			break
		}
		counts := make([]int, nodes)
		for _, pl := range byFifth[2] {
			if pl.pod.Labels[ksHostSpreadKey] == v {
				counts[pl.node]++
			}
		}
		if maxInt(counts)-minInt(counts) > 1 {
			bad[2] = append(bad[2], fmt.Sprintf("%s=%s: up to %d pods on one node while some of the %d nodes have %d (skew > 1)",
				ksHostSpreadKey, v, maxInt(counts), nodes, minInt(counts)))
		}
	}
	// Hostname anti-affinity (4).
	perNode := map[int]int{}
	for _, pl := range byFifth[4] {
		perNode[pl.node]++
	}
	worst, over := 0, 0
	for _, c := range perNode {
		worst = max(worst, c)
		if c > 1 {
			over++
		}
	}
	if over > 0 {
		bad[4] = append(bad[4], fmt.Sprintf("%d nodes hold more than one app=nginx pod (up to %d)", over, worst))
	}
	for f := range bad {
		sort.Strings(bad[f])
	}
	return bad
}

func maxInt(xs []int) int {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}

func minInt(xs []int) int {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}
