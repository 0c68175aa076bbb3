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

// list builds the resource list, without the zero entries when nonZero; the map is sized for
// what it holds (a catalog load builds four per type).
func (r Resources) list(nonZero bool) corev1.ResourceList {
	extended := [...]struct {
		name corev1.ResourceName
		v    int64
	}{{ResourceNVIDIAGPU, r.NVIDIAGPU}, {ResourceAMDGPU, r.AMDGPU}, {ResourceAWSNeuron, r.Neuron},
		{ResourceAWSNeuronCore, r.NeuronCore}, {ResourceEFA, r.EFA}, {ResourceAWSPodENI, r.PodENI}}
	n := 4
	if nonZero {
		n = 0
		for _, v := range [...]int64{r.MilliCPU, r.MemoryBytes, r.EphemeralBytes, r.Pods} {
			if v != 0 {
				n++
			}
		}
	}
	for _, e := range extended {
		if e.v != 0 {
			n++
		}
	}
	l := make(corev1.ResourceList, n)
	if !nonZero || r.MilliCPU != 0 {
		l[corev1.ResourceCPU] = *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI)
	}
	if !nonZero || r.MemoryBytes != 0 {
		l[corev1.ResourceMemory] = *binaryQuantity(r.MemoryBytes)
	}
	if !nonZero || r.EphemeralBytes != 0 {
		l[corev1.ResourceEphemeralStorage] = *binaryQuantity(r.EphemeralBytes)
	}
	if !nonZero || r.Pods != 0 {
		l[corev1.ResourcePods] = *resource.NewQuantity(r.Pods, resource.DecimalSI)
	}
	for _, e := range extended {
		if e.v != 0 {
			l[e.name] = *resource.NewQuantity(e.v, resource.DecimalSI)
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

// binaryQuantity prints whole MiB/GiB amounts as "7577Mi" / "20Gi" rather than a raw byte count.
func binaryQuantity(b int64) *resource.Quantity {
	return resource.NewQuantity(b, resource.BinarySI)
}

// nonZeroList is List without zero entries (for reservations, which name only what they hold).
func (r Resources) nonZeroList() corev1.ResourceList { return r.list(true) }
