package interruption_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/guardrails"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// An interruption's replacement is never held: the NodePool allows no scale-up at all
// (selectPolicy Disabled) and holds any plan raising its price above 1.01× its trailing
// average, yet the replacement launches before the node is drained, as without them.
func TestInterruptionReplacementIsNeverHeld(t *testing.T) {
	e := newEnv(t, 2)
	n := e.spotNode(t)
	it, err := e.w.Cloud.Interrupt(n.Spec.ProviderID, fake.KindSpotInterruption)
	if err != nil {
		t.Fatal(err)
	}
	snap := e.w.Snapshot()
	snap.NodePools[0].Annotations = map[string]string{
		guardrails.AnnotationScaleUpPolicies: `selectPolicy: Disabled`,
		guardrails.AnnotationAnomalyHold:     `{multiple: 1.01}`,
	}
	e.snaps.Set(snap)
	msg := queue.Message{Data: scenarios.SpotNoticeJSON(it, "n-1"), Attempt: 1}
	if err := e.h.Handle(context.Background(), msg); !errors.Is(err, interruption.ErrAwaitingReplacement) {
		t.Fatalf("want ErrAwaitingReplacement, got %v", err)
	}
	if _, kinds := e.kinds(t, 3); kinds != "MarkOfferingsUnavailable,CreateNodeClaim,TaintNode" {
		t.Fatalf("want mark, create, taint; got %s", kinds)
	}
	if st := e.w.Cloud.Stats(); st.Launches != 2 {
		t.Fatalf("want 2 launches (the node and its replacement), got %d", st.Launches)
	}
}
