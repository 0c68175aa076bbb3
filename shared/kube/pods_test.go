package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsProvisionable(t *testing.T) {
	ctrl := true
	now := metav1.Now()
	unsched := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	gated := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}
	cases := []struct {
		name string
		mod  func(p *corev1.Pod)
		want bool
	}{
		// The rule of IsProvisionable's doc comment, one clause per case.
		{"unbound, scheduler not yet looked", func(p *corev1.Pod) {}, true},
		{"PodScheduled=False Unschedulable", func(p *corev1.Pod) { p.Status.Conditions = []corev1.PodCondition{unsched} }, true},
		{"PodScheduled=False SchedulingGated", func(p *corev1.Pod) { p.Status.Conditions = []corev1.PodCondition{gated} }, false},
		{"scheduling gates", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "x"}} }, false},
		{"bound", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, false},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false},
		{"being deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, false},
		{"preempting", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n1" }, false},
		{"DaemonSet pod", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: &ctrl}}
		}, false},
		{"ReplicaSet pod", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: &ctrl}}
		}, true},
		{"mirror pod", func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationMirrorPod: "x"} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
			c.mod(p)
			if got := IsProvisionable(p); got != c.want {
				t.Fatalf("IsProvisionable = %v, want %v", got, c.want)
			}
		})
	}
}
