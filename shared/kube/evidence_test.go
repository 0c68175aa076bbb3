package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/quarantine"
)

// The quarantine of sick workloads reads its evidence from the bound pods' status the snapshot
// already carries (no field of its own): a crash-looping pod's restart count, waiting reason,
// last termination and Ready transition survive the informer, the builder and the codec, and
// the rule reads them on the decoded snapshot.
func TestSnapshotCarriesPodHealthEvidence(t *testing.T) {
	owned := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}
	}
	crashing := func(p *corev1.Pod) {
		owned(p)
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "db", RestartCount: 4,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(t0.Add(-time.Minute))}}}}
	}
	f := newFixture(t, []runtime.Object{node("n1"), pod("default", "db-0", "n1", crashing), pod("default", "db-1", "", owned)})
	base := f.watcher.Revisions().Base()
	eventually(t, "3 add events", func() bool { return f.watcher.Revision() == base+3 })
	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := events.EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := events.DecodeSnapshot(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.Pods) != 1 || len(dec.Pods[0].Status.ContainerStatuses) != 1 {
		t.Fatalf("decoded pods %+v", dec.Pods)
	}
	cs := dec.Pods[0].Status.ContainerStatuses[0]
	if cs.RestartCount != 4 || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.LastTerminationState.Terminated.Reason != "OOMKilled" ||
		!cs.LastTerminationState.Terminated.FinishedAt.Time.Equal(t0.Add(-time.Minute)) {
		t.Errorf("container status %+v", cs)
	}
	// 4 restarts ≥ 3, last exit 1 minute before the snapshot (within 10): OOMKilled evidence;
	// db-1 is pending, the allowance (1) admits it since nothing is on trial.
	res := quarantine.Evaluate(dec)
	if len(res.Verdicts) != 0 || len(res.Pending) != 1 {
		t.Fatalf("verdicts %+v pending %d: the one pending pod is the allowance", res.Verdicts, len(res.Pending))
	}
	dec.PendingPods = append(dec.PendingPods, *dec.PendingPods[0].DeepCopy())
	dec.PendingPods[1].Name = "db-2"
	res = quarantine.Evaluate(dec)
	if len(res.Verdicts) != 1 || res.Verdicts[0].Evidence.OOMKilled != 1 || res.Held != 1 || res.Verdicts[0].Controller.String() != "StatefulSet default/db" {
		t.Errorf("verdicts %+v held %d", res.Verdicts, res.Held)
	}
}
