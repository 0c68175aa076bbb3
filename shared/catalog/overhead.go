package catalog

import (
	"math"
)

// The node-overhead rules below are the ones Karpenter's AWS provider applies when it builds an
// instance type (aws/karpenter-provider-aws, pkg/providers/instancetype/types.go, functions memory,
// pods, ENILimitedPods, kubeReservedResources, evictionThreshold, ephemeralStorage; read at commit
// 027ed2416c5de40f9b0a94370dfb050625d415dc), which in turn follow the EKS-optimized AMI's bootstrap
// (awslabs/amazon-eks-ami: eni-max-pods.txt and the kube-reserved formulas) and the kubelet's own
// defaults. They reproduce Karpenter's published allocatable table (website reference/instance-types.md,
// AL2023, no blockDeviceMappings) exactly for every type in the embedded data; see
// TestAllocatableMatchesKarpenterForEveryType.
const (
	// VMMemoryOverheadPercent is the share of the EC2-reported memory that the hypervisor and the
	// kernel keep: Karpenter's VM_MEMORY_OVERHEAD_PERCENT default (0.075). Capacity memory is
	// memory − ceil(memory × 0.075), in MiB.
	VMMemoryOverheadPercent = 0.075
	// GravitonCMAReservedMiB is subtracted from the EC2-reported memory of arm64 (Graviton) types
	// before the VM overhead: Karpenter's memory() comment reads "Gravitons have an extra 64 MiB of
	// cma reserved memory that we can't use". This is why arm64 allocatable is 59 MiB lower than the
	// amd64 formula would give: 64 MiB less memory, but ceil(64 × 0.075) = 5 MiB less VM overhead.
	GravitonCMAReservedMiB = 64
	// DefaultMaxPods is the kubelet's default --max-pods, used when a type has no ENI data and
	// the AMI family does not use ENI-limited pod density (Karpenter's pods(): default 110).
	DefaultMaxPods = 110
	// KubeReservedMemoryPerPodMiB and KubeReservedMemoryBaseMiB give kube-reserved memory =
	// 11 MiB × pods + 255 MiB (EKS AMI bootstrap; Karpenter kubeReservedResources).
	KubeReservedMemoryPerPodMiB = 11
	KubeReservedMemoryBaseMiB   = 255
	// KubeReservedEphemeralBytes is the default kube-reserved ephemeral-storage (1Gi, Karpenter).
	KubeReservedEphemeralBytes = 1 << 30
	// EvictionMemoryAvailableMiB is the default hard eviction threshold memory.available=100Mi
	// (kubelet default; Karpenter evictionThreshold).
	EvictionMemoryAvailableMiB = 100
	// EvictionNodeFSAvailablePercent is the default hard eviction threshold nodefs.available=10%
	// (kubelet default; Karpenter evictionThreshold: ceil(storage / 100 × 10) bytes).
	EvictionNodeFSAvailablePercent = 10
	// DefaultEphemeralStorageBytes is the ephemeral-storage capacity without blockDeviceMappings:
	// the 20Gi EBS volume of Karpenter's default block device mapping (AL2/AL2023 root /dev/xvda,
	// Bottlerocket data volume /dev/xvdb).
	DefaultEphemeralStorageBytes = 20 << 30
)

// CapacityMemoryMiB is the memory capacity (MiB) Karpenter expects a node of the type to report:
// arm64 types first lose GravitonCMAReservedMiB, then the VM overhead ceil(m × 0.075) is taken off.
// Example: m5.large 8192 − ceil(614.4) = 8192 − 615 = 7577 MiB.
func CapacityMemoryMiB(memoryMiB int64, arch string) int64 {
	m := memoryMiB
	if arch == "arm64" {
		m -= GravitonCMAReservedMiB
	}
	return m - int64(math.Ceil(float64(m)*VMMemoryOverheadPercent))
}

// ENILimitedPods is the VPC CNI pod density: ENIs of the default network card × (IPv4 addresses per
// ENI − 1) + 2 (awslabs/amazon-eks-ami eni-max-pods.txt; Karpenter ENILimitedPods; one address per
// ENI is the ENI's own, +2 for the host-network aws-node and kube-proxy pods). Example: m5.large
// 3 × (10 − 1) + 2 = 29. Returns 0 when either input is unknown (≤ 0).
func ENILimitedPods(defaultCardMaxENIs, ipv4PerENI int64) int64 {
	if defaultCardMaxENIs <= 0 || ipv4PerENI <= 0 {
		return 0
	}
	return defaultCardMaxENIs*(ipv4PerENI-1) + 2
}

// KubeReservedMilliCPU is the EKS kube-reserved CPU in millicores: 6% of the first core, 1% of the
// second, 0.5% of cores 3–4 and 0.25% of every core above 4, each band truncated to whole
// millicores (Karpenter kubeReservedResources, after Bottlerocket's and the EKS AMI's formula).
// Example: 2 vCPU → 60 + 10 = 70 m; 96 vCPU → 60 + 10 + 10 + 230 = 310 m.
func KubeReservedMilliCPU(vcpu int64) int64 {
	milli := vcpu * 1000
	var total int64
	for _, band := range [...]struct {
		start, end int64
		fraction   float64
	}{{0, 1000, 0.06}, {1000, 2000, 0.01}, {2000, 4000, 0.005}, {4000, 1 << 31, 0.0025}} {
		if milli < band.start {
			break
		}
		width := band.end - band.start
		if milli < band.end {
			width = milli - band.start
		}
		total += int64(float64(width) * band.fraction)
	}
	return total
}

// KubeReservedMemoryMiB is the EKS kube-reserved memory in MiB: 11 × pods + 255.
func KubeReservedMemoryMiB(pods int64) int64 {
	return KubeReservedMemoryPerPodMiB*pods + KubeReservedMemoryBaseMiB
}

// percentOf returns ceil(capacity / 100 × pct) as Karpenter's computeEvictionSignal does; 100%
// means the signal is disabled (kubelet-config v1beta1), so it reserves nothing.
func percentOf(capacity int64, pct float64) int64 {
	if pct >= 100 {
		return 0
	}
	return int64(math.Ceil(float64(capacity) / 100 * pct))
}

// amiFlags are the per-AMI-family switches of Karpenter's amifamily FeatureFlags.
type amiFlags struct {
	// eniLimitedMemoryOverhead: kube-reserved memory counts ENI-limited pods, not maxPods.
	eniLimitedMemoryOverhead bool
	podsPerCore              bool
	evictionSoft             bool
	// eniLimitedPodDensity: without maxPods, pods = ENI-limited pods (else 110).
	eniLimitedPodDensity bool
}

// familyFlags maps EC2NodeClass spec.amiFamily values to Karpenter's feature flags
// (pkg/providers/amifamily: DefaultFamily for AL2/AL2023/Custom, Bottlerocket, Windows).
var familyFlags = map[string]amiFlags{
	"AL2023":       {true, true, true, true},
	"AL2":          {true, true, true, true},
	"Custom":       {true, true, true, true},
	"Bottlerocket": {false, false, false, true},
	"Windows2019":  {false, true, true, false},
	"Windows2022":  {false, true, true, false},
	"Windows2025":  {false, true, true, false},
}

// DefaultAMIFamily is the family the embedded allocatable assumes (Karpenter's docs generation).
const DefaultAMIFamily = "AL2023"

// Spec is the hardware an instance type's overhead is computed from. Counts are per instance.
type Spec struct {
	VCPU      int64
	MemoryMiB int64 // as EC2 reports it (DescribeInstanceTypes MemoryInfo.SizeInMiB)
	Arch      string
	// ENILimitedPods is the VPC CNI pod limit; 0 when unknown.
	ENILimitedPods int64
	NVIDIAGPU      int64
	AMDGPU         int64
	Neuron         int64
	NeuronCore     int64
	EFA            int64
	// PodENI is the branch-ENI count for security groups for pods (0 when not trunking-compatible).
	PodENI int64
	// InstanceStoreGB is the total instance-store size in decimal GB (DescribeInstanceTypes
	// InstanceStorageInfo.TotalSizeInGB; 0 without instance store): ephemeral storage under
	// NodeSettings.InstanceStoreRAID0.
	InstanceStoreGB int64
	// NetworkCards is DescribeInstanceTypes NetworkInfo.MaximumNetworkCards (0 when unknown):
	// the card indexes 0..NetworkCards-1 a launch may put network interfaces on.
	NetworkCards int64
}

// nodeResources is everything the overhead computation yields, numerically.
type nodeResources struct {
	capacity, kubeReserved, systemReserved, eviction Resources
}

func (n nodeResources) allocatable() Resources {
	return n.capacity.Sub(n.kubeReserved).Sub(n.systemReserved).Sub(n.eviction).clampZero()
}

// compute applies the rules to a spec under node settings (nil kubelet = defaults).
func (s *Spec) compute(settings NodeSettings) nodeResources {
	flags, ok := familyFlags[settings.AMIFamily]
	if !ok {
		flags = familyFlags[DefaultAMIFamily]
	}
	k := settings.Kubelet
	if k == nil {
		k = &KubeletOverrides{}
	}
	ephemeral := settings.EphemeralStorageBytes
	if ephemeral <= 0 {
		ephemeral = DefaultEphemeralStorageBytes
	}
	if settings.InstanceStoreRAID0 && s.InstanceStoreGB > 0 {
		// TotalSizeInGB is decimal: Karpenter writes it as the quantity "<n>G".
		ephemeral = s.InstanceStoreGB * 1_000_000_000
	}
	memCapBytes := CapacityMemoryMiB(s.MemoryMiB, s.Arch) * bytesPerMiB

	eniPods := s.ENILimitedPods
	var pods int64
	switch {
	case k.MaxPods != nil:
		pods = *k.MaxPods
	case flags.eniLimitedPodDensity && eniPods > 0:
		pods = eniPods
	default:
		pods = DefaultMaxPods
	}
	if k.PodsPerCore != nil && *k.PodsPerCore > 0 && flags.podsPerCore {
		pods = min(pods, *k.PodsPerCore*s.VCPU)
	}

	var n nodeResources
	n.capacity = Resources{
		MilliCPU: s.VCPU * 1000, MemoryBytes: memCapBytes, EphemeralBytes: ephemeral, Pods: pods,
		NVIDIAGPU: s.NVIDIAGPU, AMDGPU: s.AMDGPU, Neuron: s.Neuron, NeuronCore: s.NeuronCore, EFA: s.EFA, PodENI: s.PodENI,
	}

	memPods := pods
	if flags.eniLimitedMemoryOverhead {
		// Karpenter passes ENILimitedPods here; with no ENI data the EC2 API would still give one,
		// which the embedded data carries as the EKS AMI figure, so fall back to pods only if absent.
		memPods = eniPods
		if memPods <= 0 {
			memPods = pods
		}
	}
	n.kubeReserved = Resources{
		MilliCPU:       KubeReservedMilliCPU(s.VCPU),
		MemoryBytes:    KubeReservedMemoryMiB(memPods) * bytesPerMiB,
		EphemeralBytes: KubeReservedEphemeralBytes,
	}
	k.KubeReserved.apply(&n.kubeReserved)
	k.SystemReserved.apply(&n.systemReserved)

	n.eviction = Resources{
		MemoryBytes:    EvictionMemoryAvailableMiB * bytesPerMiB,
		EphemeralBytes: percentOf(ephemeral, EvictionNodeFSAvailablePercent),
	}
	k.applyEviction(flags, &n.eviction, memCapBytes, ephemeral)
	return n
}

// applyEviction replaces the default eviction thresholds by the user's: for each signal set in
// evictionHard or (where the family honours it) evictionSoft, the larger of the two wins
// (Karpenter evictionThreshold: MaxResources over the signal maps, then assigned over defaults).
func (k *KubeletOverrides) applyEviction(flags amiFlags, ev *Resources, memCapBytes, ephemeralBytes int64) {
	signals := []evictionSignals{k.EvictionHard}
	if flags.evictionSoft {
		signals = append(signals, k.EvictionSoft)
	}
	var memSet, fsSet bool
	var memMax, fsMax int64
	for _, sig := range signals {
		if sig.Memory.Set {
			if v := sig.Memory.amount(memCapBytes); !memSet || v > memMax {
				memMax = v
			}
			memSet = true
		}
		if sig.NodeFS.Set {
			if v := sig.NodeFS.amount(ephemeralBytes); !fsSet || v > fsMax {
				fsMax = v
			}
			fsSet = true
		}
	}
	if memSet {
		ev.MemoryBytes = memMax
	}
	if fsSet {
		ev.EphemeralBytes = fsMax
	}
}
