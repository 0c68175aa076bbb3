package kube

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// eventsIn lists the Events of a namespace by reason.
func eventsIn(t *testing.T, f *fixture, ns string) map[string][]corev1.Event {
	t.Helper()
	list, err := f.kube.CoreV1().Events(ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Event{}
	for _, e := range list.Items {
		out[e.Reason] = append(out[e.Reason], e)
	}
	return out
}

// TestCreateNodeClaimRecordsLaunchedAndNominated: a created NodeClaim gets Karpenter's Launched
// transition Event, each planned pod still pending gets Nominated naming it (in the pod's own
// namespace), a pod already bound gets none, and a redelivered command adds nothing.
func TestCreateNodeClaimRecordsLaunchedAndNominated(t *testing.T) {
	waiting := pod("shop", "cart-0", "")
	bound := pod("shop", "cart-1", "n1")
	f := newFixture(t, []runtime.Object{waiting, bound, node("n1")})
	eventually(t, "pods cached", func() bool { return f.watcher.Pod("shop", "cart-0") != nil })
	cmd := createCmd("default-abc12", "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1", 0)
	cmd.NodeClaim.Annotations = map[string]string{apisv1.AnnotationPlannedPods: "shop/cart-0,shop/cart-1,shop/gone"}
	cmd.NodeClaim.Status.Conditions = []metav1.Condition{{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched"}}
	for i := 0; i < 2; i++ {
		if err := f.applier.Apply(f.ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	claimEvents := eventsIn(t, f, metav1.NamespaceDefault)
	launched := claimEvents["Launched"]
	if len(launched) != 1 || launched[0].Count != 1 || launched[0].Type != corev1.EventTypeNormal ||
		launched[0].InvolvedObject.Kind != "NodeClaim" || launched[0].InvolvedObject.Name != "default-abc12" ||
		launched[0].Message != "Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched" {
		t.Fatalf("Launched events %+v", launched)
	}
	nominated := eventsIn(t, f, "shop")[kevents.Nominated]
	if len(nominated) != 1 || nominated[0].InvolvedObject.Name != "cart-0" || nominated[0].InvolvedObject.UID != waiting.UID ||
		nominated[0].Message != "Pod should schedule on: nodeclaim/default-abc12" || nominated[0].Count != 1 {
		t.Fatalf("Nominated events %+v, want one on shop/cart-0 naming the NodeClaim", nominated)
	}
}

// TestSetNodeClaimStatusRecordsTransitions: Registered Unknown→True and Initialized (new) →True
// each get one Event; a condition whose status did not change gets none.
func TestSetNodeClaimStatusRecordsTransitions(t *testing.T) {
	f := newFixture(t, nil, nodeClaimObj(t, "nc-1", ""))
	set := func(id string, conds ...metav1.Condition) {
		t.Helper()
		cmd := &events.Command{ID: id, Kind: events.CommandSetNodeClaimStatus, Cluster: "test",
			NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-1"}, Status: apisv1.NodeClaimStatus{Conditions: conds}}}
		if err := f.applier.Apply(f.ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	set("a", metav1.Condition{Type: apisv1.ConditionRegistered, Status: metav1.ConditionUnknown})
	set("b", metav1.Condition{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered"})
	set("c", metav1.Condition{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered"},
		metav1.Condition{Type: apisv1.ConditionInitialized, Status: metav1.ConditionTrue})
	got := eventsIn(t, f, metav1.NamespaceDefault)
	reg, ini := got["Registered"], got["Initialized"]
	if len(reg) != 1 || reg[0].Message != "Status condition transitioned, Type: Registered, Status: Unknown -> True, Reason: Registered" {
		t.Errorf("Registered events %+v", reg)
	}
	if len(ini) != 1 || ini[0].Message != "Status condition transitioned, Type: Initialized, Status: Unknown -> True, Reason: Initialized" {
		t.Errorf("Initialized events %+v", ini)
	}
}

// TestRecordEventsAggregates: the same Event from a later command counts on the one Event
// object (client-go's aggregation), a redelivered command counts nothing, a repeat within the
// dedupe window with the same message is not counted, a cluster-scoped object's Event lives in
// "default", and an invalid record is refused naming its field before anything is written.
func TestRecordEventsAggregates(t *testing.T) {
	f := newFixture(t, nil)
	p := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: "gpu-0", UID: "u1"}
	rec := func(id string, r events.EventRecord) {
		t.Helper()
		if err := f.applier.Apply(f.ctx, &events.Command{ID: id, Kind: events.CommandRecordEvents, Cluster: "test", Events: []events.EventRecord{r}}); err != nil {
			t.Fatal(err)
		}
	}
	capped := kevents.FailedSchedulingEvent(p, `nodepool "gpu": limits exceeded (remaining nvidia.com/gpu=0)`)
	rec("d1", capped)
	rec("d1", capped) // redelivered
	f.clock.Step(time.Minute)
	rec("d2", capped) // within FailedScheduling's 5 minutes, same message
	f.clock.Step(5 * time.Minute)
	rec("d3", capped) // past the window: counted
	f.clock.Step(time.Second)
	rec("d4", kevents.FailedSchedulingEvent(p, "no instance type satisfies the pod's requirements")) // new message: counted
	got := eventsIn(t, f, "shop")[kevents.FailedScheduling]
	if len(got) != 1 {
		t.Fatalf("%d FailedScheduling events, want one aggregated: %+v", len(got), got)
	}
	e := got[0]
	if e.Count != 3 || e.Type != corev1.EventTypeWarning || !e.FirstTimestamp.Time.Equal(t0) || !e.LastTimestamp.Time.Equal(t0.Add(6*time.Minute+time.Second)) ||
		e.Message != "Failed to schedule pod, no instance type satisfies the pod's requirements" || e.Annotations[AnnotationEventCommand] != "d4" {
		t.Fatalf("event %+v: want count 3, first %s, last 6m1s later, the latest message", e, t0)
	}
	// A cluster-scoped object: "default".
	pool := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodePool", Name: "default"}
	rec("d5", kevents.BudgetBlocked(pool, apisv1.DisruptionReasonDrifted))
	if b := eventsIn(t, f, metav1.NamespaceDefault)[kevents.DisruptionBlocked]; len(b) != 1 ||
		b[0].Message != "No allowed disruptions for disruption reason Drifted due to blocking budget" {
		t.Fatalf("budget events %+v", b)
	}
	// Invalid: a Pod without a namespace, a NodeClaim with one, an unknown kind.
	for _, bad := range []struct {
		r     events.EventRecord
		field string
	}{
		{events.EventRecord{Object: corev1.ObjectReference{Kind: "Pod", Name: "x"}, Type: "Normal", Reason: "R"}, "command.events[0].object.namespace"},
		{events.EventRecord{Object: corev1.ObjectReference{Kind: "NodeClaim", Namespace: "x", Name: "x"}, Type: "Normal", Reason: "R"}, "command.events[0].object.namespace"},
		{events.EventRecord{Object: corev1.ObjectReference{Kind: "Secret", Namespace: "x", Name: "x"}, Type: "Normal", Reason: "R"}, "command.events[0].object.kind"},
		{events.EventRecord{Object: p, Type: "Info", Reason: "R"}, "command.events[0].type"},
	} {
		err := f.applier.Apply(f.ctx, &events.Command{ID: "bad", Kind: events.CommandRecordEvents, Cluster: "test", Events: []events.EventRecord{bad.r}})
		if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("%+v: err = %v, want ErrInvalidCommand naming %s", bad.r, err, bad.field)
		}
	}
}

// TestCommandEventsOnlyWhenApplied: a TaintNode's DisruptionTerminating Events are recorded once
// the taint is in place, and not for a taint the budget refused (the NodePool gets Karpenter's
// budget event instead).
func TestCommandEventsOnlyWhenApplied(t *testing.T) {
	n1, n3 := node("n1"), node("n3")
	for _, n := range []*corev1.Node{n1, n3} {
		n.Labels[apisv1.LabelNodePool] = "default"
	}
	f := newOwnedFixture(t, []runtime.Object{n1, n3})
	rev := settledRevision(t, f.watcher)
	taint := func(id, name string) error {
		return f.applier.Apply(f.ctx, &events.Command{ID: id, Kind: events.CommandTaintNode, Cluster: "test", SnapshotRevision: rev, NodeName: name,
			Taint:  &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule},
			Budget: &events.BudgetReservation{NodePool: "default", Reason: apisv1.DisruptionReasonUnderutilized, MaxDisrupting: 1},
			Events: kevents.Disrupting(kevents.NamedNodeClaim("nc-"+name, ""), kevents.NamedNode(name, ""), "Underutilized/Delete")})
	}
	if err := taint("t1", "n1"); err != nil {
		t.Fatal(err)
	}
	var refused *RefusedError
	if err := taint("t3", "n3"); !errors.As(err, &refused) {
		t.Fatalf("second disruption of a pool allowing 1: err = %v, want refused", err)
	}
	got := eventsIn(t, f, metav1.NamespaceDefault)
	var msgs []string
	for _, e := range got[kevents.DisruptionTerminating] {
		msgs = append(msgs, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+": "+e.Message)
	}
	want := "NodeClaim/nc-n1: Disrupting NodeClaim: Underutilized/Delete,Node/n1: Disrupting Node: Underutilized/Delete"
	if len(msgs) != 2 || !strings.Contains(want, msgs[0]) || !strings.Contains(want, msgs[1]) {
		t.Errorf("DisruptionTerminating events %v, want %s", msgs, want)
	}
	if b := got[kevents.DisruptionBlocked]; len(b) != 1 || b[0].InvolvedObject.Kind != "NodePool" ||
		b[0].Message != "No allowed disruptions for disruption reason Underutilized due to blocking budget" {
		t.Errorf("DisruptionBlocked events %+v, want the NodePool's budget event", b)
	}
}

// TestNominatedEventsAreRateLimited: Nominated Events pass a token bucket of NominationBurst (10)
// refilled at NominationQPS (5 per second), as Karpenter's PodNominationRateLimiter: fifteen at
// one instant write ten; one second later fifteen more write five; other reasons are not
// limited.
func TestNominatedEventsAreRateLimited(t *testing.T) {
	f := newFixture(t, nil)
	batch := func(id string, from, n int, nominated bool) {
		t.Helper()
		var recs []events.EventRecord
		for i := from; i < from+n; i++ {
			p := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprintf("u%d", i))}
			if nominated {
				recs = append(recs, kevents.NominatedEvent(p, "default-abc12", ""))
			} else {
				recs = append(recs, kevents.FailedSchedulingEvent(p, "no instance type fits"))
			}
		}
		if err := f.applier.Apply(f.ctx, &events.Command{ID: id, Kind: events.CommandRecordEvents, Cluster: "test", Events: recs}); err != nil {
			t.Fatal(err)
		}
	}
	batch("n1", 0, 15, true)
	if got := len(eventsIn(t, f, "shop")[kevents.Nominated]); got != NominationBurst {
		t.Fatalf("%d Nominated events after 15 at once, want the burst of %d", got, NominationBurst)
	}
	f.clock.Step(time.Second)
	batch("n2", 15, 15, true)
	if got := len(eventsIn(t, f, "shop")[kevents.Nominated]); got != NominationBurst+NominationQPS {
		t.Fatalf("%d Nominated events one second later, want %d + %d", got, NominationBurst, NominationQPS)
	}
	batch("f1", 0, 30, false)
	if got := len(eventsIn(t, f, "shop")[kevents.FailedScheduling]); got != 30 {
		t.Fatalf("%d FailedScheduling events, want all 30", got)
	}
}

// metricLog is a telemetry.Recorder that keeps every value with its labels.
type metricLog struct {
	mu  sync.Mutex
	got []metricValue
}

type metricValue struct {
	name   string
	value  float64
	labels []string
}

func (m *metricLog) Record(mt *telemetry.Metric, v float64, labels ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, metricValue{mt.Name, v, labels})
}

func (m *metricLog) of(name string) []metricValue {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []metricValue
	for _, v := range m.got {
		if v.name == name {
			out = append(out, v)
		}
	}
	return out
}

// TestCreateNodeClaimRecordsProvisioningLatency: creating a NodeClaim records, for each planned
// pod still pending in the agent's cache, its creation until the create (the applier's clock:
// created at t0 − 7 s, so 7); a bound pod, a pod not in the cache and a redelivered command
// record nothing.
func TestCreateNodeClaimRecordsProvisioningLatency(t *testing.T) {
	created := metav1.NewTime(t0.Add(-7 * time.Second))
	waiting := pod("shop", "cart-0", "", func(p *corev1.Pod) { p.CreationTimestamp = created })
	bound := pod("shop", "cart-1", "n1", func(p *corev1.Pod) { p.CreationTimestamp = created })
	f := newFixture(t, []runtime.Object{waiting, bound, node("n1")})
	log := &metricLog{}
	f.applier.opts.Metrics = log
	eventually(t, "pods cached", func() bool { return f.watcher.Pod("shop", "cart-0") != nil && f.watcher.Pod("shop", "cart-1") != nil })
	cmd := createCmd("default-abc12", "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1", 0)
	cmd.NodeClaim.Labels = map[string]string{apisv1.LabelNodePool: "default"}
	cmd.NodeClaim.Annotations = map[string]string{apisv1.AnnotationPlannedPods: "shop/cart-0,shop/cart-1,shop/gone"}
	for range 2 {
		if err := f.applier.Apply(f.ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	got := log.of("dovetail_pod_provisioning_latency_seconds")
	if len(got) != 1 || got[0].value != 7 || len(got[0].labels) != 1 || got[0].labels[0] != "default" {
		t.Fatalf("provisioning latency %+v, want one value 7 labelled nodepool default", got)
	}
}

// TestRecordEventsManyAtOnce: a command's Events are written EventParallelism (8) at a time
// (issue 28), each still recorded once: a record repeated in the same command counts once, and
// one failing write is listed while the rest are recorded. client-go's fake clientset runs its
// reactors under one lock, so it cannot show the writes overlapping; make scale measures that
// (docs/scale.md).
func TestRecordEventsManyAtOnce(t *testing.T) {
	f := newFixture(t, nil)
	var recs []events.EventRecord
	for i := range 20 {
		p := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprintf("u%d", i))}
		recs = append(recs, kevents.FailedSchedulingEvent(p, "no instance type satisfies the pod's requirements"))
	}
	recs = append(recs, recs[3]) // the same Event again in the same command
	calls := 0
	f.kube.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++ // the fake's lock is held here
		if a.(k8stesting.CreateAction).GetObject().(*corev1.Event).InvolvedObject.Name == "web-11" {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	err := f.applier.Apply(f.ctx, &events.Command{ID: "d1", Kind: events.CommandRecordEvents, Cluster: "test", Events: recs})
	if err == nil || !strings.Contains(err.Error(), "recording 1 of 21 events") || !strings.Contains(err.Error(), "Pod/web-11") {
		t.Fatalf("err = %v, want the one failed write (web-11) listed", err)
	}
	if calls != 20 {
		t.Errorf("%d Event creates, want 20 (the repeat within the command is not written again)", calls)
	}
	got := eventsIn(t, f, "shop")[kevents.FailedScheduling]
	if len(got) != 19 {
		t.Fatalf("%d FailedScheduling Events, want 19 (20 pods, web-11's write failed)", len(got))
	}
	for _, e := range got {
		if e.Count != 1 {
			t.Errorf("%s: count %d, want 1", e.InvolvedObject.Name, e.Count)
		}
	}
}
