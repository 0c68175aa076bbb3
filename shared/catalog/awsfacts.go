package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// AWSTypeFacts are the facts of one EC2 instance type as the EC2 API reports them
// (DescribeInstanceTypes), in the units of the embedded catalog. The online refresh
// (shared/catalog/awsrefresh) fills them; NewAWSInstanceType turns them into an InstanceType with
// the same labels, capacity and overhead rules as the embedded types.
type AWSTypeFacts struct {
	Name string
	// VCPU is DefaultVCpus; MemoryMiB is MemoryInfo.SizeInMiB.
	VCPU      int64
	MemoryMiB int64
	// Arch is "amd64" or "arm64" (EC2's x86_64 is amd64).
	Arch string
	// CPUManufacturer is lower case: "intel", "amd", "aws" ("" when unknown).
	CPUManufacturer string
	// SustainedClockMHz is SustainedClockSpeedInGhz × 1000 (0 when unknown).
	SustainedClockMHz int64
	// GPUs: the first GPU device's count, lower-kebab-case name and manufacturer, and its memory in MiB.
	GPUCount        int64
	GPUName         string
	GPUManufacturer string
	GPUMemoryMiB    int64
	// Accelerators (Inferentia, Trainium): device count, lower-case name and manufacturer, and
	// NeuronCores in all.
	AcceleratorCount        int64
	AcceleratorName         string
	AcceleratorManufacturer string
	NeuronCores             int64
	// LocalNVMeGB is InstanceStorageInfo.TotalSizeInGB (0 without instance store).
	LocalNVMeGB int64
	// Hypervisor is "nitro" or "xen"; "" for bare metal.
	Hypervisor string
	BareMetal  bool
	// EncryptionInTransit is nil when unknown.
	EncryptionInTransit *bool
	// NetworkBandwidthMbps and EBSBandwidthMbps are baseline figures in Mbit/s (0 when unknown).
	NetworkBandwidthMbps int64
	EBSBandwidthMbps     int64
	// DefaultCardMaxENIs and IPv4PerENI give the VPC CNI pod limit (ENIs × (IPv4 − 1) + 2).
	DefaultCardMaxENIs int64
	IPv4PerENI         int64
	// EFA is NetworkInfo.EfaInfo.MaximumEfaInterfaces.
	EFA int64
	// NetworkCards is NetworkInfo.MaximumNetworkCards (0 when unknown).
	NetworkCards int64
	// BranchENIs is the security-groups-for-pods branch ENI count (not in the EC2 API; 0 when
	// unknown).
	BranchENIs int64
}

// familyPattern splits an instance family into category and generation ("m7i-flex" → m, 7),
// the way Karpenter's instance-category and instance-generation labels read it.
var familyPattern = regexp.MustCompile(`^([a-z]+)(\d+)`)

// NewAWSInstanceType builds an instance type from API facts, for a region, with the given
// offerings (sorted with SortOfferings). Errors name the fact that is missing or wrong.
func NewAWSInstanceType(f AWSTypeFacts, region string, offerings []Offering) (*InstanceType, error) {
	family, size, ok := strings.Cut(f.Name, ".")
	switch {
	case !ok || family == "" || size == "":
		return nil, fmt.Errorf("instanceType %q: not family.size", f.Name)
	case f.VCPU <= 0:
		return nil, fmt.Errorf("instanceType %s: vCpuInfo.defaultVCpus %d must be positive", f.Name, f.VCPU)
	case f.MemoryMiB <= 0:
		return nil, fmt.Errorf("instanceType %s: memoryInfo.sizeInMiB %d must be positive", f.Name, f.MemoryMiB)
	case f.Arch != "amd64" && f.Arch != "arm64":
		return nil, fmt.Errorf("instanceType %s: architecture %q is not amd64 or arm64", f.Name, f.Arch)
	case region == "":
		return nil, errors.New("region: required")
	}
	r := &awsRecord{Name: f.Name, Family: family, Size: size, VCPU: f.VCPU, MemoryMiB: f.MemoryMiB, Architecture: f.Arch,
		GPUCount: f.GPUCount, AcceleratorCount: f.AcceleratorCount, BareMetal: f.BareMetal, EncryptionInTransit: f.EncryptionInTransit}
	if m := familyPattern.FindStringSubmatch(family); m != nil {
		cat := m[1]
		gen, _ := strconv.ParseInt(m[2], 10, 64)
		r.Category, r.Generation = &cat, &gen
	}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	num := func(n int64) *int64 {
		if n == 0 {
			return nil
		}
		return &n
	}
	r.CPUManufacturer = str(f.CPUManufacturer)
	r.CPUSustainedClockMHz = num(f.SustainedClockMHz)
	r.GPUName, r.GPUManufacturer, r.GPUMemoryMiB = str(f.GPUName), str(f.GPUManufacturer), num(f.GPUMemoryMiB)
	r.AcceleratorName, r.AcceleratorManufacturer = str(f.AcceleratorName), str(f.AcceleratorManufacturer)
	r.LocalNVMeGB = num(f.LocalNVMeGB)
	r.Hypervisor = str(f.Hypervisor)
	r.NetworkBandwidthMbps, r.EBSBandwidthMbps = num(f.NetworkBandwidthMbps), num(f.EBSBandwidthMbps)
	r.DefaultCardMaxENIs, r.IPv4PerENI = num(f.DefaultCardMaxENIs), num(f.IPv4PerENI)
	r.NetworkCards = num(f.NetworkCards)
	if f.BranchENIs > 0 {
		r.TrunkingCompatible, r.BranchENIs = ptrTo(true), &f.BranchENIs
	}
	r.KarpenterAllocatable = &karpenterAllocatable{EFA: num(f.EFA), NeuronCore: num(f.NeuronCores)}
	it := r.instanceType()
	it.Labels = awsLabels(r, region)
	it.Offerings = append([]Offering(nil), offerings...)
	SortOfferings(it.Offerings)
	return it, nil
}

func ptrTo[T any](v T) *T { return &v }
