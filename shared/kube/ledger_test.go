package kube

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func poolNode(name string) *corev1.Node {
	n := node(name)
	n.Labels[apisv1.LabelNodePool] = "default"
	n.Labels[apisv1.LabelNodeInitialized] = "true"
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// The agent is the ledger of the budget: two reservations of a budget of one, applied back to
// back (before the informer shows the first taint), grant one; a taint without a reservation
// (an interruption: involuntary) is applied all the same and counts against the budget after;
// once the caches show the taints, the count comes from them; a lapsed grant frees its unit.
func TestBudgetReservationsAreGrantedInOrder(t *testing.T) {
	f := newOwnedFixture(t, []runtime.Object{poolNode("a"), poolNode("b"), poolNode("c"), poolNode("d")})
	eventually(t, "sync", func() bool { return len(f.watcher.DisruptingNodes("default")) == 0 && f.watcher.Node("d") != nil })
	rev := settledRevision(t, f.watcher)
	budget := &events.BudgetReservation{NodePool: "default", Reason: apisv1.DisruptionReasonDrifted, MaxDisrupting: 1}
	taint := func(id, node string, b *events.BudgetReservation) error {
		return f.applier.Apply(f.ctx, &events.Command{ID: id, Kind: events.CommandTaintNode, Cluster: "test", SnapshotRevision: rev, NodeName: node,
			Taint: &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}, Budget: b})
	}
	if err := taint("t-a", "a", budget); err != nil {
		t.Fatal(err)
	}
	var refused *RefusedError
	if err := taint("t-b", "b", budget); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "allows 1 disrupting node(s), 1 already are (a)") {
		t.Fatalf("second reservation: %v, want refused naming the budget and node a", err)
	}
	if err := taint("t-a-again", "a", budget); err != nil {
		t.Fatalf("the node holding the unit asks again: %v, want granted", err)
	}
	if err := taint("t-c", "c", nil); err != nil {
		t.Fatalf("an interruption's taint: %v, want applied (involuntary, no reservation)", err)
	}
	eventually(t, "the caches show both taints", func() bool { return len(f.watcher.DisruptingNodes("default")) == 2 })
	b2 := *budget
	b2.MaxDisrupting = 2
	if err := taint("t-d", "d", &b2); !errors.As(err, &refused) {
		t.Fatalf("a budget of two with a and c disrupting: %v, want refused", err)
	}
	// A grant the caches never show (the taint lost) frees its unit after grantTTL.
	f.applier.ledger.note("ghost", "default", f.clock.Now())
	f.clock.Step(grantTTL + time.Second)
	b2.MaxDisrupting = 3
	if err := taint("t-d-2", "d", &b2); err != nil {
		t.Fatalf("a budget of three with a and c disrupting and a lapsed grant: %v, want granted", err)
	}
	// A drain follows the taint: a node not tainted karpenter.sh/disrupted is not drained.
	err := f.applier.Apply(f.ctx, &events.Command{ID: "drain-b", Kind: events.CommandDrainNode, Cluster: "test", SnapshotRevision: rev, NodeName: "b"})
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "not tainted") {
		t.Fatalf("drain of an untainted node: %v, want refused", err)
	}
	evs, _ := f.kube.CoreV1().Events(metav1.NamespaceDefault).List(f.ctx, metav1.ListOptions{})
	if len(evs.Items) == 0 {
		t.Fatal("refusals must be recorded as Events")
	}
}

// DeleteNode of a node without the termination finalizer waits for its drain, but not beyond its
// NodeClaim's terminationGracePeriod counted from the karpenter.sh/disrupted taint: every drain
// is bounded by it.
func TestDeleteNodePastTheTerminationGracePeriod(t *testing.T) {
	n := poolNode("stuck")
	added := metav1.NewTime(t0.Add(-30 * time.Minute))
	n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added}}
	hour := metav1.Duration{Duration: time.Hour}
	nc, err := ToUnstructured(&apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-stuck",
		Labels: map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent}}, Spec: apisv1.NodeClaimSpec{TerminationGracePeriod: &hour},
		Status: apisv1.NodeClaimStatus{NodeName: "stuck", ProviderID: "aws:///us-east-1a/i-stuck"}}, apisv1.GroupVersion, "NodeClaim")
	if err != nil {
		t.Fatal(err)
	}
	f := newOwnedFixture(t, []runtime.Object{n, pod("default", "held", "stuck")}, nc)
	eventually(t, "sync", func() bool { return len(f.watcher.PodsOnNode("stuck")) == 1 })
	rev := settledRevision(t, f.watcher)
	del := func(id string) error {
		return f.applier.Apply(f.ctx, &events.Command{ID: id, Kind: events.CommandDeleteNode, Cluster: "test", SnapshotRevision: rev, NodeName: "stuck"})
	}
	var refused *RefusedError
	if err := del("del-1"); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "not drained") {
		t.Fatalf("30 min into a 1 h grace period: %v, want refused (pods not drained)", err)
	}
	f.clock.Step(31 * time.Minute)
	if err := del("del-2"); err != nil {
		t.Fatalf("past the grace period: %v, want the node deleted", err)
	}
	if _, err := f.kube.CoreV1().Nodes().Get(f.ctx, "stuck", metav1.GetOptions{}); err == nil {
		t.Fatal("node still there")
	}
}

// A new leader's revisions start above every revision the old leader published, whatever the
// two processes' clocks say: the standby's own revisions (counted from its clock, an hour behind
// the old leader's here) are lower than the old leader's. It takes the floor the old leader left
// on the ledger ConfigMap, so a command made from the old leader's snapshot predates its history
// and is refused as stale, while one made from its own snapshot is applied.
func TestNewLeaderRevisionsStartAboveTheOldLeaders(t *testing.T) {
	objs := []runtime.Object{poolNode("a")}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), ListKinds, ownAll(t, objs, nil)...)
	kc := fake.NewClientset(objs...)
	replica := func(now time.Time) (*Watcher, *Applier) {
		clk := testingclock.NewFakeClock(now)
		w, err := NewWatcher(kc, dyn, WatcherOptions{Namespace: testNamespace, Clock: clk, SyncTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(func() { cancel(); w.Shutdown() })
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return w, NewApplier(kc, dyn, w, ApplierOptions{Namespace: testNamespace, Clock: clk})
	}
	ctx := context.Background()
	oldW, oldA := replica(t0)
	newW, newA := replica(t0.Add(-time.Hour))
	eventually(t, "sync", func() bool { return oldW.Node("a") != nil && newW.Node("a") != nil })
	floor := func() string {
		cm, err := kc.CoreV1().ConfigMaps(testNamespace).Get(ctx, DisruptionLedgerConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Annotations[RevisionFloorAnnotation]
	}

	oldRev := settledRevision(t, oldW)
	from, end, err := oldA.ReserveRevisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// No floor yet: the old leader starts just above its own clock-based revisions (above the
	// settled one: an informer event may still land between the read and the reservation, and
	// one landing after the floor was written raises the start by that much inside the span).
	if from <= oldRev || from > oldW.Revision() || from < end-RevisionTerm || from >= end-RevisionTerm+8 || floor() != strconv.FormatInt(end, 10) {
		t.Fatalf("old leader reserved [%d, %d), floor %s; want it to start above its revision %d, at most at %d, span %d, and the floor at its end",
			from, end, floor(), oldRev, oldW.Revision(), RevisionTerm)
	}
	published := oldW.Revision()
	standby := settledRevision(t, newW)
	if standby >= published {
		t.Fatalf("standby's own revision %d is not below the old leader's %d: the case under test needs it to be", standby, published)
	}

	from2, end2, err := newA.ReserveRevisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if from2 < end || from2 >= end+8 || end2 != end+RevisionTerm || floor() != strconv.FormatInt(end2, 10) || newW.Revision() < end || newW.Revision() >= end+8 {
		t.Fatalf("new leader reserved [%d, %d) at revision %d, floor %s; want [%d, %d): the old leader's end", from2, end2, newW.Revision(), floor(), end, end+RevisionTerm)
	}
	taint := func(id string, rev int64) error {
		return newA.Apply(ctx, &events.Command{ID: id, Kind: events.CommandTaintNode, Cluster: "test", SnapshotRevision: rev, NodeName: "a",
			Taint: &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}})
	}
	var refused *RefusedError
	if err := taint("from-the-old-leader", published); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "predates this agent") {
		t.Fatalf("command of the old leader's revision %d: %v, want refused as predating the new leader", published, err)
	}
	if err := taint("from-the-new-leader", newW.Revision()); err != nil {
		t.Fatalf("command of the new leader's own revision: %v, want applied", err)
	}

	// A floor that is not a number is refused naming the annotation, never read as 0.
	cm, err := kc.CoreV1().ConfigMaps(testNamespace).Get(ctx, DisruptionLedgerConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations[RevisionFloorAnnotation] = "soon"
	if _, err := kc.CoreV1().ConfigMaps(testNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := oldA.ReserveRevisions(ctx); err == nil || !strings.Contains(err.Error(), "metadata.annotations["+RevisionFloorAnnotation+`]: "soon"`) {
		t.Fatalf("garbled floor: %v, want an error naming the annotation", err)
	}
}
