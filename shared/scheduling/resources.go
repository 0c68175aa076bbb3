// Package scheduling holds the pure scheduling semantics Dovetail shares with kube-scheduler:
// resource requests, node requirements, taints and tolerations. It performs no I/O.
package scheduling

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources is a numeric resource vector, fast to add and compare in the solver's hot loops.
// Units: MilliCPU in millicores, Memory and EphemeralStorage in bytes, Pods as a count, and
// Scalar for extended resources (nvidia.com/gpu, vpc.amazonaws.com/efa, ...) in their integer
// units (milli-units are not used for extended resources, which Kubernetes requires whole).
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Pods             int64
	Scalar           map[corev1.ResourceName]int64
}

// FromList converts a ResourceList. Unknown resource names land in Scalar.
func FromList(l corev1.ResourceList) Resources {
	var r Resources
	for name, q := range l {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case corev1.ResourcePods:
			r.Pods = q.Value()
		default:
			if q.IsZero() {
				continue
			}
			if r.Scalar == nil {
				r.Scalar = map[corev1.ResourceName]int64{}
			}
			r.Scalar[name] = q.Value()
		}
	}
	return r
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	out := Resources{
		MilliCPU:         r.MilliCPU + o.MilliCPU,
		Memory:           r.Memory + o.Memory,
		EphemeralStorage: r.EphemeralStorage + o.EphemeralStorage,
		Pods:             r.Pods + o.Pods,
	}
	if len(r.Scalar) > 0 || len(o.Scalar) > 0 {
		out.Scalar = make(map[corev1.ResourceName]int64, len(r.Scalar)+len(o.Scalar))
		for k, v := range r.Scalar {
			out.Scalar[k] += v
		}
		for k, v := range o.Scalar {
			out.Scalar[k] += v
		}
	}
	return out
}

// Sub returns r − o (components may go negative).
func (r Resources) Sub(o Resources) Resources {
	neg := Resources{MilliCPU: -o.MilliCPU, Memory: -o.Memory, EphemeralStorage: -o.EphemeralStorage, Pods: -o.Pods}
	if len(o.Scalar) > 0 {
		neg.Scalar = make(map[corev1.ResourceName]int64, len(o.Scalar))
		for k, v := range o.Scalar {
			neg.Scalar[k] = -v
		}
	}
	return r.Add(neg)
}

// Max returns the component-wise maximum.
func (r Resources) Max(o Resources) Resources {
	out := Resources{
		MilliCPU:         max(r.MilliCPU, o.MilliCPU),
		Memory:           max(r.Memory, o.Memory),
		EphemeralStorage: max(r.EphemeralStorage, o.EphemeralStorage),
		Pods:             max(r.Pods, o.Pods),
	}
	if len(r.Scalar) > 0 || len(o.Scalar) > 0 {
		out.Scalar = map[corev1.ResourceName]int64{}
		for k, v := range r.Scalar {
			out.Scalar[k] = max(out.Scalar[k], v)
		}
		for k, v := range o.Scalar {
			out.Scalar[k] = max(out.Scalar[k], v)
		}
	}
	return out
}

// Fits reports whether r fits within capacity c: every requested component ≤ c's. An extended
// resource requested but absent from c does not fit.
func (r Resources) Fits(c Resources) bool {
	if r.MilliCPU > c.MilliCPU || r.Memory > c.Memory || r.Pods > c.Pods {
		return false
	}
	// Ephemeral storage is only checked when the capacity states it (kube-scheduler does the same
	// when the node reports no ephemeral-storage).
	if r.EphemeralStorage > 0 && c.EphemeralStorage > 0 && r.EphemeralStorage > c.EphemeralStorage {
		return false
	}
	if len(r.Scalar) == 0 { // ranging over an empty map still costs an iterator
		return true
	}
	for k, v := range r.Scalar {
		if v > 0 && v > c.Scalar[k] {
			return false
		}
	}
	return true
}

// Exceeding names the first component of r that does not fit c, or "" when r fits.
func (r Resources) Exceeding(c Resources) string {
	switch {
	case r.MilliCPU > c.MilliCPU:
		return fmt.Sprintf("cpu %dm > %dm", r.MilliCPU, c.MilliCPU)
	case r.Memory > c.Memory:
		return fmt.Sprintf("memory %dMi > %dMi", r.Memory>>20, c.Memory>>20)
	case r.Pods > c.Pods:
		return fmt.Sprintf("pods %d > %d", r.Pods, c.Pods)
	case r.EphemeralStorage > 0 && c.EphemeralStorage > 0 && r.EphemeralStorage > c.EphemeralStorage:
		return fmt.Sprintf("ephemeral-storage %dMi > %dMi", r.EphemeralStorage>>20, c.EphemeralStorage>>20)
	}
	keys := make([]string, 0, len(r.Scalar))
	for k := range r.Scalar {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := r.Scalar[corev1.ResourceName(k)]; v > 0 && v > c.Scalar[corev1.ResourceName(k)] {
			return fmt.Sprintf("%s %d > %d", k, v, c.Scalar[corev1.ResourceName(k)])
		}
	}
	return ""
}

// IsZero reports whether every component is zero.
func (r Resources) IsZero() bool {
	if r.MilliCPU != 0 || r.Memory != 0 || r.EphemeralStorage != 0 || r.Pods != 0 {
		return false
	}
	for _, v := range r.Scalar {
		if v != 0 {
			return false
		}
	}
	return true
}

// String renders "cpu=1500m memory=2048Mi pods=3 nvidia.com/gpu=1".
func (r Resources) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu=%dm memory=%dMi pods=%d", r.MilliCPU, r.Memory>>20, r.Pods)
	if r.EphemeralStorage > 0 {
		fmt.Fprintf(&b, " ephemeral-storage=%dMi", r.EphemeralStorage>>20)
	}
	keys := make([]string, 0, len(r.Scalar))
	for k := range r.Scalar {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, r.Scalar[corev1.ResourceName(k)])
	}
	return b.String()
}

// containerRequests returns a container's requests, defaulting each resource that has a limit
// but no request to the limit, as the API server's defaulting does (core/v1 SetDefaults_Container
// applies it before scheduling; manifests read by `dovetail plan` have not been defaulted).
func containerRequests(c *corev1.Container) Resources {
	r := FromList(c.Resources.Requests)
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		r = r.Add(FromList(corev1.ResourceList{name: q}))
	}
	return r
}

// PodRequests is the pod's effective request as kube-scheduler computes it (Kubernetes
// "Resources" docs and KEP-753 sidecar containers):
//
//	effective = max(max over init containers i of (request(i) + sidecars started before i),
//	                sum(containers) + sum(sidecars)) + pod overhead
//
// where sidecars are init containers with restartPolicy Always; they keep running, so they add
// to every later init container and to the main containers. Pods is always 1.
func PodRequests(pod *corev1.Pod) Resources {
	var sum Resources
	for i := range pod.Spec.Containers {
		sum = sum.Add(containerRequests(&pod.Spec.Containers[i]))
	}
	var sidecars, initMax Resources
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = sidecars.Add(req)
			// A sidecar's own start also needs the sidecars before it.
			initMax = initMax.Max(sidecars)
			continue
		}
		initMax = initMax.Max(req.Add(sidecars))
	}
	eff := sum.Add(sidecars).Max(initMax)
	if pod.Spec.Resources != nil {
		eff = withPodLevelRequests(eff, pod.Spec.Resources)
	}
	if pod.Spec.Overhead != nil {
		eff = eff.Add(FromList(pod.Spec.Overhead))
	}
	eff.Pods = 1
	return eff
}

// withPodLevelRequests applies pod-level resources (spec.resources, KEP-2837, beta and on by
// default since Kubernetes 1.34) to the containers' effective request, as kube-scheduler counts
// them (k8s.io/component-helpers resource.PodRequests): for the resources a pod may set at pod
// level (cpu, memory, hugepages-*: IsSupportedPodLevelResource) a pod-level request replaces
// the containers' total. The API server's defaulting runs first (pkg/apis/core/v1
// defaultPodRequests; manifests read by dovetail plan are not defaulted): when only a pod-level
// limit is set, the request is the containers' total for cpu and memory if any container asks
// for it (overcommittable resources), else the limit. Other resources keep the containers'
// total. Karpenter sizes nodes with the same helper, so a pod asking 4 CPUs at pod level and
// 100m in each of its containers needs 4 CPUs.
func withPodLevelRequests(eff Resources, rr *corev1.ResourceRequirements) Resources {
	supported := func(n corev1.ResourceName) bool {
		return n == corev1.ResourceCPU || n == corev1.ResourceMemory || strings.HasPrefix(string(n), corev1.ResourceHugePagesPrefix)
	}
	set := func(n corev1.ResourceName, q resource.Quantity) {
		switch n {
		case corev1.ResourceCPU:
			eff.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			eff.Memory = q.Value()
		default:
			scalar := make(map[corev1.ResourceName]int64, len(eff.Scalar)+1)
			for k, v := range eff.Scalar {
				scalar[k] = v
			}
			if q.IsZero() {
				delete(scalar, n)
			} else {
				scalar[n] = q.Value()
			}
			eff.Scalar = scalar
		}
	}
	for n, q := range rr.Requests {
		if supported(n) {
			set(n, q)
		}
	}
	for n, q := range rr.Limits {
		if _, ok := rr.Requests[n]; ok || !supported(n) {
			continue
		}
		fromContainers := (n == corev1.ResourceCPU && eff.MilliCPU > 0) || (n == corev1.ResourceMemory && eff.Memory > 0)
		if !fromContainers {
			set(n, q)
		}
	}
	return eff
}

// List converts back to a ResourceList (zero components omitted).
func (r Resources) List() corev1.ResourceList {
	out := corev1.ResourceList{}
	if r.MilliCPU != 0 {
		out[corev1.ResourceCPU] = *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI)
	}
	if r.Memory != 0 {
		out[corev1.ResourceMemory] = *resource.NewQuantity(r.Memory, resource.BinarySI)
	}
	if r.EphemeralStorage != 0 {
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(r.EphemeralStorage, resource.BinarySI)
	}
	if r.Pods != 0 {
		out[corev1.ResourcePods] = *resource.NewQuantity(r.Pods, resource.DecimalSI)
	}
	for k, v := range r.Scalar {
		if v != 0 {
			out[k] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

// FitsAfter reports whether r fits in capacity on top of used (r + used ≤ capacity, with
// Fits's rules), without allocating.
func (r Resources) FitsAfter(used, capacity Resources) bool {
	if r.MilliCPU+used.MilliCPU > capacity.MilliCPU || r.Memory+used.Memory > capacity.Memory || r.Pods+used.Pods > capacity.Pods {
		return false
	}
	if r.EphemeralStorage > 0 && capacity.EphemeralStorage > 0 && r.EphemeralStorage+used.EphemeralStorage > capacity.EphemeralStorage {
		return false
	}
	if len(r.Scalar) == 0 {
		return true
	}
	for k, v := range r.Scalar {
		if v > 0 && v+used.Scalar[k] > capacity.Scalar[k] {
			return false
		}
	}
	return true
}
