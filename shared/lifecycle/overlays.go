package lifecycle

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/overlay"
)

// NodeOverlayReadyDependents are the conditions a NodeOverlay's Ready summarizes: its one
// dependent, ValidationSucceeded (Karpenter v1alpha1 nodeoverlay_status.go, StatusConditions).
var NodeOverlayReadyDependents = []string{apisv1.ConditionValidationSucceeded}

// nodeOverlays writes each NodeOverlay's conditions as Karpenter's nodeoverlay controller
// decides them (pkg/controllers/nodeoverlay/controller.go, updateOverlayStatuses), from the
// same resolution every function plans with (overlay.ResolveSnapshot against Options.Catalog):
// ValidationSucceeded True, or False with reason RuntimeValidation (the validation errors) or
// Conflict ("conflict with another overlay"); Ready True when ValidationSucceeded is, else False
// with reason UnhealthyDependents. Without a catalog nothing is written: which overlays
// conflict depends on the instance types they select.
func (d *decider) nodeOverlays() {
	if d.o.Catalog == nil || len(d.snap.NodeOverlays) == 0 {
		return
	}
	outcomes := map[string]overlay.Outcome{}
	for _, o := range overlay.ResolveSnapshot(d.snap, d.o.Catalog).Outcomes() {
		outcomes[o.Name] = o
	}
	overlays := make([]*apisv1.NodeOverlay, 0, len(d.snap.NodeOverlays))
	for i := range d.snap.NodeOverlays {
		overlays = append(overlays, &d.snap.NodeOverlays[i])
	}
	sort.Slice(overlays, func(i, j int) bool { return overlays[i].Name < overlays[j].Name })
	for _, o := range overlays {
		want := OverlayConditions(o, outcomes[o.Name])
		if sameConditions(o.Status.Conditions, want) {
			continue
		}
		ready := meta.FindStatusCondition(want, apisv1.ConditionReady)
		d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, fmt.Sprint(d.snap.Revision), "nodeoverlay-status", o.Name, string(o.UID)),
			Kind: events.CommandSetNodeOverlayStatus,
			NodeOverlay: &apisv1.NodeOverlay{TypeMeta: o.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: o.Name, UID: o.UID, Generation: o.Generation},
				Status: apisv1.NodeOverlayStatus{Conditions: want}},
			Reason: fmt.Sprintf("NodeOverlay %s: Ready=%s", o.Name, ready.Status)})
	}
}

// OverlayConditions are the conditions of NodeOverlay o whose resolution gave out: the
// ValidationSucceeded it decided and the Ready that follows, at o's generation.
func OverlayConditions(o *apisv1.NodeOverlay, out overlay.Outcome) []metav1.Condition {
	gen := o.Generation
	valid := metav1.Condition{Type: apisv1.ConditionValidationSucceeded, Status: metav1.ConditionTrue,
		Reason: apisv1.ConditionValidationSucceeded, ObservedGeneration: gen}
	if !out.Applied {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, out.Reason, out.Message
	}
	conds := []metav1.Condition{valid}
	apisv1.SetReadyFromDependents(&conds, gen, NodeOverlayReadyDependents)
	return conds
}
