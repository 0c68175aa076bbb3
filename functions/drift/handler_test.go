package drift_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/drift"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// The commands go to the scenarios' in-memory World, which applies them as the agent would
// (no NATS here: the transport is covered by the interruption and provision tests).

func setup(t *testing.T) (*scenarios.World, *drift.Handler) {
	t.Helper()
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{
			NodeClassRef:           &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
			TerminationGracePeriod: &metav1.Duration{Duration: time.Hour},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}}}}}
	class := apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.EC2NodeClassSpec{Role: "KarpenterNodeRole-test"}, Status: apisv1.EC2NodeClassStatus{AMIs: []apisv1.AMI{{ID: "ami-1"}}, InstanceProfile: "test_profile"}}
	w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{EC2: &class}})
	w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: ptr(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	ctx := context.Background()
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return w, &drift.Handler{Cluster: scenarios.Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Cloud, Publisher: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func ptr[T any](v T) *T { return &v }

func TestPoisonAndOtherEvents(t *testing.T) {
	_, h := setup(t)
	if err := h.Handle(context.Background(), queue.Message{Data: []byte("{}")}); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("want poison, got %v", err)
	}
	cmd := &events.Command{ID: "c1", Kind: events.CommandDeleteNode, Cluster: scenarios.Cluster, NodeName: "x"}
	data, err := events.NewEvent(scenarios.Cluster, "agent", events.TypeCommand, "c1", cmd)
	if err != nil {
		t.Fatal(err)
	}
	// Issue 25: one rule for event types in every function: a type drift does not handle is
	// dead-lettered with the reason, not acknowledged.
	if err := h.Handle(context.Background(), queue.Message{Data: data}); !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "is not handled by the drift function") {
		t.Fatalf("a command event is not for drift: want poison naming the function, got %v", err)
	}
}

// A node launched with ami-1 drifts when the class resolves ami-2. Step 1 launches the
// replacement and taints; the replacement is not registered, so no drain. If the drain then
// stays blocked for the NodeClaim's terminationGracePeriod (1 h) after the taint, the node is
// deleted anyway: at taint + 59 min it still waits, at taint + 60 min it is force-deleted.
func TestDriftStepsAndTerminationGracePeriod(t *testing.T) {
	w, h := setup(t)
	ctx := context.Background()
	snap := w.Snapshot()
	if len(snap.Nodes) != 1 || snap.NodeClaims[0].Status.ImageID != "ami-1" {
		t.Fatalf("want one node launched on ami-1 (launch records status.imageID), got %d nodes, image %q", len(snap.Nodes), snap.NodeClaims[0].Status.ImageID)
	}
	if d, _ := h.Decide(ctx, snap); len(d.Steps) != 0 {
		t.Fatalf("nothing drifted yet, got %v", d)
	}
	w.SetNodeClassAMIs("default", []apisv1.AMI{{ID: "ami-2"}})
	d, err := h.Decide(ctx, w.Snapshot())
	if err != nil || len(d.Steps) != 1 || d.Steps[0].Step != drift.StepStart || len(d.Steps[0].Launched) != 1 {
		t.Fatalf("want start with one replacement, got %v %v", d, err)
	}
	node := w.Node(snap.Nodes[0].Name)
	var drifted *corev1.Taint
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].Key == apisv1.TaintKeyDisrupted {
			drifted = &node.Spec.Taints[i]
		}
	}
	if drifted == nil || drifted.TimeAdded == nil || !drifted.TimeAdded.Time.Equal(w.Clock.Now()) {
		t.Fatalf("want the drifted taint with timeAdded = snapshot time, got %+v", node.Spec.Taints)
	}
	// The replacement never registers (its boot is not stepped): the drain cannot start.
	w.Clock.Step(59 * time.Minute)
	if d, _ = h.Decide(ctx, w.Snapshot()); d.Steps[0].Step != drift.StepWait {
		t.Fatalf("59 min after the taint: want wait, got %v", d)
	}
	w.Clock.Step(time.Minute)
	if d, _ = h.Decide(ctx, w.Snapshot()); d.Steps[0].Step != drift.StepForceDelete {
		t.Fatalf("60 min after the taint: want force-delete, got %v", d)
	}
	// Force-delete hands the node to the termination path: the NodeClaim is being deleted and
	// the lifecycle function drains the node, then terminates the instance and releases it.
	deleting := false
	for _, nc := range w.Snapshot().NodeClaims {
		if nc.Status.ProviderID == node.Spec.ProviderID {
			deleting = nc.DeletionTimestamp != nil
		}
	}
	if !deleting {
		t.Fatal("want the drifted node's NodeClaim being deleted")
	}
	for i := 0; i < 2 && w.Node(node.Name) != nil; i++ {
		if err := w.Lifecycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w.Node(node.Name) != nil {
		t.Fatal("the node must be gone after the termination path ran")
	}
	if inst, err := w.Cloud.Get(ctx, node.Spec.ProviderID); err == nil && inst.State == cloud.StateRunning {
		t.Fatalf("instance %s still running", inst.ID)
	}
}

// handleAt runs the handler on snap dated at, with the function's clock at now, and returns
// the decision it made (nil when none) and its error.
func handleAt(t *testing.T, h *drift.Handler, snap *events.Snapshot, at, now time.Time) (*drift.Decision, error) {
	t.Helper()
	s := *snap
	s.Time = metav1.NewTime(at)
	data, err := events.NewEvent(scenarios.Cluster, "agent", events.TypeSnapshot, "snap-"+at.String(), &s)
	if err != nil {
		t.Fatal(err)
	}
	var got *drift.Decision
	h.OnDecision = func(d drift.Decision) { got = &d }
	h.Now = func() time.Time { return now }
	err = h.Handle(context.Background(), queue.Message{Data: data, Attempt: 1})
	return got, err
}

// Expiry is read on the function's clock: a NodeClaim with expireAfter 1h created at T is not
// expired at T+59m by the function's clock, though the snapshot (dated 90 s ahead, within
// events.MaxClockSkew) would say T+60m30s; at T+60m it is. A snapshot dated a day ahead is
// poison naming snapshot.time (it would have expired every node); a stale one is skipped.
func TestExpiryReadsTheFunctionClock(t *testing.T) {
	w, h := setup(t)
	snap := w.Snapshot()
	hour := apisv1.MustParseNillableDuration("1h")
	snap.NodeClaims[0].Spec.ExpireAfter = hour
	created := snap.NodeClaims[0].CreationTimestamp.Time
	if d, err := handleAt(t, h, snap, created.Add(time.Hour+30*time.Second), created.Add(59*time.Minute)); err != nil || d != nil {
		t.Fatalf("at T+59m by the function's clock: decision %v, %v; want none", d, err)
	}
	d, err := handleAt(t, h, snap, created.Add(24*time.Hour), created.Add(time.Minute))
	if !errors.Is(err, queue.ErrPoison) || !errors.Is(err, events.ErrClockSkew) || !strings.Contains(err.Error(), "snapshot.time") || d != nil {
		t.Fatalf("a snapshot dated a day ahead: %v, %v; want poison naming snapshot.time", d, err)
	}
	if d, err := handleAt(t, h, snap, created.Add(time.Hour), created.Add(time.Hour+10*time.Minute)); err != nil || d != nil {
		t.Fatalf("a 10-minute-old snapshot: %v, %v; want skipped", d, err)
	}
	d, err = handleAt(t, h, snap, created.Add(time.Hour), created.Add(time.Hour))
	if err != nil || d == nil || len(d.Steps) != 1 || !strings.Contains(d.Steps[0].Why, "expire") {
		t.Fatalf("at T+60m: %v, %v; want the node replaced for expiry", d, err)
	}
}

// Expiry is forceful, as in Karpenter v1: an expired NodeClaim is handed to the termination
// path though its pool's budget allows no disruption and its pod carries
// karpenter.sh/do-not-disrupt, in the same decision that launches replacement capacity for its
// pods (issue 25, 7c): Karpenter's provisioner schedules the pods of nodes being deleted with the
// pending ones (sigs.k8s.io/karpenter pkg/controllers/provisioning/provisioner.go, Schedule), so
// the evicted pods do not wait for a pods-pending round; the hand-off does not wait for it.
func TestExpiryIsForceful(t *testing.T) {
	w, h := setup(t)
	snap := w.Snapshot()
	snap.NodeClaims[0].Spec.ExpireAfter = apisv1.MustParseNillableDuration("1h")
	snap.NodePools[0].Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "0"}}
	for i := range snap.Pods {
		snap.Pods[i].Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
	}
	before, _ := w.Cloud.List(context.Background(), scenarios.Cluster)
	created := snap.NodeClaims[0].CreationTimestamp.Time
	d, err := handleAt(t, h, snap, created.Add(time.Hour), created.Add(time.Hour))
	if err != nil || d == nil || len(d.Steps) != 1 || d.Steps[0].Step != drift.StepExpire || len(d.OverBudget)+len(d.Blocked) != 0 {
		t.Fatalf("decision %v, %v; want the expired node handed off despite budget 0 and do-not-disrupt", d, err)
	}
	after, _ := w.Cloud.List(context.Background(), scenarios.Cluster)
	// The scenario's one node is the expired one: with it left out its pods fit nowhere, so one
	// replacement is launched for them.
	if len(after) != len(before)+1 || len(d.Steps[0].Launched) != 1 {
		t.Fatalf("%d instances, was %d; launched %v: want one replacement for the expired node's pods", len(after), len(before), d.Steps[0].Launched)
	}
	// Found by name: the snapshot's order puts the replacement anywhere.
	expired := snap.NodeClaims[0].Name
	for _, nc := range w.Snapshot().NodeClaims {
		if nc.Name == expired && nc.DeletionTimestamp == nil {
			t.Fatal("the expired NodeClaim must be deleted (the termination path takes it from there)")
		}
	}
}

// A second message on a snapshot taken before the first one's taint was applied (the agent had
// not applied it yet) does not start the drifted node again: without the handler's memory of
// what it started (emit.Started) it launched a second replacement for the same node. Once
// disruption.ReplacementLock has passed with the start never showing (its taint refused, say),
// the node may be started again.
func TestADriftedNodeIsNotStartedTwiceOnAStaleSnapshot(t *testing.T) {
	w, h := setup(t)
	ctx := context.Background()
	w.SetNodeClassAMIs("default", []apisv1.AMI{{ID: "ami-2"}})
	before := w.Snapshot()
	d, err := h.Decide(ctx, before)
	if err != nil || len(d.Steps) != 1 || d.Steps[0].Step != drift.StepStart || len(d.Steps[0].Launched) != 1 {
		t.Fatalf("want start with one replacement, got %v %v", d, err)
	}
	d, err = h.Decide(ctx, before)
	if err != nil || len(d.Steps) != 1 || d.Steps[0].Step != drift.StepSkip || len(d.Steps[0].Launched) != 0 ||
		!strings.Contains(d.Steps[0].Detail, "started by an earlier message") {
		t.Fatalf("the same untainted snapshot again: want skip, nothing launched; got %+v %v", d.Steps, err)
	}
	if claims := len(w.Snapshot().NodeClaims); claims != 2 {
		t.Fatalf("%d NodeClaims, want the node's and one replacement", claims)
	}
	later := *before
	later.Time = metav1.NewTime(before.Time.Add(disruption.ReplacementLock))
	if d, err = h.Decide(ctx, &later); err != nil || len(d.Steps) != 1 || d.Steps[0].Step == drift.StepSkip {
		t.Fatalf("after the lock: want the node judged again, got %+v %v", d.Steps, err)
	}
}
