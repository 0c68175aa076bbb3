package overlay

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// A small catalog: m5.large $0.096 and m5.xlarge $0.192 on-demand, each with a spot offering at
// half price, in one zone; c5.large $0.085 on-demand.
func testCatalog() *catalog.Catalog {
	typ := func(name, family string, od float64, spot bool) *catalog.InstanceType {
		it := &catalog.InstanceType{Name: name, Labels: map[string]string{
			corev1.LabelInstanceTypeStable: name, apisv1.LabelInstanceFamily: family, apisv1.LabelInstanceCategory: family[:1]},
			Offerings: []catalog.Offering{{Zone: "us-east-1a", CapacityType: apisv1.CapacityTypeOnDemand, PricePerHour: od, Available: true}}}
		if spot {
			it.Offerings = append(it.Offerings, catalog.Offering{Zone: "us-east-1a", CapacityType: apisv1.CapacityTypeSpot, PricePerHour: od / 2, Available: true})
		}
		catalog.SortOfferings(it.Offerings)
		return it
	}
	return catalog.New("us-east-1", []*catalog.InstanceType{typ("m5.large", "m5", 0.096, true), typ("m5.xlarge", "m5", 0.192, true), typ("c5.large", "c5", 0.085, false)})
}

func pools(names ...string) []*apisv1.NodePool {
	var out []*apisv1.NodePool
	for _, n := range names {
		out = append(out, &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return out
}

func ov(name string, weight int32, change string, reqs ...corev1.NodeSelectorRequirement) *apisv1.NodeOverlay {
	o := &apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apisv1.NodeOverlaySpec{Requirements: reqs}}
	if weight != 0 {
		o.Spec.Weight = &weight
	}
	switch {
	case change == "":
	case change[0] == '+' || change[0] == '-':
		o.Spec.PriceAdjustment = &change
	default:
		o.Spec.Price = &change
	}
	return o
}

func in(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func price(t *testing.T, s *Store, pool, typ, capacityType string, cat *catalog.Catalog) float64 {
	t.Helper()
	for _, o := range s.Apply(pool, cat.Get(typ)).Offerings {
		if o.CapacityType == capacityType {
			return o.PricePerHour
		}
	}
	t.Fatalf("%s has no %s offering", typ, capacityType)
	return 0
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func outcomes(s *Store) map[string]Outcome {
	out := map[string]Outcome{}
	for _, o := range s.Outcomes() {
		out[o.Name] = o
	}
	return out
}

// Karpenter's AdjustedPrice, case by case.
func TestAdjustedPrice(t *testing.T) {
	for _, c := range []struct {
		change string
		want   float64
	}{
		{"", 0.2}, {"0.25", 0.25}, {"+0.05", 0.25}, {"-0.05", 0.15}, {"-30%", 0.14}, {"+10%", 0.22},
		{"-100%", 0}, {"-1", 0}, // floored at 0
	} {
		if got := AdjustedPrice(0.2, c.change); !near(got, c.want) {
			t.Errorf("AdjustedPrice(0.2, %q) = %v, want %v", c.change, got, c.want)
		}
	}
}

// Equal weights on the same offering conflict: overlays are taken in name-descending order at
// equal weight, so "b" applies and "a" is refused whole (reason Conflict) — also on m5.xlarge,
// which only "a" selects.
func TestEqualWeightPriceOverlaysConflict(t *testing.T) {
	cat := testCatalog()
	s := Resolve([]*apisv1.NodeOverlay{
		ov("a", 10, "-50%", in(apisv1.LabelInstanceFamily, "m5")),
		ov("b", 10, "-10%", in(corev1.LabelInstanceTypeStable, "m5.large")),
	}, pools("default"), cat)
	got := outcomes(s)
	if !got["b"].Applied || got["a"].Applied || got["a"].Reason != apisv1.ReasonConflict || got["a"].Message != apisv1.MessageOverlayConflict {
		t.Fatalf("outcomes %+v, want b applied and a refused with Conflict", got)
	}
	// m5.large on-demand 0.096 × 0.9 = 0.0864; m5.xlarge untouched (a is not applied anywhere).
	if p := price(t, s, "default", "m5.large", apisv1.CapacityTypeOnDemand, cat); !near(p, 0.0864) {
		t.Errorf("m5.large on-demand %v, want 0.0864", p)
	}
	if p := price(t, s, "default", "m5.xlarge", apisv1.CapacityTypeOnDemand, cat); !near(p, 0.192) {
		t.Errorf("m5.xlarge on-demand %v, want 0.192 (the conflicting overlay applies nowhere)", p)
	}
}

// A higher weight wins where both select; the lower one still applies elsewhere.
func TestHigherWeightWins(t *testing.T) {
	cat := testCatalog()
	s := Resolve([]*apisv1.NodeOverlay{
		ov("family", 1, "+0.01", in(apisv1.LabelInstanceFamily, "m5")),
		ov("large", 100, "0.05", in(corev1.LabelInstanceTypeStable, "m5.large")),
	}, pools("default"), cat)
	for name, o := range outcomes(s) {
		if !o.Applied {
			t.Errorf("%s: %+v, want applied", name, o)
		}
	}
	// m5.large: price 0.05 from "large" (both offerings); m5.xlarge: 0.192 + 0.01 = 0.202.
	if p := price(t, s, "default", "m5.large", apisv1.CapacityTypeSpot, cat); !near(p, 0.05) {
		t.Errorf("m5.large spot %v, want 0.05", p)
	}
	if p := price(t, s, "default", "m5.xlarge", apisv1.CapacityTypeOnDemand, cat); !near(p, 0.202) {
		t.Errorf("m5.xlarge on-demand %v, want 0.202", p)
	}
}

// The conflict is judged against the lowest weight that touched the offering: after "top"
// (100), "y" (50) applies without changing the price, and "x" (50) then conflicts with it.
func TestConflictAgainstTheLowestWeightSoFar(t *testing.T) {
	cat := testCatalog()
	large := in(corev1.LabelInstanceTypeStable, "m5.large")
	s := Resolve([]*apisv1.NodeOverlay{ov("top", 100, "0.01", large), ov("x", 50, "0.02", large), ov("y", 50, "0.03", large)}, pools("default"), cat)
	got := outcomes(s)
	if !got["top"].Applied || !got["y"].Applied || got["x"].Reason != apisv1.ReasonConflict {
		t.Fatalf("outcomes %+v, want top and y applied, x Conflict", got)
	}
	if p := price(t, s, "default", "m5.large", apisv1.CapacityTypeOnDemand, cat); !near(p, 0.01) {
		t.Errorf("m5.large %v, want top's 0.01", p)
	}
}

// Offering-level requirements change only the offerings they select.
func TestCapacityTypeSelectsOfferings(t *testing.T) {
	cat := testCatalog()
	s := Resolve([]*apisv1.NodeOverlay{ov("spot", 0, "-50%", in(apisv1.LabelCapacityType, apisv1.CapacityTypeSpot))}, pools("default"), cat)
	// m5.large spot 0.048 × 0.5 = 0.024; on-demand stays 0.096.
	if p := price(t, s, "default", "m5.large", apisv1.CapacityTypeSpot, cat); !near(p, 0.024) {
		t.Errorf("spot %v, want 0.024", p)
	}
	if p := price(t, s, "default", "m5.large", apisv1.CapacityTypeOnDemand, cat); !near(p, 0.096) {
		t.Errorf("on-demand %v, want 0.096", p)
	}
	if got := s.Apply("default", cat.Get("c5.large")); got != cat.Get("c5.large") {
		t.Error("c5.large has no spot offering, so the overlay must not select it")
	}
}

// karpenter.sh/nodepool and the NodePools' template labels select per pool; a custom label a
// pool does not carry fails an In requirement.
func TestPoolLabelsSelect(t *testing.T) {
	cat := testCatalog()
	ps := pools("a", "b")
	ps[1].Spec.Template.ObjectMeta.Labels = map[string]string{"team": "ml"}
	s := Resolve([]*apisv1.NodeOverlay{
		ov("pool-a", 0, "0.01", in(apisv1.LabelNodePool, "a")),
		ov("team-ml", 0, "0.02", in("team", "ml")),
	}, ps, cat)
	if p := price(t, s, "a", "c5.large", apisv1.CapacityTypeOnDemand, cat); !near(p, 0.01) {
		t.Errorf("pool a: %v, want 0.01", p)
	}
	if p := price(t, s, "b", "c5.large", apisv1.CapacityTypeOnDemand, cat); !near(p, 0.02) {
		t.Errorf("pool b: %v, want 0.02", p)
	}
}

// Capacity: resources merge across weights (the first value of a resource stays), and an
// equal weight adding the same resource conflicts.
func TestCapacityOverlays(t *testing.T) {
	cat := testCatalog()
	capOv := func(name string, weight int32, res string, n int64) *apisv1.NodeOverlay {
		o := ov(name, weight, "", in(apisv1.LabelInstanceFamily, "m5"))
		o.Spec.Capacity = corev1.ResourceList{corev1.ResourceName(res): *resource.NewQuantity(n, resource.DecimalSI)}
		return o
	}
	s := Resolve([]*apisv1.NodeOverlay{capOv("high", 10, "example.com/device", 4), capOv("low", 5, "example.com/device", 8),
		capOv("other", 5, "example.com/fpga", 1), capOv("clash", 10, "example.com/device", 2)}, pools("default"), cat)
	got := outcomes(s)
	// Order: high(10), clash(10) — name descending at equal weight puts "high" first — then other(5), low(5).
	if !got["high"].Applied || got["clash"].Reason != apisv1.ReasonConflict || !got["other"].Applied || !got["low"].Applied {
		t.Fatalf("outcomes %+v, want clash Conflict, the rest applied", got)
	}
	c := s.Apply("default", cat.Get("m5.large")).OverlayCapacity
	if d, f := c["example.com/device"], c["example.com/fpga"]; d.Value() != 4 || f.Value() != 1 {
		t.Errorf("capacity %v, want device 4 (high's) and fpga 1", c)
	}
	if s.Apply("default", cat.Get("c5.large")).OverlayCapacity != nil {
		t.Error("c5.large is not in the m5 family")
	}
}

// An overlay that fails Karpenter's runtime validation is skipped with reason RuntimeValidation.
func TestRuntimeValidationOutcome(t *testing.T) {
	s := Resolve([]*apisv1.NodeOverlay{ov("bad", 0, "-10%", in(apisv1.LabelCapacityType, "cheap"))}, pools("default"), testCatalog())
	if o := outcomes(s)["bad"]; o.Applied || o.Reason != apisv1.ReasonRuntimeValidation || o.Message == "" {
		t.Fatalf("outcome %+v, want RuntimeValidation with the error", o)
	}
}

// A capacity reservation's type (same name, its own reserved offering and reservation labels)
// is priced by the applied overlays that select its offering.
func TestApplyToReservedOffering(t *testing.T) {
	cat := testCatalog()
	s := Resolve([]*apisv1.NodeOverlay{
		ov("od-only", 10, "0.5", in(apisv1.LabelCapacityType, apisv1.CapacityTypeOnDemand)),
		ov("all", 0, "+1", in(apisv1.LabelInstanceFamily, "m5")),
	}, pools("default"), cat)
	base := cat.Get("m5.large")
	res := *base
	res.Labels = map[string]string{apisv1.LabelCapacityReservationID: "cr-1"}
	res.Offerings = []catalog.Offering{{Zone: "us-east-1a", CapacityType: apisv1.CapacityTypeReserved, PricePerHour: 1e-8, ReservationID: "cr-1", Available: true}}
	got := s.Apply("default", &res).Offerings[0]
	// "od-only" does not select a reserved offering; "all" adds 1: 1e-8 + 1.
	if !near(got.PricePerHour, 1+1e-8) || got.PriceOverlay != "all" {
		t.Errorf("reserved offering %+v, want 1.00000001 by all", got)
	}
}
