package lowerbound

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

const gib = int64(1) << 30

func res(milliCPU, memGiB, pods int64) scheduling.Resources {
	return scheduling.Resources{MilliCPU: milliCPU, Memory: memGiB * gib, Pods: pods}
}

func podsOf(n int, milliCPU, memGiB int64) []scheduling.Resources {
	out := make([]scheduling.Resources, n)
	for i := range out {
		out[i] = res(milliCPU, memGiB, 1)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func mustCompute(t *testing.T, reqs []scheduling.Resources, opts []Option) *Bound {
	t.Helper()
	b, err := Compute(reqs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// 10 pods of 1 CPU / 1 GiB; A = 2 CPU, 4 GiB, 10 pods at $1; B = 4 CPU, 8 GiB, 20 pods at $1.5.
// Resource rows alone: CPU binds, B costs 1.5/4 = 0.375 per CPU against A's 0.5, so 10/4 = 2.5 B
// nodes: $3.75 (Aggregate). The node-count row adds x_A + x_B ≥ ⌈10/4⌉ = 3; with 2x_A + 4x_B ≥ 10
// the optimum moves to x_A = 1, x_B = 2: $4, which is also the best integer plan.
func TestCheapestPerBindingResource(t *testing.T) {
	opts := []Option{{Name: "A", Allocatable: res(2000, 4, 10), PricePerHour: 1}, {Name: "B", Allocatable: res(4000, 8, 20), PricePerHour: 1.5}}
	b := mustCompute(t, podsOf(10, 1000, 1), opts)
	if !near(b.PricePerHour, 4) || !near(b.Aggregate, 3.75) {
		t.Fatalf("bound = %v (aggregate %v), want 4 (aggregate 3.75)", b.PricePerHour, b.Aggregate)
	}
	if len(b.Mix) != 2 || b.Mix[0].Name != "B" || !near(b.Mix[0].Nodes, 2) || b.Mix[1].Name != "A" || !near(b.Mix[1].Nodes, 1) {
		t.Fatalf("mix = %+v, want 2 × B and 1 × A", b.Mix)
	}
}

// Two resources bind together. A = 4 CPU, 2 GiB at $1; B = 1 CPU, 8 GiB at $1; 8 pods of
// 500m / 1 GiB need 4 CPU and 8 GiB: 4a + b ≥ 4 and 2a + 8b ≥ 8 meet at a = b = 0.8 (from
// 15b = 12), cost 1.6; the corners a = 4 or b = 4 cost 4.
func TestTwoResourcesBindTogether(t *testing.T) {
	opts := []Option{{Name: "A", Allocatable: res(4000, 2, 110), PricePerHour: 1}, {Name: "B", Allocatable: res(1000, 8, 110), PricePerHour: 1}}
	b := mustCompute(t, podsOf(8, 500, 1), opts)
	if !near(b.PricePerHour, 1.6) {
		t.Fatalf("bound = %v, want 1.6", b.PricePerHour)
	}
	if len(b.Mix) != 2 || !near(b.Mix[0].Nodes, 0.8) || !near(b.Mix[1].Nodes, 0.8) {
		t.Fatalf("mix = %+v, want 0.8 × A and 0.8 × B", b.Mix)
	}
}

// Three pods of 2100m on 4-CPU nodes at $1: the aggregate LP sees 6300m / 4000m = 1.575 nodes;
// the count cut at 2100m knows ⌊4000/2100⌋ = 1 such pod per node, so 3 nodes: $3, which is also
// the true optimum.
func TestCountCutForBigPods(t *testing.T) {
	opts := []Option{{Name: "T", Allocatable: res(4000, 16, 16), PricePerHour: 1}}
	b := mustCompute(t, podsOf(3, 2100, 1), opts)
	if !near(b.Aggregate, 1.575) {
		t.Fatalf("aggregate = %v, want 6300/4000 = 1.575", b.Aggregate)
	}
	if !near(b.PricePerHour, 3) {
		t.Fatalf("bound = %v, want 3 (one 2100m pod per 4000m node)", b.PricePerHour)
	}
}

// The node-count row: one 500m pod, Big = 10 CPU at $1, Small = 1 CPU at $0.12. Without it the
// LP buys 0.05 of Big ($0.05); a plan needs at least one node, and the cheapest is Small: $0.12.
func TestAtLeastOneNode(t *testing.T) {
	opts := []Option{{Name: "Big", Allocatable: res(10000, 40, 110), PricePerHour: 1}, {Name: "Small", Allocatable: res(1000, 4, 110), PricePerHour: 0.12}}
	b := mustCompute(t, podsOf(1, 500, 0), opts)
	if !near(b.Aggregate, 0.05) || !near(b.PricePerHour, 0.12) {
		t.Fatalf("bound = %v (aggregate %v), want 0.12 (aggregate 0.05)", b.PricePerHour, b.Aggregate)
	}
}

// The pods row: 30 tiny pods on nodes of 10 pod slots need 3 nodes even though CPU and memory
// would fit one.
func TestPodSlotsBind(t *testing.T) {
	opts := []Option{{Name: "T", Allocatable: res(64000, 256, 10), PricePerHour: 2}}
	b := mustCompute(t, podsOf(30, 10, 0), opts)
	if !near(b.PricePerHour, 6) {
		t.Fatalf("bound = %v, want 3 nodes × $2 = 6", b.PricePerHour)
	}
}

// Extended resources are rows too: 2 one-GPU pods need 2 GPU nodes at $3 = $6 whatever the CPU
// pods need (10 × 1 CPU fits in the 16 CPUs of those two nodes).
func TestExtendedResources(t *testing.T) {
	gpu := res(8000, 32, 110)
	gpu.Scalar = map[corev1.ResourceName]int64{catalog.ResourceNVIDIAGPU: 1}
	opts := []Option{{Name: "G", Allocatable: gpu, PricePerHour: 3}, {Name: "C", Allocatable: res(8000, 32, 110), PricePerHour: 1}}
	reqs := podsOf(10, 1000, 1)
	for range 2 {
		r := res(1000, 1, 1)
		r.Scalar = map[corev1.ResourceName]int64{catalog.ResourceNVIDIAGPU: 1}
		reqs = append(reqs, r)
	}
	b := mustCompute(t, reqs, opts)
	if !near(b.PricePerHour, 6) {
		t.Fatalf("bound = %v, want 2 GPU nodes × $3 = 6", b.PricePerHour)
	}
}

func TestErrors(t *testing.T) {
	opts := []Option{{Name: "T", Allocatable: res(4000, 16, 16), PricePerHour: 1}}
	if _, err := Compute(podsOf(1, 5000, 1), opts); err == nil || !strings.Contains(err.Error(), "requests[0]") {
		t.Fatalf("err = %v, want requests[0] fits no option", err)
	}
	if _, err := Compute(podsOf(1, 100, 1), []Option{{Name: "T", Allocatable: res(4000, 16, 16), PricePerHour: math.NaN()}}); err == nil || !strings.Contains(err.Error(), "options[0].pricePerHour") {
		t.Fatalf("err = %v, want options[0].pricePerHour", err)
	}
	if b, err := Compute(nil, opts); err != nil || b.PricePerHour != 0 {
		t.Fatalf("no pods: %v, %v; want 0", b, err)
	}
	if _, err := OptionsFor(Source{}); err == nil || !strings.Contains(err.Error(), "catalog") {
		t.Fatalf("err = %v, want catalog: required", err)
	}
}

// optimum is the exact cheapest plan of a small instance (bruteForce with every pod free to use
// every option).
func optimum(reqs []scheduling.Resources, opts []Option) float64 {
	p := Problem{Options: opts}
	all := make([]int, len(opts))
	for j := range opts {
		all[j] = j
	}
	for _, r := range reqs {
		p.Classes = append(p.Classes, Class{Requests: r, Count: 1, Options: all})
	}
	return bruteForce(p)
}

// The defining property, on random small instances: the bound never exceeds the exact optimum
// (found by enumerating every partition), and the cuts never lower it.
func TestBoundNeverExceedsOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 300 {
		var opts []Option
		for k := range 1 + rng.IntN(3) {
			cpu := int64(1000 * (1 + rng.IntN(8)))
			opts = append(opts, Option{Name: string(rune('A' + k)), Allocatable: res(cpu, int64(1+rng.IntN(16)), int64(2+rng.IntN(6))),
				PricePerHour: float64(cpu)/1000*0.05 + rng.Float64()*0.1})
		}
		var reqs []scheduling.Resources
		for range 1 + rng.IntN(6) {
			r := scheduling.Resources{MilliCPU: int64(100 + rng.IntN(3000)), Memory: int64(rng.IntN(8)) * gib / 2, Pods: 1}
			if fitsSomeOption(r, opts) {
				reqs = append(reqs, r)
			}
		}
		if len(reqs) == 0 {
			continue
		}
		b := mustCompute(t, reqs, opts)
		opt := optimum(reqs, opts)
		if b.PricePerHour > opt*(1+1e-9) || b.Aggregate > b.PricePerHour*(1+1e-9) || b.Aggregate < 0 {
			t.Fatalf("trial %d: bound %v (aggregate %v) vs optimum %v\nopts %+v\nreqs %+v", trial, b.PricePerHour, b.Aggregate, opt, opts, reqs)
		}
	}
}

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

func daemonSet(name, cpu string, tolerations ...corev1.Toleration) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: tolerations,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: quantity(cpu)}}}}}}}}
}

func nodePool(reqs ...corev1.NodeSelectorRequirement) *apisv1.NodePool {
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	for _, r := range reqs {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, apisv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: r})
	}
	return np
}

// On the embedded catalog: m5.large has 1930m allocatable and m5.xlarge 3920m (EKS reservation
// rules; the same figures as Karpenter's instance-types reference), on-demand list prices
// $0.096 and $0.192. kube-proxy (100m) and aws-node (25m) take 125m off each: 1805m and 3795m,
// 27 and 56 pod slots. Four pods of 900m: ⌊1805/900⌋ = 2 per m5.large and ⌊3795/900⌋ = 4 per
// m5.xlarge, so the count cut needs 2 × $0.096 or 1 × $0.192: $0.192.
func TestOptionsForRealCatalog(t *testing.T) {
	c, err := catalog.AWS()
	if err != nil {
		t.Fatal(err)
	}
	np := nodePool(
		corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}},
		corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}})
	tainted := []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	dss := []*appsv1.DaemonSet{daemonSet("kube-proxy", "100m", corev1.Toleration{Operator: corev1.TolerationOpExists}), daemonSet("aws-node", "25m", corev1.Toleration{Operator: corev1.TolerationOpExists}),
		daemonSet("not-tolerating", "500m")}
	np.Spec.Template.Spec.Taints = tainted
	opts, err := OptionsFor(Source{Catalog: c, NodePool: np, DaemonSets: dss})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		cpu, pods int64
		price     float64
	}{"m5.large": {1805, 27, 0.096}, "m5.xlarge": {3795, 56, 0.192}}
	if len(opts) != 2 {
		t.Fatalf("options = %+v, want m5.large and m5.xlarge", opts)
	}
	for _, o := range opts {
		w := want[o.Name]
		if o.Allocatable.MilliCPU != w.cpu || o.Allocatable.Pods != w.pods || o.PricePerHour != w.price {
			t.Fatalf("%s: cpu %dm pods %d price %v, want %dm %d %v", o.Name, o.Allocatable.MilliCPU, o.Allocatable.Pods, o.PricePerHour, w.cpu, w.pods, w.price)
		}
	}
	reqs := Requests([]*corev1.Pod{pod("900m"), pod("900m"), pod("900m"), pod("900m")})
	b := mustCompute(t, reqs, opts)
	if !near(b.PricePerHour, 0.192) {
		t.Fatalf("bound = %v, want 0.192", b.PricePerHour)
	}
	// Aggregate: m5.xlarge is cheaper per CPU (0.192/3.795 < 0.096/1.805): 3600/3795 × 0.192.
	if !near(b.Aggregate, 3600.0/3795*0.192) {
		t.Fatalf("aggregate = %v, want %v", b.Aggregate, 3600.0/3795*0.192)
	}

	// Spot allowed: the price is the cheapest offering, a spot estimate (the spot model prices
	// spot at about 0.426 of on-demand); with every spot offering marked unavailable it is the
	// on-demand list price again.
	np = nodePool(corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
		corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}})
	cheapest := c.Get("m5.large").Offerings[0] // sorted by price
	opts, err = OptionsFor(Source{Catalog: c, NodePool: np})
	if err != nil || len(opts) != 1 || opts[0].PricePerHour != cheapest.PricePerHour || cheapest.CapacityType != apisv1.CapacityTypeSpot || cheapest.PricePerHour >= 0.096 {
		t.Fatalf("spot: %+v, %v; want the cheapest spot offering %+v", opts, err, cheapest)
	}
	opts, err = OptionsFor(Source{Catalog: c, NodePool: np, Unavailable: func(_, _, ct, _ string) bool { return ct == apisv1.CapacityTypeSpot }})
	if err != nil || len(opts) != 1 || opts[0].PricePerHour != 0.096 {
		t.Fatalf("spot unavailable: %+v, %v; want the on-demand list price 0.096", opts, err)
	}
}

func pod(cpu string) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: quantity(cpu)}}}}}}
}
