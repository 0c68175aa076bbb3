package localdev

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AnnotationCrash marks a pod (through its controller's pod template) whose containers stand for
// an image that exits CrashRunFor after every start: local dev runs no containers, so this is
// how a manifest says "this image is broken". "Error" exits with code 1 (an application error),
// "OOMKilled" with code 137 as the kernel's OOM killer ends it. The in-memory cluster's kubelet
// stand-in then reports the container statuses a real kubelet would (crashLoop).
const AnnotationCrash = "localdev.dovetail.dev/crash"

// Values of AnnotationCrash and their exit codes (128 + SIGKILL for the OOM killer).
const (
	CrashError     = "Error"
	CrashOOMKilled = "OOMKilled"
)

// The kubelet's container restart back-off: 10 s after the first exit, doubling per restart, at
// most 5 minutes (k8s.io/kubernetes pkg/kubelet/kubelet.go backOffPeriod and
// MaxContainerBackOff; "Pod Lifecycle", Container restarts). CrashRunFor is how long the stand-in
// image runs before it exits: Dovetail's own choice, a few seconds like a process that fails at
// start-up.
const (
	initialBackOff = 10 * time.Second
	maxBackOff     = 300 * time.Second
	CrashRunFor    = 5 * time.Second
)

// crashState is a crash-looping container at one instant.
type crashState struct {
	Restarts int32
	// Running: the container is up since Since; else it waits out its back-off since Since
	// (its last exit).
	Running bool
	Since   time.Time
	// LastExit is when the previous run ended (zero before the first exit).
	LastExit time.Time
}

// crashLoop is a container started at start that exits CrashRunFor after each start, restarted
// by the kubelet after its back-off (initialBackOff doubling up to maxBackOff), as seen at now.
func crashLoop(start, now time.Time) crashState {
	s := crashState{Running: true, Since: start}
	for {
		exit := s.Since.Add(CrashRunFor)
		if now.Before(exit) {
			return s
		}
		backOff := min(initialBackOff<<min(s.Restarts, 16), maxBackOff)
		if now.Before(exit.Add(backOff)) {
			return crashState{Restarts: s.Restarts, Since: exit, LastExit: exit}
		}
		s = crashState{Restarts: s.Restarts + 1, Running: true, Since: exit.Add(backOff), LastExit: exit}
	}
}

// crashStatus is the pod status a kubelet reports for a pod whose containers crash as reason
// says (AnnotationCrash), started at start: each container's restartCount, its state (running,
// or waiting CrashLoopBackOff), its lastState (terminated with the reason and exit code), and
// Ready/ContainersReady True only while the containers run. A reason that is neither value is
// the kubelet's CreateContainerConfigError naming the annotation: the container never starts.
func crashStatus(p *corev1.Pod, reason string, start, now time.Time) corev1.PodStatus {
	st := *p.Status.DeepCopy()
	var exitCode int32
	switch reason {
	case CrashError:
		exitCode = 1
	case CrashOOMKilled:
		exitCode = 137
	}
	c := crashLoop(start, now)
	ready, readySince := corev1.ConditionTrue, c.Since
	st.ContainerStatuses = nil
	for _, ctr := range p.Spec.Containers {
		cs := corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, RestartCount: c.Restarts}
		switch {
		case exitCode == 0:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError",
				Message: fmt.Sprintf("metadata.annotations[%s]: %q is not %s or %s", AnnotationCrash, reason, CrashError, CrashOOMKilled)}
			ready, readySince = corev1.ConditionFalse, start
		case c.Running:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.Since)}
			cs.Ready, cs.Started = true, ptrTo(true)
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off restarting failed container %s in pod %s_%s", ctr.Name, p.Name, p.Namespace)}
			ready = corev1.ConditionFalse
		}
		if exitCode != 0 && !c.LastExit.IsZero() {
			started := c.LastExit.Add(-CrashRunFor)
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason,
				StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(c.LastExit)}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	st.Phase = corev1.PodRunning
	for _, typ := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		cond := corev1.PodCondition{Type: typ, Status: ready, LastTransitionTime: metav1.NewTime(readySince)}
		if ready == corev1.ConditionFalse {
			cond.Reason = "ContainersNotReady"
		}
		st.Conditions = setCondition(st.Conditions, cond)
	}
	return st
}

// kubelet is the in-memory cluster's stand-in for what a node's kubelet reports of its pods'
// containers, for the pods that ask for it (AnnotationCrash): every other bound pod is Running
// and Ready from its binding on, as the binder writes.
type kubelet struct {
	kube kubernetes.Interface
	now  func() time.Time
}

// pass writes the status of every bound, non-terminal pod with AnnotationCrash as of now (a pod
// started when its PodScheduled condition turned True), when it changed.
func (k *kubelet) pass(ctx context.Context) error {
	pods, err := k.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	now := k.now()
	for i := range pods.Items {
		p := &pods.Items[i]
		reason, ok := p.Annotations[AnnotationCrash]
		if !ok || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var start time.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				start = c.LastTransitionTime.Time
			}
		}
		if start.IsZero() {
			continue
		}
		st := crashStatus(p, reason, start, now)
		if equality.Semantic.DeepEqual(st, p.Status) {
			continue
		}
		p.Status = st
		if _, err := k.kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("kubelet stand-in: status of %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
