package provisioning

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// improveCase is a small random input in the Karpenter benchmark's shape (its label keys and
// zones, so karpenterShapeViolations judges the plan independently of the solver), on a random
// catalog whose prices are not linear in size (else no move pays), with host ports on some
// generic pods, sometimes minValues on instance types, and sometimes a second NodePool of higher
// weight restricted to one type.
type improveCase struct {
	in      Input
	fifthOf map[string]int
}

func drawImproveCase(t *rapid.T) improveCase {
	var types []*catalog.InstanceType
	nt := rapid.IntRange(1, 6).Draw(t, "types")
	for i := range nt {
		cpu := int64(rapid.SampledFrom([]int{1, 2, 4, 8, 16}).Draw(t, "cpu"))
		gibPerCPU := int64(rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gibPerCPU"))
		// Price per vCPU falls or rises with size by up to ±40 %, per type.
		skew := rapid.Float64Range(0.6, 1.4).Draw(t, "skew")
		price := (0.04*float64(cpu) + 0.005*float64(cpu*gibPerCPU)) * skew
		name := fmt.Sprintf("rt-%d", i)
		var offs []catalog.Offering
		for _, z := range ksZones {
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: apisv1.CapacityTypeOnDemand, PricePerHour: price, Available: true, PriceSource: catalog.PriceSourceEmbedded})
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: apisv1.CapacityTypeSpot, PricePerHour: price * 0.4, Available: true, PriceSource: catalog.PriceSourceEmbedded})
		}
		catalog.SortOfferings(offs)
		types = append(types, &catalog.InstanceType{
			Name:   name,
			Labels: map[string]string{corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(cpu*gibPerCPU<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(rapid.Int64Range(4, 110).Draw(t, "maxPods"), resource.DecimalSI),
			},
			Offerings: offs,
		})
	}
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if rapid.Bool().Draw(t, "onDemandOnly") {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, apisv1.NodeSelectorRequirementWithMinValues{
			NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{apisv1.CapacityTypeOnDemand}}})
	}
	if nt > 1 && rapid.IntRange(0, 3).Draw(t, "minValues") == 0 {
		two := 2
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, apisv1.NodeSelectorRequirementWithMinValues{
			NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists}, MinValues: &two})
	}
	pools := []*apisv1.NodePool{np}
	if rapid.Bool().Draw(t, "secondPool") {
		// A higher-weight pool restricted to the first type: pods it takes must stay there.
		w := int32(10)
		hi := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "preferred"}}
		hi.Spec.Weight = &w
		hi.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
			Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"rt-0"}}}}
		pools = append(pools, hi)
	}
	n := rapid.IntRange(1, 40).Draw(t, "pods")
	fifthOf := map[string]int{}
	var pods []*corev1.Pod
	for i := range n {
		f := rapid.IntRange(0, len(ksFifths)-1).Draw(t, "fifth")
		name := fmt.Sprintf("p-%d", i)
		cpu := rapid.IntRange(100, 3000).Draw(t, "milliCPU")
		mem := rapid.IntRange(64, 12000).Draw(t, "MiB")
		v := rapid.SampledFrom(ksLabelValues[:3]).Draw(t, "value")
		p := requestPod(name, int64(cpu), int64(mem), nil)
		ksConstrain(p, f, v)
		if f == 0 && rapid.IntRange(0, 3).Draw(t, "port") == 0 {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		}
		pods = append(pods, p)
		fifthOf[name] = f
	}
	return improveCase{in: Input{Pods: pods, NodePools: pools, Catalog: catalog.New("", types)}, fifthOf: fifthOf}
}

// solveWithImprove solves with the improvement on (the default budget) or off.
func solveWithImprove(t *rapid.T, in Input, on bool) *Plan {
	if !on {
		saved := improveBudget
		improveBudget = func(int) int { return 0 }
		defer func() { improveBudget = saved }()
	}
	p, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImproveProperties: on random small inputs, the plan with the improvement keeps every pod
// the plan without it placed (and in the same NodePool), breaks no constraint the independent
// checker judges (topology spread on zone and hostname, zone affinity, hostname anti-affinity)
// nor a host port, costs no more, and is the same on every run.
func TestImproveProperties(t *testing.T) {
	var improved int
	rapid.Check(t, func(t *rapid.T) {
		tc := drawImproveCase(t)
		before := solveWithImprove(t, tc.in, false)
		after := solveWithImprove(t, tc.in, true)
		poolBefore := podPools(before)
		poolAfter := podPools(after)
		for pod, pool := range poolBefore {
			if poolAfter[pod] != pool {
				t.Fatalf("pod %s: NodePool %q before the improvement, %q after", pod, pool, poolAfter[pod])
			}
		}
		if len(poolAfter) != len(poolBefore) {
			t.Fatalf("%d pods placed before the improvement, %d after", len(poolBefore), len(poolAfter))
		}
		for f, bad := range karpenterShapeViolations(after, tc.fifthOf) {
			if len(bad) > 0 && !hasOnlyUnschedulable(bad) {
				t.Fatalf("%s violated after the improvement: %s", ksFifths[f], strings.Join(bad, "; "))
			}
		}
		if bad := hostPortClashes(after); bad != "" {
			t.Fatal(bad)
		}
		pb, pa := before.TotalPricePerHour(), after.TotalPricePerHour()
		if pa > pb+1e-9 {
			t.Fatalf("the improvement raised the plan's price: %.6f → %.6f $/h", pb, pa)
		}
		if pa < pb-1e-9 {
			improved++
		}
		again := solveWithImprove(t, tc.in, true)
		if !reflect.DeepEqual(planShape(after), planShape(again)) {
			t.Fatalf("two solves of one input differ:\n%v\n%v", planShape(after), planShape(again))
		}
	})
	t.Logf("the improvement made %d of the random plans cheaper", improved)
}

// hasOnlyUnschedulable: the checker's only complaint is pods left unschedulable (random inputs
// may hold pods no type fits; the placed-pods property covers what the improvement may do).
func hasOnlyUnschedulable(bad []string) bool {
	for _, b := range bad {
		if !strings.Contains(b, "unschedulable") {
			return false
		}
	}
	return true
}

// podPools maps each placed pod to its NodeClaim's NodePool.
func podPools(p *Plan) map[string]string {
	out := map[string]string{}
	for _, nc := range p.NodeClaims {
		for _, pod := range nc.Pods {
			out[pod.Name] = nc.NodePool.Name
		}
	}
	return out
}

// hostPortClashes names two pods on one NodeClaim binding the same host port.
func hostPortClashes(p *Plan) string {
	for i, nc := range p.NodeClaims {
		seen := map[int32]string{}
		for _, pod := range nc.Pods {
			for _, c := range pod.Spec.Containers {
				for _, port := range c.Ports {
					if port.HostPort == 0 {
						continue
					}
					if other := seen[port.HostPort]; other != "" {
						return fmt.Sprintf("NodeClaim %d: pods %s and %s both bind host port %d", i, other, pod.Name, port.HostPort)
					}
					seen[port.HostPort] = pod.Name
				}
			}
		}
	}
	return ""
}

// planShape is what a plan decides: per NodeClaim its pool, offerings and pods.
func planShape(p *Plan) []string {
	var out []string
	for _, nc := range p.NodeClaims {
		var b strings.Builder
		b.WriteString(nc.NodePool.Name)
		for _, o := range nc.Offerings {
			fmt.Fprintf(&b, " %s/%s/%s", o.InstanceType.Name, o.Zone, o.CapacityType)
		}
		for _, pod := range nc.Pods {
			b.WriteString(" " + pod.Name)
		}
		out = append(out, b.String())
	}
	for _, u := range p.Unschedulable {
		out = append(out, "unschedulable "+u.Pod.Name)
	}
	return out
}

// TestImproveTriesSamePriceClaimsFirst reproduces what the improvement's same-price walk fixes
// (commit 43e65a6, issue 28): emptying a claim moved each pod onto the first claim that took
// it, often a nearly full one tryAdd grew to a dearer type, so the move did not pay and was
// refused while a claim further on had room at its price.
//
// Only place's claim-opening and the improvement run (the stage on its own, as in
// stages_test.go), so the claims are exactly the three opened here, in this order, on an
// on-demand pool of m5.large (1930m allocatable, 0.096 USD/h) and m5.xlarge (3920m, 0.192 USD/h;
// catalog prices and allocatable as in solver_test.go):
//
//	A: a 1500m  m5.large 0.096  fill 1500/1930 = 0.78
//	B: b 1000m  m5.large 0.096  fill 1000/1930 = 0.52
//	X: x  500m  m5.large 0.096  fill  500/1930 = 0.26   (3 × 0.096 = 0.288 USD/h)
//
// The improvement empties the least filled first, X. Its pod x (500m) fits A's head (its
// m5.xlarge room, 3920 − 1500 = 2420m), so A is the first claim to take it, at 2000m > 1930m:
// A grows to m5.xlarge, +0.096, and the move saves 0.096 − 0.096 = 0, which is refused (a move
// must make the plan cheaper). Then B (1000m onto A: 2500m, m5.xlarge, saves 0) and A (1500m
// onto B: 2500m, the same) are refused too: the old rule ends at 3 × m5.large, 0.288 USD/h.
// Trying same-price claims first puts x on B (1000 + 500 = 1500m ≤ 1930m, still an m5.large):
// saves 0.096, kept. Then B (1500m now) and A are refused as above (each would grow the other
// to m5.xlarge, saving 0): 2 × m5.large, 0.192 USD/h, with A = {a} and B = {b, x}.
func TestImproveTriesSamePriceClaimsFirst(t *testing.T) {
	in := Input{Catalog: cat(t), NodePools: []*apisv1.NodePool{nodePool("default", onDemand("m5.large", "m5.xlarge")...)},
		Pods: []*corev1.Pod{pod("a", "1500m", "1Gi"), pod("b", "1000m", "1Gi"), pod("x", "500m", "1Gi")}}
	s, ps := compile(&in)
	for _, p := range ps { // compile's order: a, b, x (CPU descending); one claim each
		s.prepare(p)
		if u := s.openClaim(p); u.Reason != "" {
			t.Fatalf("open a claim for %s: %s", p.pod.Name, u.Reason)
		}
	}
	if len(s.claims) != 3 || math.Abs(plansCost(s.claims)-0.288) > 1e-9 {
		t.Fatalf("opened %d claims at %v USD/h, want 3 m5.large at 0.288", len(s.claims), plansCost(s.claims))
	}
	s.improve()
	ncs := s.finalizeAll()
	var got []string
	var total float64
	for _, nc := range ncs {
		o := nc.Cheapest()
		var names []string
		for _, p := range nc.Pods {
			names = append(names, p.Name)
		}
		got = append(got, o.InstanceType.Name+" "+strings.Join(names, ","))
		total += o.PricePerHour
	}
	if want := []string{"m5.large a", "m5.large b,x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("NodeClaims after the improvement = %q, want %q", got, want)
	}
	if math.Abs(total-0.192) > 1e-9 {
		t.Errorf("total %v USD/h, want 2 × 0.096 = 0.192", total)
	}
}
