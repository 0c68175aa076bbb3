package kube

import (
	corev1 "k8s.io/api/core/v1"
)

// AnnotationMirrorPod marks a static pod's mirror in the API (kubelet sets it); mirror pods cannot
// be evicted or rescheduled. Source: k8s.io/api/core/v1 MirrorPodAnnotationKey.
const AnnotationMirrorPod = corev1.MirrorPodAnnotationKey

// IsProvisionable reports whether a pod is pending and waiting for capacity, the pods a
// provisioning decision must place. The rule mirrors Karpenter's "provisionable pod"
// (karpenter pkg/utils/pod: not scheduled, not preempting, failed to schedule, not owned by a
// DaemonSet or a Node) with one widening, because the in-memory dev cluster has no kube-scheduler
// to set conditions:
//
//   - unbound: spec.nodeName is empty;
//   - not terminal (phase is neither Succeeded nor Failed) and not being deleted;
//   - not preempting: status.nominatedNodeName is empty (the scheduler found room by preemption);
//   - not owned by a DaemonSet (the DaemonSet controller places those on every node) and not a
//     mirror pod or owned by a Node (static pods belong to one kubelet);
//   - not held by scheduling gates (spec.schedulingGates empty; the scheduler will not look at it);
//   - the PodScheduled condition is either False with reason Unschedulable (the scheduler tried
//     and found no node) or absent (the scheduler has not looked yet: "merely unbound"). Any other
//     reason (SchedulingGated, a pending preemption...) means the pod is not waiting for capacity.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || IsTerminal(pod) || pod.DeletionTimestamp != nil {
		return false
	}
	if pod.Status.NominatedNodeName != "" || len(pod.Spec.SchedulingGates) > 0 {
		return false
	}
	if IsDaemonSetPod(pod) || IsMirrorPod(pod) || isOwnedBy(pod, "Node") {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return true
}

// IsBoundActive reports whether a pod occupies a node: bound (spec.nodeName set) and not terminal.
// Pods being deleted still count: their resources stay in use until the kubelet stops them, which
// is how kube-scheduler accounts for them too.
func IsBoundActive(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && !IsTerminal(pod)
}

// IsTerminal reports whether the pod has finished (phase Succeeded or Failed).
func IsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// IsDaemonSetPod reports whether a DaemonSet controls the pod.
func IsDaemonSetPod(pod *corev1.Pod) bool { return isOwnedBy(pod, "DaemonSet") }

// IsMirrorPod reports whether the pod is the API mirror of a static pod.
func IsMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[AnnotationMirrorPod]
	return ok
}

// countsAsNewOnNode reports whether binding this pod to a node invalidates a disruption decision
// made before: DaemonSet and mirror pods run on every node anyway (Karpenter ignores them when
// judging a node empty), and terminal pods hold nothing.
func countsAsNewOnNode(pod *corev1.Pod) bool {
	return IsBoundActive(pod) && !IsDaemonSetPod(pod) && !IsMirrorPod(pod)
}

func isOwnedBy(pod *corev1.Pod, kind string) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == kind && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// isProvisionableIgnoringNomination is IsProvisionable for a pod whose nominatedNodeName Dovetail
// set itself (the node planned for it), which is no preemption.
func isProvisionableIgnoringNomination(pod *corev1.Pod) bool {
	q := *pod
	q.Status.NominatedNodeName = ""
	return IsProvisionable(&q)
}
