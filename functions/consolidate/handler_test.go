package consolidate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
)

// The function runs against real parts: an embedded NATS JetStream server carries its commands,
// the fake cloud (in-memory, over the real catalog) launches and terminates instances.

const cluster = "test"

var now = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	h     *Handler
	cloud *fake.Cloud
	cons  jetstream.Consumer
}

func newEnv(t *testing.T) *env {
	srv, url, err := natsembed.Run(natsembed.Options{StoreDir: t.TempDir(), Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := dnats.Connect(url, t.Name(), srv.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := context.Background()
	stream, err := dnats.EnsureStream(ctx, nc, dnats.StreamConfig{Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "reader", FilterSubject: queue.CommandsSubject(cluster), AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	c := fake.New(fake.Options{Catalog: catalog.MustAWS(), Cluster: cluster, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := &Handler{Cluster: cluster, Catalog: catalog.MustAWS(), NodeSettings: cloud.NodeSettingsFor, Provider: c, Publisher: pub,
		Codec: events.Codec{Blobs: &events.MemoryBlobStore{}}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &env{t: t, h: h, cloud: c, cons: cons}
}

// commands reads the commands published since the last call.
func (e *env) commands() []events.Command {
	e.t.Helper()
	var out []events.Command
	for {
		batch, err := e.cons.Fetch(100, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			e.t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			env, err := events.Decode(m.Data())
			if err != nil {
				e.t.Fatal(err)
			}
			c, err := e.h.Codec.Command(context.Background(), env)
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, *c)
			_ = m.Ack()
		}
		if n == 0 {
			return out
		}
	}
}

func (e *env) handle(s *events.Snapshot) Outcome {
	e.t.Helper()
	data, err := e.h.Codec.NewEvent(context.Background(), cluster, "agent", events.TypeSnapshot, "snap-"+time.Now().String(), s)
	if err != nil {
		e.t.Fatal(err)
	}
	var out Outcome
	e.h.OnOutcome = func(o Outcome) { out = o }
	e.h.Now = func() time.Time { return s.Time.Time } // the function's clock agrees with the agent's
	if err := e.h.Handle(context.Background(), queue.Message{Data: data, Attempt: 1}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func pool() apisv1.NodePool {
	after := apisv1.MustParseNillableDuration("0s")
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "np"}}
	np.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
	}
	np.Spec.Disruption = apisv1.Disruption{ConsolidationPolicy: apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: &after, Budgets: []apisv1.Budget{{Nodes: "10%"}}}
	return np
}

func node(name, it, pid string) (corev1.Node, apisv1.NodeClaim) {
	t := catalog.MustAWS().Get(it)
	labels := map[string]string{apisv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: it, corev1.LabelTopologyZone: "us-east-1a",
		apisv1.LabelCapacityType: "on-demand", corev1.LabelHostname: name}
	for k, v := range t.Labels {
		labels[k] = v
	}
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Allocatable: t.Allocatable(), Capacity: t.Capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	nc := apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name, UID: types.UID("uid-" + name), Labels: map[string]string{apisv1.LabelNodePool: "default"}},
		Status: apisv1.NodeClaimStatus{NodeName: name, ProviderID: pid}}
	return n, nc
}

func pod(name, nodeName string) corev1.Pod {
	ctrl := true
	st := metav1.NewTime(now.Add(-time.Hour))
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: st,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: &ctrl}}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &st}}
}

// TestReplaceThenDrainThenTerminate walks one consolidation through three snapshots: an
// m5.2xlarge (0.384 $/h) holding 2 × 500m is replaced by an m5.large (0.096 $/h, 1930m
// allocatable): launch + record + taint; then, the replacement Ready, drain; then, the node
// empty, terminate the instance and delete the Node and NodeClaim.
func TestReplaceThenDrainThenTerminate(t *testing.T) {
	e := newEnv(t)
	const oldID = "i-0123456789abcdef0"
	if err := e.cloud.AddInstance(cloud.Instance{ID: oldID, Zone: "us-east-1a", InstanceType: "m5.2xlarge", CapacityType: "on-demand",
		Tags: map[string]string{apisv1.TagCluster: cluster}}); err != nil {
		t.Fatal(err)
	}
	oldPID := cloud.AWSProviderID("us-east-1a", oldID)
	n, nc := node("old", "m5.2xlarge", oldPID)
	snap := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 10, Time: metav1.NewTime(now),
		NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{n}, NodeClaims: []apisv1.NodeClaim{nc},
		Pods: []corev1.Pod{pod("p1", "old"), pod("p2", "old")}}

	// 1. Decide: launch the replacement, record it, taint the node.
	out := e.handle(snap)
	if out.Decision == nil || len(out.Launched) != 1 {
		t.Fatalf("outcome %+v (report %+v)", out, out.Report)
	}
	if got := out.Launched[0].Labels[corev1.LabelInstanceTypeStable]; got != "m5.large" {
		t.Errorf("replacement is %s, want m5.large", got)
	}
	cmds := e.commands()
	if len(cmds) != 2 || cmds[0].Kind != events.CommandCreateNodeClaim || cmds[1].Kind != events.CommandTaintNode {
		t.Fatalf("commands %v, want CreateNodeClaim then TaintNode", kinds(cmds))
	}
	repl := *cmds[0].NodeClaim
	if repl.Annotations[disruption.AnnotationDecision] != out.Decision.ID || repl.Annotations[disruption.AnnotationReplaces] != "old" {
		t.Errorf("replacement annotations %v", repl.Annotations)
	}
	taint := cmds[1].Taint
	if cmds[1].NodeName != "old" || taint.Key != apisv1.TaintKeyDisrupted || taint.Effect != corev1.TaintEffectNoSchedule || cmds[1].SnapshotRevision != 10 ||
		taint.TimeAdded == nil || !taint.TimeAdded.Time.Equal(now) {
		t.Errorf("taint command %+v", cmds[1])
	}

	// 2. The taint landed and the replacement registered Ready: drain.
	snap.Revision, snap.Time = 11, metav1.NewTime(now.Add(time.Minute))
	snap.Nodes[0].Spec.Taints = []corev1.Taint{*taint}
	rn, _ := node("new", "m5.large", repl.Status.ProviderID)
	repl.Status.NodeName = "new"
	snap.Nodes = append(snap.Nodes, rn)
	snap.NodeClaims = append(snap.NodeClaims, repl)
	out = e.handle(snap)
	if cmds = e.commands(); len(cmds) != 1 || cmds[0].Kind != events.CommandDrainNode || cmds[0].NodeName != "old" || cmds[0].SnapshotRevision != 11 {
		t.Fatalf("commands %v (progress %+v), want DrainNode old", kinds(cmds), out.Progress[0])
	}

	// 3. Drained (the pods were recreated on the replacement): the NodeClaim is deleted, which
	// hands the node to the one termination path; consolidation itself terminates nothing.
	snap.Revision, snap.Time = 12, metav1.NewTime(now.Add(2*time.Minute))
	for i := range snap.Pods {
		snap.Pods[i].Spec.NodeName = "new"
	}
	out = e.handle(snap)
	cmds = e.commands()
	if len(cmds) != 1 || cmds[0].Kind != events.CommandDeleteNodeClaim || cmds[0].NodeClaim.Name != "nc-old" {
		t.Fatalf("commands %v, want DeleteNodeClaim nc-old", kinds(cmds))
	}
	if inst, err := e.cloud.Get(context.Background(), oldPID); err != nil || inst.State != cloud.StateRunning {
		t.Errorf("old instance %+v (%v), want still running until the termination path ends it", inst, err)
	}
	if len(out.Finished) != 1 || out.Finished[0] != "old" {
		t.Errorf("finished %v, want [old]", out.Finished)
	}

	// 4. The lifecycle function, on the snapshot where nc-old is being deleted, terminates the
	// instance and releases the finalizers (the node's first).
	snap.Revision, snap.Time = 13, metav1.NewTime(now.Add(3*time.Minute))
	del := metav1.NewTime(now.Add(2 * time.Minute))
	snap.NodeClaims[0].DeletionTimestamp, snap.NodeClaims[0].Finalizers = &del, []string{events.FinalizerTermination}
	snap.Nodes[0].Finalizers = []string{events.FinalizerTermination}
	lc := &lifecycle.Handler{Cluster: cluster, Provider: e.cloud, Publisher: e.h.Publisher, Codec: e.h.Codec, Log: e.h.Log}
	res, err := lc.Decide(context.Background(), snap)
	if err != nil || len(res.Terminated) != 1 || res.Terminated[0] != oldPID {
		t.Fatalf("lifecycle terminated %v (%v), want [%s]", res.Terminated, err, oldPID)
	}
	if inst, err := e.cloud.Get(context.Background(), oldPID); err != nil || (inst.State != cloud.StateShuttingDown && inst.State != cloud.StateTerminated) {
		t.Errorf("old instance %+v (%v), want terminating", inst, err)
	}
	// The replacement "new" registers in the same decision; keep the commands about "old".
	// Its status commands record the termination conditions (Karpenter's Drained,
	// VolumesDetached, InstanceTerminating), all True here: no pod or attachment is left.
	var old []events.Command
	conds := map[string]metav1.ConditionStatus{}
	for _, c := range e.commands() {
		if c.Kind == events.CommandSetNodeClaimStatus && c.NodeClaim != nil && c.NodeClaim.Name == "nc-old" {
			for _, cond := range c.NodeClaim.Status.Conditions {
				conds[cond.Type] = cond.Status
			}
			continue
		}
		if c.NodeName == "old" || (c.NodeClaim != nil && c.NodeClaim.Name == "nc-old") {
			old = append(old, c)
		}
	}
	for _, typ := range []string{apisv1.ConditionDrained, apisv1.ConditionVolumesDetached, apisv1.ConditionInstanceTerminating} {
		if conds[typ] != metav1.ConditionTrue {
			t.Errorf("nc-old condition %s: %q, want True (conditions %v)", typ, conds[typ], conds)
		}
	}
	if cmds = old; len(cmds) != 3 || cmds[0].Kind != events.CommandDeleteNode || cmds[1].Kind != events.CommandRemoveFinalizer || cmds[1].NodeName != "old" ||
		cmds[2].Kind != events.CommandRemoveFinalizer || cmds[2].NodeClaim.Name != "nc-old" {
		t.Fatalf("lifecycle commands %v, want DeleteNode old, RemoveFinalizer node old, RemoveFinalizer nodeclaim nc-old", kinds(cmds))
	}
}

// TestDrainWaitsForReplacement: tainted, but the replacement has not registered: no drain.
func TestDrainWaitsForReplacement(t *testing.T) {
	e := newEnv(t)
	n, nc := node("old", "m5.2xlarge", "aws:///us-east-1a/i-0123456789abcdef0")
	n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Value: disruption.TaintValuePrefix + "abc.1", Effect: corev1.TaintEffectNoSchedule}}
	snap := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 3, Time: metav1.NewTime(now),
		NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{n}, NodeClaims: []apisv1.NodeClaim{nc}, Pods: []corev1.Pod{pod("p1", "old")}}
	out := e.handle(snap)
	if cmds := e.commands(); len(cmds) != 0 {
		t.Fatalf("commands %v, want none", kinds(cmds))
	}
	if len(out.Progress) != 1 || !strings.Contains(out.Progress[0].Waiting, "0 of 1 replacement") {
		t.Errorf("progress %+v", out.Progress)
	}
}

func TestPoison(t *testing.T) {
	e := newEnv(t)
	err := e.h.Handle(context.Background(), queue.Message{Data: []byte("{not json")})
	if !errors.Is(err, queue.ErrPoison) {
		t.Errorf("malformed message: %v, want ErrPoison", err)
	}
	other := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: "other", Revision: 1, Time: metav1.NewTime(now)}
	data, _ := e.h.Codec.NewEvent(context.Background(), "other", "agent", events.TypeSnapshot, "x", other)
	if err := e.h.Handle(context.Background(), queue.Message{Data: data}); !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "snapshot.cluster") {
		t.Errorf("other cluster's snapshot: %v", err)
	}
}

func kinds(cs []events.Command) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c.Kind) + ":" + c.NodeName
	}
	return out
}

// A consolidation whose candidates were tainted ConsolidationTimeout ago and still wait (here,
// for a replacement that never appeared) is rolled back: its candidates are untainted and serve
// pods again, instead of keeping the taint forever. Before the timeout it only waits.
func TestStuckConsolidationRollsBack(t *testing.T) {
	taint := func(age time.Duration) *events.Snapshot {
		n, nc := node("old", "m5.2xlarge", "aws:///us-east-1a/i-0123456789abcdef0")
		added := metav1.NewTime(now.Add(-age))
		n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Value: disruption.TaintValuePrefix + "abc.1", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added}}
		return &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 3, Time: metav1.NewTime(now),
			NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{n}, NodeClaims: []apisv1.NodeClaim{nc}, Pods: []corev1.Pod{pod("p1", "old")}}
	}
	e := newEnv(t)
	if out := e.handle(taint(9 * time.Minute)); out.Abandoned != "" || len(e.commands()) != 0 {
		t.Fatalf("at 9 min: abandoned %q, commands %v; want it still waiting", out.Abandoned, kinds(e.commands()))
	}
	e = newEnv(t)
	out := e.handle(taint(disruption.ConsolidationTimeout))
	cmds := e.commands()
	if len(cmds) != 1 || cmds[0].Kind != events.CommandUntaintNode || cmds[0].NodeName != "old" || cmds[0].Taint.Key != apisv1.TaintKeyDisrupted {
		t.Fatalf("at the timeout: commands %v, want UntaintNode old", kinds(cmds))
	}
	if !strings.Contains(out.Abandoned, "rolled back") || !strings.Contains(out.Abandoned, "0 of 1 replacement") {
		t.Errorf("abandoned %q", out.Abandoned)
	}
}

// consolidateAfter is read on the function's clock, not the snapshot's: the node's pods last
// changed 4 minutes before the function's clock, so with consolidateAfter 5m it is no candidate,
// though the snapshot (dated 90 s ahead, within events.MaxClockSkew) would make it 5m30s. A
// snapshot dated an hour ahead is refused as poison naming snapshot.time; one 10 minutes old is
// skipped (acknowledged without a decision).
func TestConsolidateAfterReadsTheFunctionClock(t *testing.T) {
	e := newEnv(t)
	n, nc := node("old", "m5.2xlarge", "aws:///us-east-1a/i-0123456789abcdef0")
	last := metav1.NewTime(now.Add(-4 * time.Minute))
	nc.Status.LastPodEventTime = &last
	np := pool()
	five := apisv1.MustParseNillableDuration("5m")
	np.Spec.Disruption.ConsolidateAfter = &five
	snapAt := func(t time.Time) []byte {
		s := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 10, Time: metav1.NewTime(t),
			NodePools: []apisv1.NodePool{np}, Nodes: []corev1.Node{n}, NodeClaims: []apisv1.NodeClaim{nc}}
		data, err := e.h.Codec.NewEvent(context.Background(), cluster, "agent", events.TypeSnapshot, "snap-"+t.String(), s)
		if err != nil {
			e.t.Fatal(err)
		}
		return data
	}
	e.h.Now = func() time.Time { return now }
	var out *Outcome
	e.h.OnOutcome = func(o Outcome) { out = &o }
	if err := e.h.Handle(context.Background(), queue.Message{Data: snapAt(now.Add(90 * time.Second)), Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if out == nil || out.Decision != nil || len(out.Report.Skipped) != 1 || !strings.Contains(out.Report.Skipped[0].Reason, "pods changed 4m0s ago, consolidateAfter is 5m0s") {
		t.Fatalf("outcome %+v: want no decision, the node waiting for consolidateAfter on the function's clock", out)
	}
	out = nil
	err := e.h.Handle(context.Background(), queue.Message{Data: snapAt(now.Add(time.Hour)), Attempt: 1})
	if !errors.Is(err, queue.ErrPoison) || !errors.Is(err, events.ErrClockSkew) || !strings.Contains(err.Error(), "snapshot.time") || out != nil {
		t.Fatalf("a snapshot dated an hour ahead: %v (outcome %v), want poison naming snapshot.time and no decision", err, out)
	}
	if err := e.h.Handle(context.Background(), queue.Message{Data: snapAt(now.Add(-10 * time.Minute)), Attempt: 1}); err != nil || out != nil {
		t.Fatalf("a 10-minute-old snapshot: %v (outcome %v), want skipped", err, out)
	}
	if cmds := e.commands(); len(cmds) != 0 {
		t.Fatalf("commands %v, want none", kinds(cmds))
	}
}

// A replace decision whose replacement is initialized but was filled by pods the kube-scheduler
// placed there after the decision: the candidate's 2 × 500m no longer fit (m5.large holds
// 1930m; 3 × 500m others took 1500m of it), so the drain lacks room. It waits while the
// deficit is younger than DrainDeficitTimeout, then rolls back (untaints the candidate) instead
// of holding the pool's disruption budget for the whole ConsolidationTimeout.
func TestDrainDeficitRollsBackAfterReplacementsAreReady(t *testing.T) {
	snapWith := func(readyAgo time.Duration) *events.Snapshot {
		n, nc := node("old", "m5.2xlarge", "aws:///us-east-1a/i-0123456789abcdef0")
		added := metav1.NewTime(now.Add(-5 * time.Minute))
		n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Value: disruption.TaintValuePrefix + "abc.1", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added}}
		rn, rc := node("new", "m5.large", "aws:///us-east-1a/i-0fedcba9876543210")
		rc.Annotations = map[string]string{disruption.AnnotationDecision: "abc", disruption.AnnotationReplaces: "old"}
		rc.Status.Conditions = []metav1.Condition{{Type: apisv1.ConditionInitialized, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-readyAgo))}}
		pods := []corev1.Pod{pod("p1", "old"), pod("p2", "old"), pod("q1", "new"), pod("q2", "new"), pod("q3", "new")}
		return &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 7, Time: metav1.NewTime(now),
			NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{n, rn}, NodeClaims: []apisv1.NodeClaim{nc, rc}, Pods: pods}
	}
	e := newEnv(t)
	out := e.handle(snapWith(30 * time.Second))
	if cmds := e.commands(); len(cmds) != 0 || out.Abandoned != "" {
		t.Fatalf("30 s after the replacement was ready: commands %v, abandoned %q; want it waiting", kinds(cmds), out.Abandoned)
	}
	if len(out.Progress) != 1 || !strings.Contains(out.Progress[0].Waiting, "the pods need 1 more NodeClaim(s)") {
		t.Fatalf("progress %+v, want the drain waiting for 1 more NodeClaim", out.Progress)
	}
	e = newEnv(t)
	out = e.handle(snapWith(disruption.DrainDeficitTimeout))
	cmds := e.commands()
	if len(cmds) != 1 || cmds[0].Kind != events.CommandUntaintNode || cmds[0].NodeName != "old" || cmds[0].Taint.Key != apisv1.TaintKeyDisrupted {
		t.Fatalf("%s after the replacement was ready: commands %v, want UntaintNode old", disruption.DrainDeficitTimeout, kinds(cmds))
	}
	if !strings.Contains(out.Abandoned, "rolled back") || !strings.Contains(out.Abandoned, "1 more NodeClaim") {
		t.Errorf("abandoned %q", out.Abandoned)
	}
}

// A pod without a controller bound to a tainted candidate after the decision (a bare pod given
// spec.nodeName bypasses the taint) forbids the drain; it never clears by itself, so the
// decision is rolled back DrainDeficitTimeout after its replacement was ready, as Karpenter
// abandons a command whose candidate turned invalid, instead of holding the pool's disruption
// budget (and stalling drift) for the whole ConsolidationTimeout.
func TestBarePodOnACandidateRollsBackAfterDrainDeficitTimeout(t *testing.T) {
	snapWith := func(readyAgo time.Duration) *events.Snapshot {
		n, nc := node("old", "m5.2xlarge", "aws:///us-east-1a/i-0123456789abcdef0")
		added := metav1.NewTime(now.Add(-5 * time.Minute))
		n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Value: disruption.TaintValuePrefix + "abc.1", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added}}
		rn, rc := node("new", "m5.large", "aws:///us-east-1a/i-0fedcba9876543210")
		rc.Annotations = map[string]string{disruption.AnnotationDecision: "abc", disruption.AnnotationReplaces: "old"}
		rc.Status.Conditions = []metav1.Condition{{Type: apisv1.ConditionInitialized, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-readyAgo))}}
		bare := pod("bare", "old")
		bare.OwnerReferences = nil
		return &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 7, Time: metav1.NewTime(now),
			NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{n, rn}, NodeClaims: []apisv1.NodeClaim{nc, rc}, Pods: []corev1.Pod{pod("p1", "old"), bare}}
	}
	e := newEnv(t)
	out := e.handle(snapWith(30 * time.Second))
	if cmds := e.commands(); len(cmds) != 0 || out.Abandoned != "" {
		t.Fatalf("30 s after the replacement was ready: commands %v, abandoned %q; want it waiting", kinds(cmds), out.Abandoned)
	}
	if len(out.Progress) != 1 || !strings.Contains(out.Progress[0].Waiting, "default/bare") {
		t.Fatalf("progress %+v, want the drain blocked naming default/bare", out.Progress)
	}
	e = newEnv(t)
	out = e.handle(snapWith(disruption.DrainDeficitTimeout))
	cmds := e.commands()
	if len(cmds) != 1 || cmds[0].Kind != events.CommandUntaintNode || cmds[0].NodeName != "old" {
		t.Fatalf("%s after the replacement was ready: commands %v, want UntaintNode old", disruption.DrainDeficitTimeout, kinds(cmds))
	}
	if !strings.Contains(out.Abandoned, "rolled back") || !strings.Contains(out.Abandoned, "default/bare") {
		t.Errorf("abandoned %q", out.Abandoned)
	}
}

// Karpenter's karpenter.sh/disrupted taint (value "", no timeAdded) left on a node in a
// migration is stamped with the snapshot's time, and once disruption.StrayTaintTimeout old is
// removed; meanwhile the node holds its disruption budget as any disrupting node does.
func TestStrayKarpenterTaintStampedThenRemoved(t *testing.T) {
	snap := func(added *metav1.Time) *events.Snapshot {
		n, nc := node("left", "m5.2xlarge", "aws:///us-east-1a/i-0123456789abcdef0")
		n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: added}}
		return &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 3, Time: metav1.NewTime(now),
			NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{n}, NodeClaims: []apisv1.NodeClaim{nc}, Pods: []corev1.Pod{pod("p1", "left")}}
	}
	e := newEnv(t)
	e.handle(snap(nil))
	cmds := e.commands()
	if len(cmds) != 1 || cmds[0].Kind != events.CommandTaintNode || cmds[0].NodeName != "left" || cmds[0].Taint.Value != "" ||
		cmds[0].Taint.TimeAdded == nil || !cmds[0].Taint.TimeAdded.Time.Equal(now) {
		t.Fatalf("commands %+v, want TaintNode left stamping the taint at %s", cmds, now)
	}
	recent := metav1.NewTime(now.Add(-disruption.StrayTaintTimeout + time.Second))
	e = newEnv(t)
	if e.handle(snap(&recent)); len(e.commands()) != 0 {
		t.Fatal("a stray taint younger than the timeout was touched")
	}
	old := metav1.NewTime(now.Add(-disruption.StrayTaintTimeout))
	e = newEnv(t)
	out := e.handle(snap(&old))
	cmds = e.commands()
	if len(cmds) != 1 || cmds[0].Kind != events.CommandUntaintNode || cmds[0].NodeName != "left" || len(out.Strays) != 1 {
		t.Fatalf("commands %v, strays %+v: want UntaintNode left", kinds(cmds), out.Strays)
	}
}

// Two consolidations a second apart, the second on a snapshot that records neither the first's
// replacement NodeClaim nor its taint (the agent had not applied them yet): the second is decided
// by a process that does not remember the first (a cold start), so only the cloud can tell. Its
// launch step lists the cluster's instances, finds the first's replacement unrecorded and
// launches nothing: no second replacement for the same node (make scale, N = 1,000, launched
// four replacements for nine nodes that way, docs/scale.md).
func TestAReplacementIsNotLaunchedTwiceOnASnapshotBehindTheCloud(t *testing.T) {
	e := newEnv(t)
	n, nc := node("old", "m5.2xlarge", "aws:///us-east-1a/i-0123456789abcdef0")
	snap := func(rev int64) *events.Snapshot {
		return &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: rev, Time: metav1.NewTime(now), Complete: true,
			NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{n}, NodeClaims: []apisv1.NodeClaim{nc},
			Pods: []corev1.Pod{pod("p1", "old"), pod("p2", "old")}}
	}
	if out := e.handle(snap(10)); out.Decision == nil || len(out.Launched) != 1 {
		t.Fatalf("first decision: %+v, want one replacement launched", out)
	}
	if cmds := e.commands(); len(cmds) != 2 {
		t.Fatalf("first decision's commands %v, want CreateNodeClaim and TaintNode", kinds(cmds))
	}
	e.h = &Handler{Cluster: cluster, Catalog: e.h.Catalog, NodeSettings: e.h.NodeSettings, Provider: e.cloud, Publisher: e.h.Publisher,
		Codec: e.h.Codec, Log: e.h.Log}
	out := e.handle(snap(11))
	if len(out.Launched) != 0 || !strings.Contains(out.Abandoned, "behind the cloud") {
		t.Fatalf("second decision launched %d, abandoned %q; want nothing launched, the snapshot behind the cloud", len(out.Launched), out.Abandoned)
	}
	if cmds := e.commands(); len(cmds) != 0 {
		t.Fatalf("second decision's commands %v, want none", kinds(cmds))
	}
	insts, err := e.cloud.List(context.Background(), cluster)
	if err != nil || len(insts) != 1 {
		t.Fatalf("instances %d (%v), want the first replacement only", len(insts), err)
	}
}

// A delete leaves nothing in the cloud, so the handler remembers the consolidation it started
// and decides nothing new until a snapshot shows it (a candidate tainted) or
// disruption.ReplacementLock has passed: the second message here, a revision later with the taint
// not applied yet, waits; a snapshot with the taint shows the decision in flight; a handler whose
// decision never showed decides again after the lock.
func TestANewConsolidationWaitsUntilTheLastShows(t *testing.T) {
	e := newEnv(t)
	a, nca := node("a", "m5.large", "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa0")
	b, ncb := node("b", "m5.2xlarge", "aws:///us-east-1a/i-0bbbbbbbbbbbbbbb0")
	snap := func(rev int64, at time.Time, taints []corev1.Taint) *events.Snapshot {
		b := b
		b.Spec.Taints = taints
		return &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: rev, Time: metav1.NewTime(at),
			NodePools: []apisv1.NodePool{pool()}, Nodes: []corev1.Node{a, b}, NodeClaims: []apisv1.NodeClaim{nca, ncb},
			Pods: []corev1.Pod{pod("p1", "a"), pod("p2", "b")}}
	}
	// b (0.384 $/h) goes, its 500m onto a (1930m allocatable, 500m used): a delete, no launch.
	out := e.handle(snap(10, now, nil))
	if out.Decision == nil || out.Decision.Method != disruption.MethodDelete || strings.Join(out.Decision.NodeNames(), ",") != "b" {
		t.Fatalf("first decision %+v, want delete b", out.Decision)
	}
	cmds := e.commands()
	if len(cmds) != 1 || cmds[0].Kind != events.CommandTaintNode {
		t.Fatalf("commands %v, want TaintNode b", kinds(cmds))
	}
	taint, id := *cmds[0].Taint, out.Decision.ID
	out = e.handle(snap(11, now.Add(time.Second), nil))
	if out.Decision != nil || !strings.Contains(out.Abandoned, "does not show in revision 11") {
		t.Fatalf("a revision later, untainted: decision %+v, abandoned %q; want it waiting", out.Decision, out.Abandoned)
	}
	if cmds := e.commands(); len(cmds) != 0 {
		t.Fatalf("commands %v, want none", kinds(cmds))
	}
	out = e.handle(snap(12, now.Add(2*time.Second), []corev1.Taint{taint}))
	if len(out.Progress) != 1 || out.Progress[0].ID != id || out.Decision != nil {
		t.Fatalf("tainted: progress %+v, decision %+v; want the delete in flight", out.Progress, out.Decision)
	}
	e.commands()
	// Rolled back (untainted again): the decision showed, so nothing is waited for.
	if out = e.handle(snap(13, now.Add(3*time.Second), nil)); out.Decision == nil || out.Abandoned != "" {
		t.Fatalf("after the rollback: decision %+v, abandoned %q; want a new decision", out.Decision, out.Abandoned)
	}
	e.commands()

	e = newEnv(t)
	if out := e.handle(snap(10, now, nil)); out.Decision == nil {
		t.Fatal("no first decision")
	}
	e.commands()
	if out := e.handle(snap(11, now.Add(disruption.ReplacementLock-time.Second), nil)); out.Decision != nil {
		t.Fatalf("just before the lock: decision %+v, want it waiting", out.Decision)
	}
	if out := e.handle(snap(12, now.Add(disruption.ReplacementLock), nil)); out.Decision == nil || out.Abandoned != "" {
		t.Fatalf("at the lock: decision %+v, abandoned %q; want a new decision", out.Decision, out.Abandoned)
	}
}
