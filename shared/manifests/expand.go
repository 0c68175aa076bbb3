package manifests

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExpandPods returns the pods the manifests describe, in document order: each standalone Pod as
// written (phase Pending when unbound and unset, Running when bound to a node and unset), and for
// each Workload its Replicas pods named "<controller>-<index>" (index from 0), carrying the
// template's labels, annotations and spec, the controller's namespace and an owner reference to
// the controller (controller: true). Controller pods are pending: phase Pending and no
// spec.nodeName unless the template itself sets one. A CronJob contributes the pods of one run
// of its job template. DaemonSets are not expanded: the solver adds their overhead per node.
//
// The pods are fresh copies; changing them does not change the Set.
func (s *Set) ExpandPods() []*corev1.Pod {
	type entry struct {
		seq int
		pod *corev1.Pod
		w   *Workload
	}
	var entries []entry
	// Objects added to the Set by hand (not read from a document) sort after the read ones, in
	// slice order, so the result stays deterministic.
	next := s.seq
	seqOf := func(obj any) int {
		if n, ok := s.order[obj]; ok {
			return n
		}
		next++
		return next
	}
	for _, p := range s.Pods {
		entries = append(entries, entry{seq: seqOf(p), pod: p})
	}
	for _, w := range s.Workloads {
		entries = append(entries, entry{seq: seqOf(w), w: w})
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].seq < entries[j].seq })

	var pods []*corev1.Pod
	for _, e := range entries {
		if e.pod != nil {
			p := e.pod.DeepCopy()
			if p.Namespace == "" {
				p.Namespace = DefaultNamespace
			}
			if p.Status.Phase == "" {
				p.Status.Phase = corev1.PodPending
				if p.Spec.NodeName != "" {
					p.Status.Phase = corev1.PodRunning
				}
			}
			pods = append(pods, p)
			continue
		}
		pods = append(pods, e.w.Pods()...)
	}
	return pods
}

// Pods returns the workload's Replicas pending pods, as ExpandPods describes.
func (w *Workload) Pods() []*corev1.Pod {
	ns := w.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	isController := true
	owner := metav1.OwnerReference{
		APIVersion: w.APIVersion, Kind: w.Kind, Name: w.Name,
		Controller: &isController, BlockOwnerDeletion: &isController,
	}
	if m, ok := w.Object.(metav1.Object); ok {
		owner.UID = m.GetUID()
	}
	pods := make([]*corev1.Pod, 0, w.Replicas)
	for i := range w.Replicas {
		t := w.Template.DeepCopy()
		pods = append(pods, &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Name:            fmt.Sprintf("%s-%d", w.Name, i),
				Namespace:       ns,
				Labels:          t.Labels,
				Annotations:     t.Annotations,
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			Spec:   t.Spec,
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		})
	}
	return pods
}
