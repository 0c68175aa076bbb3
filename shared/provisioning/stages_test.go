package provisioning

import (
	"math"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Each stage of Solve on its own (see Solve): the input is compiled, and only the stages up to
// the one under test run, so what a test sees is that stage's work.

// TestCompileOrdersFirstFitDecreasing: compile hands place the pods by CPU, then memory,
// descending, then namespace/name: c (1 CPU, 2Gi), b (1 CPU, 512Mi), a and d (500m, 1Gi; a
// before d by name).
func TestCompileOrdersFirstFitDecreasing(t *testing.T) {
	in := Input{Catalog: cat(t), Pods: []*corev1.Pod{
		pod("d", "500m", "1Gi"), pod("a", "500m", "1Gi"), pod("b", "1", "512Mi"), pod("c", "1", "2Gi")}}
	_, pods := compile(&in)
	var got []string
	for _, p := range pods {
		got = append(got, p.pod.Name)
	}
	if want := []string{"c", "b", "a", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// TestPlaceIsFirstFit: place alone packs three 900m pods of an m5.large pool (1930m
// allocatable) two on the first NodeClaim (1800m) and the third on a second one, and refuses a
// pod no type holds, with the reason.
func TestPlaceIsFirstFit(t *testing.T) {
	in := Input{Catalog: cat(t), NodePools: []*apisv1.NodePool{nodePool("default", onDemand("m5.large")...)},
		Pods: append(pods(3, "900m", "1Gi"), pod("huge", "3", "1Gi"))}
	s, ps := compile(&in)
	refused := s.place(ps)
	var sizes []int
	for _, c := range s.claims {
		sizes = append(sizes, len(c.pods))
	}
	if !reflect.DeepEqual(sizes, []int{2, 1}) {
		t.Errorf("pods per claim = %v, want [2 1]", sizes)
	}
	if len(refused) != 1 || refused[0].Pod.Name != "huge" || refused[0].Reason == "" {
		t.Errorf("refused = %+v, want huge with its reason", refused)
	}
}

// refineInput is five 860m pods on an m5 pool (on-demand, prices linear in size: m5.large
// 0.096, m5.xlarge 0.192, m5.2xlarge 0.384 USD/h). First-fit puts all five (4300m) on one
// m5.2xlarge (7910m allocatable; an m5.xlarge has 3920m): 0.384.
func refineInput(t *testing.T) Input {
	np := nodePool("default", onDemand("m5.large", "m5.xlarge", "m5.2xlarge")...)
	return Input{Catalog: cat(t), NodePools: []*apisv1.NodePool{np}, Pods: pods(5, "860m", "1Gi")}
}

func placed(t *testing.T, in Input) *solver {
	t.Helper()
	s, ps := compile(&in)
	if refused := s.place(ps); len(refused) > 0 {
		t.Fatalf("refused: %+v", refused)
	}
	if len(s.claims) != 1 || math.Abs(claimCost(s.claims[0])-0.384) > 1e-9 {
		t.Fatalf("first-fit: %d claims, first at %v USD/h; want one m5.2xlarge at 0.384", len(s.claims), claimCost(s.claims[0]))
	}
	return s
}

// TestRefineSplitsAnOversizedClaim: under a 4-vCPU cap the five pods re-pack as four on an
// m5.xlarge (3440m ≤ 3920m) and one on an m5.large (860m ≤ 1930m): 0.192 + 0.096 = 0.288 <
// 0.384. The 2-vCPU cap (three m5.large, two pods each: 0.288) is no cheaper, so the first is
// kept.
func TestRefineSplitsAnOversizedClaim(t *testing.T) {
	s := placed(t, refineInput(t))
	s.refine()
	var types []string
	for _, c := range s.claims {
		types = append(types, s.finalize(c).Cheapest().InstanceType.Name)
	}
	if want := []string{"m5.xlarge", "m5.large"}; !reflect.DeepEqual(types, want) {
		t.Errorf("refined claims = %v, want %v", types, want)
	}
	if got := plansCost(s.claims); math.Abs(got-0.288) > 1e-9 {
		t.Errorf("refined cost = %v, want 0.288", got)
	}
}

// TestRefineTriesTheCapsTheBudgetAllows: refineInput's five pods spread over zones (maxSkew 1,
// the pool in us-east-1a alone, so one claim holds them and topology counts them) with the
// topology re-pack budget at 10 placements: keeping a re-packing costs 5, one cap 5 more. The
// budget was once charged for every cap up front (5 × (2 caps + 1) = 15 > 10: 4 and 2 vCPU; no
// m5 type has 1), and the claim
// stayed on its m5.2xlarge (0.384 USD/h); now the first cap (4 vCPU) is tried, and its
// m5.xlarge + m5.large (0.288, TestRefineSplitsAnOversizedClaim) kept, which spends the budget.
func TestRefineTriesTheCapsTheBudgetAllows(t *testing.T) {
	in := refineInput(t)
	in.NodePools[0].Spec.Template.Spec.Requirements = append(in.NodePools[0].Spec.Template.Spec.Requirements,
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a"))
	for _, p := range in.Pods {
		p.Labels = map[string]string{"app": "web"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	s := placed(t, in)
	if !s.claims[0].topo {
		t.Fatal("the claim's pods are not topology-counted; the test needs them to be")
	}
	s.topoRefineLeft = 10
	s.refine()
	if got := plansCost(s.claims); math.Abs(got-0.288) > 1e-9 {
		t.Errorf("refined cost = %v with a budget of 10 placements, want 0.288 (the 4-vCPU cap)", got)
	}
	if s.topoRefineLeft != 0 {
		t.Errorf("budget left %d placements, want 0 (5 for the keeping, 5 for the one cap tried)", s.topoRefineLeft)
	}
}

// TestRefineKeepsTheLimit: with spec.limits nodes: 1 the one m5.2xlarge is the whole limit; a
// replacement of two nodes does not fit in its place, so refine keeps it, and the limits still
// count exactly one node.
func TestRefineKeepsTheLimit(t *testing.T) {
	in := refineInput(t)
	in.NodePools[0].Spec.Limits = corev1.ResourceList{ResourceNodes: resource.MustParse("1")}
	s := placed(t, in)
	s.refine()
	if len(s.claims) != 1 || math.Abs(claimCost(s.claims[0])-0.384) > 1e-9 {
		t.Fatalf("refine under nodes: 1 gave %d claims; want the one m5.2xlarge kept", len(s.claims))
	}
	if got := s.claims[0].limits.committed.Scalar[ResourceNodes]; got != 1 {
		t.Errorf("limits count %d nodes, want 1", got)
	}
}

// TestFinalizeRanksOfferings: finalize gives a claim every allowed offering of the types that
// hold its pods, cheapest first (ties: type name, spot before on-demand, zone), and only types
// that hold them: a 1500m pod fits an m5.large (1930m), so both sizes are offered, in both
// capacity types the pool allows.
func TestFinalizeRanksOfferings(t *testing.T) {
	np := nodePool("default",
		req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge"),
		req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeSpot, apisv1.CapacityTypeOnDemand))
	in := Input{Catalog: cat(t), NodePools: []*apisv1.NodePool{np}, Pods: []*corev1.Pod{pod("a", "1500m", "1Gi")}}
	s, ps := compile(&in)
	s.place(ps)
	ncs := s.finalizeAll()
	if len(ncs) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(ncs))
	}
	offs := ncs[0].Offerings
	seen := map[string]bool{}
	for i, o := range offs {
		seen[o.InstanceType.Name+"/"+o.CapacityType] = true
		if i == 0 {
			continue
		}
		a := offs[i-1]
		if a.PricePerHour > o.PricePerHour || (a.PricePerHour == o.PricePerHour && a.InstanceType.Name > o.InstanceType.Name) {
			t.Errorf("offering %d (%s %s %s %v) ranks after a cheaper one (%s %s %s %v)", i-1, a.InstanceType.Name, a.CapacityType, a.Zone, a.PricePerHour,
				o.InstanceType.Name, o.CapacityType, o.Zone, o.PricePerHour)
		}
	}
	for _, k := range []string{"m5.large/spot", "m5.large/on-demand", "m5.xlarge/spot", "m5.xlarge/on-demand"} {
		if !seen[k] {
			t.Errorf("no %s offering among %d", k, len(offs))
		}
	}
	if len(seen) != 4 {
		t.Errorf("offered %v, want exactly m5.large and m5.xlarge in spot and on-demand", seen)
	}
}
