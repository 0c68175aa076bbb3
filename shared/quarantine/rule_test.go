package quarantine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// pod is a pod of Deployment dep (ReplicaSet dep-hash), created at created.
func pod(dep, name string, created time.Time) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: metav1.NewTime(created),
		Labels:          map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "5d8f7c"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: dep + "-5d8f7c", Controller: ptr.To(true)}}}}
}

// crashing is a bound pod whose container restarted n times, last exiting (reason) ago.
func crashing(dep, name, node string, n int32, reason string, ago time.Duration) corev1.Pod {
	p := pod(dep, name, now.Add(-time.Hour))
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: n,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: reason, FinishedAt: metav1.NewTime(now.Add(-ago))}}}}
	return p
}

func ready(dep, name, node string) corev1.Pod {
	p := pod(dep, name, now.Add(-time.Hour))
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

func pendingPods(dep string, n int) []corev1.Pod {
	var out []corev1.Pod
	for i := 0; i < n; i++ {
		// Created one second apart, in reverse name order: the oldest goes first.
		out = append(out, pod(dep, fmt.Sprintf("%s-p%03d", dep, i), now.Add(-time.Duration(i)*time.Second)))
	}
	return out
}

func snapshot(pools []apisv1.NodePool, bound []corev1.Pod, pending []corev1.Pod) *events.Snapshot {
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{apisv1.LabelNodePool: "default"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{apisv1.LabelNodePool: "gpu"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sys"}},
	}
	return &events.Snapshot{Time: metav1.NewTime(now), NodePools: pools, Nodes: nodes, Pods: bound, PendingPods: pending}
}

func pool(name string, ann map[string]string) apisv1.NodePool {
	return apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// Two crash-looping pods (5 restarts, last exit 30 s ago; defaults: 3 restarts within 10 m) and
// 200 pending replicas: sick 2 of 2 running, none on trial, allowance 1 → 1 admitted (the oldest:
// p199, created 199 s before p000), 199 held.
func TestCrashLoopingDeploymentGetsOnlyTheAllowance(t *testing.T) {
	snap := snapshot([]apisv1.NodePool{pool("default", nil)},
		[]corev1.Pod{crashing("crashy", "crashy-a", "n1", 5, "Error", 30*time.Second), crashing("crashy", "crashy-b", "n1", 4, "Error", time.Minute)},
		pendingPods("crashy", 200))
	res := Evaluate(snap)
	if len(res.Verdicts) != 1 {
		t.Fatalf("verdicts %+v", res.Verdicts)
	}
	v := res.Verdicts[0]
	if v.Controller != (Controller{Kind: "Deployment", Namespace: "default", Name: "crashy"}) || v.NodePool != "default" {
		t.Errorf("controller %v pool %q", v.Controller, v.NodePool)
	}
	if v.Evidence.CrashLooping != 2 || v.Evidence.Running != 2 || v.Evidence.OnTrial != 0 {
		t.Errorf("evidence %+v", v.Evidence)
	}
	if got := names(v.Admitted); len(got) != 1 || got[0] != "crashy-p199" {
		t.Errorf("admitted %v, want [crashy-p199]", got)
	}
	if len(v.Held) != 199 || res.Held != 199 || len(res.Pending) != 1 {
		t.Errorf("held %d/%d, pending %d", len(v.Held), res.Held, len(res.Pending))
	}
	msg := v.Message()
	for _, want := range []string{"Deployment default/crashy is quarantined", "2 of its 2 running pods are sick (2 crash-looping",
		"pod default/crashy-a container app: CrashLoopBackOff, 5 restarts, last exit 1 (Error)", "199 pending replicas wait", "allowance of 1 (NodePool default"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

// A pod already on trial (bound, not Ready, 1 restart: not yet evidence) uses the allowance of
// 1: nothing more is admitted. With an allowance of 3, 3 − 1 = 2 are.
func TestPodsOnTrialUseTheAllowance(t *testing.T) {
	bound := []corev1.Pod{crashing("crashy", "crashy-a", "n1", 5, "Error", time.Minute), crashing("crashy", "crashy-t", "n1", 1, "Error", 10*time.Second)}
	res := Evaluate(snapshot([]apisv1.NodePool{pool("default", nil)}, bound, pendingPods("crashy", 10)))
	if res.Held != 10 || res.Verdicts[0].Evidence.OnTrial != 1 {
		t.Errorf("held %d, evidence %+v; want 10 held, 1 on trial", res.Held, res.Verdicts[0].Evidence)
	}
	res = Evaluate(snapshot([]apisv1.NodePool{pool("default", map[string]string{AnnotationAllowance: "3"})}, bound, pendingPods("crashy", 10)))
	if res.Held != 8 {
		t.Errorf("allowance 3, 1 on trial: held %d, want 8", res.Held)
	}
	// A pod Ready for 30 s (a crashing container is Ready while it runs) is on trial too; one
	// Ready for the window (10 m) is proven. Two sick of four running: allowance 3 − 1 on trial
	// = 2 admitted of 10.
	fresh := ready("crashy", "crashy-f", "n1")
	fresh.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-30 * time.Second))
	proven := ready("crashy", "crashy-r", "n1")
	proven.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-10 * time.Minute))
	sick := []corev1.Pod{bound[0], crashing("crashy", "crashy-b", "n1", 4, "Error", time.Minute), fresh, proven}
	res = Evaluate(snapshot([]apisv1.NodePool{pool("default", map[string]string{AnnotationAllowance: "3"})}, sick, pendingPods("crashy", 10)))
	if len(res.Verdicts) != 1 || res.Held != 8 || res.Verdicts[0].Evidence.OnTrial != 1 || res.Verdicts[0].Evidence.Ready != 2 {
		t.Fatalf("held %d, verdicts %+v; want 8 held, 1 on trial, 2 Ready", res.Held, res.Verdicts)
	}
}

// OOMKilled is its own evidence; a pod not Ready for 12 m (window 10 m) is sick, one for 9 m is
// not (on trial). Evidence older than the window (last exit 11 m ago) does not count.
func TestEvidenceKinds(t *testing.T) {
	s := Defaults()
	cases := []struct {
		name string
		p    corev1.Pod
		want string
	}{
		{"oom", crashing("d", "a", "n1", 3, ReasonOOMKilled, 2*time.Minute), ReasonOOMKilled},
		{"two restarts", crashing("d", "a", "n1", 2, "Error", 2*time.Minute), ""},
		{"old crash, Ready false 11m", crashing("d", "a", "n1", 9, "Error", 11*time.Minute), "NotReady"},
		{"not ready 9m", func() corev1.Pod {
			p := ready("d", "a", "n1")
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-9 * time.Minute))
			return p
		}(), ""},
		{"ready", ready("d", "a", "n1"), ""},
	}
	for _, c := range cases {
		if got, _ := sickness(&c.p, s, now); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// One sick pod of three running (two Ready) is not quarantined (1·2 < 3); one of two is (1·2 ≥ 2).
func TestHalfTheRunningPodsMustBeSick(t *testing.T) {
	sick := crashing("web", "web-a", "n1", 5, "Error", time.Minute)
	res := Evaluate(snapshot(nil, []corev1.Pod{sick, ready("web", "web-b", "n1"), ready("web", "web-c", "n1")}, pendingPods("web", 5)))
	if res.Held != 0 || len(res.Pending) != 5 {
		t.Errorf("1 of 3 sick: held %d", res.Held)
	}
	res = Evaluate(snapshot(nil, []corev1.Pod{sick, ready("web", "web-b", "n1")}, pendingPods("web", 5)))
	if res.Held != 4 {
		t.Errorf("1 of 2 sick: held %d, want 4 (allowance 1)", res.Held)
	}
}

// The settings are the pool's whose nodes run most sick pods: two on gpu (disabled), one on
// default → gpu's, nothing held. Pods on a node of no NodePool use the defaults.
func TestSettingsOfTheSickestPool(t *testing.T) {
	pools := []apisv1.NodePool{pool("default", nil), pool("gpu", map[string]string{AnnotationQuarantine: "disabled"})}
	bound := []corev1.Pod{crashing("d", "d-a", "n2", 5, "Error", time.Minute), crashing("d", "d-b", "n2", 5, "Error", time.Minute), crashing("d", "d-c", "n1", 5, "Error", time.Minute)}
	res := Evaluate(snapshot(pools, bound, pendingPods("d", 3)))
	if res.Held != 0 {
		t.Errorf("gpu disabled: held %d", res.Held)
	}
	res = Evaluate(snapshot(pools, []corev1.Pod{crashing("d", "d-a", "sys", 5, "Error", time.Minute)}, pendingPods("d", 3)))
	if res.Held != 2 || res.Verdicts[0].NodePool != "" {
		t.Errorf("no pool: held %d, verdicts %+v", res.Held, res.Verdicts)
	}
}

// An exempt pending pod is always admitted and uses no allowance; a malformed value is named.
func TestWorkloadOptOut(t *testing.T) {
	pending := pendingPods("d", 3)
	for i := range pending {
		pending[i].Annotations = map[string]string{AnnotationQuarantine: ValueDisabled}
	}
	bound := []corev1.Pod{crashing("d", "d-a", "n1", 5, "Error", time.Minute)}
	if res := Evaluate(snapshot(nil, bound, pending)); res.Held != 0 || len(res.Verdicts) != 0 {
		t.Errorf("exempt: held %d, verdicts %d", res.Held, len(res.Verdicts))
	}
	pending[0].Annotations[AnnotationQuarantine] = "off"
	pending[1].Annotations[AnnotationQuarantine] = "off"
	res := Evaluate(snapshot(nil, bound, pending))
	// p000 and p001 are malformed, so not exempt: p001 (older) takes the allowance, p000 is held.
	if res.Held != 1 || names(res.Verdicts[0].Held)[0] != "d-p000" {
		t.Fatalf("held %d %v", res.Held, res.Verdicts)
	}
	if msg := res.Verdicts[0].Message(); !strings.Contains(msg, `metadata.annotations[dovetail.dev/quarantine]: "off" is not enabled or disabled`) {
		t.Errorf("message does not name the malformed annotation:\n%s", msg)
	}
}

// StatefulSet and Job pods count under their controller; a ReplicaSet whose name does not end
// in the pod's template hash stays a ReplicaSet; a bare pod has none.
func TestControllerOf(t *testing.T) {
	p := pod("web", "x", now)
	if c, _ := ControllerOf(&p); c.String() != "Deployment default/web" {
		t.Errorf("%v", c)
	}
	p.Labels = nil
	if c, _ := ControllerOf(&p); c.String() != "ReplicaSet default/web-5d8f7c" {
		t.Errorf("%v", c)
	}
	p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "StatefulSet", "db"
	if c, ok := ControllerOf(&p); !ok || c.String() != "StatefulSet default/db" {
		t.Errorf("%v", c)
	}
	p.OwnerReferences[0].Kind = "DaemonSet"
	if _, ok := ControllerOf(&p); ok {
		t.Errorf("a DaemonSet pod counts")
	}
	p.OwnerReferences = nil
	if _, ok := ControllerOf(&p); ok {
		t.Errorf("a bare pod counts")
	}
}

func TestParseSettings(t *testing.T) {
	s, err := ParseSettings(&apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
		AnnotationWindow: "15m", AnnotationRestarts: "5", AnnotationAllowance: "0", AnnotationQuarantine: "enabled"}}})
	if err != nil || s != (Settings{Window: 15 * time.Minute, Restarts: 5, Allowance: 0}) {
		t.Errorf("%+v %v", s, err)
	}
	s, err = ParseSettings(&apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
		AnnotationWindow: "30s", AnnotationRestarts: "0", AnnotationAllowance: "-1", AnnotationQuarantine: "no"}}})
	if s != Defaults() {
		t.Errorf("malformed annotations do not fall back to defaults: %+v", s)
	}
	for _, want := range []string{
		`metadata.annotations[dovetail.dev/quarantine-window]: "30s" is shorter than 1m0s`,
		`metadata.annotations[dovetail.dev/quarantine-restarts]: "0" is not an integer of at least 1`,
		`metadata.annotations[dovetail.dev/quarantine-allowance]: "-1" is not an integer of at least 0`,
		`metadata.annotations[dovetail.dev/quarantine]: "no" is not enabled or disabled`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if _, err := ParseSettings(&apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{AnnotationWindow: "ten"}}}); err == nil ||
		!strings.Contains(err.Error(), "is not a duration") {
		t.Errorf("%v", err)
	}
}

func TestPoolCondition(t *testing.T) {
	def := pool("default", nil)
	bound := []corev1.Pod{crashing("crashy", "crashy-a", "n1", 5, "Error", time.Minute)}
	res := Evaluate(snapshot([]apisv1.NodePool{def}, bound, pendingPods("crashy", 4)))
	c := PoolCondition(res, &def)
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonSickWorkloads || c.Message != "pending replicas held: Deployment default/crashy" {
		t.Errorf("%+v", c)
	}
	gpu := pool("gpu", map[string]string{AnnotationAllowance: "many"})
	c = PoolCondition(res, &gpu)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalidSettings || !strings.Contains(c.Message, `quarantine-allowance]: "many"`) {
		t.Errorf("%+v", c)
	}
	off := pool("off", map[string]string{AnnotationQuarantine: ValueDisabled})
	if c = PoolCondition(res, &off); c.Status != metav1.ConditionFalse || c.Reason != ReasonDisabled {
		t.Errorf("%+v", c)
	}
}
