package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// AntiAffinityTerm is a compiled required pod anti-affinity term.
type AntiAffinityTerm struct {
	TopologyKey string
	selector    labels.Selector
	namespaces  map[string]bool // nil with allNamespaces false: the owner pod's namespace
	allNS       bool
	ownerNS     string
}

// RequiredAntiAffinity compiles a pod's requiredDuringSchedulingIgnoredDuringExecution pod
// anti-affinity terms. A term with a nil label selector matches no pod (kube-scheduler); an
// empty namespaceSelector ({}) means every namespace; namespaces and namespaceSelector absent
// mean the pod's own namespace. Label-based namespaceSelectors are treated as all namespaces,
// the conservative reading when namespace labels are not in the snapshot.
func RequiredAntiAffinity(pod *corev1.Pod) ([]AntiAffinityTerm, error) {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.PodAntiAffinity == nil {
		return nil, nil
	}
	var out []AntiAffinityTerm
	for _, t := range pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.LabelSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			return nil, err
		}
		term := AntiAffinityTerm{TopologyKey: t.TopologyKey, selector: sel, ownerNS: namespaceOf(pod)}
		switch {
		case t.NamespaceSelector != nil:
			term.allNS = true
		case len(t.Namespaces) > 0:
			term.namespaces = map[string]bool{}
			for _, ns := range t.Namespaces {
				term.namespaces[ns] = true
			}
		}
		out = append(out, term)
	}
	return out, nil
}

// Matches reports whether the term selects the pod.
func (t *AntiAffinityTerm) Matches(pod *corev1.Pod) bool {
	ns := namespaceOf(pod)
	switch {
	case t.allNS:
	case t.namespaces != nil:
		if !t.namespaces[ns] {
			return false
		}
	default:
		if ns != t.ownerNS {
			return false
		}
	}
	return t.selector.Matches(labels.Set(pod.Labels))
}

// HostnameAntiAffinityConflict reports whether placing pod (with its compiled terms) on a node
// that already runs residents breaks required anti-affinity on kubernetes.io/hostname, in either
// direction (the incoming pod's terms against residents, residents' terms against the pod), as
// kube-scheduler's InterPodAffinity filter checks. residentTerms[i] are residents[i]'s terms.
func HostnameAntiAffinityConflict(pod *corev1.Pod, terms []AntiAffinityTerm, residents []*corev1.Pod, residentTerms [][]AntiAffinityTerm) bool {
	for i, r := range residents {
		for j := range terms {
			if terms[j].TopologyKey == corev1.LabelHostname && terms[j].Matches(r) {
				return true
			}
		}
		if i < len(residentTerms) {
			for j := range residentTerms[i] {
				if residentTerms[i][j].TopologyKey == corev1.LabelHostname && residentTerms[i][j].Matches(pod) {
					return true
				}
			}
		}
	}
	return false
}

func namespaceOf(p *corev1.Pod) string {
	if p.Namespace == "" {
		return corev1.NamespaceDefault
	}
	return p.Namespace
}

// AntiAffinityTerms compiles pod anti-affinity terms (required, or preferred ones being honoured)
// of a pod; see RequiredAntiAffinity for the namespace rules.
func AntiAffinityTerms(pod *corev1.Pod, terms []corev1.PodAffinityTerm) ([]AntiAffinityTerm, error) {
	cp := pod.DeepCopy()
	cp.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
	return RequiredAntiAffinity(cp)
}
