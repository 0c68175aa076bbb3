package provisioning

import (
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/provisioning/lowerbound"
)

// The cost-quality measurement: the plan's $/h against a lower bound no plan can beat
// (lowerbound.Compute: an LP relaxation over the NodePool's instance types, with DaemonSet
// overhead, certified by LP duality), on the real embedded catalog and real workload mixes:
//
//   - seed: the seed scenario of `dovetail dev` (localdev/manifests: nodepool.yaml, workloads.yaml,
//     system-nodes.yaml with its two tainted nodes and DaemonSets);
//   - alibaba-N: N CPU-only pods drawn from the Alibaba openb request shapes
//     (testdata/workloads/alibaba_openb_cpu_only.csv, see its README for provenance and licence);
//   - bitnami-N: N pods of the Bitnami resourcesPreset requests, preset uniform at random
//     (testdata/workloads/bitnami_resource_presets.csv).
//
// Every mix runs with the seed NodePool's requirements twice: capacity type on-demand only, and
// spot + on-demand (spot prices of the embedded catalog are the spot model's estimates). The
// seed pool's limits (1000 CPU, 1000Gi) are dropped: the larger mixes exceed them, and limits
// only remove options (the bound ignores them too). The bound covers the pods the plan puts on
// new NodeClaims; pods placed on existing nodes cost nothing extra.
//
// Target (issue 3): plan within 5 % of the bound for workloads without hard constraints.

const costTarget = 1.05

type costMix struct {
	name string
	// hard: the mix has hard scheduling constraints (spread, anti-affinity), so the 5 % target
	// does not apply.
	hard  bool
	input func(t testing.TB, np *apisv1.NodePool) Input
	// pool builds the NodePool for the capacity types (nil: the seed pool, costPool).
	pool func(t testing.TB, capacityTypes ...string) *apisv1.NodePool
}

type costRow struct {
	mix, capacity                   string
	pods, placedNew, unsched, nodes int
	plan, bound, aggregate          float64
	planBound                       float64 // Plan.LowerBoundPerHour
	lpMix, planMix                  string
	cpuUtil, memUtil                float64 // plan: Σ requests / Σ allocatable after DaemonSets
	hard                            bool
}

func (r costRow) ratio() float64 { return r.plan / r.bound }

func costMixes() []costMix {
	mixes := []costMix{{name: "seed", hard: true, input: seedCostInput}}
	for _, n := range []int{100, 1000, 5000} {
		mixes = append(mixes, costMix{name: fmt.Sprintf("alibaba-%d", n), input: csvCostInput("alibaba", n)})
	}
	for _, n := range []int{100, 1000} {
		mixes = append(mixes, costMix{name: fmt.Sprintf("bitnami-%d", n), input: csvCostInput("bitnami", n)})
	}
	mixes = append(mixes,
		costMix{name: "svc+batch-323", input: servicesAndBatchInput},
		costMix{name: "svc+batch-any", input: servicesAndBatchInput, pool: openPool},
		costMix{name: "gpu-200", input: gpuInput(200), pool: gpuPool})
	return mixes
}

// servicesAndBatchInput is the mixed shape: 240 small service pods (the requests of the
// Online Boutique and Sock Shop deployments, testdata/workloads/service_requests.csv, drawn
// uniformly) next to 83 batch pods of 8–32 vCPU (the Alibaba openb CPU-only shapes of at least
// 8 vCPU, drawn by their count).
func servicesAndBatchInput(t testing.TB, np *apisv1.NodePool) Input {
	t.Helper()
	rng := rand.New(rand.NewPCG(2023, 323))
	var pods []*corev1.Pod
	svc := readCSV(t, "../../testdata/workloads/service_requests.csv")
	for i := range 240 {
		r := svc[rng.IntN(len(svc))]
		pods = append(pods, requestPod(fmt.Sprintf("svc-%d", i), int64(atoi(t, r[2])), int64(atoi(t, r[3])), nil))
	}
	var big [][]string
	for _, r := range readCSV(t, "../../testdata/workloads/alibaba_openb_cpu_only.csv") {
		if atoi(t, r[0]) >= 8000 {
			big = append(big, r)
		}
	}
	for i, r := range weightedDraws(t, rng, big, 4, 83) {
		pods = append(pods, requestPod(fmt.Sprintf("batch-%d", i), int64(atoi(t, r[0])), int64(atoi(t, r[1])), nil))
	}
	set := seedSet(t)
	return Input{Pods: pods, DaemonSets: set.DaemonSets, NodePools: []*apisv1.NodePool{np}, NodeClasses: set.NodeClasses, NodeSettings: cloud.NodeSettingsFor}
}

// gpuInput draws n pods from the Alibaba openb shapes that ask for whole GPUs
// (testdata/workloads/alibaba_openb_gpu_whole.csv), each with its nvidia.com/gpu count.
func gpuInput(n int) func(testing.TB, *apisv1.NodePool) Input {
	return func(t testing.TB, np *apisv1.NodePool) Input {
		t.Helper()
		rng := rand.New(rand.NewPCG(2023, uint64(n)))
		var pods []*corev1.Pod
		for i, r := range weightedDraws(t, rng, readCSV(t, "../../testdata/workloads/alibaba_openb_gpu_whole.csv"), 4, n) {
			gpu := resource.NewQuantity(int64(atoi(t, r[2])), resource.DecimalSI)
			pods = append(pods, requestPod(fmt.Sprintf("gpu-%d", i), int64(atoi(t, r[0])), int64(atoi(t, r[1])), gpu))
		}
		set := seedSet(t)
		return Input{Pods: pods, DaemonSets: set.DaemonSets, NodePools: []*apisv1.NodePool{np}, NodeClasses: set.NodeClasses, NodeSettings: cloud.NodeSettingsFor}
	}
}

func weightedDraws(t testing.TB, rng *rand.Rand, rows [][]string, weightCol, n int) [][]string {
	var cum []int
	total := 0
	for _, r := range rows {
		total += atoi(t, r[weightCol])
		cum = append(cum, total)
	}
	out := make([][]string, n)
	for i := range out {
		x := rng.IntN(total)
		k := 0
		for cum[k] <= x {
			k++
		}
		out[i] = rows[k]
	}
	return out
}

func requestPod(name string, milliCPU, memMiB int64, gpus *resource.Quantity) *corev1.Pod {
	reqs := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memMiB<<20, resource.BinarySI),
	}
	if gpus != nil {
		reqs["nvidia.com/gpu"] = *gpus
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: reqs}}}}}
}

// openPool is the seed NodePool with only its capacity-type requirement: every instance type
// of the catalog (the "unrestricted pool").
func openPool(t testing.TB, capacityTypes ...string) *apisv1.NodePool {
	np := costPool(t, capacityTypes...)
	var keep []apisv1.NodeSelectorRequirementWithMinValues
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == apisv1.LabelCapacityType {
			keep = append(keep, r)
		}
	}
	np.Spec.Template.Spec.Requirements = keep
	return np
}

// gpuPool is the seed NodePool restricted to the GPU categories g and p, amd64.
func gpuPool(t testing.TB, capacityTypes ...string) *apisv1.NodePool {
	np := openPool(t, capacityTypes...)
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
		apisv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"g", "p"}}},
		apisv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}})
	return np
}

// seedSet loads the seed manifests from the checkout (read as files, not imported, so shared/
// does not depend on localdev/).
func seedSet(t testing.TB) *manifests.Set {
	t.Helper()
	dir := "../../localdev/manifests/"
	set, err := manifests.Load(dir+"nodepool.yaml", dir+"workloads.yaml", dir+"system-nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(set.NodePools) != 1 || len(set.NodeClasses) != 1 {
		t.Fatalf("seed manifests: %d NodePools, %d EC2NodeClasses; want 1 and 1", len(set.NodePools), len(set.NodeClasses))
	}
	return set
}

// costPool is the seed NodePool without limits, restricted to the given capacity types.
func costPool(t testing.TB, capacityTypes ...string) *apisv1.NodePool {
	np := seedSet(t).NodePools[0].DeepCopy()
	np.Spec.Limits = nil
	found := false
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == apisv1.LabelCapacityType {
			np.Spec.Template.Spec.Requirements[i].Values = capacityTypes
			found = true
		}
	}
	if !found {
		t.Fatal("seed NodePool has no karpenter.sh/capacity-type requirement")
	}
	return np
}

func seedCostInput(t testing.TB, np *apisv1.NodePool) Input {
	set := seedSet(t)
	in := Input{Nodes: set.Nodes, DaemonSets: set.DaemonSets, NodePools: []*apisv1.NodePool{np}, NodeClasses: set.NodeClasses,
		NodeSettings: cloud.NodeSettingsFor}
	for _, p := range set.ExpandPods() {
		if p.Spec.NodeName == "" {
			in.Pods = append(in.Pods, p)
		} else {
			in.BoundPods = append(in.BoundPods, p)
		}
	}
	return in
}

// csvCostInput draws n pods from a testdata mix: "alibaba" weights its shapes by their count
// column, "bitnami" draws presets uniformly. The seed's DaemonSets and EC2NodeClass apply.
func csvCostInput(kind string, n int) func(testing.TB, *apisv1.NodePool) Input {
	return func(t testing.TB, np *apisv1.NodePool) Input {
		t.Helper()
		file, cpuCol, memCol, ephCol, weightCol := "alibaba_openb_cpu_only.csv", 0, 1, -1, 4
		if kind == "bitnami" {
			file, cpuCol, memCol, ephCol, weightCol = "bitnami_resource_presets.csv", 1, 2, 3, -1
		}
		rows := readCSV(t, "../../testdata/workloads/"+file)
		var cum []int
		total := 0
		for _, r := range rows {
			w := 1
			if weightCol >= 0 {
				w = atoi(t, r[weightCol])
			}
			total += w
			cum = append(cum, total)
		}
		rng := rand.New(rand.NewPCG(2023, uint64(n)))
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			x := rng.IntN(total)
			k := 0
			for cum[k] <= x {
				k++
			}
			r := rows[k]
			reqs := corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(atoi(t, r[cpuCol])), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(atoi(t, r[memCol]))<<20, resource.BinarySI),
			}
			if ephCol >= 0 {
				reqs[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(atoi(t, r[ephCol]))<<20, resource.BinarySI)
			}
			pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", kind, i), Namespace: "default"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: reqs}}}}}
		}
		set := seedSet(t)
		return Input{Pods: pods, DaemonSets: set.DaemonSets, NodePools: []*apisv1.NodePool{np}, NodeClasses: set.NodeClasses,
			NodeSettings: cloud.NodeSettingsFor}
	}
}

func readCSV(t testing.TB, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs[1:] // header
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// measureCost solves the input and bounds the pods the plan puts on new NodeClaims.
func measureCost(t testing.TB, c *catalog.Catalog, mix costMix, capacity string, capacityTypes []string) (costRow, Input) {
	t.Helper()
	pool := mix.pool
	if pool == nil {
		pool = costPool
	}
	np := pool(t, capacityTypes...)
	in := mix.input(t, np)
	in.Catalog = c
	p, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	row := costRow{mix: mix.name, capacity: capacity, pods: len(in.Pods), unsched: len(p.Unschedulable), nodes: len(p.NodeClaims),
		plan: p.TotalPricePerHour(), hard: mix.hard, planBound: p.LowerBoundPerHour}
	var placed []*corev1.Pod
	for _, nc := range p.NodeClaims {
		placed = append(placed, nc.Pods...)
	}
	row.placedNew = len(placed)
	var used, avail catalog.Resources
	count := map[string]int{}
	var names []string
	for _, nc := range p.NodeClaims {
		first := nc.Cheapest()
		a := first.InstanceType.AllocatableFast()
		avail.MilliCPU += a.MilliCPU - first.DaemonOverhead.MilliCPU
		avail.MemoryBytes += a.MemoryBytes - first.DaemonOverhead.Memory
		used.MilliCPU += nc.Requests.MilliCPU
		used.MemoryBytes += nc.Requests.Memory
		if count[first.InstanceType.Name] == 0 {
			names = append(names, first.InstanceType.Name)
		}
		count[first.InstanceType.Name]++
	}
	if avail.MilliCPU > 0 {
		row.cpuUtil, row.memUtil = float64(used.MilliCPU)/float64(avail.MilliCPU), float64(used.MemoryBytes)/float64(avail.MemoryBytes)
	}
	sort.SliceStable(names, func(i, j int) bool { return count[names[i]] > count[names[j]] })
	var top []string
	for i, n := range names {
		if i == 3 {
			break
		}
		top = append(top, fmt.Sprintf("%d×%s", count[n], n))
	}
	row.planMix = strings.Join(top, " ")
	var settings catalog.NodeSettings
	if len(in.NodeClasses) > 0 {
		var err error
		if settings, err = cloud.NodeSettingsFor(in.NodeClasses[0]); err != nil {
			t.Fatal(err)
		}
	}
	opts, err := lowerbound.OptionsFor(lowerbound.Source{Catalog: c, NodePool: np, Settings: settings, DaemonSets: in.DaemonSets})
	if err != nil {
		t.Fatal(err)
	}
	b, err := lowerbound.Compute(lowerbound.Requests(placed), opts)
	if err != nil {
		t.Fatalf("%s/%s: bound: %v", mix.name, capacity, err)
	}
	// Both are valid bounds: the plan's own (fit cuts over every option, exclusive sets and zone
	// pins) and the pool's (fit cuts over the pool's options, pods free of their constraints).
	row.bound, row.aggregate = max(b.PricePerHour, row.planBound), b.Aggregate
	var parts []string
	for i, u := range b.Mix {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%.1f×%s", u.Nodes, u.Name))
	}
	row.lpMix = strings.Join(parts, " ")
	return row, in
}

var costCapacities = []struct {
	name  string
	types []string
}{
	{"on-demand", []string{apisv1.CapacityTypeOnDemand}},
	{"spot+od", []string{apisv1.CapacityTypeSpot, apisv1.CapacityTypeOnDemand}},
}

// TestCostQuality prints the table (go test -run TestCostQuality -v) and checks what must
// hold: the plan never costs less than the bound (else the bound or the plan's pricing is
// wrong), the mixes without constraints are fully placed and within the 5 % target of the
// bound (the solve's budgets are deterministic, so the figures are too). The seed's pods carry
// spreads and affinities the bound leaves out: its ratio is reported, not checked.
func TestCostQuality(t *testing.T) {
	c := cat(t)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-13s %-9s %5s %5s %5s %5s %10s %10s %10s %7s  %-6s %-9s  %-45s %s\n", "mix", "capacity", "pods", "new", "unsch", "nodes",
		"plan $/h", "bound $/h", "aggr $/h", "ratio", "target", "util c/m", "plan types (top 3)", "LP mix (top 3)")
	for _, mix := range costMixes() {
		for _, ct := range costCapacities {
			row, _ := measureCost(t, c, mix, ct.name, ct.types)
			verdict := "ok"
			switch {
			case row.hard:
				verdict = "n/a"
			case row.ratio() > costTarget:
				verdict = "MISS"
			}
			fmt.Fprintf(&b, "%-13s %-9s %5d %5d %5d %5d %10.4f %10.4f %10.4f %7.4f  %-6s %3.0f%%/%3.0f%%  %-45s %s\n", row.mix, row.capacity, row.pods, row.placedNew,
				row.unsched, row.nodes, row.plan, row.bound, row.aggregate, row.ratio(), verdict, 100*row.cpuUtil, 100*row.memUtil, row.planMix, row.lpMix)
			if row.plan < row.bound*(1-1e-9) {
				t.Errorf("%s/%s: plan $%.6f/h is below the lower bound $%.6f/h", row.mix, row.capacity, row.plan, row.bound)
			}
			if !mix.hard && row.ratio() > costTarget {
				t.Errorf("%s/%s: plan $%.4f/h is %.4f× the bound $%.4f/h, above the %.2f target", row.mix, row.capacity, row.plan, row.ratio(), row.bound, costTarget)
			}
			if !mix.hard && row.unsched > 0 {
				t.Errorf("%s/%s: %d pods unschedulable", row.mix, row.capacity, row.unsched)
			}
		}
	}
	t.Log(b.String())
}

// BenchmarkCostQuality reports, per mix and capacity type, the plan's $/h, the bound's and their
// ratio (the solve time is the ordinary ns/op).
func BenchmarkCostQuality(b *testing.B) {
	c := cat(b)
	for _, mix := range costMixes() {
		for _, ct := range costCapacities {
			b.Run(mix.name+"/"+ct.name, func(b *testing.B) {
				row, in := measureCost(b, c, mix, ct.name, ct.types)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, err := Solve(in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(row.plan, "$/h")
				b.ReportMetric(row.bound, "bound$/h")
				b.ReportMetric(row.ratio(), "ratio")
				b.ReportMetric(float64(row.nodes), "nodes")
			})
		}
	}
}
