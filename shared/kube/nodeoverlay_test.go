package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// overlayObj is a NodeOverlay as the API server stores it after its create (generation 1).
// Tests create it through NodeOverlayGVR (createOverlays): the dynamic fake's tracker files
// objects given to its constructor under the resource meta.UnsafeGuessKindToResource guesses,
// "nodeoverlaies" for this kind.
func overlayObj(t *testing.T, name, priceAdjustment string, conds ...metav1.Condition) *unstructured.Unstructured {
	t.Helper()
	o := &apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: apisv1.NodeOverlaySpec{PriceAdjustment: &priceAdjustment}, Status: apisv1.NodeOverlayStatus{Conditions: conds}}
	u, err := ToUnstructured(o, apisv1.NodeOverlayGroupVersion, apisv1.KindNodeOverlay)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestWatcherSnapshotsNodeOverlays: the agent watches karpenter.sh/v1alpha1 nodeoverlays and
// carries them in its snapshots, sorted by name; a new one bumps the NodeOverlay revision the
// agent's change loop publishes on.
func TestWatcherSnapshotsNodeOverlays(t *testing.T) {
	f := newFixture(t, nil)
	createOverlays(t, f, overlayObj(t, "spot-discount", "-30%"), overlayObj(t, "savings-plan", "-0.01"))
	if !f.watcher.WatchesNodeOverlays() {
		t.Fatal("NodeOverlays served but not watched")
	}
	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.NodeOverlays) != 2 || snap.NodeOverlays[0].Name != "savings-plan" || snap.NodeOverlays[1].Name != "spot-discount" ||
		*snap.NodeOverlays[1].Spec.PriceAdjustment != "-30%" {
		t.Fatalf("snapshot NodeOverlays %+v, want savings-plan then spot-discount (-30%%)", snap.NodeOverlays)
	}
	// The snapshot codec carries them to the functions.
	enc, err := events.EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := events.DecodeSnapshot(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.NodeOverlays) != 2 || *dec.NodeOverlays[0].Spec.PriceAdjustment != "-0.01" {
		t.Fatalf("decoded NodeOverlays %+v, want the two overlays", dec.NodeOverlays)
	}
	before := f.watcher.Revisions().LastChange(KindNodeOverlay)
	if _, err := f.dyn.Resource(NodeOverlayGVR).Create(f.ctx, overlayObj(t, "reserved", "+0.5"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NodeOverlay revision", func() bool { return f.watcher.Revisions().LastChange(KindNodeOverlay) > before })
}

// TestWatcherWithoutNodeOverlayCRD: a cluster that does not serve nodeoverlays (404, the CRD is
// not installed) starts the watcher without them and snapshots carry none; a 403 (RBAC)
// fails the start naming the resource.
func TestWatcherWithoutNodeOverlayCRD(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"not served", apierrors.NewNotFound(NodeOverlayGVR.GroupResource(), ""), false},
		{"forbidden", apierrors.NewForbidden(NodeOverlayGVR.GroupResource(), "", errors.New("RBAC")), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), ListKinds, nodePoolObj(t, "default"))
			dyn.PrependReactor("list", "nodeoverlays", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, c.err })
			clk := testingclock.NewFakeClock(t0)
			w, err := NewWatcher(fake.NewClientset(), dyn, WatcherOptions{Namespace: testNamespace, Clock: clk, SyncTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(func() { cancel(); w.Shutdown() })
			err = w.Start(ctx)
			if c.wantErr {
				if err == nil || !apierrors.IsForbidden(errors.Unwrap(err)) {
					t.Fatalf("Start: %v, want the 403 of nodeoverlays", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			snap, err := NewSnapshotBuilder(w, "test", clk).Build()
			if err != nil {
				t.Fatal(err)
			}
			if w.WatchesNodeOverlays() || snap.NodeOverlays != nil || len(snap.NodePools) != 1 {
				t.Fatalf("watches overlays %v, snapshot overlays %v pools %d; want none watched, none carried, the pool", w.WatchesNodeOverlays(), snap.NodeOverlays, len(snap.NodePools))
			}
		})
	}
}

// TestApplySetNodeOverlayStatus writes Karpenter's NodeOverlay conditions through /status.
func TestApplySetNodeOverlayStatus(t *testing.T) {
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	validTrue := metav1.Condition{Type: apisv1.ConditionValidationSucceeded, Status: metav1.ConditionTrue, Reason: apisv1.ConditionValidationSucceeded,
		ObservedGeneration: 1, LastTransitionTime: earlier}
	f := newFixture(t, nil)
	createOverlays(t, f, overlayObj(t, "a", "-10%", validTrue), overlayObj(t, "b", "-20%"))
	conflict := []metav1.Condition{
		{Type: apisv1.ConditionValidationSucceeded, Status: metav1.ConditionFalse, Reason: apisv1.ReasonConflict, Message: apisv1.MessageOverlayConflict, ObservedGeneration: 1},
		{Type: apisv1.ConditionReady, Status: metav1.ConditionFalse, Reason: apisv1.ReasonUnhealthyDependents, Message: "ValidationSucceeded=False", ObservedGeneration: 1},
	}
	valid := []metav1.Condition{
		{Type: apisv1.ConditionValidationSucceeded, Status: metav1.ConditionTrue, Reason: apisv1.ConditionValidationSucceeded, ObservedGeneration: 1},
		{Type: apisv1.ConditionReady, Status: metav1.ConditionTrue, Reason: apisv1.ConditionReady, ObservedGeneration: 1},
	}
	cmd := func(id, name string, gen int64, conds []metav1.Condition) *events.Command {
		return &events.Command{ID: id, Kind: events.CommandSetNodeOverlayStatus, Cluster: "test",
			NodeOverlay: &apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}, Status: apisv1.NodeOverlayStatus{Conditions: conds}}}
	}
	get := func(name string) *apisv1.NodeOverlay {
		t.Helper()
		u, err := f.dyn.Resource(NodeOverlayGVR).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o := &apisv1.NodeOverlay{}
		if err := FromUnstructured(u, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	// a: ValidationSucceeded stays True (its time kept), Ready is new (stamped now).
	if err := f.applier.Apply(f.ctx, cmd("1", "a", 1, valid)); err != nil {
		t.Fatal(err)
	}
	a := get("a")
	vs, ready := meta.FindStatusCondition(a.Status.Conditions, apisv1.ConditionValidationSucceeded), meta.FindStatusCondition(a.Status.Conditions, apisv1.ConditionReady)
	if len(a.Status.Conditions) != 2 || vs == nil || !vs.LastTransitionTime.Equal(&earlier) || ready == nil || ready.Status != metav1.ConditionTrue || !ready.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("a's conditions %+v: want ValidationSucceeded True since %v, Ready True since %v", a.Status.Conditions, earlier, t0)
	}
	// b conflicts: both False, with Karpenter's reason and message.
	if err := f.applier.Apply(f.ctx, cmd("2", "b", 1, conflict)); err != nil {
		t.Fatal(err)
	}
	b := get("b")
	vs = meta.FindStatusCondition(b.Status.Conditions, apisv1.ConditionValidationSucceeded)
	if vs == nil || vs.Status != metav1.ConditionFalse || vs.Reason != "Conflict" || vs.Message != "conflict with another overlay" {
		t.Fatalf("b's conditions %+v: want ValidationSucceeded False, Conflict", b.Status.Conditions)
	}
	// Decided on generation 1 of a NodeOverlay now at 2: left alone.
	u, _ := f.dyn.Resource(NodeOverlayGVR).Get(f.ctx, "b", metav1.GetOptions{})
	u.SetGeneration(2)
	if _, err := f.dyn.Resource(NodeOverlayGVR).Update(f.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.applier.Apply(f.ctx, cmd("3", "b", 1, valid)); err != nil {
		t.Fatal(err)
	}
	if vs := meta.FindStatusCondition(get("b").Status.Conditions, apisv1.ConditionValidationSucceeded); vs.Status != metav1.ConditionFalse {
		t.Errorf("a status decided on generation 1 was written on generation 2: %+v", vs)
	}
	// Gone: nothing to do. Another condition type: refused, naming the field.
	if err := f.applier.Apply(f.ctx, cmd("4", "gone", 1, valid)); err != nil {
		t.Errorf("NodeOverlay gone: %v, want success", err)
	}
	bad := cmd("5", "a", 1, []metav1.Condition{{Type: "Drifted", Status: metav1.ConditionTrue, Reason: "Drifted"}})
	if err := f.applier.Apply(f.ctx, bad); !errors.Is(err, ErrInvalidCommand) || !containsAll(err.Error(), "command.nodeOverlay.status.conditions[0].type", "Drifted") {
		t.Errorf("a Drifted condition: %v, want an invalid command naming the field", err)
	}
	if err := bad.Validate(); err == nil || !containsAll(err.Error(), "command.nodeOverlay.status.conditions[0].type") {
		t.Errorf("Validate of a Drifted condition: %v, want an error naming the field", err)
	}
}

// createOverlays creates the NodeOverlays and waits until the watcher's cache has them.
func createOverlays(t *testing.T, f *fixture, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		if _, err := f.dyn.Resource(NodeOverlayGVR).Create(f.ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "NodeOverlays cached", func() bool { return len(f.watcher.nodeOverlays.GetStore().List()) == len(objs) })
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
