package manifests

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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
// A cluster dump holds the controllers' pods too: a workload adds only the pods it lacks
// (Replicas minus the Pods it already runs, found by their owner references, see owners.go),
// skipping the names its pods already have; a ReplicaSet owned by a Deployment of the Set, or
// a Job owned by a CronJob of the Set, adds none (its owner stands for it), unless the owner
// references form a cycle (Set.OwnerCycles).
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

	idx := s.workloadIndex()
	live := s.running(idx)
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
		if idx.standsFor(e.w) != nil {
			continue // its owner adds its pods; one in a cycle adds its own (OwnerCycles)
		}
		pods = append(pods, e.w.missing(live[e.w])...)
	}
	return pods
}

// Pods returns the workload's Replicas pending pods, as ExpandPods describes. A StatefulSet's
// pods are numbered from spec.ordinals.start (default 0), and each carries one volume per
// volumeClaimTemplate, named after the template and referring to the claim
// "<template>-<statefulset>-<ordinal>" (replacing a template volume of the same name), as the
// StatefulSet controller builds them (Kubernetes docs, "StatefulSets: Stable Storage").
func (w *Workload) Pods() []*corev1.Pod { return w.missing(nil) }

// missing returns the workload's pods as Pods does, less those it already runs (their names in
// running): Replicas − len(running) pods, at the first indices whose names are free.
func (w *Workload) missing(running map[string]bool) []*corev1.Pod {
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
	sts, _ := w.Object.(*appsv1.StatefulSet)
	start := int32(0)
	if sts != nil && sts.Spec.Ordinals != nil {
		start = sts.Spec.Ordinals.Start
	}
	want := int(w.Replicas) - len(running)
	pods := make([]*corev1.Pod, 0, max(want, 0))
	for i := start; len(pods) < want; i++ {
		if running[fmt.Sprintf("%s-%d", w.Name, i)] {
			continue
		}
		t := w.Template.DeepCopy()
		if sts != nil {
			for _, ct := range sts.Spec.VolumeClaimTemplates {
				setVolume(&t.Spec, corev1.Volume{Name: ct.Name, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: StatefulSetClaimName(ct.Name, sts.Name, i)},
				}})
			}
		}
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

// setVolume replaces the spec's volume of the same name, or appends v.
func setVolume(spec *corev1.PodSpec, v corev1.Volume) {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == v.Name {
			spec.Volumes[i] = v
			return
		}
	}
	spec.Volumes = append(spec.Volumes, v)
}

// StatefulSetClaimName is the PersistentVolumeClaim the StatefulSet controller creates for a
// volumeClaimTemplate and a pod ordinal: "<template>-<statefulset>-<ordinal>".
func StatefulSetClaimName(template, statefulSet string, ordinal int32) string {
	return fmt.Sprintf("%s-%s-%d", template, statefulSet, ordinal)
}

// EphemeralClaimName is the PersistentVolumeClaim the ephemeral-volume controller creates for a
// pod's generic ephemeral volume: "<pod>-<volume>" (Kubernetes docs, "Ephemeral Volumes: PVC naming").
func EphemeralClaimName(pod, volume string) string { return pod + "-" + volume }

// Default StorageClass annotations (the beta one is still honoured by the admission plugin).
const (
	AnnotationDefaultStorageClass     = "storageclass.kubernetes.io/is-default-class"
	AnnotationBetaDefaultStorageClass = "storageclass.beta.kubernetes.io/is-default-class"
)

// DefaultStorageClass returns the class the DefaultStorageClass admission plugin would give a
// claim without spec.storageClassName: among classes annotated is-default-class "true", the one
// created last (creationTimestamp), ties broken by name; nil when there is none.
func (s *Set) DefaultStorageClass() *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, sc := range s.StorageClasses {
		if sc.Annotations[AnnotationDefaultStorageClass] != "true" && sc.Annotations[AnnotationBetaDefaultStorageClass] != "true" {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&sc.CreationTimestamp) ||
			(best.CreationTimestamp.Equal(&sc.CreationTimestamp) && sc.Name < best.Name) {
			best = sc
		}
	}
	return best
}

// ExpandPVCs returns the claims the manifests describe, as the API server would hold them once
// the controllers ran: the PersistentVolumeClaim documents (in document order), then, for each
// StatefulSet (document order) and ordinal, one claim per volumeClaimTemplate named
// "<template>-<statefulset>-<ordinal>" in the StatefulSet's namespace, labelled with the
// template's labels and the StatefulSet's selector matchLabels; then one claim per generic
// ephemeral volume of every pod, named "<pod>-<volume>" and owned by the pod. A generated claim
// whose namespace/name is already a document is not generated again (the controllers reuse an
// existing claim). Claims without spec.storageClassName get the default StorageClass
// (DefaultStorageClass), as the admission plugin sets it; claims with spec.volumeName and no
// status.phase are Bound, the others without a phase Pending.
//
// The claims are fresh copies; changing them does not change the Set.
func (s *Set) ExpandPVCs() []*corev1.PersistentVolumeClaim {
	seen := map[string]bool{}
	var out []*corev1.PersistentVolumeClaim
	add := func(c *corev1.PersistentVolumeClaim) {
		key := c.Namespace + "/" + c.Name
		if seen[key] {
			return
		}
		seen[key] = true
		out = append(out, c)
	}
	for _, c := range s.PVCs {
		c = c.DeepCopy()
		if c.Namespace == "" {
			c.Namespace = DefaultNamespace
		}
		add(c)
	}
	isController := true
	for _, w := range s.Workloads {
		sts, ok := w.Object.(*appsv1.StatefulSet)
		if !ok || len(sts.Spec.VolumeClaimTemplates) == 0 {
			continue
		}
		var selector map[string]string
		if sts.Spec.Selector != nil {
			selector = sts.Spec.Selector.MatchLabels
		}
		start := int32(0)
		if sts.Spec.Ordinals != nil {
			start = sts.Spec.Ordinals.Start
		}
		for i := start; i < start+w.Replicas; i++ {
			for _, ct := range sts.Spec.VolumeClaimTemplates {
				c := &corev1.PersistentVolumeClaim{
					TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
					ObjectMeta: *ct.ObjectMeta.DeepCopy(),
					Spec:       *ct.Spec.DeepCopy(),
				}
				c.Name = StatefulSetClaimName(ct.Name, sts.Name, i)
				c.Namespace = w.Namespace
				c.Labels = mergeStrings(ct.Labels, selector)
				add(c)
			}
		}
	}
	for _, p := range s.ExpandPods() {
		for _, v := range p.Spec.Volumes {
			if v.Ephemeral == nil || v.Ephemeral.VolumeClaimTemplate == nil {
				continue
			}
			ct := v.Ephemeral.VolumeClaimTemplate
			c := &corev1.PersistentVolumeClaim{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{
					Name: EphemeralClaimName(p.Name, v.Name), Namespace: p.Namespace,
					Labels: mergeStrings(ct.Labels, nil), Annotations: mergeStrings(ct.Annotations, nil),
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID,
						Controller: &isController, BlockOwnerDeletion: &isController}},
				},
				Spec: *ct.Spec.DeepCopy(),
			}
			add(c)
		}
	}
	def := s.DefaultStorageClass()
	for _, c := range out {
		if c.Spec.StorageClassName == nil && def != nil {
			name := def.Name
			c.Spec.StorageClassName = &name
		}
		if c.Status.Phase == "" {
			c.Status.Phase = corev1.ClaimPending
			if c.Spec.VolumeName != "" {
				c.Status.Phase = corev1.ClaimBound
			}
		}
	}
	return out
}

// mergeStrings returns a new map holding a's entries and then b's (nil when both are empty).
func mergeStrings(a, b map[string]string) map[string]string {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
