package scheduling

import (
	corev1 "k8s.io/api/core/v1"
)

// ApplyLimitRangeDefaults returns a copy of the pod spec with the defaults the API server's
// LimitRanger admission plugin gives containers in a namespace with these LimitRanges (the
// ones of the pod's namespace; others are ignored by the caller): for every LimitRange item of
// type Container, a container without a limit for a resource gets the item's default, and one
// without a request gets its defaultRequest. Items are defaulted first as the API server
// defaults a LimitRange object (SetDefaults_LimitRange): a missing defaultRequest falls back to
// the default, a missing default to the max. Init containers are defaulted like containers.
// The rule that a request missing next to a limit equals the limit applies as for any pod; here it is applied first, as the API server's defaulting runs when it
// decodes the pod, before admission. The spec is returned unchanged when nothing applies.
//
// Source: kubernetes plugin/pkg/admission/limitranger (defaultContainerResourceRequirements,
// mergeContainerResources) and pkg/apis/core/v1 defaults.go (SetDefaults_LimitRange).
func ApplyLimitRangeDefaults(spec corev1.PodSpec, lrs []*corev1.LimitRange) corev1.PodSpec {
	reqs, lims := corev1.ResourceList{}, corev1.ResourceList{}
	for _, lr := range lrs {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			def := item.Default
			for name, q := range item.Max {
				if _, ok := def[name]; !ok {
					if def == nil {
						def = corev1.ResourceList{}
					} else {
						def = def.DeepCopy()
					}
					def[name] = q
				}
			}
			for name, q := range def {
				lims[name] = q
			}
			for name, q := range def {
				if _, ok := item.DefaultRequest[name]; !ok {
					reqs[name] = q
				}
			}
			for name, q := range item.DefaultRequest {
				reqs[name] = q
			}
		}
	}
	if len(reqs) == 0 && len(lims) == 0 {
		return spec
	}
	out := *spec.DeepCopy()
	merge := func(cs []corev1.Container) {
		for i := range cs {
			r := &cs[i].Resources
			// The API server defaults a request missing next to a limit to the limit when it
			// decodes the pod, before admission: LimitRanger then sees the request set.
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q
				}
			}
			for name, q := range lims {
				if _, ok := r.Limits[name]; !ok {
					if r.Limits == nil {
						r.Limits = corev1.ResourceList{}
					}
					r.Limits[name] = q
				}
			}
			for name, q := range reqs {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q
				}
			}
		}
	}
	merge(out.Containers)
	merge(out.InitContainers)
	return out
}

// LimitRangesIn returns the LimitRanges of one namespace ("" is "default").
func LimitRangesIn(lrs []*corev1.LimitRange, namespace string) []*corev1.LimitRange {
	if namespace == "" {
		namespace = corev1.NamespaceDefault
	}
	var out []*corev1.LimitRange
	for _, lr := range lrs {
		ns := lr.Namespace
		if ns == "" {
			ns = corev1.NamespaceDefault
		}
		if ns == namespace {
			out = append(out, lr)
		}
	}
	return out
}
