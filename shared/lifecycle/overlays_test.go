package lifecycle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// overlayCatalog has m5.large (on-demand 0.096, spot 0.048) and c5.large (on-demand 0.085).
func overlayCatalog() *catalog.Catalog {
	typ := func(name, family string, od float64, spot bool) *catalog.InstanceType {
		it := &catalog.InstanceType{Name: name, Labels: map[string]string{corev1.LabelInstanceTypeStable: name, apisv1.LabelInstanceFamily: family},
			Offerings: []catalog.Offering{{Zone: "us-east-1a", CapacityType: apisv1.CapacityTypeOnDemand, PricePerHour: od, Available: true}}}
		if spot {
			it.Offerings = append(it.Offerings, catalog.Offering{Zone: "us-east-1a", CapacityType: apisv1.CapacityTypeSpot, PricePerHour: od / 2, Available: true})
		}
		catalog.SortOfferings(it.Offerings)
		return it
	}
	return catalog.New("us-east-1", []*catalog.InstanceType{typ("m5.large", "m5", 0.096, true), typ("c5.large", "c5", 0.085, false)})
}

func nodeOverlay(name string, weight int32, adjustment string, req corev1.NodeSelectorRequirement) apisv1.NodeOverlay {
	o := apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name), Generation: 3},
		Spec: apisv1.NodeOverlaySpec{PriceAdjustment: &adjustment, Requirements: []corev1.NodeSelectorRequirement{req}}}
	if weight != 0 {
		o.Spec.Weight = &weight
	}
	return o
}

// TestNodeOverlayStatus decides Karpenter's conditions from the snapshot. Resolution runs by
// weight, then name, both descending: m-discount (weight 10) sets m5.large's prices; m-b
// (weight 0) selects the same offerings, but only an equal weight conflicts, so it applies
// under m-discount; m-a (weight 0) then selects offerings m-b, of its own weight, already
// priced: Conflict. bad requires capacity type "cheap", not one of Karpenter's values:
// RuntimeValidation. c-only selects c5.large alone and applies.
func TestNodeOverlayStatus(t *testing.T) {
	family := func(f string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{f}}
	}
	snap := &events.Snapshot{Cluster: "c", Revision: 9, Time: metav1.NewTime(t0), NodePools: []apisv1.NodePool{pool()},
		NodeOverlays: []apisv1.NodeOverlay{
			nodeOverlay("m-discount", 10, "-30%", family("m5")),
			nodeOverlay("m-a", 0, "-0.01", family("m5")),
			nodeOverlay("m-b", 0, "-0.02", family("m5")),
			nodeOverlay("bad", 0, "-10%", corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"cheap"}}),
			nodeOverlay("c-only", 0, "+0.01", family("c5")),
		}}
	opts := Options{Catalog: overlayCatalog()}
	cmds := commandsOf(Decide(snap, opts), events.CommandSetNodeOverlayStatus)
	type want struct {
		valid  metav1.ConditionStatus
		reason string
		msg    string // "" for any non-empty message (RuntimeValidation's carries the errors)
	}
	wants := map[string]want{
		"bad":        {metav1.ConditionFalse, "RuntimeValidation", ""},
		"c-only":     {metav1.ConditionTrue, apisv1.ConditionValidationSucceeded, ""},
		"m-a":        {metav1.ConditionFalse, "Conflict", "conflict with another overlay"},
		"m-b":        {metav1.ConditionTrue, apisv1.ConditionValidationSucceeded, ""},
		"m-discount": {metav1.ConditionTrue, apisv1.ConditionValidationSucceeded, ""},
	}
	if len(cmds) != len(wants) {
		t.Fatalf("%d SetNodeOverlayStatus commands, want %d: %+v", len(cmds), len(wants), cmds)
	}
	names := []string{"bad", "c-only", "m-a", "m-b", "m-discount"} // by name
	for i, c := range cmds {
		o := c.NodeOverlay
		w := wants[o.Name]
		if o.Name != names[i] || o.Generation != 3 || string(o.UID) != "uid-"+o.Name || c.Validate() != nil {
			t.Errorf("command %d: overlay %s generation %d uid %s (valid: %v), want %s at generation 3", i, o.Name, o.Generation, o.UID, c.Validate(), names[i])
		}
		vs := meta.FindStatusCondition(o.Status.Conditions, apisv1.ConditionValidationSucceeded)
		ready := meta.FindStatusCondition(o.Status.Conditions, apisv1.ConditionReady)
		if len(o.Status.Conditions) != 2 || vs == nil || ready == nil {
			t.Fatalf("%s: conditions %+v, want ValidationSucceeded and Ready", o.Name, o.Status.Conditions)
		}
		if vs.Status != w.valid || vs.Reason != w.reason || vs.ObservedGeneration != 3 {
			t.Errorf("%s: ValidationSucceeded %+v, want %s (%s) at generation 3", o.Name, vs, w.valid, w.reason)
		}
		switch {
		case w.valid == metav1.ConditionTrue && (vs.Message != "" || ready.Status != metav1.ConditionTrue || ready.Reason != apisv1.ConditionReady):
			t.Errorf("%s: ValidationSucceeded %+v Ready %+v, want both True", o.Name, vs, ready)
		case w.valid == metav1.ConditionFalse && (ready.Status != metav1.ConditionFalse || ready.Reason != apisv1.ReasonUnhealthyDependents || ready.Message != "ValidationSucceeded=False"):
			t.Errorf("%s: Ready %+v, want False, UnhealthyDependents, ValidationSucceeded=False", o.Name, ready)
		case w.valid == metav1.ConditionFalse && w.msg != "" && vs.Message != w.msg, w.valid == metav1.ConditionFalse && vs.Message == "":
			t.Errorf("%s: message %q, want %q", o.Name, vs.Message, w.msg)
		}
	}
	if m := meta.FindStatusCondition(cmds[0].NodeOverlay.Status.Conditions, apisv1.ConditionValidationSucceeded).Message; !strings.Contains(m, "spec.requirements[0].values") || !strings.Contains(m, "cheap") {
		t.Errorf("bad's message %q, want the requirement's field and value", m)
	}

	// Written, the same snapshot asks for nothing; without a catalog nothing is decided.
	for i := range snap.NodeOverlays {
		for _, c := range cmds {
			if c.NodeOverlay.Name == snap.NodeOverlays[i].Name {
				snap.NodeOverlays[i].Status = c.NodeOverlay.Status
			}
		}
	}
	if n := len(commandsOf(Decide(snap, opts), events.CommandSetNodeOverlayStatus)); n != 0 {
		t.Errorf("%d SetNodeOverlayStatus commands for overlays whose status is current", n)
	}
	snap.NodeOverlays[0].Status.Conditions = nil
	if n := len(commandsOf(Decide(snap, Options{}), events.CommandSetNodeOverlayStatus)); n != 0 {
		t.Errorf("%d SetNodeOverlayStatus commands without a catalog, want 0", n)
	}
	// m-discount deleted: m-b is the highest-weight price overlay left, m-a still conflicts.
	snap.NodeOverlays = snap.NodeOverlays[1:]
	if n := len(commandsOf(Decide(snap, opts), events.CommandSetNodeOverlayStatus)); n != 0 {
		t.Errorf("%d SetNodeOverlayStatus commands after m-discount went, want 0 (the others' outcomes hold)", n)
	}
}
