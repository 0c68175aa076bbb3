package provisioning

import (
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/commitments"
)

// The acceptance case, on the embedded us-east-1 catalog's on-demand list prices:
// c6i.xlarge 0.17, c6i.2xlarge 0.34, m6i.xlarge 0.192, m6i.2xlarge 0.384 USD/h. Twelve pods of
// 3 CPU / 2Gi: one per 4-vCPU node (3920m allocatable), two per 8-vCPU node (7910m).
//
// List prices: the c6i family is cheapest per pod, 0.17 each whether on c6i.xlarge or half a
// c6i.2xlarge: 12 × 0.17 = 2.04 USD/h, no m6i.
//
// With a 1.00 USD/h Compute Savings Plan at 30 % off and a Reserved Instance for 2 × m6i.xlarge:
// two pods take the two m6i.xlarge at 0 (paid already). The other ten go to c6i (0.17 × 0.7 =
// 0.119 per pod, still cheapest), 1.70 USD/h at list. The plan covers 1.00 USD/h of discounted
// usage, i.e. 1.00 / 0.7 = 1.428571 USD/h at list; the remaining 1.70 − 1.428571 = 0.271429 is
// billed at list. Total: 0 + 1.00 + 0.271429 = 1.271429 USD/h, and both commitments are fully used.
func TestCommitmentsChangeTotalAndTypes(t *testing.T) {
	np := nodePool("default", onDemand("c6i.xlarge", "c6i.2xlarge", "m6i.xlarge", "m6i.2xlarge")...)
	in := Input{Pods: pods(12, "3", "2Gi"), NodePools: []*apisv1.NodePool{np}}
	list := solve(t, in)
	if got := list.TotalPricePerHour(); math.Abs(got-2.04) > 1e-9 {
		t.Fatalf("list-price total %.6f, want 2.04", got)
	}
	if n := countType(list, "m6i.xlarge"); n != 0 {
		t.Fatalf("list-price plan has %d m6i.xlarge, want 0", n)
	}

	in.Commitments = &apisv1.Commitments{
		SavingsPlans: []apisv1.SavingsPlan{{Name: "compute", Type: apisv1.SavingsPlanCompute, CommitmentPerHour: 1.00, DiscountRate: 0.30}},
		Reservations: []apisv1.Reservation{{Name: "ri-m6i", InstanceType: "m6i.xlarge", Region: "us-east-1", Count: 2}},
	}
	p := solve(t, in)
	want := 1.00 + (1.70 - 1.00/0.7)
	if got := p.TotalPricePerHour(); math.Abs(got-want) > 1e-9 {
		t.Errorf("committed total %.6f, want %.6f", got, want)
	}
	if n := countType(p, "m6i.xlarge"); n != 2 {
		t.Errorf("committed plan has %d m6i.xlarge, want the 2 of the Reserved Instance", n)
	}
	for _, n := range p.NodeClaims {
		if n.Cheapest().CapacityType != apisv1.CapacityTypeOnDemand {
			t.Errorf("claim on %s is %s, want on-demand (a Reserved Instance is a billing discount)", n.Cheapest().InstanceType.Name, n.Cheapest().CapacityType)
		}
	}
	if placed := podsOnClaims(p); placed != 12 {
		t.Errorf("%d pods placed, want 12", placed)
	}
	wantUse := []commitments.Use{
		{Name: "compute", Kind: commitments.KindSavingsPlan, CommittedPerHour: 1, UsedPerHour: 1, Utilisation: 1},
		{Name: "ri-m6i", Kind: commitments.KindReservation, Count: 2, Used: 2, Utilisation: 1},
	}
	if len(p.Commitments) != 2 || !sameUse(p.Commitments[0], wantUse[0]) || !sameUse(p.Commitments[1], wantUse[1]) {
		t.Errorf("utilisation %+v, want %+v", p.Commitments, wantUse)
	}
	// The bound prices the ten bought pods at 0.119 each: 1.19 ≤ 1.271429.
	if p.LowerBoundPerHour <= 0 || p.LowerBoundPerHour > p.TotalPricePerHour()+1e-9 {
		t.Errorf("lower bound %.6f, want in (0, %.6f]", p.LowerBoundPerHour, p.TotalPricePerHour())
	}
	if math.Abs(p.LowerBoundPerHour-1.19) > 1e-6 {
		t.Errorf("lower bound %.6f, want 10 × 0.119 = 1.19", p.LowerBoundPerHour)
	}
}

// Existing nodes consume the commitments first: an on-demand m6i.xlarge already running takes
// one of the two reserved instances, so the plan gets one m6i.xlarge at 0; a running c6i.2xlarge
// (0.34 at list, 0.238 discounted) takes 0.238 of the Savings Plan's 1.00.
func TestExistingNodesConsumeCommitmentsFirst(t *testing.T) {
	np := nodePool("default", onDemand("c6i.xlarge", "c6i.2xlarge", "m6i.xlarge", "m6i.2xlarge")...)
	running := func(name, typ string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelInstanceTypeStable: typ, corev1.LabelTopologyZone: "us-east-1a",
			apisv1.LabelCapacityType: apisv1.CapacityTypeOnDemand, apisv1.LabelNodePool: "default"}},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name, Taints: []corev1.Taint{{Key: "full", Effect: corev1.TaintEffectNoSchedule}}}}
	}
	in := Input{Pods: pods(2, "3", "2Gi"), NodePools: []*apisv1.NodePool{np},
		Nodes: []*corev1.Node{running("a", "m6i.xlarge"), running("b", "c6i.2xlarge")},
		Commitments: &apisv1.Commitments{
			SavingsPlans: []apisv1.SavingsPlan{{Name: "compute", Type: apisv1.SavingsPlanCompute, CommitmentPerHour: 1.00, DiscountRate: 0.30}},
			Reservations: []apisv1.Reservation{{Name: "ri-m6i", InstanceType: "m6i.xlarge", Region: "us-east-1", Count: 2}},
		}}
	p := solve(t, in)
	if n := countType(p, "m6i.xlarge"); n != 1 {
		t.Fatalf("plan has %d m6i.xlarge, want 1 (the other reserved instance runs already)", n)
	}
	// New: m6i.xlarge at 0 and a c6i.xlarge at 0.119; the plan's SP use adds to the node's 0.238.
	if got := p.TotalPricePerHour(); math.Abs(got-0.119) > 1e-9 {
		t.Errorf("total %.6f, want 0.119", got)
	}
	if u := p.Commitments[0]; math.Abs(u.UsedPerHour-(0.238+0.119)) > 1e-9 {
		t.Errorf("Savings Plan used %.6f, want 0.238 + 0.119 = 0.357", u.UsedPerHour)
	}
}

// With no commitments the plan is the list-price plan and carries no utilisation.
func TestNoCommitmentsNoEffect(t *testing.T) {
	np := nodePool("default", onDemand("c6i.xlarge", "m6i.xlarge")...)
	p := solve(t, Input{Pods: pods(3, "3", "2Gi"), NodePools: []*apisv1.NodePool{np}})
	if p.Commitments != nil || p.NodeClaims[0].Committed {
		t.Fatalf("commitment fields set without commitments: %+v", p.Commitments)
	}
}

// TestCommitmentsBoundProperty: under random commitments (Compute and EC2Instance Savings
// Plans, zonal and regional Reserved Instances, running nodes that consume them first), the
// lower bound never exceeds the plan's effective total, no NodeClaim costs more than its list
// price, and every pod the list-price plan placed is placed.
func TestCommitmentsBoundProperty(t *testing.T) {
	c := cat(t)
	types := []string{"c6i.large", "c6i.xlarge", "c6i.2xlarge", "m6i.large", "m6i.xlarge", "m6i.2xlarge", "r6i.large", "r6i.xlarge"}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	rapid.Check(t, func(t *rapid.T) {
		np := nodePool("default", onDemand(types...)...)
		if rapid.Bool().Draw(t, "spot") {
			np.Spec.Template.Spec.Requirements[1].Values = append(np.Spec.Template.Spec.Requirements[1].Values, apisv1.CapacityTypeSpot)
		}
		var ps []*corev1.Pod
		for i := range rapid.IntRange(1, 24).Draw(t, "pods") {
			cpu := rapid.IntRange(100, 7000).Draw(t, "cpu")
			mem := rapid.IntRange(128, 30000).Draw(t, "mem")
			ps = append(ps, pod(fmt.Sprintf("p%d", i), fmt.Sprintf("%dm", cpu), fmt.Sprintf("%dMi", mem)))
		}
		var com apisv1.Commitments
		for i := range rapid.IntRange(0, 2).Draw(t, "sps") {
			sp := apisv1.SavingsPlan{Name: fmt.Sprintf("sp%d", i), Type: apisv1.SavingsPlanCompute,
				CommitmentPerHour: float64(rapid.IntRange(1, 300).Draw(t, "commit")) / 100,
				DiscountRate:      float64(rapid.IntRange(5, 70).Draw(t, "rate")) / 100}
			if rapid.Bool().Draw(t, "family") {
				sp.Type, sp.InstanceFamily, sp.Region = apisv1.SavingsPlanEC2Instance, rapid.SampledFrom([]string{"c6i", "m6i", "r6i"}).Draw(t, "fam"), "us-east-1"
			}
			if rapid.Bool().Draw(t, "rates") {
				sp.Rates = map[string]float64{rapid.SampledFrom(types).Draw(t, "rateType"): float64(rapid.IntRange(5, 70).Draw(t, "typeRate")) / 100}
				if sp.Type == apisv1.SavingsPlanEC2Instance {
					sp.Rates = map[string]float64{sp.InstanceFamily + ".large": 0.5}
				}
			}
			com.SavingsPlans = append(com.SavingsPlans, sp)
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "ris") {
			r := apisv1.Reservation{Name: fmt.Sprintf("ri%d", i), InstanceType: rapid.SampledFrom(types).Draw(t, "riType"), Count: rapid.IntRange(1, 4).Draw(t, "count")}
			if rapid.Bool().Draw(t, "zonal") {
				r.Zone = rapid.SampledFrom(zones).Draw(t, "zone")
			} else {
				r.Region = "us-east-1"
			}
			com.Reservations = append(com.Reservations, r)
		}
		if err := com.Validate(); err != nil {
			t.Fatalf("generated invalid commitments: %v", err)
		}
		var nodes []*corev1.Node
		for i := range rapid.IntRange(0, 3).Draw(t, "nodes") {
			nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{
				corev1.LabelInstanceTypeStable: rapid.SampledFrom(types).Draw(t, "nodeType"), corev1.LabelTopologyZone: rapid.SampledFrom(zones).Draw(t, "nodeZone"),
				apisv1.LabelCapacityType: apisv1.CapacityTypeOnDemand}},
				Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///x/i-%d", i), Unschedulable: true}})
		}
		in := Input{Pods: ps, NodePools: []*apisv1.NodePool{np}, Catalog: c, Nodes: nodes}
		base, err := Solve(in)
		if err != nil {
			t.Fatal(err)
		}
		in.Commitments = &com
		p, err := Solve(in)
		if err != nil {
			t.Fatal(err)
		}
		if total := p.TotalPricePerHour(); p.LowerBoundPerHour > total*(1+1e-9)+1e-12 {
			t.Fatalf("lower bound %.6f > plan %.6f", p.LowerBoundPerHour, total)
		}
		for _, n := range p.NodeClaims {
			o := n.Cheapest()
			list := 0.0
			for _, lo := range o.InstanceType.Offerings {
				if lo.Zone == o.Zone && lo.CapacityType == o.CapacityType {
					list = lo.PricePerHour
				}
			}
			if n.EffectivePricePerHour > list+1e-9 || n.EffectivePricePerHour < -1e-12 {
				t.Fatalf("%s in %s: effective %.6f outside [0, list %.6f]", o.InstanceType.Name, o.Zone, n.EffectivePricePerHour, list)
			}
		}
		if podsOnClaims(p)+podsOnNodes(p) < podsOnClaims(base)+podsOnNodes(base) {
			t.Fatalf("commitments placed %d pods, list prices %d", podsOnClaims(p), podsOnClaims(base))
		}
	})
}

func countType(p *Plan, typ string) int {
	n := 0
	for _, c := range p.NodeClaims {
		if c.Cheapest().InstanceType.Name == typ {
			n++
		}
	}
	return n
}

func podsOnClaims(p *Plan) int {
	n := 0
	for _, c := range p.NodeClaims {
		n += len(c.Pods)
	}
	return n
}

func podsOnNodes(p *Plan) int {
	n := 0
	for _, e := range p.ExistingNodes {
		n += len(e.Pods)
	}
	return n
}

func sameUse(a, b commitments.Use) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Name == b.Name && a.Kind == b.Kind && near(a.CommittedPerHour, b.CommittedPerHour) && near(a.UsedPerHour, b.UsedPerHour) &&
		a.Count == b.Count && a.Used == b.Used && near(a.Utilisation, b.Utilisation)
}

// BenchmarkKarpenterShapeCommitted is BenchmarkKarpenterShape/N with commitments: a Compute
// Savings Plan of 100 USD/h at 28 % off and a regional Reserved Instance of 20 instances for
// each of the catalog's first five types, to compare with the same solve without (which must
// cost nothing extra: BenchmarkKarpenterShape).
func BenchmarkKarpenterShapeCommitted(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		in, _ := karpenterShapeInput(n)
		in.Commitments = &apisv1.Commitments{SavingsPlans: []apisv1.SavingsPlan{{Name: "compute", Type: apisv1.SavingsPlanCompute, CommitmentPerHour: 100, DiscountRate: 0.28}}}
		for i, it := range in.Catalog.Types()[:5] {
			in.Commitments.Reservations = append(in.Commitments.Reservations, apisv1.Reservation{
				Name: fmt.Sprintf("ri-%d", i), InstanceType: it.Name, Region: in.Catalog.Region, Count: 20})
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var cost float64
			for b.Loop() {
				p, err := Solve(in)
				if err != nil {
					b.Fatal(err)
				}
				cost = p.TotalPricePerHour()
			}
			b.ReportMetric(cost, "$/h")
		})
	}
}

// capCatalog is one 4-vCPU type in one zone: on-demand at 0.10 USD/h, spot at 0.08.
func capCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	offs := []catalog.Offering{
		{Zone: "zone-a", CapacityType: apisv1.CapacityTypeOnDemand, PricePerHour: 0.10, PriceSource: catalog.PriceSourceEmbedded, Available: true},
		{Zone: "zone-a", CapacityType: apisv1.CapacityTypeSpot, PricePerHour: 0.08, PriceSource: catalog.PriceSourceEmbedded, Available: true},
	}
	catalog.SortOfferings(offs)
	return catalog.New("test-region", []*catalog.InstanceType{{
		Name:   "small",
		Labels: map[string]string{corev1.LabelInstanceTypeStable: "small", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods: resource.MustParse("110")},
		Offerings: offs,
	}})
}

// TestSavingsPlanCapDuringPacking: a Savings Plan's discount is planned only for the usage its
// commitment covers. One type, on-demand 0.10 and spot 0.08 USD/h; ten 3-CPU pods, one per
// node. A 0.10 USD/h Compute Savings Plan at 30 % covers 0.10 / 0.7 = 0.142857 USD/h of list
// usage: the first on-demand node whole (0.07 of the commitment), then 0.03 / 0.07 = 3/7 of a
// second one, which costs 0.10 − 3/7 × 0.03 = 0.087143, dearer than spot. Planning every node
// at the discounted 0.07 would take ten on-demand nodes: 0.07 + 0.087143 + 8 × 0.10 = 0.957143.
// With the discount followed as NodeClaims are added: one on-demand node at 0.07, nine spot at
// 0.08: 0.79 USD/h (the cheapest mix: two on-demand cost 0.797143). The lower bound stays at
// most the total.
func TestSavingsPlanCapDuringPacking(t *testing.T) {
	np := nodePool("default", req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeOnDemand, apisv1.CapacityTypeSpot))
	in := Input{Pods: pods(10, "3", "2Gi"), NodePools: []*apisv1.NodePool{np}, Catalog: capCatalog(t),
		Commitments: &apisv1.Commitments{SavingsPlans: []apisv1.SavingsPlan{{Name: "compute", Type: apisv1.SavingsPlanCompute, CommitmentPerHour: 0.10, DiscountRate: 0.30}}}}
	p := solve(t, in)
	if len(p.NodeClaims) != 10 {
		t.Fatalf("%d NodeClaims, want 10 (one 3-CPU pod per 4-vCPU node)", len(p.NodeClaims))
	}
	ct := map[string]int{}
	for _, n := range p.NodeClaims {
		ct[n.Cheapest().CapacityType]++
	}
	if ct[apisv1.CapacityTypeOnDemand] != 1 || ct[apisv1.CapacityTypeSpot] != 9 {
		t.Errorf("capacity types %v, want 1 on-demand and 9 spot", ct)
	}
	if got, want := p.TotalPricePerHour(), 0.07+9*0.08; math.Abs(got-want) > 1e-9 {
		t.Errorf("total %.6f USD/h, want %.6f", got, want)
	}
	if p.LowerBoundPerHour > p.TotalPricePerHour()+1e-9 {
		t.Errorf("lower bound %.6f above the total %.6f", p.LowerBoundPerHour, p.TotalPricePerHour())
	}
	if len(p.Commitments) != 1 || math.Abs(p.Commitments[0].UsedPerHour-0.07) > 1e-9 {
		t.Errorf("commitments %+v, want compute with 0.07 of 0.10 USD/h used", p.Commitments)
	}
}
