package catalog

import (
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// prepare computes the numeric views once (called by New).
func (it *InstanceType) prepare() {
	if it.fastReady {
		return
	}
	it.capacityFast = ResourcesFromList(it.Capacity)
	it.allocatableFast = ResourcesFromList(it.Allocatable())
	it.fastReady = true
}

// CapacityFast is Capacity as numbers (see Resources for units), precomputed by New.
func (it *InstanceType) CapacityFast() Resources {
	if it.fastReady {
		return it.capacityFast
	}
	return ResourcesFromList(it.Capacity)
}

// AllocatableFast is Allocatable() as numbers (millicores, bytes, pods, devices) under the default
// node settings (AL2023, default kubelet, 20Gi volume), precomputed by New: a field read in hot loops.
func (it *InstanceType) AllocatableFast() Resources {
	if it.fastReady {
		return it.allocatableFast
	}
	return ResourcesFromList(it.Allocatable())
}

// AllocatableWith is the allocatable a node of this type gets under an EC2NodeClass kubelet block
// (AL2023 family, 20Gi volume): maxPods and podsPerCore change pods; kubeReserved and
// systemReserved replace the computed reservation per resource; evictionHard / evictionSoft
// memory.available and nodefs.available (absolute or % of capacity) replace the default thresholds.
// nil k gives Allocatable(). Invalid entries are skipped: validate with ParseKubelet or
// NewNodeSettings first to refuse them with a field path.
func (it *InstanceType) AllocatableWith(k *apisv1.KubeletConfiguration) corev1.ResourceList {
	if k == nil {
		return it.Allocatable()
	}
	o, _ := ParseKubelet(k, "kubelet") // best effort by contract: o keeps every valid entry
	_, alloc := it.ResourcesWith(NodeSettings{Kubelet: o})
	return alloc.List()
}

// ResourcesWith returns capacity and allocatable (numeric) under node settings. Parse the settings
// once per EC2NodeClass with NewNodeSettings and call this per type: it does no parsing and no
// allocation beyond the two returned values.
func (it *InstanceType) ResourcesWith(s NodeSettings) (capacity, allocatable Resources) {
	if s.Kubelet == nil && s.EphemeralStorageBytes == 0 && !s.InstanceStoreRAID0 && (s.AMIFamily == "" || s.AMIFamily == DefaultAMIFamily) {
		return it.CapacityFast(), it.AllocatableFast()
	}
	if it.Azure != nil {
		n := it.Azure.compute(s)
		return n.capacity, n.allocatable()
	}
	if it.Spec != nil {
		n := it.Spec.compute(s)
		return n.capacity, n.allocatable()
	}
	return it.resourcesWithoutSpec(s)
}

// resourcesWithoutSpec applies settings to a hand-built type from its Capacity and Overhead. A
// hand-built type records no instance store, so InstanceStoreRAID0 leaves its ephemeral storage
// at EphemeralStorageBytes (as for an EC2 type without instance store).
func (it *InstanceType) resourcesWithoutSpec(s NodeSettings) (Resources, Resources) {
	flags, ok := familyFlags[s.AMIFamily]
	if !ok {
		flags = familyFlags[DefaultAMIFamily]
	}
	n := nodeResources{
		capacity:       ResourcesFromList(it.Capacity),
		kubeReserved:   ResourcesFromList(it.Overhead.KubeReserved),
		systemReserved: ResourcesFromList(it.Overhead.SystemReserved),
		eviction:       ResourcesFromList(it.Overhead.EvictionThreshold),
	}
	if s.EphemeralStorageBytes > 0 {
		n.capacity.EphemeralBytes = s.EphemeralStorageBytes
		n.eviction.EphemeralBytes = percentOf(s.EphemeralStorageBytes, EvictionNodeFSAvailablePercent)
	}
	if k := s.Kubelet; k != nil {
		if k.MaxPods != nil {
			n.capacity.Pods = *k.MaxPods
		}
		if k.PodsPerCore != nil && *k.PodsPerCore > 0 && flags.podsPerCore {
			n.capacity.Pods = min(n.capacity.Pods, *k.PodsPerCore*(n.capacity.MilliCPU/1000))
		}
		k.KubeReserved.apply(&n.kubeReserved)
		k.SystemReserved.apply(&n.systemReserved)
		k.applyEviction(flags, &n.eviction, n.capacity.MemoryBytes, n.capacity.EphemeralBytes)
	}
	return n.capacity, n.allocatable()
}

// AvailableOfferings returns the offerings with Available set, in the stored order (price, zone,
// capacity type). It allocates only when some offering is unavailable.
func (it *InstanceType) AvailableOfferings() []Offering {
	for i, o := range it.Offerings {
		if !o.Available {
			out := append([]Offering(nil), it.Offerings[:i]...)
			for _, o := range it.Offerings[i+1:] {
				if o.Available {
					out = append(out, o)
				}
			}
			return out
		}
	}
	return it.Offerings
}
