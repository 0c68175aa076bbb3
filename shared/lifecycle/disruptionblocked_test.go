package lifecycle

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// blockedWorld is an initialized, registered node of NodePool "default" (WhenEmptyOrUnderutilized,
// consolidateAfter 0s) with one pod web-0 that a ReplicaSet controls.
type blockedWorld struct {
	nc   apisv1.NodeClaim
	node corev1.Node
	pool apisv1.NodePool
	pods []corev1.Pod
	pdbs []policyv1.PodDisruptionBudget
}

func newBlockedWorld() *blockedWorld {
	nc, n := registered()
	initAt := metav1.NewTime(t0.Add(time.Minute))
	nc.Status.Conditions = []metav1.Condition{
		{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(t0)},
		{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: ReasonRegistered, LastTransitionTime: initAt},
		{Type: apisv1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: ReasonInitialized, LastTransitionTime: initAt},
		{Type: apisv1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReady, LastTransitionTime: initAt},
		{Type: ConditionConsistentStateFound, Status: metav1.ConditionTrue, Reason: ConditionConsistentStateFound, LastTransitionTime: initAt},
		{Type: ConditionConsolidatable, Status: metav1.ConditionTrue, Reason: ConditionConsolidatable, LastTransitionTime: initAt},
	}
	nc.Annotations[apisv1.AnnotationPlannedPods] = "" // its planned pods are bound: nothing to nominate
	n.Labels[apisv1.LabelNodeInitialized] = "true"
	n.Spec.Taints = n.Spec.Taints[:1] // the startup taint is gone
	after := apisv1.MustParseNillableDuration("0s")
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Disruption = apisv1.Disruption{ConsolidationPolicy: apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: &after}
	ctrl := true
	web := pod("web-0", n.Name, 30)
	web.Labels = map[string]string{"app": "web"}
	web.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: &ctrl}}
	web.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return &blockedWorld{nc: nc, node: n, pool: pool, pods: []corev1.Pod{web}}
}

func (w *blockedWorld) decide(at time.Time) Decision {
	s := snapshot(at, []apisv1.NodeClaim{w.nc}, []corev1.Node{w.node}, w.pods...)
	s.NodePools = []apisv1.NodePool{w.pool}
	s.PDBs = w.pdbs
	return Decide(s, Options{})
}

// blockedCmds are the decision's commands that write or clear DisruptionBlocked.
func blockedCmds(d Decision) []events.Command {
	var out []events.Command
	for _, c := range d.Commands {
		if c.Kind != events.CommandSetNodeClaimStatus {
			continue
		}
		if condOf(c, ConditionDisruptionBlocked) != nil || (len(c.ClearConditions) == 1 && c.ClearConditions[0] == ConditionDisruptionBlocked) {
			out = append(out, c)
		}
	}
	return out
}

// Each standing blocker lands on the NodeClaim as DisruptionBlocked=True, reason its
// disruption.BlockerKind, message "<kind> <object>: <message>" naming the object (the messages
// are shared/disruption's, quoted here from its rules).
func TestDisruptionBlockedNamesEachBlocker(t *testing.T) {
	const node = "ip-10-0-0-4.ec2.internal"
	for _, tc := range []struct {
		name   string
		edit   func(w *blockedWorld)
		reason disruption.BlockerKind
		msg    string
	}{
		{"pod do-not-disrupt", func(w *blockedWorld) {
			w.pods[0].Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
		},
			disruption.BlockerDoNotDisrupt, "DoNotDisrupt Pod/default/web-0: pod default/web-0 is annotated karpenter.sh/do-not-disrupt"},
		{"PDB allowing 0", func(w *blockedWorld) {
			w.pdbs = []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					MaxUnavailable: &intstr.IntOrString{IntVal: 0}},
				Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 0}}}
		}, disruption.BlockerPDB,
			"PodDisruptionBudget PodDisruptionBudget/default/web: PodDisruptionBudget default/web allows 0 disruption(s); evicting pod default/web-0 would need 1"},
		{"node do-not-disrupt", func(w *blockedWorld) { w.node.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"} },
			disruption.BlockerDoNotDisrupt, "DoNotDisrupt Node/" + node + ": node is annotated karpenter.sh/do-not-disrupt"},
		{"pod without a controller", func(w *blockedWorld) { w.pods[0].OwnerReferences = nil },
			disruption.BlockerNoController, "NoController Pod/default/web-0: pod default/web-0 has no controller owner and could not be recreated elsewhere"},
		{"consolidateAfter Never", func(w *blockedWorld) {
			never := apisv1.MustParseNillableDuration("Never")
			w.pool.Spec.Disruption.ConsolidateAfter = &never
		}, disruption.BlockerConsolidateAfter, `ConsolidateAfter NodePool/default: nodepool "default" has consolidateAfter Never`},
		// Every blocker, in Candidates' order; the reason is the first.
		{"node and pod", func(w *blockedWorld) {
			w.node.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
			w.pods[0].OwnerReferences = nil
		}, disruption.BlockerDoNotDisrupt, "DoNotDisrupt Node/" + node + ": node is annotated karpenter.sh/do-not-disrupt\n" +
			"NoController Pod/default/web-0: pod default/web-0 has no controller owner and could not be recreated elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newBlockedWorld()
			at := t0.Add(time.Hour)
			if c := blockedCmds(w.decide(at)); len(c) != 0 {
				t.Fatalf("nothing blocks yet: %+v", c)
			}
			tc.edit(w)
			d := w.decide(at)
			c := blockedCmds(d)
			if len(c) != 1 {
				t.Fatalf("want one DisruptionBlocked write, got %+v", c)
			}
			got := condOf(c[0], ConditionDisruptionBlocked)
			if got.Status != metav1.ConditionTrue || got.Reason != string(tc.reason) || got.Message != tc.msg || !got.LastTransitionTime.Time.Equal(at) {
				t.Fatalf("condition %+v\nwant True %s %q since %v", got, tc.reason, tc.msg, at)
			}
			if c[0].NodeClaim.Name != w.nc.Name || c[0].NodeClaim.Status.NodeName != "" || c[0].SnapshotRevision != 7 {
				t.Errorf("command %+v", c[0])
			}
		})
	}
}

// Written once: the same blockers on a later snapshot write nothing, also while a
// consolidateAfter counts down (the countdown is Consolidatable's); a changed message is
// rewritten with the transition time kept; once nothing blocks the condition is removed, and
// then nothing is written again.
func TestDisruptionBlockedWrittenOnChangeOnly(t *testing.T) {
	w := newBlockedWorld()
	w.pods[0].Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
	at := t0.Add(time.Hour)
	w.pods[0].Status.StartTime = &metav1.Time{Time: at} // the last pod event
	w.nc.Status.LastPodEventTime = &metav1.Time{Time: at}
	d := w.decide(at)
	if len(blockedCmds(d)) != 1 {
		t.Fatalf("first write: %+v", blockedCmds(d))
	}
	applyStatus(&w.nc, d)
	hour := apisv1.MustParseNillableDuration("1h")
	w.pool.Spec.Disruption.ConsolidateAfter = &hour
	for _, later := range []time.Duration{time.Second, 10 * time.Minute, 2 * time.Hour} {
		d := w.decide(at.Add(later))
		if c := blockedCmds(d); len(c) != 0 {
			t.Fatalf("unchanged at +%s: %+v", later, c)
		}
		// The countdown is in force before the hour: Consolidatable (True in the fixture) goes.
		if cleared := strings.Contains(kinds(d.Commands), "SetNodeClaimStatus"); cleared != (later < time.Hour) {
			t.Fatalf("at +%s Consolidatable cleared %v: %s", later, cleared, kinds(d.Commands))
		}
	}
	// A pod answers to the first rule it breaks: losing its controller owner while annotated
	// changes nothing; losing the annotation then makes NoController the blocker, rewritten
	// with the transition time kept (still True).
	w.pods[0].OwnerReferences = nil
	if c := blockedCmds(w.decide(at.Add(3 * time.Hour))); len(c) != 0 {
		t.Fatalf("the pod's first rule unchanged: %+v", c)
	}
	w.pods[0].Annotations = nil
	d = w.decide(at.Add(3 * time.Hour))
	c := blockedCmds(d)
	if len(c) != 1 {
		t.Fatalf("changed blocker: %+v", c)
	}
	if got := condOf(c[0], ConditionDisruptionBlocked); got.Reason != string(disruption.BlockerNoController) || !got.LastTransitionTime.Time.Equal(at) {
		t.Fatalf("changed blocker %+v, want NoController since %v", got, at)
	}
	applyStatus(&w.nc, d)
	// Nothing blocks: removed once.
	w.pods = nil
	d = w.decide(at.Add(4 * time.Hour))
	c = blockedCmds(d)
	if len(c) != 1 || len(c[0].ClearConditions) != 1 || len(c[0].NodeClaim.Status.Conditions) != 0 {
		t.Fatalf("want DisruptionBlocked removed: %+v", c)
	}
	w.nc.Status.Conditions = w.nc.Status.Conditions[:len(w.nc.Status.Conditions)-1]
	if condition(&w.nc, ConditionDisruptionBlocked) != nil {
		t.Fatal("test setup: DisruptionBlocked should be the last condition")
	}
	if c := blockedCmds(w.decide(at.Add(5 * time.Hour))); len(c) != 0 {
		t.Fatalf("removed already: %+v", c)
	}
}

// Passing states are not blockers here: a node tainted karpenter.sh/disrupted (being drained
// for a disruption) or not initialized yet gets no DisruptionBlocked for that alone, while a
// standing blocker on it is still written; a NodeClaim whose NodePool is not in the snapshot is
// left alone.
func TestDisruptionBlockedIgnoresPassingStates(t *testing.T) {
	at := t0.Add(time.Hour)
	disrupting := func(w *blockedWorld) {
		w.node.Spec.Taints = append(w.node.Spec.Taints, corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule})
	}
	notInitialized := func(w *blockedWorld) {
		delete(w.node.Labels, apisv1.LabelNodeInitialized)
		w.node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		w.nc.Status.Conditions = w.nc.Status.Conditions[:2] // Launched, Registered
	}
	for name, edit := range map[string]func(*blockedWorld){"disrupting": disrupting, "not initialized": notInitialized} {
		w := newBlockedWorld()
		edit(w)
		if c := blockedCmds(w.decide(at)); len(c) != 0 {
			t.Fatalf("%s: %+v", name, c)
		}
		w.pods[0].OwnerReferences = nil
		c := blockedCmds(w.decide(at))
		if len(c) != 1 || condOf(c[0], ConditionDisruptionBlocked).Reason != string(disruption.BlockerNoController) {
			t.Fatalf("%s with a bare pod: %+v", name, c)
		}
	}
	w := newBlockedWorld()
	w.pods[0].OwnerReferences = nil
	w.pool.Name = "other"
	if c := blockedCmds(w.decide(at)); len(c) != 0 {
		t.Fatalf("NodePool not in the snapshot: %+v", c)
	}
}

// The message fits the API's 32768-byte limit: whole lines while they fit, then a line counting
// the rest.
func TestBlockersMessageCapped(t *testing.T) {
	var bs []disruption.Blocker
	for i := range 1000 {
		name := fmt.Sprintf("pod-%04d-%s", i, strings.Repeat("x", 40))
		bs = append(bs, disruption.Blocker{Kind: disruption.BlockerNoController, Object: disruption.ObjectRef{Kind: "Pod", Namespace: "default", Name: name},
			Message: "pod default/" + name + " has no controller owner and could not be recreated elsewhere"})
	}
	msg := BlockersMessage(bs)
	if len(msg) > MaxConditionMessageBytes {
		t.Fatalf("message is %d bytes", len(msg))
	}
	lines := strings.Split(msg, "\n")
	// Each line is "NoController Pod/default/<49-byte name>: pod default/<name> has no
	// controller owner and could not be recreated elsewhere": 12+1+12+49+2+12+49+61 = 198 bytes,
	// 199 with its newline. 164 lines take 198+163×199 = 32635 bytes; a 165th would make 32834,
	// so the count of the other 836 follows (21 bytes: 32656 in all).
	shown := len(lines) - 1
	if len(lines[0]) != 198 || shown != 164 || lines[shown] != "(836 more not shown)" || len(msg) != 32656 {
		t.Fatalf("%d lines, first %d bytes, last %q, %d bytes", len(lines), len(lines[0]), lines[len(lines)-1], len(msg))
	}
	if one := BlockersMessage(bs[:1]); one != lines[0] {
		t.Errorf("one blocker: %q", one)
	}
	// A first line too long on its own (no real name is this long) is cut, on a rune boundary,
	// to leave room for the count: at most 32768 − len("\n(1 more not shown)") = 32749 bytes;
	// after the 52-byte "PodDisruptionBudget PodDisruptionBudget/default/db: " that leaves
	// 32697 for two-byte runes, so 32696 of them: 32748 bytes.
	long := disruption.Blocker{Kind: disruption.BlockerPDB, Object: disruption.ObjectRef{Kind: "PodDisruptionBudget", Namespace: "default", Name: "db"},
		Message: strings.Repeat("é", 20000)} // 2 bytes each
	msg = BlockersMessage([]disruption.Blocker{long, bs[0]})
	head, tail, _ := strings.Cut(msg, "\n")
	if len(msg) > MaxConditionMessageBytes || len(head) != 32748 || tail != "(1 more not shown)" || !utf8.ValidString(head) {
		t.Errorf("long first line: %d bytes, head %d bytes, tail %q", len(msg), len(head), tail)
	}
}
