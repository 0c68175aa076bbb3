package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// The cluster is the scenarios' in-memory World, which applies commands as the agent does
// (finalizers and deletion timestamps included); the cloud is the fake over the real catalog,
// launched into by the real provision function.

// crashing publishes through the World but fails the publish numbered failAt (1-based), as a
// function killed at that line would: the rest of the invocation never happens.
type crashing struct {
	w      *scenarios.World
	calls  int
	failAt int
}

var errKilled = errors.New("function killed")

func (c *crashing) Publish(ctx context.Context, subject, id string, data []byte) error {
	c.calls++
	if c.calls == c.failAt {
		return errKilled
	}
	return c.w.Publish(ctx, subject, id, data)
}

func world(t *testing.T) *scenarios.World {
	t.Helper()
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	grace := metav1.Duration{Duration: 10 * time.Minute}
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{
			NodeClassRef:           &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
			TerminationGracePeriod: &grace,
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}}}}}
	w.AddPools([]apisv1.NodePool{pool}, nil)
	yes := true
	w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	if _, err := w.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Clock.Step(30 * time.Second) // the instance boots and its kubelet registers the Node
	if err := w.Cloud.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

func handler(w *scenarios.World, pub queue.Publisher) *lifecycle.Handler {
	return &lifecycle.Handler{Cluster: scenarios.Cluster, Provider: w.Cloud, Publisher: pub, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func theClaim(t *testing.T, w *scenarios.World) (apisv1.NodeClaim, *corev1.Node) {
	t.Helper()
	snap := w.Snapshot()
	if len(snap.NodeClaims) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(snap.NodeClaims))
	}
	nc := snap.NodeClaims[0]
	for i := range snap.Nodes {
		if snap.Nodes[i].Spec.ProviderID == nc.Status.ProviderID {
			return nc, &snap.Nodes[i]
		}
	}
	return nc, nil
}

func condition(nc apisv1.NodeClaim, typ string) metav1.ConditionStatus {
	for _, c := range nc.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// A crash between RegisterNode and SetNodeClaimStatus: the redelivered snapshot finishes the
// registration; then initialization makes the NodeClaim Ready.
func TestRegistrationSurvivesACrash(t *testing.T) {
	w := world(t)
	ctx := context.Background()
	nc, node := theClaim(t, w)
	if node == nil || !hasTaint(node, apisv1.TaintKeyUnregistered) || node.Labels[apisv1.LabelCapacityType] != "" {
		t.Fatalf("the kubelet's node: %+v; want it registered with karpenter.sh/unregistered and without the offering labels", node)
	}
	snap := w.Snapshot()
	if _, err := handler(w, &crashing{w: w, failAt: 2}).Decide(ctx, snap); !errors.Is(err, errKilled) {
		t.Fatalf("err %v, want the crash", err)
	}
	if _, n := theClaim(t, w); hasTaint(n, apisv1.TaintKeyUnregistered) == false && condition(nc, apisv1.ConditionRegistered) == metav1.ConditionTrue {
		t.Fatal("the status cannot be written before the crash point")
	}
	if _, err := handler(w, w).Decide(ctx, snap); err != nil { // redelivery of the same message
		t.Fatal(err)
	}
	nc, node = theClaim(t, w)
	if condition(nc, apisv1.ConditionRegistered) != metav1.ConditionTrue || nc.Status.NodeName != node.Name || hasTaint(node, apisv1.TaintKeyUnregistered) ||
		node.Labels[apisv1.LabelCapacityType] != "on-demand" || node.Labels[apisv1.LabelInstanceFamily] != "m5" || len(node.Finalizers) != 1 {
		t.Fatalf("after redelivery: claim %+v, node labels %v taints %v finalizers %v", nc.Status, node.Labels, node.Spec.Taints, node.Finalizers)
	}
	if _, err := handler(w, w).Decide(ctx, w.Snapshot()); err != nil {
		t.Fatal(err)
	}
	nc, node = theClaim(t, w)
	if condition(nc, apisv1.ConditionInitialized) != metav1.ConditionTrue || condition(nc, apisv1.ConditionReady) != metav1.ConditionTrue ||
		node.Labels[apisv1.LabelNodeInitialized] != "true" {
		t.Fatalf("after initialization: %+v, node labels %v", nc.Status.Conditions, node.Labels)
	}
}

// kubectl delete nodeclaim, with the function killed at each publish of the termination in
// turn: every run ends with the instance terminated, the Node and the NodeClaim gone and no
// finalizer left.
func TestTerminationSurvivesACrashAtEveryStep(t *testing.T) {
	for failAt := 1; failAt <= 8; failAt++ {
		w := world(t)
		ctx := context.Background()
		for i := 0; i < 2; i++ { // register, initialize
			if _, err := handler(w, w).Decide(ctx, w.Snapshot()); err != nil {
				t.Fatal(err)
			}
		}
		w.Schedule()
		nc, node := theClaim(t, w)
		if err := w.DeleteNodeClaim(nc.Name); err != nil {
			t.Fatal(err)
		}
		crashed := false
		pub := &crashing{w: w, failAt: failAt}
		for step := 0; step < 10; step++ {
			w.Clock.Step(time.Second)
			_, err := handler(w, pub).Decide(ctx, w.Snapshot())
			if errors.Is(err, errKilled) {
				crashed = true
				continue // redelivered: the next snapshot decides again
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if !crashed {
			continue // fewer publishes than failAt
		}
		snap := w.Snapshot()
		if len(snap.NodeClaims) != 0 || w.Node(node.Name) != nil {
			t.Fatalf("crash at publish %d: %d NodeClaims, node %v left", failAt, len(snap.NodeClaims), w.Node(node.Name) != nil)
		}
		if inst, err := w.Cloud.Get(ctx, nc.Status.ProviderID); err == nil && inst.State == cloud.StateRunning {
			t.Fatalf("crash at publish %d: instance still running", failAt)
		}
		if len(w.Lost) != 0 {
			t.Fatalf("crash at publish %d: pods lost %v", failAt, w.Lost)
		}
	}
}

// A launch whose Node never registers is reaped after the (shortened) registration TTL: the
// NodeClaim is deleted, the instance terminated, the offering marked.
func TestLivenessReapsALaunchThatNeverRegisters(t *testing.T) {
	w := scenarios.NewWorld(scenarios.Start, time.Hour, nil) // the instance would boot in an hour
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"}}}}}
	w.AddPools([]apisv1.NodePool{pool}, nil)
	w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}})
	ctx := context.Background()
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	nc, _ := theClaim(t, w)
	h := handler(w, w)
	h.Options.RegistrationTTL = 2 * time.Minute
	for i := 0; i < 4; i++ {
		w.Clock.Step(time.Minute)
		if _, err := h.Decide(ctx, w.Snapshot()); err != nil {
			t.Fatal(err)
		}
	}
	snap := w.Snapshot()
	if len(snap.NodeClaims) != 0 {
		t.Fatalf("NodeClaim still there: %+v", snap.NodeClaims[0].ObjectMeta)
	}
	if inst, err := w.Cloud.Get(ctx, nc.Status.ProviderID); err == nil && inst.State == cloud.StateRunning {
		t.Fatal("instance still running")
	}
	marked := false
	for _, m := range snap.UnavailableOfferings {
		marked = marked || (m.InstanceType == nc.Labels[corev1.LabelInstanceTypeStable] && m.Reason == "RegistrationTimeout")
	}
	if !marked {
		t.Fatalf("offering not marked: %+v", snap.UnavailableOfferings)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// A NodeClaim being deleted whose instance is not tagged for this cluster: the provider refuses
// to terminate it, the finalizer stays, and the refusal is poison (dead-lettered at once with
// the reason), not a transient failure redelivered for a minute.
func TestForeignInstanceTerminationIsPoison(t *testing.T) {
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	foreign := cloud.Instance{ID: "i-0f0f0f0f0f0f0f0f0", Zone: "us-east-1a", InstanceType: "m5.large", CapacityType: "on-demand",
		State: cloud.StateRunning, Tags: map[string]string{apisv1.TagCluster: "someone-else"}}
	if err := w.Cloud.AddInstance(foreign); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(scenarios.Start)
	nc := apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-foreign", UID: "uid-f", DeletionTimestamp: &now,
		Finalizers: []string{events.FinalizerTermination}, Labels: map[string]string{apisv1.LabelNodePool: "default"}},
		Status: apisv1.NodeClaimStatus{ProviderID: cloud.AWSProviderID("us-east-1a", foreign.ID)}}
	snap := &events.Snapshot{Cluster: scenarios.Cluster, Revision: 5, Time: now, NodeClaims: []apisv1.NodeClaim{nc}}
	out, err := handler(w, w).Decide(context.Background(), snap)
	if !errors.Is(err, queue.ErrPoison) || !errors.Is(err, cloud.ErrNotOwned) || !strings.Contains(err.Error(), "someone-else") {
		t.Fatalf("err %v, want poison naming the foreign tag", err)
	}
	for _, c := range w.Commands {
		if c.Kind == events.CommandRemoveFinalizer {
			t.Errorf("finalizer removed for an instance still running: %+v", c)
		}
	}
	if len(out.Terminated) != 0 {
		t.Errorf("terminated %v", out.Terminated)
	}
	if got, _ := w.Cloud.Get(context.Background(), nc.Status.ProviderID); got.State != cloud.StateRunning {
		t.Errorf("foreign instance %s, want running", got.State)
	}
}

// discard accepts every command without applying it.
type discard struct{}

func (discard) Publish(context.Context, string, string, []byte) error { return nil }

// The registration TTL (15 minutes) is read on the function's clock: a launch whose node never
// registered is reaped once the function's clock says 15 minutes, not when a snapshot dated
// 90 s ahead (within events.MaxClockSkew) says so; a snapshot dated an hour ahead, which would
// have reaped every launch in flight, is poison naming snapshot.time.
func TestRegistrationTTLReadsTheFunctionClock(t *testing.T) {
	w := world(t)
	snap := w.Snapshot()
	snap.Nodes, snap.Pods = nil, nil // the instance never registered a node
	created := snap.NodeClaims[0].CreationTimestamp.Time
	h := handler(w, discard{})
	reaped := func(at, now time.Time) (bool, error) {
		s := *snap
		s.Time = metav1.NewTime(at)
		data, err := events.NewEvent(scenarios.Cluster, "agent", events.TypeSnapshot, "snap-"+at.String(), &s)
		if err != nil {
			t.Fatal(err)
		}
		var out lifecycle.Outcome
		h.OnDecision = func(o lifecycle.Outcome) { out = o }
		h.Now = func() time.Time { return now }
		err = h.Handle(context.Background(), queue.Message{Data: data, Attempt: 1})
		for _, c := range out.Commands {
			if c.Kind == events.CommandDeleteNodeClaim {
				return true, err
			}
		}
		return false, err
	}
	if got, err := reaped(created.Add(15*time.Minute+30*time.Second), created.Add(14*time.Minute)); err != nil || got {
		t.Fatalf("at 14 minutes by the function's clock: reaped %v, %v; want kept", got, err)
	}
	got, err := reaped(created.Add(time.Hour), created.Add(time.Minute))
	if !errors.Is(err, queue.ErrPoison) || !errors.Is(err, events.ErrClockSkew) || !strings.Contains(err.Error(), "snapshot.time") || got {
		t.Fatalf("a snapshot dated an hour ahead: reaped %v, %v; want poison naming snapshot.time", got, err)
	}
	if got, err := reaped(created.Add(15*time.Minute), created.Add(15*time.Minute)); err != nil || !got {
		t.Fatalf("at 15 minutes: reaped %v, %v; want the launch reaped", got, err)
	}
}

// The termination finalizers are released with the cloud's word on the instance: the agent has no
// cloud credentials and lets a NodeClaim or Node go only on this evidence (shared/kube
// ownership.go). The fake cloud terminates at once, as EC2 TerminateInstances moves a running
// instance to shutting-down and then terminated.
func TestFinalizerReleaseCarriesTheInstanceState(t *testing.T) {
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	own := cloud.Instance{ID: "i-0e0e0e0e0e0e0e0e0", Zone: "us-east-1a", InstanceType: "m5.large", CapacityType: "on-demand",
		State: cloud.StateRunning, Tags: map[string]string{apisv1.TagCluster: scenarios.Cluster}}
	if err := w.Cloud.AddInstance(own); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(scenarios.Start)
	pid := cloud.AWSProviderID("us-east-1a", own.ID)
	nc := apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-own", UID: "uid-o", DeletionTimestamp: &now,
		Finalizers: []string{events.FinalizerTermination}, Labels: map[string]string{apisv1.LabelNodePool: "default"}},
		Status: apisv1.NodeClaimStatus{ProviderID: pid}}
	snap := &events.Snapshot{Cluster: scenarios.Cluster, Revision: 5, Time: now, NodeClaims: []apisv1.NodeClaim{nc}}
	out, err := handler(w, w).Decide(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Terminated) != 1 || out.Terminated[0] != pid {
		t.Fatalf("terminated %v, want [%s]", out.Terminated, pid)
	}
	got, err := w.Cloud.Get(context.Background(), pid)
	want := events.InstanceNotFound
	if err == nil {
		want = got.State // shutting-down or terminated
	}
	released := 0
	for _, c := range w.Commands {
		if c.Kind != events.CommandRemoveFinalizer {
			continue
		}
		released++
		if c.Instance == nil || c.Instance.ProviderID != pid || c.Instance.State != want {
			t.Errorf("RemoveFinalizer %s carries %+v, want {%s %s}", c.ID, c.Instance, pid, want)
		}
	}
	if released != 1 {
		t.Errorf("%d RemoveFinalizer commands, want 1 (the NodeClaim's)", released)
	}
}

// A lifecycle function that fell behind its queue acknowledges an event holding an older snapshot
// than one it decided on without reading its payload: here the older event's payload is not a
// snapshot at all, which is poison when it is read. The same revision again is decided (the
// agent's tick of an unchanged cluster), and so is a redelivery of the older event.
func TestBackloggedSnapshotsAreSkippedUnread(t *testing.T) {
	w := world(t)
	snap := w.Snapshot()
	h := handler(w, discard{})
	h.Now = func() time.Time { return snap.Time.Time }
	decisions := 0
	h.OnDecision = func(lifecycle.Outcome) { decisions++ }
	newest := snap.Revision + 10
	event := func(rev int64, payload any) []byte {
		t.Helper()
		raw, err := events.NewEvent(scenarios.Cluster, "agent", events.TypeSnapshot, fmt.Sprintf("snap-%d", rev), payload, events.WithRevision(rev))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	s := *snap
	s.Revision = newest
	current := event(newest, &s)
	if err := h.Handle(context.Background(), queue.Message{Data: current, Attempt: 1}); err != nil || decisions != 1 {
		t.Fatalf("newest event: %v, %d decisions; want one decision", err, decisions)
	}
	older := event(newest-3, []byte("not a zstd snapshot"))
	if err := h.Handle(context.Background(), queue.Message{Data: older, Attempt: 1}); err != nil || decisions != 1 {
		t.Fatalf("older event: %v, %d decisions; want it acknowledged unread, no new decision", err, decisions)
	}
	if err := h.Handle(context.Background(), queue.Message{Data: older, Attempt: 2}); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("a redelivery of the older event: %v; want it read (and poison here)", err)
	}
	if err := h.Handle(context.Background(), queue.Message{Data: current, Attempt: 1}); err != nil || decisions != 2 {
		t.Fatalf("the newest revision again: %v, %d decisions; want it decided again (a tick)", err, decisions)
	}
}
