package disruption

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PDBs answers whether a set of pods may be evicted together without breaking a
// PodDisruptionBudget (policy/v1).
type PDBs struct {
	items []pdb
	// byPod caches the PDB indices matching each pod (keyed without building a string, so a
	// lookup allocates nothing).
	byPod map[podKey][]int
}

type pdb struct {
	name     string // namespace/name
	ns       string
	selector labels.Selector
	// allowed is how many matching pods may be evicted now.
	allowed int
}

// NewPDBs evaluates each PDB over pods (the snapshot's bound and pending pods). A PDB whose
// status has been written by the disruption controller (status.observedGeneration > 0) is
// taken at its word (status.disruptionsAllowed); otherwise disruptionsAllowed is computed as
// the controller does: expected = matching pods, healthy = matching pods with Ready=True,
// desired = minAvailable (int, or percent of expected rounded up) or expected − maxUnavailable
// (int, or percent rounded up); allowed = max(0, healthy − desired). A PDB with neither field
// allows nothing to be assumed and is treated as allowing 0 (fail closed). A selector that does
// not parse also allows 0. policy/v1: an empty selector matches every pod of the namespace.
func NewPDBs(pdbs []policyv1.PodDisruptionBudget, pods []*corev1.Pod) *PDBs {
	out := &PDBs{byPod: map[podKey][]int{}}
	for i := range pdbs {
		p := &pdbs[i]
		item := pdb{name: p.Namespace + "/" + p.Name, ns: p.Namespace}
		sel, err := selectorOf(p.Spec.Selector)
		if err != nil {
			item.selector = labels.Everything()
			item.allowed = 0
			out.items = append(out.items, item)
			continue
		}
		item.selector = sel
		var expected, healthy int
		for _, pod := range pods {
			if pod.Namespace != p.Namespace || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			expected++
			if podReady(pod) {
				healthy++
			}
		}
		if p.Status.ObservedGeneration > 0 {
			item.allowed = int(p.Status.DisruptionsAllowed)
		} else {
			item.allowed = computeAllowed(p, expected, healthy)
		}
		out.items = append(out.items, item)
	}
	for _, pod := range pods {
		var idx []int
		for i := range out.items {
			it := &out.items[i]
			if pod.Namespace == it.ns && it.selector.Matches(labels.Set(pod.Labels)) {
				idx = append(idx, i)
			}
		}
		if len(idx) > 0 {
			out.byPod[keyOf(pod)] = idx
		}
	}
	return out
}

func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Nothing(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

func computeAllowed(p *policyv1.PodDisruptionBudget, expected, healthy int) int {
	var desired int
	switch {
	case p.Spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MinAvailable, expected, true)
		if err != nil {
			return 0
		}
		desired = v
	case p.Spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MaxUnavailable, expected, true)
		if err != nil {
			return 0
		}
		desired = expected - v
	default:
		return 0
	}
	return max(healthy-desired, 0)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Allowed returns the PDB's disruptionsAllowed by "namespace/name" (false when unknown).
func (p *PDBs) Allowed(name string) (int, bool) {
	for _, it := range p.items {
		if it.name == name {
			return it.allowed, true
		}
	}
	return 0, false
}

// PDBError is Check's answer: the PodDisruptionBudgets ("namespace/name") that keep a pod from
// being evicted, and why.
type PDBError struct {
	PDBs []string
	msg  string
}

func (e *PDBError) Error() string { return e.msg }

// object is the first PDB the error names, as an ObjectRef.
func (e *PDBError) object() ObjectRef {
	ns, name, _ := strings.Cut(e.PDBs[0], "/")
	return ObjectRef{Kind: "PodDisruptionBudget", Namespace: ns, Name: name}
}

// Check reports why the pods cannot all be evicted together, or nil: a pod matched by more
// than one PDB (the Eviction API refuses those outright), or more matching pods than a PDB's
// disruptionsAllowed. The error is a *PDBError.
func (p *PDBs) Check(pods []*corev1.Pod) error {
	if v := p.violations(pods, false); len(v) > 0 {
		return v[0]
	}
	return nil
}

// violations are Check's refusals; with all false it stops at the first, else it names every
// PDB the pods break once (at the first pod that breaks it).
func (p *PDBs) violations(pods []*corev1.Pod, all bool) []*PDBError {
	if len(p.items) == 0 {
		return nil
	}
	var out []*PDBError
	var counts map[int]int
	reported := map[string]bool{}
	for _, pod := range pods {
		idx := p.byPod[keyOf(pod)]
		switch len(idx) {
		case 0:
			continue
		case 1:
		default:
			out = append(out, &PDBError{PDBs: []string{p.items[idx[0]].name, p.items[idx[1]].name}, msg: fmt.Sprintf(
				"pod %s is matched by %d PodDisruptionBudgets (%s, %s); the Eviction API refuses to evict it",
				podRef(pod), len(idx), p.items[idx[0]].name, p.items[idx[1]].name)})
			if !all {
				return out
			}
			continue
		}
		if counts == nil {
			counts = map[int]int{}
		}
		counts[idx[0]]++
		if it := p.items[idx[0]]; counts[idx[0]] > it.allowed && !reported[it.name] {
			reported[it.name] = true
			out = append(out, &PDBError{PDBs: []string{it.name}, msg: fmt.Sprintf("PodDisruptionBudget %s allows %d disruption(s); evicting pod %s would need %d",
				it.name, it.allowed, podRef(pod), counts[idx[0]])})
			if !all {
				return out
			}
		}
	}
	return out
}

// podKey is a pod's namespace (default when empty, as podRef names it) and name.
type podKey struct{ ns, name string }

func keyOf(p *corev1.Pod) podKey {
	ns := p.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return podKey{ns, p.Name}
}

func podRef(p *corev1.Pod) string {
	ns := p.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return ns + "/" + p.Name
}
