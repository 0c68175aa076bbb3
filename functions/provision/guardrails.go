package provision

import (
	"context"
	"fmt"

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

// publishHolds writes each changed ScaleUpHeld condition (a SetNodePoolStatus command carrying
// only that condition: the agent merges it with the others), records a Warning Event on the
// NodePool when a hold begins and a Normal one when it is released, and counts the held
// NodeClaims (dovetail_nodepool_scale_up_held_total).
func (h *Handler) publishHolds(ctx context.Context, snap *events.Snapshot, holds []provisioning.PoolHold) error {
	var recs []events.EventRecord
	for _, ph := range holds {
		v, np := ph.Verdict, ph.NodePool
		if ph.Held > 0 {
			telemetry.OrNop(h.Metrics).Record(telemetry.ScaleUpHeld, float64(ph.Held), np.Name)
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
