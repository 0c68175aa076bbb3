package manifests

import (
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A cluster dump holds both the controllers and the pods they already run; a controller's
// manifest must not add its pods a second time. These rules follow the pods' controller owner
// references the way the controllers set them (Kubernetes docs, "Owners and Dependents"):
//   - a Deployment's pods are owned by its ReplicaSet "<deployment>-<pod-template-hash>", which
//     the Deployment owns;
//   - a CronJob's pods are owned by its Job "<cronjob>-<scheduled time in minutes>", which the
//     CronJob owns;
//   - StatefulSet, ReplicaSet and Job pods are owned by that controller directly.
//
// A UID on both sides must agree (a controller deleted and recreated under the same name is
// another object); when either side has none (a hand-written manifest), the name decides.

// workloadKey identifies a workload in the Set.
type workloadKey struct{ kind, namespace, name string }

// workloadIndex holds the Set's workloads by kind, namespace and name.
type workloadIndex map[workloadKey]*Workload

func (s *Set) workloadIndex() workloadIndex {
	idx := workloadIndex{}
	for _, w := range s.Workloads {
		idx[workloadKey{w.Kind, namespaceOr(w.Namespace), w.Name}] = w
	}
	return idx
}

func namespaceOr(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// controllerRef returns the controller owner reference, or nil.
func controllerRef(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

// uid is the workload's metadata.uid ("" for a hand-written manifest).
func (w *Workload) uid() types.UID {
	if m, ok := w.Object.(metav1.Object); ok {
		return m.GetUID()
	}
	return ""
}

// resolve returns the workload ref points at in namespace ns, or nil.
func (idx workloadIndex) resolve(ns string, ref *metav1.OwnerReference) *Workload {
	if ref == nil {
		return nil
	}
	w := idx[workloadKey{ref.Kind, ns, ref.Name}]
	if w == nil || (ref.UID != "" && w.uid() != "" && ref.UID != w.uid()) {
		return nil
	}
	return w
}

// owner returns the workload of the Set that controls w (a ReplicaSet's Deployment, a Job's
// CronJob), or nil.
func (idx workloadIndex) owner(w *Workload) *Workload {
	m, ok := w.Object.(metav1.Object)
	if !ok {
		return nil
	}
	return idx.resolve(namespaceOr(w.Namespace), controllerRef(m.GetOwnerReferences()))
}

// inCycle reports whether following controller owner references up from w comes back to w
// (hand-edited or hostile input: the API server does not refuse a cycle, and the garbage
// collector leaves such objects alone, Kubernetes docs "Garbage Collection"). A workload in a
// cycle has no owner that stands for it: it adds its own pods, and OwnerCycles names it.
func (idx workloadIndex) inCycle(w *Workload) bool {
	o := idx.owner(w)
	for range len(idx) {
		if o == nil {
			return false
		}
		if o == w {
			return true
		}
		o = idx.owner(o)
	}
	return false
}

// standsFor returns the workload whose pods w's are counted with: its owner, or nil when it has
// none in the Set or is in an ownership cycle.
func (idx workloadIndex) standsFor(w *Workload) *Workload {
	if idx.inCycle(w) {
		return nil
	}
	return idx.owner(w)
}

// OwnerCycles lists the workloads (kind namespace/name, sorted) whose controller owner
// references lead back to themselves; each is planned as if it had no owner.
func (s *Set) OwnerCycles() []string {
	idx := s.workloadIndex()
	var out []string
	for _, w := range s.Workloads {
		if idx.inCycle(w) {
			out = append(out, w.Kind+" "+namespaceOr(w.Namespace)+"/"+w.Name)
		}
	}
	sort.Strings(out)
	return out
}

// top follows owners up (at most two steps: ReplicaSet → Deployment, Job → CronJob), never
// into an ownership cycle.
func (idx workloadIndex) top(w *Workload) *Workload {
	for i := 0; i < 2 && w != nil; i++ {
		o := idx.standsFor(w)
		if o == nil {
			break
		}
		w = o
	}
	return w
}

// runs returns the workload of the Set whose pods include p (the topmost controller), or nil.
// Without the ReplicaSet or Job in the Set, the owner is found from their names: the
// ReplicaSet "<deployment>-<pod-template-hash>" with the pod's pod-template-hash label, the
// Job "<cronjob>-<digits>".
func (idx workloadIndex) runs(p *corev1.Pod) *Workload {
	ref := controllerRef(p.OwnerReferences)
	if ref == nil {
		return nil
	}
	ns := namespaceOr(p.Namespace)
	if w := idx.resolve(ns, ref); w != nil {
		return idx.top(w)
	}
	switch ref.Kind {
	case "ReplicaSet":
		if h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			return idx[workloadKey{"Deployment", ns, strings.TrimSuffix(ref.Name, "-"+h)}]
		}
	case "Job":
		if i := strings.LastIndexByte(ref.Name, '-'); i > 0 && allDigits(ref.Name[i+1:]) {
			return idx[workloadKey{"CronJob", ns, ref.Name[:i]}]
		}
	}
	return nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// running counts, per workload, the Set's Pods it runs now: not finished (Succeeded or Failed)
// and not being deleted (its replacement, when there is one, is counted instead).
func (s *Set) running(idx workloadIndex) map[*Workload]map[string]bool {
	out := map[*Workload]map[string]bool{}
	for _, p := range s.Pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		if w := idx.runs(p); w != nil {
			if out[w] == nil {
				out[w] = map[string]bool{}
			}
			out[w][p.Name] = true
		}
	}
	return out
}
