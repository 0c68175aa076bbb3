package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

// These tests run the agent against a real embedded NATS JetStream server and client-go's fake
// clientset and dynamic fake (no Kubernetes API runs offline). The fakes ignore field selectors,
// PDBs on eviction and resourceVersion conflicts; the real-control-plane e2e covers those.

const cluster = "test"

type env struct {
	kube      *fake.Clientset
	dyn       *dynamicfake.FakeDynamicClient
	publisher *qnats.Publisher
	stream    jetstream.Stream
	events    chan queue.Message // what a "provision" function would receive
	agent     *Agent
	ctx       context.Context
	metrics   *telemetry.Memory
	// prom is the same values in the Prometheus backend the agent binary serves on /metrics.
	prom *prom.Recorder
}

// tee records every value in each of its recorders.
type tee []telemetry.Recorder

func (t tee) Record(m *telemetry.Metric, value float64, labels ...string) {
	for _, r := range t {
		r.Record(m, value, labels...)
	}
}

func newEnv(t *testing.T, clk clock.WithTicker, idle, max, snapEvery time.Duration, objs ...runtime.Object) *env {
	t.Helper()
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := qnats.Connect(url, "agent-test", srv.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{ctx: ctx, events: make(chan queue.Message, 16), metrics: &telemetry.Memory{}, prom: prom.NewRecorder()}
	if e.stream, err = qnats.EnsureStream(ctx, nc, qnats.StreamConfig{Cluster: cluster, Memory: true}); err != nil {
		t.Fatal(err)
	}
	if e.publisher, err = qnats.NewPublisher(nc); err != nil {
		t.Fatal(err)
	}
	fast := []time.Duration{20 * time.Millisecond}
	cmds, err := qnats.NewConsumer(ctx, nc, qnats.ConsumerConfig{Cluster: cluster, Durable: "agent", Subject: queue.CommandsSubject(cluster), Backoff: fast})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := qnats.NewConsumer(ctx, nc, qnats.ConsumerConfig{Cluster: cluster, Durable: "provision", Subject: queue.EventsSubject(cluster), Backoff: fast})
	if err != nil {
		t.Fatal(err)
	}
	go evs.Consume(ctx, func(_ context.Context, m queue.Message) error { e.events <- m; return nil })

	e.kube = fake.NewClientset(objs...)
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kube.ListKinds)
	e.agent, err = New(Config{
		Cluster: cluster, Namespace: "dovetail-system", Kube: e.kube, Dynamic: e.dyn,
		Publisher: e.publisher, Commands: cmds, Clock: clk,
		BatchIdle: idle, BatchMax: max, SnapshotInterval: snapEvery, SyncTimeout: 10 * time.Second, Metrics: tee{e.metrics, e.prom},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent.Run: %v", err)
		}
	})
	return e
}

// waitSynced waits for the caches and for the agent to lead (its revisions reserved, the
// cluster facts read): snapshots built from then on are the ones it would publish.
func (e *env) waitSynced(t *testing.T) {
	t.Helper()
	select {
	case <-e.agent.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("agent caches not synced")
	}
	eventually(t, "the agent leading", e.agent.Leading)
}

func (e *env) nextEvent(t *testing.T) events.Envelope {
	t.Helper()
	select {
	case m := <-e.events:
		env, err := events.Decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		return env
	case <-time.After(10 * time.Second):
		t.Fatal("no event on the events subject")
		return events.Envelope{}
	}
}

func (e *env) publishCommand(t *testing.T, msgID string, cmd *events.Command) {
	t.Helper()
	data, err := events.NewEvent(cluster, "provision", events.TypeCommand, msgID, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.publisher.Publish(e.ctx, queue.CommandsSubject(cluster), msgID, data); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func testNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{apisv1.LabelNodePool: "default"}}}
}

// own makes the named nodes (created with testNode, so without a providerID) Dovetail's, as a
// launch does: a providerID "aws:///us-east-1a/i-<name>" on the Node and a NodeClaim carrying
// the agent's ownership mark that records it; it waits until the agent's cache has both.
func (e *env) own(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		pid := "aws:///us-east-1a/i-" + name
		n, err := e.kube.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.ProviderID = pid
		if _, err := e.kube.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name,
			Labels: map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent}},
			Status: apisv1.NodeClaimStatus{ProviderID: pid, NodeName: name}}
		u, err := kube.ToUnstructured(nc, apisv1.GroupVersion, "NodeClaim")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.dyn.Resource(kube.NodeClaimGVR).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, name+" owned in the agent's cache", func() bool {
			c, _ := e.agent.Watcher().NodeClaim("nc-" + name)
			n := e.agent.Watcher().Node(name)
			return c != nil && n != nil && n.Spec.ProviderID == pid
		})
	}
}

func testPod(name, nodeName string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if nodeName != "" {
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

func TestAgentPendingBatchAndCommands(t *testing.T) {
	// Real clock, Karpenter's windows (1 s idle, 10 s max): the three pods below must reach the
	// agent's informer within one idle window of each other, which a 200 ms window left little
	// room for on CI's loaded 2-core machine. The batch comes 1 s after the last pod.
	e := newEnv(t, clock.RealClock{}, DefaultBatchIdle, DefaultBatchMax, -1, testNode("n1"), testPod("running", "n1"))
	e.waitSynced(t)

	for _, name := range []string{"web-2", "web-0", "web-1"} {
		if _, err := e.kube.CoreV1().Pods("default").Create(e.ctx, testPod(name, ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env := e.nextEvent(t)
	if env.Type != events.TypePodsPending || env.Cluster != cluster || env.Component != Component {
		t.Fatalf("event %s from %s/%s, want %s from %s/%s", env.Type, env.Cluster, env.Component, events.TypePodsPending, cluster, Component)
	}
	pp, err := events.Codec{}.PodsPending(e.ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	// Three pods created well inside one 1 s idle window: one batch naming all three, and
	// the snapshot's pending pods are exactly them (the running pod is in Pods, on n1).
	if got := strings.Join(pp.Pods, ","); got != "default/web-0,default/web-1,default/web-2" {
		t.Fatalf("batch pods %s", got)
	}
	var pending []string
	for _, p := range pp.Snapshot.PendingPods {
		pending = append(pending, p.Namespace+"/"+p.Name)
	}
	if got := strings.Join(pending, ","); got != "default/web-0,default/web-1,default/web-2" ||
		len(pp.Snapshot.Pods) != 1 || pp.Snapshot.Pods[0].Name != "running" || len(pp.Snapshot.Nodes) != 1 {
		t.Fatalf("snapshot pending %s, pods %d, nodes %d", got, len(pp.Snapshot.Pods), len(pp.Snapshot.Nodes))
	}
	rev := pp.Snapshot.Revision
	e.own(t, "n1") // so that the drain below is refused for what changed on n1, not for whose it is

	// The function launched an instance and sends CreateNodeClaim; the queue redelivers it
	// under another message id (a retried function): still one NodeClaim.
	create := &events.Command{
		ID: events.CommandID(cluster, "create", "default-x1"), Kind: events.CommandCreateNodeClaim, Cluster: cluster, SnapshotRevision: rev,
		NodeClaim: &apisv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "default-x1", Labels: map[string]string{apisv1.LabelNodePool: "default"}, CreationTimestamp: metav1.NewTime(time.Now())},
			Spec:       apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"}},
			Status:     apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"},
		},
	}
	e.publishCommand(t, "cmd-1", create)
	e.publishCommand(t, "cmd-1-retry", create)
	eventually(t, "NodeClaim in the agent's cache", func() bool {
		nc, _ := e.agent.Watcher().NodeClaim("default-x1")
		return nc != nil && nc.Status.ProviderID == "aws:///us-east-1a/i-0123456789abcdef0"
	})

	// A stale drain (a pod bound to n1 after rev) is refused with an Event and acknowledged.
	if _, err := e.kube.CoreV1().Pods("default").Create(e.ctx, testPod("late", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "late pod observed", func() bool { return e.agent.Watcher().NodePodsChangedSince("n1", rev) })
	e.publishCommand(t, "cmd-2", &events.Command{ID: "drain-n1", Kind: events.CommandDrainNode, Cluster: cluster, SnapshotRevision: rev, NodeName: "n1"})
	eventually(t, "refusal Event", func() bool {
		l, _ := e.kube.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
		return len(l.Items) == 1 && l.Items[0].Reason == kube.ReasonCommandRefused && l.Items[0].InvolvedObject.Name == "n1"
	})

	// A message that is not a command event goes to the dead-letter subject with its reason.
	if err := e.publisher.Publish(e.ctx, queue.CommandsSubject(cluster), "junk-1", []byte(`{"hello":1}`)); err != nil {
		t.Fatal(err)
	}
	var dlq *jetstream.RawStreamMsg
	eventually(t, "dead-lettered message", func() bool {
		m, err := e.stream.GetLastMsgForSubject(e.ctx, queue.DeadLetterSubject(cluster))
		dlq = m
		return err == nil
	})
	if reason := dlq.Header.Get(qnats.HeaderDLQReason); !strings.Contains(reason, "poison") || !strings.Contains(reason, "specversion") {
		t.Fatalf("DLQ reason %q, want the poison reason naming specversion", reason)
	}
	list, err := e.dyn.Resource(kube.NodeClaimGVR).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("%d NodeClaims (%v), want 2 (n1's and default-x1)", len(list.Items), err)
	}
	// Only the stale drain was refused; only the junk was dead-lettered.
	info, _ := e.stream.Info(e.ctx, jetstream.WithSubjectFilter(queue.DeadLetterSubject(cluster)))
	if n := info.State.Subjects[queue.DeadLetterSubject(cluster)]; n != 1 {
		t.Fatalf("%d dead-lettered messages, want 1", n)
	}
}

func TestAgentSnapshotTimer(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, clk, 0, 0, 0, testNode("n1")) // SnapshotInterval 0: the 30 s default
	e.waitSynced(t)
	// The ticker is the only timer while no pod is pending.
	eventually(t, "snapshot ticker armed", clk.HasWaiters)
	clk.Step(29 * time.Second)
	select {
	case m := <-e.events:
		t.Fatalf("event before 30 s: %s", m.ID)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Second)
	env := e.nextEvent(t)
	if env.Type != events.TypeSnapshot {
		t.Fatalf("event type %s, want %s", env.Type, events.TypeSnapshot)
	}
	snap, err := events.Codec{}.Snapshot(e.ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Time.Time.Equal(clk.Now()) || len(snap.Nodes) != 1 || snap.Revision != e.agent.Watcher().Revision() {
		t.Fatalf("snapshot time %v nodes %d revision %d", snap.Time, len(snap.Nodes), snap.Revision)
	}
}

func TestHandleCommandOutcomes(t *testing.T) {
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, testNode("n1"))
	e.waitSynced(t)
	e.own(t, "n1")
	encode := func(cluster string, cmd *events.Command) []byte {
		data, err := events.NewEvent(cluster, "provision", events.TypeCommand, "m", cmd)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	other := encode("other", &events.Command{ID: "a", Kind: events.CommandDeleteNode, Cluster: "other", NodeName: "n1"})
	if err := e.agent.HandleCommand(e.ctx, queue.Message{Data: other}); !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "command.cluster") {
		t.Fatalf("foreign cluster: %v, want poison naming command.cluster", err)
	}
	// Encoded by hand: EncodeCommand itself refuses the invalid key.
	zw, _ := zstd.NewWriter(nil)
	bad, err := events.NewEvent(cluster, "provision", events.TypeCommand, "b", zw.EncodeAll([]byte(
		`{"id":"b","kind":"TaintNode","cluster":"`+cluster+`","nodeName":"n1","taint":{"key":"bad key!","effect":"NoSchedule"}}`), nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.agent.HandleCommand(e.ctx, queue.Message{Data: bad}); !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "command.taint.key") {
		t.Fatalf("invalid taint: %v, want poison naming command.taint.key", err)
	}
	// A command that cannot be decoded at all (a zstd bomb of 2,000,000 pod references) is poison.
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	bomb, err := events.NewEvent(cluster, "provision", events.TypeCommand, "bomb", enc.EncodeAll([]byte(
		`{"id":"x","kind":"NominatePods","cluster":"`+cluster+`","nodeName":"n1","pods":[{}`+strings.Repeat(`,{}`, 1_999_999)+`]}`), nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.agent.HandleCommand(e.ctx, queue.Message{Data: bomb}); !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "over a decoding limit") {
		t.Fatalf("command bomb: %v, want poison naming the decoding limit", err)
	}
	// A transient API failure asks for redelivery (not poison).
	var once sync.Once
	e.kube.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		fail := false
		once.Do(func() { fail = true })
		if fail {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	del := encode(cluster, &events.Command{ID: "c", Kind: events.CommandDeleteNode, Cluster: cluster, SnapshotRevision: e.agent.Watcher().Revision(), NodeName: "n1"})
	if err := e.agent.HandleCommand(e.ctx, queue.Message{Data: del}); err == nil || errors.Is(err, queue.ErrPoison) {
		t.Fatalf("transient failure: %v, want a retryable error", err)
	}
	if err := e.agent.HandleCommand(e.ctx, queue.Message{Data: del}); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

// A drain a PDB holds is acknowledged, not redelivered: the deciding function drains again on a
// later snapshot, and a redelivery with backoff would hold up every command behind it.
func TestHeldDrainIsAcknowledged(t *testing.T) {
	n1 := testNode("n1")
	n1.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, n1, testPod("guarded", "n1"))
	e.waitSynced(t)
	e.own(t, "n1")
	evictions := 0
	e.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		evictions++
		return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	})
	data, err := events.NewEvent(cluster, "consolidate", events.TypeCommand, "d", &events.Command{ID: "d", Kind: events.CommandDrainNode,
		Cluster: cluster, SnapshotRevision: e.agent.Watcher().Revision(), NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.agent.HandleCommand(e.ctx, queue.Message{Data: data}); err != nil {
		t.Fatalf("held drain: %v, want acknowledged", err)
	}
	if evictions != 1 {
		t.Fatalf("%d eviction calls, want 1 (the pod was tried, the PDB refused it)", evictions)
	}
}

// The agent's snapshots carry the cluster facts it discovered before the first one: here the
// kube-dns Service's clusterIP and its family (the fake API server reports no version and has no
// ServiceCIDR, so those stay empty rather than guessed).
func TestSnapshotCarriesClusterFacts(t *testing.T) {
	dns := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Spec: corev1.ServiceSpec{ClusterIP: "10.100.0.10"}}
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, testNode("n1"), dns)
	e.waitSynced(t)
	if err := e.agent.PublishSnapshot(e.ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := events.Codec{}.Snapshot(e.ctx, e.nextEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	want := events.ClusterFacts{ClusterDNSIP: "10.100.0.10", IPFamily: "ipv4"}
	if snap.ClusterFacts == nil || *snap.ClusterFacts != want {
		t.Fatalf("snapshot facts %+v, want %+v", snap.ClusterFacts, want)
	}
}
