package provision

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/guardrails"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// poolHold is the anomaly hold's verdict on one NodePool's part of a plan.
type poolHold struct {
	np      *apisv1.NodePool
	verdict guardrails.Verdict
	// held counts the new NodeClaims the plan kept back.
	held int
}

// holdAnomalies applies each NodePool's anomaly hold (guardrails.AnnotationAnomalyHold) to the
// plan, in place: a held NodePool's new NodeClaims leave the plan and their pods become
// unschedulable with the hold's message, so they wait (and get FailedScheduling saying why). A
// NodePool whose annotation is invalid launches nothing new, its pods' reason naming the
// annotation and field. The NodePool's price counts its NodeClaims at their catalog price
// (provisioning.AddedClaims) and each new NodeClaim at its cheapest offering's, as the plan
// prices it. It returns the verdicts of the NodePools with a hold, sorted by name.
func holdAnomalies(in *provisioning.Input, plan *provisioning.Plan) []poolHold {
	byPool := map[string][]*provisioning.NodeClaimPlan{}
	for _, nc := range plan.NodeClaims {
		byPool[nc.NodePool.Name] = append(byPool[nc.NodePool.Name], nc)
	}
	var out []poolHold
	held := map[string]string{} // NodePool → the reason its pods wait
	for _, np := range in.NodePools {
		a, err := guardrails.AnomalyHoldOf(np)
		if err != nil {
			held[np.Name] = fmt.Sprintf("nodepool %q: %v", np.Name, err)
			continue
		}
		if a == nil {
			continue
		}
		claims := provisioning.AddedClaims(in, np.Name)
		s := guardrails.Spend{Trailing: guardrails.TrailingAverage(in.Time, a.Window.Duration, claims), Nodes: len(byPool[np.Name])}
		for _, c := range claims {
			s.Before += c.PricePerHour
		}
		s.After = s.Before
		for _, nc := range byPool[np.Name] {
			s.After += nc.Cheapest().PricePerHour
		}
		h := poolHold{np: np, verdict: a.Decide(np, s, in.Time)}
		if h.verdict.Held {
			held[np.Name] = fmt.Sprintf("nodepool %q: scale-up held: %s", np.Name, h.verdict.Condition.Message)
			h.held = len(byPool[np.Name])
		}
		out = append(out, h)
	}
	if len(held) > 0 {
		kept := plan.NodeClaims[:0:0]
		for _, nc := range plan.NodeClaims {
			why, ok := held[nc.NodePool.Name]
			if !ok {
				kept = append(kept, nc)
				continue
			}
			for _, p := range nc.Pods {
				plan.Unschedulable = append(plan.Unschedulable, provisioning.Unschedulable{Pod: p, Reason: why})
			}
		}
		plan.NodeClaims = kept
	}
	sort.Slice(out, func(i, j int) bool { return out[i].np.Name < out[j].np.Name })
	return out
}

// publishHolds writes each changed ScaleUpHeld condition (a SetNodePoolStatus command carrying
// only that condition: the agent merges it with the others), records a Warning Event on the
// NodePool when a hold begins and a Normal one when it is released, and counts the held
// NodeClaims (dovetail_nodepool_scale_up_held_total).
func (h *Handler) publishHolds(ctx context.Context, snap *events.Snapshot, holds []poolHold) error {
	var recs []events.EventRecord
	for _, ph := range holds {
		v, np := ph.verdict, ph.np
		if ph.held > 0 {
			telemetry.OrNop(h.Metrics).Record(telemetry.ScaleUpHeld, float64(ph.held), np.Name)
		}
		ref := kevents.ObjectRef(apisv1.GroupVersion, "NodePool", np.ObjectMeta)
		switch {
		case v.Started:
			recs = append(recs, events.EventRecord{Object: ref, Type: corev1.EventTypeWarning, Reason: guardrails.EventScaleUpHeld, Message: v.Condition.Message, Key: v.HoldID})
		case v.Released:
			recs = append(recs, events.EventRecord{Object: ref, Type: corev1.EventTypeNormal, Reason: guardrails.EventScaleUpReleased, Message: v.Condition.Message, Key: v.HoldID})
		}
		if v.Condition == nil || sameCondition(meta.FindStatusCondition(np.Status.Conditions, guardrails.ConditionScaleUpHeld), v.Condition) {
			continue
		}
		st := *np.Status.DeepCopy()
		st.Conditions = []metav1.Condition{*v.Condition}
		st.Conditions[0].ObservedGeneration = np.Generation
		c := events.Command{ID: events.CommandID(h.Cluster, fmt.Sprint(snap.Revision), "scale-up-held", np.Name, string(np.UID), v.HoldID, string(v.Condition.Status)),
			Kind: events.CommandSetNodePoolStatus, Cluster: h.Cluster, SnapshotRevision: snap.Revision,
			NodePool: &apisv1.NodePool{TypeMeta: np.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: np.Name, UID: np.UID}, Status: st},
			Reason:   fmt.Sprintf("NodePool %s: %s=%s (%s)", np.Name, guardrails.ConditionScaleUpHeld, v.Condition.Status, v.Condition.Reason)}
		if err := h.publish(ctx, snap, c); err != nil {
			return err
		}
	}
	e := emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}
	return e.Events(ctx, snap.Time.Time, snap.Revision, recs, "scale-up-held")
}

// sameCondition: the NodePool already says what the verdict would write.
func sameCondition(have, want *metav1.Condition) bool {
	return have != nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message
}
