package interruption_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/runtime/functest"
)

// The handler publishes through a real embedded NATS JetStream server and the commands are read
// back from the stream. The cluster state comes from the scenarios' in-memory World (fake cloud
// over the real catalog, provision function's real launches).

type env struct {
	w     *scenarios.World
	h     *interruption.Handler
	snaps *interruption.LatestSnapshot
	cmds  *functest.Commands
}

// jetStream starts an embedded NATS JetStream server with the cluster's stream and returns a
// connection to it and a publisher, both closed with the test.
func jetStream(t *testing.T) (context.Context, *natsgo.Conn, *dnats.Publisher) {
	t.Helper()
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: scenarios.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := dnats.Connect(url, "test", srv.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := dnats.EnsureStream(ctx, nc, dnats.StreamConfig{Cluster: scenarios.Cluster, Memory: true}); err != nil {
		t.Fatal(err)
	}
	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, nc, pub
}

func newEnv(t *testing.T, pods int) *env {
	t.Helper()
	ctx, nc, pub := jetStream(t)
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge", "c5.large", "c5.xlarge"}}},
		}}}}}
	w.AddPools([]apisv1.NodePool{pool}, nil)
	for i := 0; i < pods; i++ {
		w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + string(rune('a'+i)), Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: ptr(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}}})
	}
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return envFor(ctx, t, nc, pub, w)
}

// envFor is the interruption handler over w's cloud (its provider) publishing to JetStream, with
// the commands it sends collected.
func envFor(ctx context.Context, t *testing.T, nc *natsgo.Conn, pub *dnats.Publisher, w *scenarios.World) *env {
	t.Helper()
	e := &env{w: w, snaps: &interruption.LatestSnapshot{Cluster: scenarios.Cluster}}
	e.h = &interruption.Handler{Cluster: scenarios.Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Provider, Publisher: pub,
		Snapshots: e.snaps, Now: w.Clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	e.cmds = functest.CollectCommands(ctx, t, nc, scenarios.Cluster)
	return e
}

func ptr[T any](v T) *T { return &v }

// kinds waits until n commands arrived and returns their kinds in order.
func (e *env) kinds(t *testing.T, n int) ([]events.Command, string) {
	t.Helper()
	got := e.cmds.Wait(t, n)
	ks := make([]string, 0, len(got))
	for _, c := range got {
		ks = append(ks, string(c.Kind))
	}
	return got, strings.Join(ks, ",")
}

func (e *env) spotNode(t *testing.T) corev1.Node {
	for _, n := range e.w.Snapshot().Nodes {
		return n
	}
	t.Fatal("no node")
	return corev1.Node{}
}

func sample(t *testing.T, name string) []byte {
	b, err := os.ReadFile("../../events/notices/testdata/aws/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMalformedNoticeIsPoison(t *testing.T) {
	e := newEnv(t, 1)
	for _, data := range [][]byte{[]byte(`{"hello":1}`), sample(t, "autoscaling_instance_terminate_lifecycle_action.json")} {
		err := e.h.Handle(context.Background(), queue.Message{Data: data})
		if !errors.Is(err, queue.ErrPoison) || !errors.Is(err, events.ErrMalformed) {
			t.Fatalf("want poison wrapping ErrMalformed, got %v", err)
		}
	}
}

func TestNoSnapshotYetKeepsNoticePending(t *testing.T) {
	e := newEnv(t, 1)
	n := e.spotNode(t)
	it, err := e.w.Cloud.Interrupt(n.Spec.ProviderID, fake.KindSpotInterruption)
	if err != nil {
		t.Fatal(err)
	}
	err = e.h.Handle(context.Background(), queue.Message{Data: scenarios.SpotNoticeJSON(it, "n-1"), Attempt: 1})
	if !errors.Is(err, interruption.ErrAwaitingSnapshot) || errors.Is(err, queue.ErrPoison) {
		t.Fatalf("want a retryable ErrAwaitingSnapshot, got %v", err)
	}
}

// A snapshot dated far from the function's clock is not trusted to say "newer than the notice":
// one dated 10 minutes ahead that does not list the instance (its agent's clock is wrong) must
// not drop the notice as "no node has the instance"; nor may a 10-minute-old one. The notice
// waits for a snapshot on time, then is acted on.
func TestSkewedSnapshotKeepsNoticePending(t *testing.T) {
	e := newEnv(t, 1)
	n := e.spotNode(t)
	it, err := e.w.Cloud.Interrupt(n.Spec.ProviderID, fake.KindSpotInterruption)
	if err != nil {
		t.Fatal(err)
	}
	notice := scenarios.SpotNoticeJSON(it, "n-1")
	for _, skew := range []time.Duration{10 * time.Minute, -10 * time.Minute} {
		snap := e.w.Snapshot()
		snap.Nodes, snap.NodeClaims, snap.Pods = nil, nil, nil
		snap.Time = metav1.NewTime(e.w.Clock.Now().Add(skew))
		e.snaps.Set(snap)
		err = e.h.Handle(context.Background(), queue.Message{Data: notice, Attempt: 1})
		if !errors.Is(err, interruption.ErrAwaitingSnapshot) || !errors.Is(err, events.ErrClockSkew) {
			t.Fatalf("a snapshot %s off: %v, want ErrAwaitingSnapshot naming the skew", skew, err)
		}
		e.snaps = &interruption.LatestSnapshot{Cluster: scenarios.Cluster}
		e.h.Snapshots = e.snaps
	}
	e.snaps.Set(e.w.Snapshot())
	if err := e.h.Handle(context.Background(), queue.Message{Data: notice, Attempt: 2}); err != nil && !errors.Is(err, interruption.ErrAwaitingReplacement) {
		t.Fatalf("on a snapshot on time: %v", err)
	}
	if _, got := e.kinds(t, 1); !strings.HasPrefix(got, string(events.CommandMarkUnavailable)) {
		t.Fatalf("commands %s, want the interruption acted on", got)
	}
}

// Two pods of 500m on one spot node, no other node: the replacement must be launched at once,
// in this order: mark the offering, create the replacement, taint; no drain yet (it is not ready
// and the deadline rule's start, notice + 120 s − 15 s − 30 s = +75 s, is not reached). At
// notice + 80 s the drain is forced by the rule even though nothing changed, and the redelivery
// launches nothing twice.
func TestSpotInterruptionReplacesBeforeDraining(t *testing.T) {
	e := newEnv(t, 2)
	n := e.spotNode(t)
	it, err := e.w.Cloud.Interrupt(n.Spec.ProviderID, fake.KindSpotInterruption)
	if err != nil {
		t.Fatal(err)
	}
	e.snaps.Set(e.w.Snapshot())
	msg := queue.Message{Data: scenarios.SpotNoticeJSON(it, "n-1"), Attempt: 1}
	if err := e.h.Handle(context.Background(), msg); !errors.Is(err, interruption.ErrAwaitingReplacement) {
		t.Fatalf("want ErrAwaitingReplacement, got %v", err)
	}
	cmds, kinds := e.kinds(t, 3)
	if kinds != "MarkOfferingsUnavailable,CreateNodeClaim,TaintNode" {
		t.Fatalf("want mark, create, taint; got %s", kinds)
	}
	m := cmds[0].Unavailable[0]
	if m.InstanceType != n.Labels[corev1.LabelInstanceTypeStable] || m.Zone != n.Labels[corev1.LabelTopologyZone] || m.CapacityType != "spot" {
		t.Fatalf("marked %+v, want the node's offering", m)
	}
	if want := it.Time.Add(3 * time.Minute); !m.Expires.Time.Equal(want) {
		t.Fatalf("mark expires %v, want notice + 3 min", m.Expires)
	}
	repl := cmds[1].NodeClaim
	if repl.Labels[corev1.LabelInstanceTypeStable] == m.InstanceType && repl.Labels[corev1.LabelTopologyZone] == m.Zone {
		t.Fatalf("replacement %s landed on the interrupted offering", repl.Name)
	}
	if tt := cmds[2].Taint; tt.Key != apisv1.TaintKeyDisrupted || tt.Effect != corev1.TaintEffectNoSchedule || cmds[2].NodeName != n.Name {
		t.Fatalf("taint %+v on %s", tt, cmds[2].NodeName)
	}
	// 80 s after the notice, past the drain start at +75 s, on a snapshot that shows the taint
	// (the notice waits for one: a taint the agent refused as stale would be sent again).
	e.w.Clock.SetTime(it.Time.Add(80 * time.Second))
	for _, c := range cmds[1:3] { // the agent applied the replacement's NodeClaim and the taint
		applied, err := events.NewEvent(scenarios.Cluster, "agent", events.TypeCommand, c.ID, &c)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.w.Publish(context.Background(), queue.CommandsSubject(scenarios.Cluster), c.ID, applied); err != nil {
			t.Fatal(err)
		}
	}
	e.snaps.Set(e.w.Snapshot())
	msg.Attempt = 2
	// The drain is asked for; the notice stays (re-driven) until a snapshot shows the pods gone.
	if err := e.h.Handle(context.Background(), msg); !errors.Is(err, interruption.ErrAwaitingDrain) {
		t.Fatalf("want the drain at +80 s and the notice kept until the pods are gone, got %v", err)
	}
	// The redelivery repeats the mark with the same command ID (the stream's deduplication drops
	// it), the replacement in flight takes the pods and the node is tainted: only the drain is new.
	cmds, kinds = e.kinds(t, 4)
	if kinds != "MarkOfferingsUnavailable,CreateNodeClaim,TaintNode,DrainNode" {
		t.Fatalf("want the repeats deduplicated and one drain, got %s", kinds)
	}
	if st := e.w.Cloud.Stats(); st.Launches != 2 {
		t.Fatalf("want 2 launches (the node and one replacement), got %d", st.Launches)
	}
	last := cmds[len(cmds)-1]
	if last.Kind != events.CommandDrainNode || last.NodeName != n.Name || !strings.Contains(last.Reason, "drain must start by") {
		t.Fatalf("want a forced drain of %s, got %+v", n.Name, last)
	}
}

func TestRebalancePolicy(t *testing.T) {
	e := newEnv(t, 1)
	n := e.spotNode(t)
	e.snaps.Set(e.w.Snapshot())
	id := n.Spec.ProviderID[strings.LastIndexByte(n.Spec.ProviderID, '/')+1:]
	data := []byte(strings.ReplaceAll(string(sample(t, "ec2_instance_rebalance_recommendation.json")), "i-1234567890abcdef0", id))
	var got interruption.Decision
	e.h.OnDecision = func(d interruption.Decision) { got = d }
	if err := e.h.Handle(context.Background(), queue.Message{Data: data}); err != nil || got.Action != "record" {
		t.Fatalf("Record policy: want record, got %q %v", got.Action, err)
	}
	e.h.Rebalance = interruption.RebalanceReplace
	err := e.h.Handle(context.Background(), queue.Message{Data: data})
	if !errors.Is(err, interruption.ErrAwaitingReplacement) || got.Action != "replace" || len(got.Launched) != 1 || len(got.Marked) != 0 {
		t.Fatalf("Replace policy: want a replacement, no mark, waiting; got %+v %v", got, err)
	}
}

func TestStateChangeCleansUp(t *testing.T) {
	e := newEnv(t, 1)
	n := e.spotNode(t)
	e.snaps.Set(e.w.Snapshot())
	id := n.Spec.ProviderID[strings.LastIndexByte(n.Spec.ProviderID, '/')+1:]
	data := []byte(strings.ReplaceAll(string(sample(t, "ec2_instance_state_change_terminated.json")), "i-1234567890abcdef0", id))
	if err := e.h.Handle(context.Background(), queue.Message{Data: data}); err != nil {
		t.Fatal(err)
	}
	// The NodeClaim is handed to the termination path, which removes the Node with it.
	cmds, kinds := e.kinds(t, 1)
	if kinds != "DeleteNodeClaim" || cmds[0].NodeClaim == nil || cmds[0].NodeClaim.Name == "" {
		t.Fatalf("want DeleteNodeClaim of %s's NodeClaim, got %s", n.Name, kinds)
	}
	// running: nothing to do. An instance of another cluster: recorded, not acted on.
	run := []byte(strings.ReplaceAll(string(sample(t, "ec2_instance_state_change_running.json")), "i-1234567890abcdef0", id))
	var got interruption.Decision
	e.h.OnDecision = func(d interruption.Decision) { got = d }
	if err := e.h.Handle(context.Background(), queue.Message{Data: run}); err != nil || got.Action != "record" {
		t.Fatalf("running: want record, got %q %v", got.Action, err)
	}
	if err := e.h.Handle(context.Background(), queue.Message{Data: sample(t, "aws_health_scheduled_change_instance_retirement.json")}); err != nil || got.Action != "record" {
		t.Fatalf("unknown instance: want record, got %q %v", got.Action, err)
	}
}

// A node held by a karpenter.sh/disrupted taint no Dovetail function owns (here "maintenance",
// an operator's) is taken over by the interruption: its TaintNode replaces that taint with
// interrupted, so the stray-taint cleanup (disruption.StrayTaints, which removes unowned values
// after StrayTaintTimeout) cannot lift it from under the drain, and a later notice counts the
// node as evacuating.
func TestInterruptionTakesOverAStrayTaint(t *testing.T) {
	e := newEnv(t, 1)
	n := e.spotNode(t)
	stray := events.Command{ID: "operator-taint", Kind: events.CommandTaintNode, Cluster: scenarios.Cluster, NodeName: n.Name,
		Taint: &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	applied, err := events.NewEvent(scenarios.Cluster, "operator", events.TypeCommand, stray.ID, &stray)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.w.Publish(context.Background(), queue.CommandsSubject(scenarios.Cluster), stray.ID, applied); err != nil {
		t.Fatal(err)
	}
	it, err := e.w.Cloud.Interrupt(n.Spec.ProviderID, fake.KindSpotInterruption)
	if err != nil {
		t.Fatal(err)
	}
	e.snaps.Set(e.w.Snapshot())
	if err := e.h.Handle(context.Background(), queue.Message{Data: scenarios.SpotNoticeJSON(it, "n-1"), Attempt: 1}); !errors.Is(err, interruption.ErrAwaitingReplacement) {
		t.Fatalf("want ErrAwaitingReplacement, got %v", err)
	}
	cmds, kinds := e.kinds(t, 3)
	if kinds != "MarkOfferingsUnavailable,CreateNodeClaim,TaintNode" {
		t.Fatalf("want mark, create, taint (the stray taint taken over); got %s", kinds)
	}
	taint := cmds[2]
	if taint.NodeName != n.Name || taint.Taint.Value != disruption.TaintValueInterrupted {
		t.Fatalf("taint %+v on %s, want %s=%s on %s", taint.Taint, taint.NodeName, apisv1.TaintKeyDisrupted, disruption.TaintValueInterrupted, n.Name)
	}
	applied, err = events.NewEvent(scenarios.Cluster, "agent", events.TypeCommand, taint.ID, &taint)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.w.Publish(context.Background(), queue.CommandsSubject(scenarios.Cluster), taint.ID, applied); err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, tt := range e.w.Node(n.Name).Spec.Taints {
		if tt.Key == apisv1.TaintKeyDisrupted {
			values = append(values, tt.Value)
		}
	}
	if len(values) != 1 || values[0] != disruption.TaintValueInterrupted {
		t.Fatalf("node's %s values %q, want only %q", apisv1.TaintKeyDisrupted, values, disruption.TaintValueInterrupted)
	}
	// Past the stray timeout the cleanup finds nothing of its own on the node.
	snap := e.w.Snapshot()
	later := it.Time.Add(disruption.StrayTaintTimeout + time.Minute)
	state, err := disruption.NewState(snap, e.w.Catalog, e.w.NodeSettings)
	if err != nil {
		t.Fatal(err)
	}
	if got := disruption.StrayTaints(state, later); len(got) != 0 {
		t.Fatalf("stray taints %+v, want none: the interruption owns the node", got)
	}
}
