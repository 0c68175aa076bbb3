package disruption

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// A karpenter.sh/disrupted taint no Dovetail function owns (Karpenter's, value "") is stamped
// when it has no timeAdded and removed once StrayTaintTimeout (10 minutes) old; Dovetail's own
// values (consolidation, drift, interruption) and taints on nodes or NodeClaims being deleted
// (the termination path) are left alone.
func TestStrayTaints(t *testing.T) {
	c := csNewCluster(t, csT0)
	c.pool("default")
	disrupted := func(name, value string, added *time.Time) *corev1.Node {
		n := c.node(name, "default", "m5.large", "on-demand")
		tn := corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: value, Effect: corev1.TaintEffectNoSchedule}
		if added != nil {
			tn.TimeAdded = &metav1.Time{Time: *added}
		}
		n.Spec.Taints = append(n.Spec.Taints, tn)
		return n
	}
	old, recent := csT0.Add(-10*time.Minute), csT0.Add(-9*time.Minute)
	disrupted("a-karpenter-new", "", nil)
	disrupted("b-karpenter-old", "", &old)
	disrupted("c-karpenter-recent", "", &recent)
	disrupted("d-consolidation", "consolidation.abc.1", &old)
	disrupted("e-drifted", TaintValueDrifted, &old)
	disrupted("f-interrupted", TaintValueInterrupted, &old)
	gone := disrupted("g-node-deleting", "", &old)
	gone.DeletionTimestamp = &metav1.Time{Time: csT0}
	disrupted("h-claim-deleting", "", &old)
	c.snap.NodeClaims[len(c.snap.NodeClaims)-1].DeletionTimestamp = &metav1.Time{Time: csT0}
	c.node("i-untainted", "default", "m5.large", "on-demand")

	strays := StrayTaints(c.state(), csT0)
	if len(strays) != 2 {
		t.Fatalf("strays %+v: want a-karpenter-new (stamp) and b-karpenter-old (remove)", strays)
	}
	a, b := strays[0], strays[1]
	if a.Node != "a-karpenter-new" || a.Untaint || a.Taint.TimeAdded == nil || !a.Taint.TimeAdded.Time.Equal(csT0) || a.Taint.Value != "" {
		t.Errorf("first %+v: want a-karpenter-new stamped at %s", a, csT0)
	}
	if b.Node != "b-karpenter-old" || !b.Untaint {
		t.Errorf("second %+v: want b-karpenter-old removed", b)
	}
	cmds := StrayCommands("test", 7, strays)
	if len(cmds) != 2 || cmds[0].Kind != events.CommandTaintNode || cmds[1].Kind != events.CommandUntaintNode ||
		cmds[0].NodeName != "a-karpenter-new" || cmds[1].NodeName != "b-karpenter-old" || cmds[1].Taint.Key != apisv1.TaintKeyDisrupted ||
		cmds[0].ID == cmds[1].ID || cmds[0].SnapshotRevision != 7 {
		t.Fatalf("commands %+v", cmds)
	}
	for _, cmd := range cmds {
		if err := cmd.Validate(); err != nil {
			t.Errorf("%s: %v", cmd.Kind, err)
		}
	}
}

// ApplyTaint: a new key is appended; the same key and effect is tainted already, except a
// karpenter.sh/disrupted taint of the same value without timeAdded, which is stamped; the input
// is never modified.
func TestApplyTaint(t *testing.T) {
	at := &metav1.Time{Time: csT0}
	disrupted := corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}
	noExec := corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}
	have := []corev1.Taint{noExec, disrupted}
	stamp := disrupted
	stamp.TimeAdded = at
	for name, c := range map[string]struct {
		t       corev1.Taint
		changed bool
		want    []corev1.Taint
	}{
		"new key":             {corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}, true, []corev1.Taint{noExec, disrupted, {Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		"same, no time":       {disrupted, false, have},
		"stamp":               {stamp, true, []corev1.Taint{noExec, stamp}},
		"other value":         {corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: TaintValueDrifted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: at}, false, have},
		"NoExecute not dated": {corev1.Taint{Key: noExec.Key, Effect: corev1.TaintEffectNoExecute, TimeAdded: at}, false, have},
		// A reclaim takes over a node any other value holds (here the termination path's empty
		// value, or a stray's), value and timeAdded both.
		"interrupted takes over": {corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: TaintValueInterrupted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: at}, true,
			[]corev1.Taint{noExec, {Key: apisv1.TaintKeyDisrupted, Value: TaintValueInterrupted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: at}}},
		"other effect appends": {corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoExecute}, true, []corev1.Taint{noExec, disrupted, {Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoExecute}}},
	} {
		got, changed := ApplyTaint(have, c.t)
		if name == "interrupted takes over" {
			// ... and once it holds the node, it holds it: a second command changes nothing.
			if again, changed := ApplyTaint(got, c.t); changed || !reflect.DeepEqual(again, got) {
				t.Errorf("%s twice: %+v changed %v", name, again, changed)
			}
		}
		if changed != c.changed || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v changed %v, want %+v changed %v", name, got, changed, c.want, c.changed)
		}
		if have[1].TimeAdded != nil || len(have) != 2 {
			t.Fatalf("%s: the input was modified: %+v", name, have)
		}
	}
}
