package catalog

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Well-known karpenter.k8s.aws labels that shared/apis/v1 does not define (same keys and value
// formats as Karpenter's AWS provider, pkg/apis/v1/labels.go and instancetype computeRequirements).
const (
	// LabelInstanceGPUManufacturer is the GPU maker, lower-kebab-case ("nvidia", "amd").
	LabelInstanceGPUManufacturer = "karpenter.k8s.aws/instance-gpu-manufacturer"
	// LabelInstanceGPUMemory is the memory of one GPU in MiB.
	LabelInstanceGPUMemory = "karpenter.k8s.aws/instance-gpu-memory"
	// LabelInstanceAcceleratorName / Manufacturer / Count describe Inferentia, Trainium and
	// Qualcomm accelerators (lower-kebab-case names).
	LabelInstanceAcceleratorName         = "karpenter.k8s.aws/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount        = "karpenter.k8s.aws/instance-accelerator-count"
	// LabelInstanceLocalNVME is the total instance-store NVMe size in GB (EC2 TotalSizeInGB).
	LabelInstanceLocalNVME = "karpenter.k8s.aws/instance-local-nvme"
	// LabelInstanceNetworkBandwidth is the baseline network bandwidth in Mbit/s.
	LabelInstanceNetworkBandwidth = "karpenter.k8s.aws/instance-network-bandwidth"
	// LabelInstanceEBSBandwidth is the maximum EBS bandwidth in Mbit/s.
	LabelInstanceEBSBandwidth = "karpenter.k8s.aws/instance-ebs-bandwidth"
	// LabelInstanceCPUManufacturer is "intel", "amd" or "aws".
	LabelInstanceCPUManufacturer = "karpenter.k8s.aws/instance-cpu-manufacturer"
	// LabelInstanceCPUSustainedClockSpeedMhz is the sustained clock in MHz.
	LabelInstanceCPUSustainedClockSpeedMhz = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
	// LabelInstanceEncryptionInTransitSupported is "true" or "false".
	LabelInstanceEncryptionInTransitSupported = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
)

// awsLabels builds the node labels of one embedded record, as Karpenter's computeRequirements sets
// them for AL2023: instance-memory is the EC2-reported MiB (not capacity), GPU and accelerator names
// are lower-kebab-case (already so in the data: "a10g", "radeon-pro-v520", "inferentia2"), and
// instance-hypervisor is "" for bare metal (Karpenter's published table shows an empty value).
// Labels whose source value is unknown are left out.
func awsLabels(r *awsRecord, region string) map[string]string {
	l := make(map[string]string, 24)
	l[corev1.LabelArchStable] = r.Architecture
	l[corev1.LabelOSStable] = string(corev1.Linux)
	l[corev1.LabelInstanceTypeStable] = r.Name
	l[corev1.LabelTopologyRegion] = region
	if r.Category != nil {
		l[apisv1.LabelInstanceCategory] = *r.Category
	}
	l[apisv1.LabelInstanceFamily] = r.Family
	if r.Generation != nil {
		l[apisv1.LabelInstanceGeneration] = strconv.FormatInt(*r.Generation, 10)
	}
	l[apisv1.LabelInstanceSize] = r.Size
	l[apisv1.LabelInstanceCPU] = strconv.FormatInt(r.VCPU, 10)
	l[apisv1.LabelInstanceMemory] = strconv.FormatInt(r.MemoryMiB, 10)
	hv := ""
	if r.Hypervisor != nil {
		hv = *r.Hypervisor
	}
	l[apisv1.LabelInstanceHypervisor] = hv
	setInt := func(key string, v *int64) {
		if v != nil {
			l[key] = strconv.FormatInt(*v, 10)
		}
	}
	setStr := func(key string, v *string) {
		if v != nil {
			l[key] = *v
		}
	}
	setInt(LabelInstanceNetworkBandwidth, r.NetworkBandwidthMbps)
	setInt(LabelInstanceEBSBandwidth, r.EBSBandwidthMbps)
	setInt(LabelInstanceLocalNVME, r.LocalNVMeGB)
	setInt(LabelInstanceCPUSustainedClockSpeedMhz, r.CPUSustainedClockMHz)
	setStr(LabelInstanceCPUManufacturer, r.CPUManufacturer)
	if r.EncryptionInTransit != nil {
		l[LabelInstanceEncryptionInTransitSupported] = strconv.FormatBool(*r.EncryptionInTransit)
	}
	if r.GPUName != nil {
		l[apisv1.LabelInstanceGPUName] = *r.GPUName
		l[apisv1.LabelInstanceGPUCount] = strconv.FormatInt(r.GPUCount, 10)
		setStr(LabelInstanceGPUManufacturer, r.GPUManufacturer)
		setInt(LabelInstanceGPUMemory, r.GPUMemoryMiB)
	}
	if r.AcceleratorName != nil {
		l[LabelInstanceAcceleratorName] = *r.AcceleratorName
		setStr(LabelInstanceAcceleratorManufacturer, r.AcceleratorManufacturer)
		l[LabelInstanceAcceleratorCount] = strconv.FormatInt(r.AcceleratorCount, 10)
	}
	return l
}
