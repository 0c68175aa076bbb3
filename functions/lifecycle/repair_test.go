package lifecycle_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/cloudmetrics"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// readyWorld is world with its NodeClaim registered and initialized and its pod bound.
func readyWorld(t *testing.T) (*scenarios.World, apisv1.NodeClaim, *corev1.Node) {
	t.Helper()
	w := world(t)
	for range 2 { // register, initialize
		if _, err := handler(w, w).Decide(context.Background(), w.Snapshot()); err != nil {
			t.Fatal(err)
		}
	}
	w.Schedule()
	nc, node := theClaim(t, w)
	if node == nil || condition(nc, apisv1.ConditionReady) != metav1.ConditionTrue {
		t.Fatalf("not ready: %+v", nc.Status.Conditions)
	}
	return w, nc, node
}

func deleting(snap *events.Snapshot, name string) bool {
	for _, nc := range snap.NodeClaims {
		if nc.Name == name {
			return nc.DeletionTimestamp != nil
		}
	}
	return false
}

// A Node whose kubelet stops reporting (Ready Unknown) is left alone for AWS's 30-minute
// toleration, then repaired: its NodeClaim is deleted, its pod deleted at once (no drain wait on a
// node no kubelet runs), its instance terminated and both objects released.
func TestRepairReplacesANodeWhoseReadyTurnsUnknown(t *testing.T) {
	w, nc, node := readyWorld(t)
	ctx := context.Background()
	h := handler(w, w)
	h.Now = w.Clock.Now
	if err := w.SetNodeCondition(node.Name, corev1.NodeReady, corev1.ConditionUnknown); err != nil {
		t.Fatal(err)
	}
	// 29 minutes later: inside the toleration (lastTransitionTime + 30m), nothing.
	w.Clock.Step(29 * time.Minute)
	out, err := h.Decide(ctx, w.Snapshot())
	if err != nil || len(out.Repaired) != 0 || deleting(w.Snapshot(), nc.Name) {
		t.Fatalf("before the toleration: repaired %v, err %v", out.Repaired, err)
	}
	// At 30 minutes: one of one node unhealthy (1 ≤ ceil(0.2 × 1) = 1), the breaker lets it through.
	w.Clock.Step(time.Minute)
	if out, err = h.Decide(ctx, w.Snapshot()); err != nil || len(out.Repaired) != 1 || out.Repaired[0] != node.Name {
		t.Fatalf("at the toleration: repaired %v, err %v", out.Repaired, err)
	}
	if !deleting(w.Snapshot(), nc.Name) {
		t.Fatal("the NodeClaim is not being deleted")
	}
	for range 4 {
		w.Clock.Step(time.Second)
		if _, err := h.Decide(ctx, w.Snapshot()); err != nil {
			t.Fatal(err)
		}
	}
	snap := w.Snapshot()
	if len(snap.NodeClaims) != 0 || w.Node(node.Name) != nil {
		t.Fatalf("after repair: %d NodeClaims, node left %v", len(snap.NodeClaims), w.Node(node.Name) != nil)
	}
	if inst, err := w.Cloud.Get(ctx, nc.Status.ProviderID); err == nil && inst.State == "running" {
		t.Fatal("instance still running")
	}
}

// The binaries hand the lifecycle function its provider wrapped by the metrics decorator
// (cloudflags.Setup, localdev): repair finds the cloud's policies through it (cloud.As follows
// Unwrap) and replaces the node at AWS's 30 minutes, and the repair is counted in
// karpenter_nodeclaims_unhealthy_disrupted_total{condition="ready"}.
func TestRepairThroughTheMetricsDecorator(t *testing.T) {
	w, nc, node := readyWorld(t)
	h := handler(w, w)
	rec := &telemetry.Memory{}
	h.Now, h.Metrics, h.Provider = w.Clock.Now, rec, cloudmetrics.Decorate(w.Cloud, rec, telemetry.ControllerOf(lifecycle.Component))
	if _, ok := h.Provider.(cloud.Repairer); ok {
		t.Fatal("the decorator implements cloud.Repairer itself: this test no longer shows cloud.As at work")
	}
	if err := w.SetNodeCondition(node.Name, corev1.NodeReady, corev1.ConditionUnknown); err != nil {
		t.Fatal(err)
	}
	w.Clock.Step(30 * time.Minute)
	out, err := h.Decide(context.Background(), w.Snapshot())
	if err != nil || len(out.Repaired) != 1 || out.Repaired[0] != node.Name || !deleting(w.Snapshot(), nc.Name) {
		t.Fatalf("through the decorator: repaired %v, err %v, want [%s]", out.Repaired, err, node.Name)
	}
	if got := rec.Value(telemetry.NodeClaimsUnhealthyDisrupted, "ready", nc.Labels[apisv1.LabelNodePool],
		nc.Labels[apisv1.LabelCapacityType], nc.Status.ImageID); got != 1 {
		t.Errorf("karpenter_nodeclaims_unhealthy_disrupted_total = %v, want 1", got)
	}
}

// --node-repair=false: the same node stays.
func TestRepairDisabled(t *testing.T) {
	w, nc, node := readyWorld(t)
	h := handler(w, w)
	h.Now, h.DisableRepair = w.Clock.Now, true
	if err := w.SetNodeCondition(node.Name, corev1.NodeReady, corev1.ConditionUnknown); err != nil {
		t.Fatal(err)
	}
	w.Clock.Step(2 * time.Hour)
	if out, err := h.Decide(context.Background(), w.Snapshot()); err != nil || len(out.Repaired) != 0 || deleting(w.Snapshot(), nc.Name) {
		t.Fatalf("repaired %v with repair disabled (err %v)", out.Repaired, err)
	}
}

// An instance terminated behind Dovetail's back (no notice): the first complete snapshot that
// misses it only records the suspicion; the second deletes the NodeClaim, and the termination
// path then deletes the Node without waiting for its pods (no kubelet runs them) and releases both.
func TestVanishedInstanceCollectedOnTheSecondSnapshot(t *testing.T) {
	w, nc, node := readyWorld(t)
	ctx := context.Background()
	h := handler(w, w)
	h.Now = w.Clock.Now
	if _, err := w.Cloud.Terminate(ctx, nc.Status.ProviderID); err != nil {
		t.Fatal(err)
	}
	// The node lifecycle controller marks the silent node Unknown (40 s without a heartbeat).
	w.Clock.Step(40 * time.Second)
	if err := w.SetNodeCondition(node.Name, corev1.NodeReady, corev1.ConditionUnknown); err != nil {
		t.Fatal(err)
	}
	first := w.Snapshot()
	if !first.Complete {
		t.Fatal("the World's snapshot is not complete")
	}
	if out, err := h.Decide(ctx, first); err != nil || len(out.Collected) != 0 {
		t.Fatalf("first snapshot: collected %v (err %v); want none yet", out.Collected, err)
	}
	// A redelivery of the same snapshot is no second sighting.
	if out, err := h.Decide(ctx, first); err != nil || len(out.Collected) != 0 {
		t.Fatalf("redelivered snapshot: collected %v (err %v)", out.Collected, err)
	}
	w.Clock.Step(10 * time.Second)
	if err := w.SetNodeCondition(node.Name, corev1.NodeReady, corev1.ConditionUnknown); err != nil { // another status write: a new revision
		t.Fatal(err)
	}
	second := w.Snapshot()
	if second.Revision <= first.Revision {
		t.Fatalf("revision %d after %d", second.Revision, first.Revision)
	}
	out, err := h.Decide(ctx, second)
	if err != nil || len(out.Collected) != 1 || out.Collected[0] != nc.Name {
		t.Fatalf("second snapshot: collected %v (err %v), want [%s]", out.Collected, err, nc.Name)
	}
	for range 4 {
		w.Clock.Step(time.Second)
		if _, err := h.Decide(ctx, w.Snapshot()); err != nil {
			t.Fatal(err)
		}
	}
	if snap := w.Snapshot(); len(snap.NodeClaims) != 0 || w.Node(node.Name) != nil {
		t.Fatalf("after collection: %d NodeClaims, node left %v", len(snap.NodeClaims), w.Node(node.Name) != nil)
	}
}

// An instance the cloud still lists, or a NodeClaim whose Node is still Ready, is never collected.
func TestRunningInstanceNotCollected(t *testing.T) {
	w, nc, node := readyWorld(t)
	ctx := context.Background()
	h := handler(w, w)
	h.Now = w.Clock.Now
	heartbeat := func() { // the kubelet's status write: each snapshot a new revision
		t.Helper()
		if err := w.SetNodeCondition(node.Name, corev1.NodeReady, corev1.ConditionTrue); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		w.Clock.Step(time.Minute)
		heartbeat()
		if out, err := h.Decide(ctx, w.Snapshot()); err != nil || len(out.Collected) != 0 {
			t.Fatalf("collected %v (err %v)", out.Collected, err)
		}
	}
	// Terminated, but its Node still says Ready: the kubelet runs, whatever the list says.
	if _, err := w.Cloud.Terminate(ctx, nc.Status.ProviderID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.Clock.Step(time.Second)
		heartbeat()
		if out, err := h.Decide(ctx, w.Snapshot()); err != nil || len(out.Collected) != 0 {
			t.Fatalf("Ready node: collected %v (err %v)", out.Collected, err)
		}
	}
}
