package catalog

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Extended resource names a node of the catalog may carry (the names the device plugins and the
// VPC resource controller register, as Karpenter uses them).
const (
	ResourceNVIDIAGPU     corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU        corev1.ResourceName = "amd.com/gpu"
	ResourceAWSNeuron     corev1.ResourceName = "aws.amazon.com/neuron"
	ResourceAWSNeuronCore corev1.ResourceName = "aws.amazon.com/neuroncore"
	ResourceEFA           corev1.ResourceName = "vpc.amazonaws.com/efa"
	ResourceAWSPodENI     corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
	bytesPerMiB                               = int64(1) << 20
	bytesPerGiB                               = int64(1) << 30
)

// Resources is a plain numeric view of a resource list, for the solver's hot loops (no
// resource.Quantity arithmetic, no map look-ups). Units: MilliCPU in millicores, MemoryBytes and
// EphemeralBytes in bytes, everything else in whole devices / pods.
type Resources struct {
	MilliCPU       int64
	MemoryBytes    int64
	EphemeralBytes int64
	Pods           int64
	NVIDIAGPU      int64
	AMDGPU         int64
	Neuron         int64
	NeuronCore     int64
	EFA            int64
	PodENI         int64
}

// Fits reports whether req fits in r on every dimension.
func (r Resources) Fits(req Resources) bool {
	return req.MilliCPU <= r.MilliCPU && req.MemoryBytes <= r.MemoryBytes &&
		req.EphemeralBytes <= r.EphemeralBytes && req.Pods <= r.Pods &&
		req.NVIDIAGPU <= r.NVIDIAGPU && req.AMDGPU <= r.AMDGPU && req.Neuron <= r.Neuron &&
		req.NeuronCore <= r.NeuronCore && req.EFA <= r.EFA && req.PodENI <= r.PodENI
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{r.MilliCPU + o.MilliCPU, r.MemoryBytes + o.MemoryBytes, r.EphemeralBytes + o.EphemeralBytes,
		r.Pods + o.Pods, r.NVIDIAGPU + o.NVIDIAGPU, r.AMDGPU + o.AMDGPU, r.Neuron + o.Neuron,
		r.NeuronCore + o.NeuronCore, r.EFA + o.EFA, r.PodENI + o.PodENI}
}

// Sub returns r − o (components may go negative; callers clamp if they need to).
func (r Resources) Sub(o Resources) Resources {
	return Resources{r.MilliCPU - o.MilliCPU, r.MemoryBytes - o.MemoryBytes, r.EphemeralBytes - o.EphemeralBytes,
		r.Pods - o.Pods, r.NVIDIAGPU - o.NVIDIAGPU, r.AMDGPU - o.AMDGPU, r.Neuron - o.Neuron,
		r.NeuronCore - o.NeuronCore, r.EFA - o.EFA, r.PodENI - o.PodENI}
}

// clampZero sets negative components to zero (the kubelet never reports negative allocatable).
func (r Resources) clampZero() Resources {
	for _, p := range []*int64{&r.MilliCPU, &r.MemoryBytes, &r.EphemeralBytes, &r.Pods, &r.NVIDIAGPU, &r.AMDGPU,
		&r.Neuron, &r.NeuronCore, &r.EFA, &r.PodENI} {
		if *p < 0 {
			*p = 0
		}
	}
	return r
}

// List converts to a corev1.ResourceList. cpu, memory, ephemeral-storage and pods are always
// present; extended resources only when non-zero (as a kubelet reports them).
func (r Resources) List() corev1.ResourceList { return r.list(false) }

// list builds the resource list: cpu, memory, ephemeral-storage and pods unless nonZero drops
// them at zero, extended resources only when non-zero. The map is sized for what it holds (a
// catalog load builds four per type).
func (r Resources) list(nonZero bool) corev1.ResourceList {
	entries := [...]struct {
		name   corev1.ResourceName
		v      int64
		format resource.Format
		core   bool // always listed, unless nonZero
	}{ // bytes in BinarySI: whole MiB/GiB print as "7577Mi" / "20Gi", not a raw byte count
		{corev1.ResourceCPU, r.MilliCPU, resource.DecimalSI, true}, {corev1.ResourceMemory, r.MemoryBytes, resource.BinarySI, true},
		{corev1.ResourceEphemeralStorage, r.EphemeralBytes, resource.BinarySI, true}, {corev1.ResourcePods, r.Pods, resource.DecimalSI, true},
		{ResourceNVIDIAGPU, r.NVIDIAGPU, resource.DecimalSI, false}, {ResourceAMDGPU, r.AMDGPU, resource.DecimalSI, false},
		{ResourceAWSNeuron, r.Neuron, resource.DecimalSI, false}, {ResourceAWSNeuronCore, r.NeuronCore, resource.DecimalSI, false},
		{ResourceEFA, r.EFA, resource.DecimalSI, false}, {ResourceAWSPodENI, r.PodENI, resource.DecimalSI, false},
	}
	listed := func(i int) bool { return entries[i].v != 0 || (entries[i].core && !nonZero) }
	n := 0
	for i := range entries {
		if listed(i) {
			n++
		}
	}
	l := make(corev1.ResourceList, n)
	for i, e := range entries {
		switch {
		case !listed(i):
		case e.name == corev1.ResourceCPU:
			l[e.name] = *resource.NewMilliQuantity(e.v, e.format)
		default:
			l[e.name] = *resource.NewQuantity(e.v, e.format)
		}
	}
	return l
}

// ResourcesFromList converts a resource list to the numeric view. Fractional values round up
// (a request of 0.5 GPU needs a whole device); unknown resource names are ignored.
func ResourcesFromList(l corev1.ResourceList) Resources {
	var r Resources
	for name, q := range l {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.MemoryBytes = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralBytes = q.Value()
		case corev1.ResourcePods:
			r.Pods = q.Value()
		case ResourceNVIDIAGPU:
			r.NVIDIAGPU = q.Value()
		case ResourceAMDGPU:
			r.AMDGPU = q.Value()
		case ResourceAWSNeuron:
			r.Neuron = q.Value()
		case ResourceAWSNeuronCore:
			r.NeuronCore = q.Value()
		case ResourceEFA:
			r.EFA = q.Value()
		case ResourceAWSPodENI:
			r.PodENI = q.Value()
		}
	}
	return r
}

// nonZeroList is List without zero entries (for reservations, which name only what they hold).
func (r Resources) nonZeroList() corev1.ResourceList { return r.list(true) }
