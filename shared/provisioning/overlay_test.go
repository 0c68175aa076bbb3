package provisioning

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/overlay"
)

func nodeOverlay(name string, weight int32, reqs ...corev1.NodeSelectorRequirement) *apisv1.NodeOverlay {
	o := &apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apisv1.NodeOverlaySpec{Requirements: reqs}}
	if weight > 0 {
		o.Spec.Weight = &weight
	}
	return o
}

var mFamily = corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"m"}}

// A −30 % NodeOverlay on the m family changes the chosen type. From the embedded us-east-1
// catalog (on-demand list prices): c6i.large $0.085/h, m6i.large $0.096/h, r6i.large $0.126/h;
// a 1 CPU / 1Gi pod fits each (1930m allocatable). Without the overlay c6i.large is cheapest;
// with it m6i.large costs 0.096 × (1 − 0.30) = $0.0672/h < $0.085/h, so m6i.large is chosen,
// the lower bound is that price, and the claim's offerings carry the overlay's name.
func TestNodeOverlayPriceChangesTheChosenType(t *testing.T) {
	c := cat(t)
	np := nodePool("default", onDemand("c6i.large", "m6i.large", "r6i.large")...)
	in := Input{Pods: []*corev1.Pod{pod("web", "1", "1Gi")}, NodePools: []*apisv1.NodePool{np}, Catalog: c}
	wantClaims(t, solve(t, in), "c6i.large")

	o := nodeOverlay("savings-plan-m", 0, mFamily)
	adj := "-30%"
	o.Spec.PriceAdjustment = &adj
	in.Overlays = overlay.Resolve([]*apisv1.NodeOverlay{o}, in.NodePools, c)
	p := solve(t, in)
	wantClaims(t, p, "m6i.large")
	got := p.NodeClaims[0].Cheapest()
	if math.Abs(got.PricePerHour-0.0672) > 1e-9 || got.PriceOverlay != "savings-plan-m" {
		t.Errorf("first offering %s %.6f $/h by overlay %q, want 0.0672 by savings-plan-m", got.InstanceType.Name, got.PricePerHour, got.PriceOverlay)
	}
	if math.Abs(p.LowerBoundPerHour-0.0672) > 1e-9 {
		t.Errorf("lower bound %.6f $/h, want the overlaid 0.0672", p.LowerBoundPerHour)
	}
	// The fallbacks keep their own prices, in overlaid order: c6i.large 0.085, then r6i.large 0.126.
	if opts := p.NodeClaims[0].InstanceTypeOptions(); len(opts) != 3 || opts[1] != "c6i.large" || opts[2] != "r6i.large" {
		t.Errorf("offering order %v, want m6i.large, c6i.large, r6i.large", opts)
	}
	if !p.NodeClaims[0].PriceOverlayApplied() || p.NodeClaims[0].CapacityOverlayApplied() {
		t.Errorf("overlay marks price=%v capacity=%v, want true, false", p.NodeClaims[0].PriceOverlayApplied(), p.NodeClaims[0].CapacityOverlayApplied())
	}
}

// An added extended resource lets pods requesting it schedule: no catalog type has
// example.com/device, so the pods are unschedulable; an overlay giving the m6i types 4 devices
// places them on m6i.large. Three pods of 2 devices (and 500m CPU) need ⌈6 / 4⌉ = 2 nodes:
// two pods per m6i.large (4 devices, 1000m of its 1930m).
func TestNodeOverlayCapacityLetsPodsSchedule(t *testing.T) {
	c := cat(t)
	np := nodePool("default", onDemand("c6i.large", "m6i.large")...)
	var ps []*corev1.Pod
	for _, n := range []string{"a", "b", "c"} {
		p := pod(n, "500m", "512Mi")
		p.Spec.Containers[0].Resources.Requests["example.com/device"] = resource.MustParse("2")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/device": resource.MustParse("2")}
		ps = append(ps, p)
	}
	in := Input{Pods: ps, NodePools: []*apisv1.NodePool{np}, Catalog: c}
	if p := solve(t, in); len(p.NodeClaims) != 0 || len(p.Unschedulable) != 3 {
		t.Fatalf("without the overlay: %d claims, %d unschedulable; want 0, 3", len(p.NodeClaims), len(p.Unschedulable))
	}
	o := nodeOverlay("devices", 0, corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m6i"}})
	o.Spec.Capacity = corev1.ResourceList{"example.com/device": resource.MustParse("4")}
	in.Overlays = overlay.Resolve([]*apisv1.NodeOverlay{o}, in.NodePools, c)
	p := solve(t, in)
	wantClaims(t, p, "m6i.large", "m6i.large")
	if !p.NodeClaims[0].CapacityOverlayApplied() || p.NodeClaims[0].PriceOverlayApplied() {
		t.Errorf("overlay marks price=%v capacity=%v, want false, true", p.NodeClaims[0].PriceOverlayApplied(), p.NodeClaims[0].CapacityOverlayApplied())
	}
}
