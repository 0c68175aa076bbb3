package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The world of one cell of the ownership table: node "n" (instance pidN, a pod "app" bound to
// it, tainted karpenter.sh/disrupted, the termination finalizer), NodeClaim "nc" recording it,
// and a pending pod "web".
const pidN = "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa7"

type world int

const (
	managed   world = iota // nc carries the agent's mark and records n's providerID
	unmanaged              // n has no karpenter.sh/nodepool label, no NodeClaim records it; nc has neither the mark nor a NodePool
	adopted                // n labelled karpenter.sh/nodepool; nc records n's providerID but lacks the agent's mark
	deleted                // n and nc were Dovetail's, and were deleted while the agent watched
	replayed               // managed, and the command is delivered again after it was applied
)

func (w world) String() string {
	return [...]string{"managed", "unmanaged", "adopted-by-label", "deleted", "replayed"}[w]
}

func ownershipWorld(t *testing.T, w world, deleting bool) *fixture {
	t.Helper()
	n := node("n")
	n.Spec.ProviderID = pidN
	n.Finalizers = []string{events.FinalizerTermination}
	n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
	claimLabels := map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent}
	claimPID, claimNode := pidN, "n"
	switch w {
	case unmanaged:
		n.Finalizers = nil
		claimLabels = map[string]string{"team": "ops"}
		claimPID, claimNode = "aws:///us-east-1a/i-0fffffffffffffff1", ""
	case adopted:
		n.Labels[apisv1.LabelNodePool] = "default"
		claimLabels = map[string]string{apisv1.LabelNodePool: "default"}
	default:
		n.Labels[apisv1.LabelNodePool] = "default"
	}
	var at *metav1.Time
	if deleting {
		ts := metav1.NewTime(t0)
		at = &ts
		n.DeletionTimestamp = at
	}
	nc := nodeClaimWith(t, "nc", claimPID, func(nc *apisv1.NodeClaim) {
		nc.Labels = claimLabels
		nc.Status.NodeName = claimNode
		nc.Finalizers = []string{events.FinalizerTermination}
		nc.DeletionTimestamp = at
		nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour} // DeletePods needs it (with deleting)
	})
	f := newFixture(t, []runtime.Object{n, pod("default", "app", "n"), pod("default", "web", "")}, nc)
	eventually(t, "sync", func() bool {
		c, _ := f.watcher.NodeClaim("nc")
		return f.watcher.Node("n") != nil && c != nil && len(f.watcher.PodsOnNode("n")) == 1
	})
	if w == deleted {
		if err := f.kube.CoreV1().Nodes().Delete(f.ctx, "n", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.dyn.Resource(NodeClaimGVR).Delete(f.ctx, "nc", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "deletes seen", func() bool {
			c, _ := f.watcher.NodeClaim("nc")
			return f.watcher.Node("n") == nil && c == nil
		})
	}
	return f
}

// ownershipCommand builds the command of kind that, on the managed world, is applied.
type ownershipRow struct {
	kind events.CommandKind
	// deleting: the world's node and NodeClaim are being deleted (RemoveFinalizer's state).
	deleting bool
	cmd      func(rev int64) *events.Command
	// want per world: "applied", or "refused: <reason substring>".
	want map[world]string
}

const (
	notOwnedNode  = `refused: not Dovetail's: no NodeClaim the agent created records node n's spec.providerID`
	notOwnedClaim = `refused: not Dovetail's: NodeClaim nc was not created by the agent`
	// A node labelled karpenter.sh/nodepool whose NodeClaim someone else made is refused for
	// what its NodeClaim lacks.
	adoptedNode = notOwnedClaim
)

// Every command kind that touches a Node or a NodeClaim, on each world: applied only on what is
// Dovetail's (a NodeClaim with the agent's mark, a Node such a NodeClaim records by providerID),
// never on a node someone labelled karpenter.sh/nodepool; a target deleted is nothing to do
// (success, no write), except a CreateNodeClaim of a name created and deleted before, and a
// RegisterNode of a deleted NodeClaim, which are refused; a redelivered command applies again
// without harm.
func TestCommandOwnershipTable(t *testing.T) {
	gone := &events.InstanceEvidence{ProviderID: pidN, State: events.InstanceTerminated}
	mk := func(kind events.CommandKind, mod func(*events.Command)) func(int64) *events.Command {
		return func(rev int64) *events.Command {
			c := &events.Command{ID: "cmd-" + string(kind), Kind: kind, Cluster: "test", SnapshotRevision: rev}
			mod(c)
			return c
		}
	}
	claim := func(name string) *apisv1.NodeClaim {
		return &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	std := func(notOwned string) map[world]string {
		adoptedWant := notOwned
		if notOwned == notOwnedNode {
			adoptedWant = adoptedNode
		}
		return map[world]string{managed: "applied", unmanaged: notOwned, adopted: adoptedWant, deleted: "applied", replayed: "applied"}
	}
	rows := []ownershipRow{
		{kind: events.CommandCreateNodeClaim, cmd: func(rev int64) *events.Command {
			c := createCmd("nc", pidN, rev)
			c.ID = "cmd-create"
			return c
		}, want: map[world]string{managed: "applied", unmanaged: notOwnedClaim, adopted: notOwnedClaim,
			deleted: "refused: NodeClaim nc was created and deleted since", replayed: "applied"}},
		{kind: events.CommandDeleteNodeClaim, cmd: mk(events.CommandDeleteNodeClaim, func(c *events.Command) { c.NodeClaim = claim("nc") }), want: std(notOwnedClaim)},
		{kind: events.CommandSetNodeClaimStatus, cmd: mk(events.CommandSetNodeClaimStatus, func(c *events.Command) {
			c.NodeClaim = claim("nc")
			c.NodeClaim.Status.Conditions = []metav1.Condition{{Type: apisv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"}}
		}), want: std(notOwnedClaim)},
		{kind: events.CommandRegisterNode, cmd: mk(events.CommandRegisterNode, func(c *events.Command) {
			c.NodeName, c.NodeClaim, c.Finalizer = "n", claim("nc"), events.FinalizerTermination
			c.Labels = map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelNodeRegistered: "true"}
		}), want: map[world]string{managed: "applied", unmanaged: notOwnedClaim, adopted: notOwnedClaim,
			deleted: "refused: NodeClaim was deleted", replayed: "applied"}},
		{kind: events.CommandTaintNode, cmd: mk(events.CommandTaintNode, func(c *events.Command) {
			c.NodeName, c.Taint = "n", &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: "drifted", Effect: corev1.TaintEffectNoSchedule}
		}), want: std(notOwnedNode)},
		{kind: events.CommandUntaintNode, cmd: mk(events.CommandUntaintNode, func(c *events.Command) {
			c.NodeName, c.Taint = "n", &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}
		}), want: std(notOwnedNode)},
		{kind: events.CommandDrainNode, cmd: mk(events.CommandDrainNode, func(c *events.Command) { c.NodeName = "n" }), want: std(notOwnedNode)},
		{kind: events.CommandDeleteNode, cmd: mk(events.CommandDeleteNode, func(c *events.Command) { c.NodeName = "n" }), want: std(notOwnedNode)},
		{kind: events.CommandLabelNode, cmd: mk(events.CommandLabelNode, func(c *events.Command) {
			c.NodeName, c.Labels = "n", map[string]string{apisv1.LabelNodeInitialized: "true"}
		}), want: std(notOwnedNode)},
		{kind: events.CommandDeletePods, deleting: true, cmd: mk(events.CommandDeletePods, func(c *events.Command) {
			c.NodeName, c.Pods = "n", []events.PodRef{{Namespace: "default", Name: "app"}}
		}), want: std(notOwnedNode)},
		{kind: events.CommandNominatePods, cmd: mk(events.CommandNominatePods, func(c *events.Command) {
			c.NodeName, c.Pods = "n", []events.PodRef{{Namespace: "default", Name: "web"}}
		}), want: std(notOwnedNode)},
		{kind: events.CommandRemoveFinalizer + " (Node)", deleting: true, cmd: mk(events.CommandRemoveFinalizer, func(c *events.Command) {
			c.NodeName, c.Finalizer, c.Instance = "n", events.FinalizerTermination, gone
		}), want: map[world]string{managed: "applied", unmanaged: "applied" /* no termination finalizer on it: nothing to remove */, adopted: adoptedNode,
			deleted: "applied", replayed: "applied"}},
		{kind: events.CommandRemoveFinalizer + " (NodeClaim)", deleting: true, cmd: mk(events.CommandRemoveFinalizer, func(c *events.Command) {
			c.NodeClaim, c.Finalizer, c.Instance = claim("nc"), events.FinalizerTermination, gone
		}), want: std(notOwnedClaim)},
	}
	for _, row := range rows {
		for _, w := range []world{managed, unmanaged, adopted, deleted, replayed} {
			t.Run(string(row.kind)+"/"+w.String(), func(t *testing.T) {
				f := ownershipWorld(t, w, row.deleting)
				rev := settledRevision(t, f.watcher)
				cmd := row.cmd(rev)
				before := [2]int{len(f.kube.Actions()), len(f.dyn.Actions())}
				err := f.applier.Apply(f.ctx, cmd)
				if w == replayed && err == nil {
					err = f.applier.Apply(f.ctx, cmd)
				}
				got := outcome(err)
				want := row.want[w]
				if !strings.HasPrefix(got, want) {
					t.Fatalf("%s on %s: %s, want %s", row.kind, w, got, want)
				}
				if w == deleted && want == "applied" {
					if n := writes(f, before); n != 0 {
						t.Errorf("%d writes for a target that is gone, want none", n)
					}
				}
				if strings.HasPrefix(want, "refused") {
					if n := writes(f, before); n != 1 { // the DovetailCommandRefused Event, nothing else
						t.Errorf("%d writes for a refused command, want 1 (its Event)", n)
					}
				}
			})
		}
	}
}

// outcome reads Apply's answer as a table cell: "applied", "refused: <reason>", or the error.
func outcome(err error) string {
	var refused *RefusedError
	switch {
	case err == nil:
		return "applied"
	case errors.As(err, &refused):
		return "refused: " + refused.Reason
	default:
		return "error: " + err.Error()
	}
}

// writes counts the create, update, patch and delete actions of both fake clients after the
// counts in before (kube's, dynamic's).
func writes(f *fixture, before [2]int) int {
	n := 0
	for _, a := range append(f.kube.Actions()[before[0]:], f.dyn.Actions()[before[1]:]...) {
		switch a.GetVerb() {
		case "create":
			// A create of a NodeClaim whose name is taken (AlreadyExists) is an attempt, not an
			// effect: the fake records it all the same.
			if a.GetResource().Resource != "nodeclaims" {
				n++
			}
		case "update", "patch", "delete":
			n++
		}
	}
	return n
}

// RemoveFinalizer of karpenter.sh/termination lets a Dovetail object go only at the end of its
// deletion, on the cloud's word that its own instance is gone or going.
func TestRemoveTerminationFinalizerNeedsDeletionAndEvidence(t *testing.T) {
	cases := []struct {
		name     string
		deleting bool
		evidence *events.InstanceEvidence
		want     string
	}{
		{"not deleting", false, &events.InstanceEvidence{ProviderID: pidN, State: events.InstanceTerminated}, "refused: it is not being deleted"},
		{"no evidence", true, nil, "refused: the command carries no evidence that the instance is gone (command.instance)"},
		{"instance running", true, &events.InstanceEvidence{ProviderID: pidN, State: "running"}, `refused: command.instance.state "running" is not terminated, shutting-down or not-found`},
		{"another instance", true, &events.InstanceEvidence{ProviderID: "aws:///us-east-1a/i-0bbbbbbbbbbbbbbb1", State: events.InstanceTerminated},
			`refused: command.instance.providerID "aws:///us-east-1a/i-0bbbbbbbbbbbbbbb1" is not the object's instance "` + pidN + `"`},
		{"shutting down", true, &events.InstanceEvidence{ProviderID: pidN, State: events.InstanceShuttingDown}, "applied"},
		{"not found", true, &events.InstanceEvidence{ProviderID: pidN, State: events.InstanceNotFound}, "applied"},
	}
	for _, c := range cases {
		for _, target := range []string{"Node", "NodeClaim"} {
			t.Run(c.name+"/"+target, func(t *testing.T) {
				f := ownershipWorld(t, managed, c.deleting)
				cmd := &events.Command{ID: "fin", Kind: events.CommandRemoveFinalizer, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher),
					Finalizer: events.FinalizerTermination, Instance: c.evidence}
				if target == "Node" {
					cmd.NodeName = "n"
				} else {
					cmd.NodeClaim = &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}}
				}
				if got := outcome(f.applier.Apply(f.ctx, cmd)); !strings.HasPrefix(got, c.want) {
					t.Fatalf("%s, want %s", got, c.want)
				}
				var fins []string
				if target == "Node" {
					n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
					fins = n.Finalizers
				} else {
					fins = getNodeClaim(t, f, "nc").Finalizers
				}
				if kept := len(fins) == 1; kept != (c.want != "applied") {
					t.Errorf("finalizers %v after %s", fins, c.want)
				}
			})
		}
	}
}

// No command writes the ownership mark, and LabelNode writes no label that says whose a node is,
// even on a node that is Dovetail's.
func TestNoCommandWritesOwnership(t *testing.T) {
	f := ownershipWorld(t, managed, false)
	rev := settledRevision(t, f.watcher)
	for _, key := range []string{apisv1.LabelNodePool, apisv1.LabelNodeRegistered, apisv1.LabelManagedBy, apisv1.LabelNodeClaim} {
		cmd := &events.Command{ID: "label-" + key, Kind: events.CommandLabelNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n",
			Labels: map[string]string{key: "x"}}
		if err := f.applier.Apply(f.ctx, cmd); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), `command.labels["`+key+`"]`) {
			t.Errorf("LabelNode %s: %v, want ErrInvalidCommand naming command.labels[%q]", key, err, key)
		}
	}
	create := createCmd("default-x1", pidN, rev)
	create.NodeClaim.Labels[apisv1.LabelManagedBy] = apisv1.ManagedByAgent
	if err := f.applier.Apply(f.ctx, create); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), `command.nodeClaim.metadata.labels["dovetail.dev/managed-by"]`) {
		t.Errorf("CreateNodeClaim carrying the mark: %v, want ErrInvalidCommand naming the label", err)
	}
	reg := &events.Command{ID: "reg", Kind: events.CommandRegisterNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n",
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}}, Finalizer: events.FinalizerTermination,
		Labels: map[string]string{apisv1.LabelManagedBy: apisv1.ManagedByAgent}}
	if err := f.applier.Apply(f.ctx, reg); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), `command.labels["dovetail.dev/managed-by"]`) {
		t.Errorf("RegisterNode carrying the mark: %v, want ErrInvalidCommand naming the label", err)
	}
	// What the agent creates carries the mark.
	ok := createCmd("default-x2", "aws:///us-east-1a/i-0ccccccccccccccc2", rev)
	if err := f.applier.Apply(f.ctx, ok); err != nil {
		t.Fatal(err)
	}
	if got := getNodeClaim(t, f, "default-x2").Labels[apisv1.LabelManagedBy]; got != apisv1.ManagedByAgent {
		t.Errorf("created NodeClaim's %s = %q, want %q", apisv1.LabelManagedBy, got, apisv1.ManagedByAgent)
	}
	if n := countActions(f.kube.Actions(), "patch", "nodes", ""); n != 0 {
		t.Errorf("%d node patches, want none", n)
	}
}

// A CreateNodeClaim replayed after its NodeClaim was released and deleted creates nothing, also
// on an agent restarted since (the tombstone is in a ConfigMap, not in the old agent's memory).
func TestReplayedCreateNodeClaimAfterRestart(t *testing.T) {
	f := newFixture(t, nil)
	const pid = "aws:///us-east-1a/i-0ddddddddddddddd4"
	create := createCmd("default-r1", pid, 0)
	if err := f.applier.Apply(f.ctx, create); err != nil {
		t.Fatal(err)
	}
	// Its deletion: the API server sets deletionTimestamp (the finalizer holds it), the
	// lifecycle function terminates the instance and the agent releases the finalizer.
	res := f.dyn.Resource(NodeClaimGVR)
	u, err := res.Get(f.ctx, "default-r1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetFinalizers([]string{events.FinalizerTermination})
	u.SetDeletionTimestamp(&metav1.Time{Time: t0})
	if _, err := res.Update(f.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleting NodeClaim cached", func() bool {
		nc, _ := f.watcher.NodeClaim("default-r1")
		return nc != nil && nc.DeletionTimestamp != nil
	})
	release := &events.Command{ID: "fin", Kind: events.CommandRemoveFinalizer, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher),
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-r1"}}, Finalizer: events.FinalizerTermination,
		Instance: &events.InstanceEvidence{ProviderID: pid, State: events.InstanceTerminated}}
	if err := f.applier.Apply(f.ctx, release); err != nil {
		t.Fatal(err)
	}
	if err := res.Delete(f.ctx, "default-r1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// A new agent on the same cluster: its watcher never saw the NodeClaim.
	w, err := NewWatcher(f.kube, f.dyn, WatcherOptions{Namespace: testNamespace, Clock: f.clock, SyncTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	t.Cleanup(func() { cancel(); w.Shutdown() })
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := NewApplier(f.kube, f.dyn, w, ApplierOptions{Namespace: testNamespace, Clock: f.clock})
	got := outcome(restarted.Apply(f.ctx, create))
	if want := "refused: NodeClaim default-r1 was deleted at " + t0.Format(time.RFC3339); !strings.HasPrefix(got, want) {
		t.Fatalf("replay: %s, want %s", got, want)
	}
	if _, err := res.Get(f.ctx, "default-r1", metav1.GetOptions{}); err == nil {
		t.Error("the replay re-created the NodeClaim")
	}
}

// The tombstones keep TombstoneTTL and MaxNodeClaimTombstones, and whatever they forget raises the
// watermark to its deletion time.
func TestPruneTombstones(t *testing.T) {
	now := t0
	old := now.Add(-TombstoneTTL - time.Minute).Format(time.RFC3339) // 24 h 1 min ago: past the TTL
	fresh := now.Add(-time.Hour).Format(time.RFC3339)
	data := map[string]string{"a": old + " aws:///us-east-1a/i-a", "b": fresh + " aws:///us-east-1a/i-b", tombstoneWatermarkKey: now.Add(-48 * time.Hour).Format(time.RFC3339)}
	patch := pruneTombstones(data, "c", tombstoneValue(now, "aws:///us-east-1a/i-c"), now)
	want := map[string]any{"c": now.Format(time.RFC3339) + " aws:///us-east-1a/i-c", "a": nil, tombstoneWatermarkKey: old}
	if len(patch) != len(want) {
		t.Fatalf("patch = %v, want %v", patch, want)
	}
	for k, v := range want {
		if got, ok := patch[k]; !ok || got != v {
			t.Errorf("patch[%q] = %v, want %v", k, got, v)
		}
	}
	if pruneTombstones(map[string]string{"c": fresh + " "}, "c", tombstoneValue(now, ""), now) != nil {
		t.Error("a name already recorded is written again")
	}
	// Beyond the cap the oldest go: MaxNodeClaimTombstones fresh entries plus one more drops the
	// oldest, whose time becomes the watermark.
	full := map[string]string{}
	for i := 0; i < MaxNodeClaimTombstones; i++ {
		full[fmt.Sprintf("nc-%05d", i)] = tombstoneValue(now.Add(-time.Duration(MaxNodeClaimTombstones-i)*time.Second), "")
	}
	patch = pruneTombstones(full, "newest", tombstoneValue(now, ""), now)
	oldest := now.Add(-time.Duration(MaxNodeClaimTombstones) * time.Second).Format(time.RFC3339)
	if patch["nc-00000"] != nil || patch[tombstoneWatermarkKey] != oldest || len(patch) != 3 {
		t.Errorf("at the cap: patch = %v, want nc-00000 dropped and the watermark at %s", patch, oldest)
	}
}

// A CreateNodeClaim decided before the watermark cannot be told from a replay and is refused;
// one decided after it is created.
func TestCreateNodeClaimOlderThanTheTombstones(t *testing.T) {
	mark := t0.Add(-time.Hour)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: NodeClaimTombstonesConfigMap, Namespace: testNamespace},
		Data: map[string]string{tombstoneWatermarkKey: mark.Format(time.RFC3339)}}
	f := newFixture(t, []runtime.Object{cm})
	late := createCmd("default-o1", "aws:///us-east-1a/i-0eeeeeeeeeeeeeee5", 0)
	late.NodeClaim.CreationTimestamp = metav1.NewTime(mark.Add(-time.Second))
	if got := outcome(f.applier.Apply(f.ctx, late)); !strings.Contains(got, "too old to tell from a replay") {
		t.Errorf("decided before the watermark: %s, want a refusal", got)
	}
	fresh := createCmd("default-o2", "aws:///us-east-1a/i-0eeeeeeeeeeeeeee6", 0)
	fresh.NodeClaim.CreationTimestamp = metav1.NewTime(mark.Add(time.Second))
	if err := f.applier.Apply(f.ctx, fresh); err != nil {
		t.Errorf("decided after the watermark: %v", err)
	}
}

// A Node whose NodeClaim was released first (its RemoveFinalizer refused, say, and the NodeClaim's
// applied) is still Dovetail's while it is being deleted: the tombstone remembers its instance, so
// its own termination finalizer is released and the Node does not stay for ever.
func TestNodeOutlivingItsReleasedNodeClaim(t *testing.T) {
	f := ownershipWorld(t, managed, true)
	gone := &events.InstanceEvidence{ProviderID: pidN, State: events.InstanceTerminated}
	rev := settledRevision(t, f.watcher)
	if err := f.applier.Apply(f.ctx, &events.Command{ID: "fin-nc", Kind: events.CommandRemoveFinalizer, Cluster: "test", SnapshotRevision: rev,
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}}, Finalizer: events.FinalizerTermination, Instance: gone}); err != nil {
		t.Fatal(err)
	}
	if err := f.dyn.Resource(NodeClaimGVR).Delete(f.ctx, "nc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NodeClaim gone from the cache", func() bool { c, _ := f.watcher.NodeClaim("nc"); return c == nil })
	fin := &events.Command{ID: "fin-n", Kind: events.CommandRemoveFinalizer, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher),
		NodeName: "n", Finalizer: events.FinalizerTermination, Instance: gone}
	if err := f.applier.Apply(f.ctx, fin); err != nil {
		t.Fatalf("node finalizer after its NodeClaim's: %v", err)
	}
	if n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{}); len(n.Finalizers) != 0 {
		t.Errorf("node finalizers %v, want none", n.Finalizers)
	}
	// A Node not being deleted gains nothing from the tombstone: a taint is still refused.
	n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
	n.DeletionTimestamp = nil
	if _, err := f.kube.CoreV1().Nodes().Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node not deleting in the cache", func() bool { c := f.watcher.Node("n"); return c != nil && c.DeletionTimestamp == nil })
	taint := &events.Command{ID: "taint-n", Kind: events.CommandTaintNode, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher),
		NodeName: "n", Taint: &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
	if got := outcome(f.applier.Apply(f.ctx, taint)); !strings.HasPrefix(got, notOwnedNode) {
		t.Errorf("taint of a live node whose NodeClaim is gone: %s, want %s", got, notOwnedNode)
	}
}

// A CreateNodeClaim cannot adopt an instance that is already someone else's: one naming the
// providerID of a Node that existed before the decision (a managed node group's), or of an
// instance another NodeClaim records (Karpenter's, beside Dovetail), would make that Node
// Dovetail's by nodeOwner's rule, and a DeleteNode or DrainNode would then pass on it. The node
// a decision launched registers after the decision, carrying the NodeClaim's pool label from its
// user data (the kubelet's --node-labels), so that one is still created when its Node came first.
func TestCreateNodeClaimCannotAdoptAnExistingInstance(t *testing.T) {
	const pidOld, pidKarp, pidNew = "aws:///us-east-1a/i-0aaaaaaaaaaaaaa01", "aws:///us-east-1a/i-0aaaaaaaaaaaaaa02", "aws:///us-east-1a/i-0aaaaaaaaaaaaaa03"
	old := node("mng")
	old.Spec.ProviderID = pidOld
	old.CreationTimestamp = metav1.NewTime(t0.Add(-48 * time.Hour))
	karpNode := node("karp")
	karpNode.Spec.ProviderID = pidKarp
	karpNode.Labels[apisv1.LabelNodePool] = "default"
	karpNode.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	fresh := node("fresh")
	fresh.Spec.ProviderID = pidNew
	fresh.Labels[apisv1.LabelNodePool] = "default"
	fresh.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute)) // booted after the decision at t0
	skewed := node("skewed")                                      // a minute "before" the decision: within events.MaxClockSkew of the agent's clock
	skewed.Spec.ProviderID = "aws:///us-east-1a/i-0aaaaaaaaaaaaaa04"
	skewed.Labels[apisv1.LabelNodePool] = "default"
	skewed.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	karpClaim := nodeClaimWith(t, "karpenter-x", pidKarp, func(nc *apisv1.NodeClaim) {
		nc.Labels = map[string]string{apisv1.LabelNodePool: "default"} // Karpenter's: no Dovetail mark
		nc.Status.NodeName = "karp"
	})
	f := newFixture(t, []runtime.Object{old, karpNode, fresh, skewed}, karpClaim)
	eventually(t, "sync", func() bool {
		c, _ := f.watcher.NodeClaim("karpenter-x")
		return f.watcher.Node("mng") != nil && f.watcher.Node("karp") != nil && f.watcher.Node("fresh") != nil && f.watcher.Node("skewed") != nil && c != nil
	})
	cases := []struct {
		name, claim, pid, node, want string
	}{
		{"node older than the decision", "forged-1", pidOld, "mng", "refused: command.nodeClaim.status.providerID"},
		{"instance another NodeClaim records", "forged-2", pidKarp, "karp", "refused: command.nodeClaim.status.providerID"},
		{"own node registered first", "default-f1", pidNew, "fresh", "applied"},
		{"own node, clocks a minute apart", "default-f2", "aws:///us-east-1a/i-0aaaaaaaaaaaaaa04", "skewed", "applied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rev := settledRevision(t, f.watcher)
			got := outcome(f.applier.Apply(f.ctx, createCmd(c.claim, c.pid, rev)))
			if !strings.HasPrefix(got, c.want) {
				t.Fatalf("CreateNodeClaim %s of %s: %s, want %s", c.claim, c.pid, got, c.want)
			}
			if c.want != "applied" {
				if _, err := f.dyn.Resource(NodeClaimGVR).Get(f.ctx, c.claim, metav1.GetOptions{}); err == nil {
					t.Errorf("NodeClaim %s created for an instance already someone else's", c.claim)
				}
				del := &events.Command{ID: "del-" + c.node, Kind: events.CommandDeleteNode, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher), NodeName: c.node}
				if got := outcome(f.applier.Apply(f.ctx, del)); !strings.HasPrefix(got, "refused: not Dovetail's") {
					t.Errorf("DeleteNode %s after the forged CreateNodeClaim: %s, want refused as not Dovetail's", c.node, got)
				}
			}
		})
	}
}

// TaintNode and UntaintNode touch only the taints Dovetail's functions write: karpenter.sh/
// disrupted with NoSchedule (Karpenter's DisruptedNoScheduleTaint, kubernetes-sigs/karpenter
// pkg/apis/v1/taints.go) and, to remove, dovetail.dev/planned. A forged TaintNode with NoExecute
// made the taint manager delete every pod on a Dovetail node at once, around the Eviction API and
// its PDBs; a forged UntaintNode stripped a NodePool's own taint (dedicated=gpu), opening the
// node to any pod.
func TestTaintCommandsTouchOnlyDovetailTaints(t *testing.T) {
	n := node("n")
	n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, apisv1.PlannedTaint("nc-n")}
	f := newOwnedFixture(t, []runtime.Object{n, pod("default", "app", "n")})
	eventually(t, "sync", func() bool { return f.watcher.Node("n") != nil && len(f.watcher.PodsOnNode("n")) == 1 })
	cmd := func(kind events.CommandKind, taint corev1.Taint) *events.Command {
		return &events.Command{ID: "cmd-" + string(kind) + "-" + taint.Key + string(taint.Effect), Kind: kind, Cluster: "test",
			SnapshotRevision: settledRevision(t, f.watcher), NodeName: "n", Taint: &taint}
	}
	refusedCases := []struct {
		name string
		cmd  *events.Command
		want string
	}{
		{"NoExecute taint", cmd(events.CommandTaintNode, corev1.Taint{Key: "example.com/evict", Effect: corev1.TaintEffectNoExecute}), `command.taint: "example.com/evict:NoExecute"`},
		{"disrupted NoExecute", cmd(events.CommandTaintNode, corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoExecute}), `command.taint: "karpenter.sh/disrupted:NoExecute"`},
		{"user taint removed", cmd(events.CommandUntaintNode, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}), `command.taint.key: "dedicated"`},
	}
	for _, c := range refusedCases {
		t.Run(c.name, func(t *testing.T) {
			err := f.applier.Apply(f.ctx, c.cmd)
			if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: %v, want ErrInvalidCommand naming %s", c.name, err, c.want)
			}
			got, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
			if len(got.Spec.Taints) != 2 || got.Spec.Taints[0].Key != "dedicated" || got.Spec.Taints[1].Key != apisv1.TaintKeyPlanned {
				t.Errorf("taints after a refused %s: %+v, want dedicated and dovetail.dev/planned unchanged", c.name, got.Spec.Taints)
			}
		})
	}
	// What the functions send still applies.
	if err := f.applier.Apply(f.ctx, cmd(events.CommandUntaintNode, apisv1.PlannedTaint("nc-n"))); err != nil {
		t.Fatalf("UntaintNode dovetail.dev/planned: %v", err)
	}
	if err := f.applier.Apply(f.ctx, cmd(events.CommandTaintNode, corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule})); err != nil {
		t.Fatalf("TaintNode karpenter.sh/disrupted:NoSchedule: %v", err)
	}
	got, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
	if len(got.Spec.Taints) != 2 || got.Spec.Taints[0].Key != "dedicated" || got.Spec.Taints[1].Key != apisv1.TaintKeyDisrupted {
		t.Errorf("taints %+v, want dedicated and karpenter.sh/disrupted", got.Spec.Taints)
	}
}

// LabelNode writes only karpenter.sh/initialized=true, the one label Dovetail's lifecycle
// function sets after registration (Karpenter's initialization controller sets the same,
// kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/initialization.go). A forged
// LabelNode wrote any label on a Dovetail node: a label a sensitive workload's nodeSelector
// names draws that workload onto the node, a topology label misplaces its spread.
func TestLabelNodeWritesOnlyInitialized(t *testing.T) {
	f := newOwnedFixture(t, []runtime.Object{node("n")})
	eventually(t, "sync", func() bool { return f.watcher.Node("n") != nil })
	for _, labels := range []map[string]string{
		{"example.com/pci": "true"},
		{corev1.LabelTopologyZone: "us-east-1z"},
		{apisv1.LabelNodeInitialized: "false"},
		{apisv1.LabelNodeInitialized: "true", "example.com/pci": "true"},
	} {
		cmd := &events.Command{ID: "label", Kind: events.CommandLabelNode, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher), NodeName: "n", Labels: labels}
		err := f.applier.Apply(f.ctx, cmd)
		if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "command.labels[") {
			t.Errorf("LabelNode %v: %v, want ErrInvalidCommand naming the label", labels, err)
		}
	}
	got, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
	if len(got.Labels) != 1 || got.Labels[corev1.LabelInstanceTypeStable] != "m5.large" {
		t.Errorf("labels after refused LabelNodes: %v, want only the fixture's instance type", got.Labels)
	}
	ok := &events.Command{ID: "init", Kind: events.CommandLabelNode, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher), NodeName: "n",
		Labels: map[string]string{apisv1.LabelNodeInitialized: "true"}}
	if err := f.applier.Apply(f.ctx, ok); err != nil {
		t.Fatalf("LabelNode karpenter.sh/initialized=true: %v", err)
	}
	if got, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{}); got.Labels[apisv1.LabelNodeInitialized] != "true" {
		t.Errorf("labels %v, want karpenter.sh/initialized=true", got.Labels)
	}
}

// DeletePods deletes pods (no Eviction API, no PDB) only where Dovetail's termination path does:
// on a node whose NodeClaim is being deleted and has a terminationGracePeriod (Karpenter deletes
// pods past it the same way, kubernetes-sigs/karpenter pkg/controllers/node/termination). A
// forged DeletePods on a Dovetail node that is not being terminated deleted its pods around
// their PDBs.
func TestDeletePodsOnlyOnATerminatingNodeClaim(t *testing.T) {
	grace := int64(10)
	cases := []struct {
		name     string
		deleting bool
		tgp      *metav1.Duration
		want     string
	}{
		{"not being deleted", false, &metav1.Duration{Duration: time.Hour}, "refused: DeletePods"},
		{"deleting without a terminationGracePeriod", true, nil, "refused: DeletePods"},
		{"deleting with a terminationGracePeriod", true, &metav1.Duration{Duration: time.Hour}, "applied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := node("n")
			n.Spec.ProviderID = pidN
			nc := nodeClaimWith(t, "nc", pidN, func(nc *apisv1.NodeClaim) {
				nc.Labels = map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent}
				nc.Status.NodeName = "n"
				nc.Spec.TerminationGracePeriod = c.tgp
				if c.deleting {
					nc.Finalizers = []string{events.FinalizerTermination}
					nc.DeletionTimestamp = &metav1.Time{Time: t0}
				}
			})
			f := newFixture(t, []runtime.Object{n, pod("default", "app", "n")}, nc)
			eventually(t, "sync", func() bool {
				c, _ := f.watcher.NodeClaim("nc")
				return c != nil && len(f.watcher.PodsOnNode("n")) == 1
			})
			cmd := &events.Command{ID: "del", Kind: events.CommandDeletePods, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher), NodeName: "n",
				Pods: []events.PodRef{{Namespace: "default", Name: "app", UID: "uid-default-app", GracePeriodSeconds: &grace}}}
			if got := outcome(f.applier.Apply(f.ctx, cmd)); !strings.HasPrefix(got, c.want) {
				t.Fatalf("DeletePods: %s, want %s", got, c.want)
			}
			_, err := f.kube.CoreV1().Pods("default").Get(f.ctx, "app", metav1.GetOptions{})
			if deleted := err != nil; deleted != (c.want == "applied") {
				t.Errorf("pod deleted = %v, want %v", deleted, c.want == "applied")
			}
		})
	}
}

// NominatePods adds to a pod only the toleration of the node's own planned taint
// (apisv1.PlannedToleration of the NodeClaim that makes the node Dovetail's), the one the
// lifecycle function sends. A forged NominatePods gave any pending pod any toleration: with
// operator Exists and no key it tolerated every taint of every node (dedicated pools, NoExecute).
func TestNominatePodsAddsOnlyThePlannedToleration(t *testing.T) {
	cases := []struct {
		name string
		tol  corev1.Toleration
		want string
	}{
		{"tolerate everything", corev1.Toleration{Operator: corev1.TolerationOpExists}, "refused: command.toleration"},
		{"another NodeClaim's planned taint", apisv1.PlannedToleration("other"), "refused: command.toleration"},
		{"a NodePool's taint", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, "refused: command.toleration"},
		{"the node's planned taint", apisv1.PlannedToleration("nc"), "applied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := ownershipWorld(t, managed, false)
			tol := c.tol
			cmd := &events.Command{ID: "nominate", Kind: events.CommandNominatePods, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher), NodeName: "n",
				Pods: []events.PodRef{{Namespace: "default", Name: "web"}}, Toleration: &tol}
			if got := outcome(f.applier.Apply(f.ctx, cmd)); !strings.HasPrefix(got, c.want) {
				t.Fatalf("NominatePods with %+v: %s, want %s", c.tol, got, c.want)
			}
			p, _ := f.kube.CoreV1().Pods("default").Get(f.ctx, "web", metav1.GetOptions{})
			if added := len(p.Spec.Tolerations) == 1; added != (c.want == "applied") {
				t.Errorf("tolerations %+v, want the toleration added = %v", p.Spec.Tolerations, c.want == "applied")
			}
		})
	}
}

// NominatePods naming a NodeClaim (the provision function's, sent behind its CreateNodeClaim
// before the node exists) adds only that NodeClaim's planned-taint toleration, and only for a
// NodeClaim the agent created; one gone, or being deleted, is nothing to do.
func TestNominatePodsForAClaimAddsOnlyItsPlannedToleration(t *testing.T) {
	cases := []struct {
		name     string
		world    world
		deleting bool
		claim    string
		tol      corev1.Toleration
		want     string
		added    bool
	}{
		{"tolerate everything", managed, false, "nc", corev1.Toleration{Operator: corev1.TolerationOpExists}, "refused: command.toleration", false},
		{"another NodeClaim's planned taint", managed, false, "nc", apisv1.PlannedToleration("other"), "refused: command.toleration", false},
		{"the NodeClaim's planned taint", managed, false, "nc", apisv1.PlannedToleration("nc"), "applied", true},
		{"a NodeClaim the agent did not create", unmanaged, false, "nc", apisv1.PlannedToleration("nc"), "refused: not Dovetail's", false},
		{"a NodeClaim being deleted", managed, true, "nc", apisv1.PlannedToleration("nc"), "applied", false},
		{"a NodeClaim gone", managed, false, "gone", apisv1.PlannedToleration("gone"), "applied", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := ownershipWorld(t, c.world, c.deleting)
			tol := c.tol
			cmd := &events.Command{ID: "nominate", Kind: events.CommandNominatePods, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher),
				NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: c.claim}}, Pods: []events.PodRef{{Namespace: "default", Name: "web"}}, Toleration: &tol}
			if err := cmd.Validate(); err != nil {
				t.Fatalf("the command is valid on the wire: %v", err)
			}
			if got := outcome(f.applier.Apply(f.ctx, cmd)); !strings.HasPrefix(got, c.want) {
				t.Fatalf("NominatePods for NodeClaim %s with %+v: %s, want %s", c.claim, c.tol, got, c.want)
			}
			p, _ := f.kube.CoreV1().Pods("default").Get(f.ctx, "web", metav1.GetOptions{})
			if added := len(p.Spec.Tolerations) == 1 && apisv1.HasPlannedToleration(p, c.claim); added != c.added {
				t.Errorf("tolerations %+v, want the planned toleration added = %v", p.Spec.Tolerations, c.added)
			}
		})
	}
}

// RemoveFinalizer and AddFinalizer touch only Dovetail's finalizers: karpenter.sh/termination on
// a Node or NodeClaim, the NodeClass kind's termination finalizer (karpenter.k8s.aws/termination,
// karpenter.azure.com/termination) on a NodeClass, and release that one only from a NodeClass
// being deleted that no NodeClaim uses (the lifecycle function's rule, as Karpenter's NodeClass
// termination controller waits for its NodeClaims). A forged RemoveFinalizer released another
// controller's finalizer, or let a NodeClass go while NodeClaims still used it.
func TestFinalizerCommandsTouchOnlyDovetailFinalizers(t *testing.T) {
	class := func(deleting bool) runtime.Object {
		nc := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Finalizers: []string{events.FinalizerNodeClassTermination, "example.com/protect"}}}
		if deleting {
			nc.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		u, err := ToUnstructured(nc, apisv1.AWSGroupVersion, apisv1.KindEC2NodeClass)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	ref := apisv1.NodeClassOf(&apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	finalizers := func(f *fixture) []string {
		u, err := f.dyn.Resource(EC2NodeClassGVR).Get(f.ctx, "default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.GetFinalizers()
	}
	cmd := func(f *fixture, kind events.CommandKind, fin string) *events.Command {
		return &events.Command{ID: "fin", Kind: kind, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher), NodeClass: &ref, Finalizer: fin}
	}

	// Someone else's finalizer: never removed or added, on a Node or a NodeClass.
	n := node("n")
	n.Finalizers = []string{events.FinalizerTermination, "example.com/protect"}
	f := newOwnedFixture(t, []runtime.Object{n}, class(true))
	eventually(t, "sync", func() bool { return f.watcher.Node("n") != nil })
	other := &events.Command{ID: "fin-n", Kind: events.CommandRemoveFinalizer, Cluster: "test", SnapshotRevision: settledRevision(t, f.watcher), NodeName: "n", Finalizer: "example.com/protect"}
	if err := f.applier.Apply(f.ctx, other); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "command.finalizer") {
		t.Errorf("RemoveFinalizer example.com/protect of node n: %v, want ErrInvalidCommand naming command.finalizer", err)
	}
	if got, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{}); len(got.Finalizers) != 2 {
		t.Errorf("node finalizers %v, want both kept", got.Finalizers)
	}
	for _, kind := range []events.CommandKind{events.CommandRemoveFinalizer, events.CommandAddFinalizer} {
		if err := f.applier.Apply(f.ctx, cmd(f, kind, "example.com/protect")); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "command.finalizer") {
			t.Errorf("%s example.com/protect of the NodeClass: %v, want ErrInvalidCommand naming command.finalizer", kind, err)
		}
	}
	if got := finalizers(f); len(got) != 2 {
		t.Errorf("NodeClass finalizers %v, want both kept", got)
	}

	// Its own finalizer, from a NodeClass not being deleted: refused.
	f = newFixture(t, nil, class(false))
	eventually(t, "sync", func() bool { return len(finalizers(f)) == 2 })
	if got := outcome(f.applier.Apply(f.ctx, cmd(f, events.CommandRemoveFinalizer, events.FinalizerNodeClassTermination))); !strings.HasPrefix(got, "refused: EC2NodeClass default is not being deleted") {
		t.Errorf("release from a live NodeClass: %s, want refused", got)
	}

	// Being deleted, but a NodeClaim still uses it: refused; once none does: released.
	user := nodeClaimWith(t, "nc-user", pidN, func(nc *apisv1.NodeClaim) {
		nc.Spec.NodeClassRef = &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: apisv1.KindEC2NodeClass, Name: "default"}
	})
	f = newFixture(t, nil, class(true), user)
	eventually(t, "sync", func() bool { c, _ := f.watcher.NodeClaim("nc-user"); return c != nil })
	if got := outcome(f.applier.Apply(f.ctx, cmd(f, events.CommandRemoveFinalizer, events.FinalizerNodeClassTermination))); !strings.HasPrefix(got, "refused: NodeClaim nc-user still uses EC2NodeClass default") {
		t.Errorf("release while a NodeClaim uses it: %s, want refused", got)
	}
	if err := f.dyn.Resource(NodeClaimGVR).Delete(f.ctx, "nc-user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NodeClaim gone", func() bool { c, _ := f.watcher.NodeClaim("nc-user"); return c == nil })
	if err := f.applier.Apply(f.ctx, cmd(f, events.CommandRemoveFinalizer, events.FinalizerNodeClassTermination)); err != nil {
		t.Fatalf("release of a deleting, unused NodeClass: %v", err)
	}
	if got := finalizers(f); len(got) != 1 || got[0] != "example.com/protect" {
		t.Errorf("NodeClass finalizers %v, want only example.com/protect", got)
	}
}

// RegisterNode writes onto the Node only what its NodeClaim holds, as Karpenter's registration
// syncs the NodeClaim's labels, annotations and taints (kubernetes-sigs/karpenter
// pkg/controllers/nodeclaim/lifecycle/registration.go): the NodeClaim's labels (not the
// agent's mark) plus karpenter.sh/registered=true, its annotations, its taints and startup
// taints and its dovetail.dev/planned taint, and the termination finalizer. A forged RegisterNode
// wrote any label, annotation, taint (NoExecute included) or finalizer on a Dovetail node, around
// the limits on LabelNode and TaintNode.
func TestRegisterNodeWritesOnlyWhatItsNodeClaimHolds(t *testing.T) {
	startup := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	claimTaint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	legit := func() *events.Command {
		return &events.Command{ID: "reg", Kind: events.CommandRegisterNode, Cluster: "test", NodeName: "n",
			NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}}, Finalizer: events.FinalizerTermination,
			Labels:      map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelNodeRegistered: "true", "team": "ml"},
			Annotations: map[string]string{"example.com/owner": "ml"},
			Taints:      []corev1.Taint{claimTaint, startup, apisv1.PlannedTaint("nc")}}
	}
	cases := []struct {
		name string
		mod  func(*events.Command)
		want string
	}{
		{"a label the NodeClaim lacks", func(c *events.Command) { c.Labels["example.com/pci"] = "true" }, `refused: command.labels["example.com/pci"]`},
		{"a label value the NodeClaim does not hold", func(c *events.Command) { c.Labels["team"] = "web" }, `refused: command.labels["team"]`},
		{"an annotation the NodeClaim lacks", func(c *events.Command) { c.Annotations["example.com/x"] = "y" }, `refused: command.annotations["example.com/x"]`},
		{"a NoExecute taint", func(c *events.Command) {
			c.Taints = append(c.Taints, corev1.Taint{Key: "example.com/evict", Effect: corev1.TaintEffectNoExecute})
		}, "refused: command.taints[3]"},
		{"another finalizer", func(c *events.Command) { c.Finalizer = "example.com/protect" }, "invalid: command.finalizer"},
		{"what the NodeClaim holds", func(*events.Command) {}, "applied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := node("n")
			n.Spec.ProviderID = pidN
			n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}
			nc := nodeClaimWith(t, "nc", pidN, func(nc *apisv1.NodeClaim) {
				nc.Labels = map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent, "team": "ml"}
				nc.Annotations = map[string]string{"example.com/owner": "ml"}
				nc.Spec.Taints, nc.Spec.StartupTaints = []corev1.Taint{claimTaint}, []corev1.Taint{startup}
			})
			f := newFixture(t, []runtime.Object{n}, nc)
			eventually(t, "sync", func() bool { c, _ := f.watcher.NodeClaim("nc"); return c != nil && f.watcher.Node("n") != nil })
			cmd := legit()
			c.mod(cmd)
			cmd.SnapshotRevision = settledRevision(t, f.watcher)
			err := f.applier.Apply(f.ctx, cmd)
			got := outcome(err)
			if errors.Is(err, ErrInvalidCommand) {
				got = "invalid: " + strings.TrimPrefix(err.Error(), ErrInvalidCommand.Error()+": ")
			}
			if !strings.HasPrefix(got, c.want) {
				t.Fatalf("RegisterNode with %s: %s, want %s", c.name, got, c.want)
			}
			node, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
			if registered := node.Labels[apisv1.LabelNodeRegistered] == "true"; registered != (c.want == "applied") {
				t.Errorf("node labels %v taints %v: registered = %v, want %v", node.Labels, node.Spec.Taints, registered, c.want == "applied")
			}
		})
	}
}
