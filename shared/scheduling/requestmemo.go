package scheduling

import (
	corev1 "k8s.io/api/core/v1"
)

// RequestMemo remembers PodRequests per pod across solver runs over the same pods: the preview
// compiles the whole cluster's bound pods for every evaluation (each expired or drifted node,
// each drain), and recomputing 95,000 pods' requests per run was half of a 100,000-object
// plan's compile time. An entry is keyed by the storage of the pod's containers (the address
// of spec.containers[0]) and used only while the pod's init containers and pod-level resources
// are also the ones it was computed from: the preview moves and evicts pods by copying the Pod
// struct, which shares that storage, while a pod built anew gets its own, so a changed spec is
// recomputed rather than trusted. A pointer key hashes in one word; namespace/name keys made
// the lookups a sixth of a 100,000-object plan. Pods with spec.overhead or no containers are not
// memoized (a map has no cheap identity; RuntimeClass overhead is rare). Results are values
// (Resources is never modified in place), so sharing one is safe. The memo keeps the container
// storage of pods it has seen alive for its lifetime. The zero RequestMemo is not usable; nil
// means no memo: Requests then computes. Not safe for concurrent use.
type RequestMemo struct {
	m map[*corev1.Container]memoEntry
}

// memoSpec identifies the spec fields PodRequests reads besides the containers' storage (the
// key), by the identity of their storage.
type memoSpec struct {
	inits               *corev1.Container
	nContainers, nInits int
	podLevel            *corev1.ResourceRequirements
}

type memoEntry struct {
	spec memoSpec
	req  Resources
}

// NewRequestMemo returns an empty memo.
func NewRequestMemo() *RequestMemo { return &RequestMemo{m: map[*corev1.Container]memoEntry{}} }

// Requests is PodRequests(pod), from the memo when the pod's spec is the one it was computed
// from. A nil m computes every time.
func (m *RequestMemo) Requests(pod *corev1.Pod) Resources {
	if m == nil || pod.Spec.Overhead != nil || len(pod.Spec.Containers) == 0 {
		return PodRequests(pod)
	}
	s := specOf(&pod.Spec)
	k := &pod.Spec.Containers[0]
	if e, ok := m.m[k]; ok && e.spec == s {
		return e.req
	}
	r := PodRequests(pod)
	m.m[k] = memoEntry{spec: s, req: r}
	return r
}

func specOf(s *corev1.PodSpec) memoSpec {
	out := memoSpec{nContainers: len(s.Containers), nInits: len(s.InitContainers), podLevel: s.Resources}
	if len(s.InitContainers) > 0 {
		out.inits = &s.InitContainers[0]
	}
	return out
}
