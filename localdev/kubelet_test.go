package localdev

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet's back-off, worked by hand from a start at 0 (each run lasts CrashRunFor, 5 s;
// back-off 10 s, 20 s, 40 s, 80 s, 160 s, then 300 s): exits at 5, 20, 45, 90, 175, 340 s;
// restarts at 15, 40, 85, 170, 335, 640 s.
func TestCrashLoopFollowsTheKubeletBackOff(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cases := []struct {
		now      int
		restarts int32
		running  bool
		since    int
		lastExit int // -1: none
	}{
		{3, 0, true, 0, -1},
		{5, 0, false, 5, 5},
		{14, 0, false, 5, 5},
		{15, 1, true, 15, 5},
		{30, 1, false, 20, 20},
		{87, 3, true, 85, 45},
		{100, 3, false, 90, 90},
		{600, 5, false, 340, 340},
		{641, 6, true, 640, 340},
	}
	for _, c := range cases {
		got := crashLoop(t0, at(c.now))
		want := crashState{Restarts: c.restarts, Running: c.running, Since: at(c.since)}
		if c.lastExit >= 0 {
			want.LastExit = at(c.lastExit)
		}
		if got != want {
			t.Errorf("at %d s: %+v, want %+v", c.now, got, want)
		}
	}
}

// The status a kubelet reports 600 s into the loop: 5 restarts, waiting CrashLoopBackOff, last
// exit 1 (Error) at 340 s, not Ready since then; an OOMKilled image exits 137; an unknown value
// is CreateContainerConfigError naming the annotation.
func TestCrashStatus(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crashy-0", Namespace: "default"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}}}
	st := crashStatus(p, CrashError, t0, t0.Add(600*time.Second))
	cs := st.ContainerStatuses[0]
	last := cs.LastTerminationState.Terminated
	if cs.RestartCount != 5 || cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || last == nil || last.ExitCode != 1 || last.Reason != "Error" ||
		!last.FinishedAt.Time.Equal(t0.Add(340*time.Second)) || cs.Ready {
		t.Errorf("container status %+v", cs)
	}
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady && (c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(t0.Add(340*time.Second))) {
			t.Errorf("Ready %+v", c)
		}
	}
	if st := crashStatus(p, CrashOOMKilled, t0, t0.Add(600*time.Second)); st.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode != 137 {
		t.Errorf("OOMKilled exit %+v", st.ContainerStatuses[0].LastTerminationState)
	}
	st = crashStatus(p, "segfault", t0, t0.Add(time.Second))
	if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "CreateContainerConfigError" || w.Message != `metadata.annotations[localdev.dovetail.dev/crash]: "segfault" is not Error or OOMKilled` {
		t.Errorf("unknown value: %+v", st.ContainerStatuses[0])
	}
}
