package scheduling

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
)

// PodNodeRequirements returns the node requirements a pod demands, as alternatives: the
// nodeSelector ANDed with each term of the required node affinity (terms are ORed by
// kube-scheduler). A pod without required node affinity has one alternative. matchFields on
// metadata.name become a kubernetes.io/hostname requirement: Dovetail names nodes after the
// hostname, so a new node can never satisfy it. It returns an error naming the field on a
// malformed operator or value.
func PodNodeRequirements(pod *corev1.Pod) ([]Requirements, error) {
	base := FromLabels(pod.Spec.NodeSelector)
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return []Requirements{base}, nil
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		// An empty term list matches no node (kube-scheduler semantics).
		return nil, nil
	}
	out := make([]Requirements, 0, len(terms))
	for i, t := range terms {
		rs := base.Copy()
		for j, e := range t.MatchExpressions {
			r, err := NewNormalizedRequirement(e.Key, e.Operator, e.Values...)
			if err != nil {
				return nil, fmt.Errorf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchExpressions[%d]: %w", i, j, err)
			}
			rs.Add(r)
		}
		for j, f := range t.MatchFields {
			if f.Key != "metadata.name" {
				return nil, fmt.Errorf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchFields[%d].key: %q is not supported (only metadata.name)", i, j, f.Key)
			}
			r, err := NewRequirement(corev1.LabelHostname, f.Operator, f.Values...)
			if err != nil {
				return nil, fmt.Errorf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchFields[%d]: %w", i, j, err)
			}
			rs.Add(r)
		}
		// An empty term matches nothing (kube-scheduler); keep it out.
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		out = append(out, rs)
	}
	return out, nil
}

// UntoleratedTaint returns the first NoSchedule or NoExecute taint the tolerations do not
// tolerate, or nil. PreferNoSchedule taints never block scheduling.
func UntoleratedTaint(tolerations []corev1.Toleration, taints []corev1.Taint) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(discard, t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return t
		}
	}
	return nil
}

// IsDaemonSetPod reports whether a DaemonSet owns the pod.
func IsDaemonSetPod(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// IsTerminal reports whether a pod has finished (Succeeded or Failed) and so holds no resources.
func IsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// discard silences the toleration matcher's logging (it only logs malformed numeric values).
var discard = logr.Discard()

// UntoleratedTaintStrict is UntoleratedTaint that, when preferNoSchedule is true, also treats
// untolerated PreferNoSchedule taints as blocking: the solver honours them as a preference and
// relaxes that last.
func UntoleratedTaintStrict(tolerations []corev1.Toleration, taints []corev1.Taint, preferNoSchedule bool) *corev1.Taint {
	if t := UntoleratedTaint(tolerations, taints); t != nil || !preferNoSchedule {
		return t
	}
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(discard, t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return t
		}
	}
	return nil
}

// HostPort is one host port a pod binds.
type HostPort struct {
	Protocol corev1.Protocol
	IP       string
	Port     int32
}

// PodHostPorts lists the host ports of a pod's containers and init containers (protocol
// defaulting to TCP, host IP to 0.0.0.0), as kube-scheduler's NodePorts filter reads them.
func PodHostPorts(pod *corev1.Pod) []HostPort {
	var out []HostPort
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				hp := HostPort{Protocol: p.Protocol, IP: p.HostIP, Port: p.HostPort}
				if hp.Protocol == "" {
					hp.Protocol = corev1.ProtocolTCP
				}
				if hp.IP == "" {
					hp.IP = "0.0.0.0"
				}
				out = append(out, hp)
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return out
}

// Conflicts reports whether two host ports cannot share a node: same protocol and port, and the
// same host IP or either bound to every address (0.0.0.0).
func (h HostPort) Conflicts(o HostPort) bool {
	return h.Protocol == o.Protocol && h.Port == o.Port && (h.IP == o.IP || h.IP == "0.0.0.0" || o.IP == "0.0.0.0")
}

// PortsConflict reports whether any of a conflicts with any of b.
func PortsConflict(a, b []HostPort) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Conflicts(y) {
				return true
			}
		}
	}
	return false
}

// HasDRARequirements reports whether the pod uses Dynamic Resource Allocation: a pod-level
// resourceClaims entry or a container (init, sidecar or main) consuming a claim. Karpenter v1.14
// does not plan such pods while its IgnoreDRARequests option is on (the default): they are
// reported with ErrDRANotSupported, and DaemonSet pods with claims add no overhead
// (sigs.k8s.io/karpenter pkg/utils/pod HasDRARequirements, provisioning/scheduling).
func HasDRARequirements(pod *corev1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	for i := range pod.Spec.InitContainers {
		if len(pod.Spec.InitContainers[i].Resources.Claims) > 0 {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if len(pod.Spec.Containers[i].Resources.Claims) > 0 {
			return true
		}
	}
	return false
}

// ErrDRANotSupported is the reason a pod with DRA requirements is not planned: what the claims'
// devices need of a node (ResourceSlices a node will publish) is not known before it exists, so
// planning the pod as if the claim did not exist could launch a node its devices never reach.
var ErrDRANotSupported = errors.New("pod has Dynamic Resource Allocation requirements (spec.resourceClaims) that are not supported: the devices a new node would publish are unknown, so the pod is not planned (as Karpenter v1.14 with IgnoreDRARequests, its default)")
