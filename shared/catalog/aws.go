package catalog

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
)

// awsCatalogZstd is data/ec2_instance_types.json (shared/data/aws/ec2_instance_types.json,
// unchanged; provenance and licences in data/README.md) compressed by hack/zstdfile: every binary
// that can reach the catalog carries 0.04 MB instead of 1.7 MB (the Lambda bootstraps' size
// budget, hack/package.sh). TestEmbeddedAWSCatalogIsTheJSON checks it is current.
//
//go:generate go run ../../hack/zstdfile -o data/ec2_instance_types.json.zst data/ec2_instance_types.json
//go:embed data/ec2_instance_types.json.zst
var awsCatalogZstd []byte

// awsCatalogJSON decompresses the embedded catalog file (1.4 ms, BenchmarkAWSCatalogDecompress;
// parsing it takes 50 times as long, and the callers cache what they build from it). An error
// means a corrupt build.
func awsCatalogJSON() ([]byte, error) { return unzstd("AWS catalog", awsCatalogZstd) }

// awsRecord is one instance type of the embedded file; pointer fields are null for some types.
type awsRecord struct {
	Name                    string                `json:"name"`
	Family                  string                `json:"family"`
	Category                *string               `json:"category"`
	Generation              *int64                `json:"generation"`
	Size                    string                `json:"size"`
	VCPU                    int64                 `json:"vcpu"`
	MemoryMiB               int64                 `json:"memory_mib"`
	Architecture            string                `json:"architecture"`
	CPUManufacturer         *string               `json:"cpu_manufacturer"`
	CPUSustainedClockMHz    *int64                `json:"cpu_sustained_clock_mhz"`
	GPUCount                int64                 `json:"gpu_count"`
	GPUName                 *string               `json:"gpu_name"`
	GPUManufacturer         *string               `json:"gpu_manufacturer"`
	GPUMemoryMiB            *int64                `json:"gpu_memory_mib"`
	AcceleratorCount        int64                 `json:"accelerator_count"`
	AcceleratorName         *string               `json:"accelerator_name"`
	AcceleratorManufacturer *string               `json:"accelerator_manufacturer"`
	LocalNVMeGB             *int64                `json:"local_nvme_gb"`
	Hypervisor              *string               `json:"hypervisor"`
	BareMetal               bool                  `json:"bare_metal"`
	EncryptionInTransit     *bool                 `json:"encryption_in_transit"`
	NetworkBandwidthMbps    *int64                `json:"network_bandwidth_mbps"`
	EBSBandwidthMbps        *int64                `json:"ebs_bandwidth_mbps"`
	DefaultCardMaxENIs      *int64                `json:"default_card_max_enis"`
	IPv4PerENI              *int64                `json:"ipv4_per_eni"`
	TrunkingCompatible      *bool                 `json:"trunking_compatible"`
	BranchENIs              *int64                `json:"branch_enis"`
	EKSAMIMaxPods           *int64                `json:"eks_ami_max_pods"`
	OnDemandUSDPerHour      *float64              `json:"on_demand_usd_per_hour_us_east_1"`
	KarpenterAllocatable    *karpenterAllocatable `json:"karpenter_allocatable"`
}

type awsFile struct {
	InstanceTypes []awsRecord `json:"instance_types"`
}

// awsUSEast1 is the parsed embedded catalog (a lazy, not a package-level sync.OnceValues: see lazy).
var awsUSEast1 lazy[*Catalog]

// AWS returns the embedded AWS us-east-1 catalog: all 1,377 instance types of the data, with
// labels, capacity and overhead from Karpenter's rules (AL2023 defaults; see overhead.go) and
// offerings per zone and capacity type (see awsZonesFor and the spot-price model in offerings.go).
// The 25 types without a us-east-1 on-demand price in the data (hpc*, mac*, p5e.48xlarge,
// trn2.48xlarge, x8aedz.*, dl2q.24xlarge) have no offerings, so they can be described but never
// launched. Parsed once and cached; the returned catalog is shared and must not be modified. The
// error is non-nil only if the embedded file is corrupt.
func AWS() (*Catalog, error) {
	embeddedUSEast1Loads.Add(1)
	return awsUSEast1.get(func() (*Catalog, error) {
		data, err := awsCatalogJSON()
		if err != nil {
			return nil, err
		}
		return parseAWS(data)
	})
}

// MustAWS is AWS for program start-up and tests: it panics if the embedded data is corrupt (a
// build defect, not bad input).
func MustAWS() *Catalog {
	c, err := AWS()
	if err != nil {
		panic(err)
	}
	return c
}

// parseAWS decodes and validates the embedded file and builds the catalog.
func parseAWS(data []byte) (*Catalog, error) {
	recs, err := parseRecords(data)
	if err != nil {
		return nil, err
	}
	types := make([]*InstanceType, 0, len(recs))
	for i := range recs {
		types = append(types, recs[i].instanceType())
	}
	c := New(AWSRegion, types)
	c.Source = SourceEmbedded
	return c, nil
}

// Catalog sources.
const (
	SourceEmbedded = "embedded"
	SourceLive     = "live"
)

// parseRecords decodes and validates the embedded instance-type facts.
func parseRecords(data []byte) ([]awsRecord, error) {
	var f awsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("embedded AWS catalog: %w", err)
	}
	seen := make(map[string]bool, len(f.InstanceTypes))
	var errs []error
	for i := range f.InstanceTypes {
		if err := f.InstanceTypes[i].validate(i, seen); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("embedded AWS catalog: %w", err)
	}
	return f.InstanceTypes, nil
}

func (r *awsRecord) validate(i int, seen map[string]bool) error {
	p := fmt.Sprintf("instance_types[%d]", i)
	switch {
	case r.Name == "":
		return fmt.Errorf("%s.name: empty", p)
	case seen[r.Name]:
		return fmt.Errorf("%s.name: %q appears twice", p, r.Name)
	case r.VCPU <= 0:
		return fmt.Errorf("%s.vcpu: %d must be positive (%s)", p, r.VCPU, r.Name)
	case r.MemoryMiB <= 0:
		return fmt.Errorf("%s.memory_mib: %d must be positive (%s)", p, r.MemoryMiB, r.Name)
	case r.Architecture != "amd64" && r.Architecture != "arm64":
		return fmt.Errorf("%s.architecture: %q is not amd64 or arm64 (%s)", p, r.Architecture, r.Name)
	case r.OnDemandUSDPerHour != nil && *r.OnDemandUSDPerHour <= 0:
		return fmt.Errorf("%s.on_demand_usd_per_hour_us_east_1: %g must be positive (%s)", p, *r.OnDemandUSDPerHour, r.Name)
	}
	seen[r.Name] = true
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// spec extracts the hardware facts the overhead rules need. Sources per field:
//   - ENILimitedPods: default_card_max_enis × (ipv4_per_eni − 1) + 2 from Karpenter's vpclimits;
//     for the 8 types absent from vpclimits (hpc6a/6id/7a/8a, trn2.48xlarge) the EKS AMI's
//     eni-max-pods.txt figure (eks_ami_max_pods: 100, or 51 for hpc6id.32xlarge), which AWS
//     generated with the same formula from DescribeInstanceTypes, the source Karpenter itself
//     falls back to (types.go ENILimitedPods reads the EC2 API's NetworkInfo).
//   - nvidia.com/gpu / amd.com/gpu: gpu_count by gpu_manufacturer.
//   - aws.amazon.com/neuron: accelerator_count for AWS (Inferentia/Trainium) accelerators.
//   - aws.amazon.com/neuroncore and vpc.amazonaws.com/efa: Karpenter's published table (the only
//     source of these counts in the data).
//   - vpc.amazonaws.com/pod-eni: branch_enis of trunking-compatible types (Karpenter awsPodENI).
func (r *awsRecord) spec() *Spec {
	s := &Spec{VCPU: r.VCPU, MemoryMiB: r.MemoryMiB, Arch: r.Architecture}
	s.ENILimitedPods = ENILimitedPods(deref(r.DefaultCardMaxENIs), deref(r.IPv4PerENI))
	if s.ENILimitedPods == 0 {
		s.ENILimitedPods = deref(r.EKSAMIMaxPods)
	}
	switch deref(r.GPUManufacturer) {
	case "nvidia":
		s.NVIDIAGPU = r.GPUCount
	case "amd":
		s.AMDGPU = r.GPUCount
	}
	if deref(r.AcceleratorManufacturer) == "aws" {
		s.Neuron = r.AcceleratorCount
	}
	if ka := r.KarpenterAllocatable; ka != nil {
		s.NeuronCore = deref(ka.NeuronCore)
		s.EFA = deref(ka.EFA)
	}
	if deref(r.TrunkingCompatible) {
		s.PodENI = deref(r.BranchENIs)
	}
	return s
}

func (r *awsRecord) instanceType() *InstanceType { return r.instanceTypeIn(AWSRegion) }

// instanceTypeIn builds the type with the region's label and the us-east-1 offerings (a caller
// for another region replaces them).
func (r *awsRecord) instanceTypeIn(region string) *InstanceType {
	spec := r.spec()
	n := spec.compute(NodeSettings{})
	it := &InstanceType{
		Name:     r.Name,
		Labels:   awsLabels(r, region),
		Capacity: n.capacity.List(),
		Overhead: Overhead{
			KubeReserved:      n.kubeReserved.nonZeroList(),
			SystemReserved:    n.systemReserved.nonZeroList(),
			EvictionThreshold: n.eviction.nonZeroList(),
		},
		Spec: spec,
		// The numeric views come straight from the computation (New then skips prepare).
		capacityFast:    n.capacity,
		allocatableFast: n.allocatable(),
		fastReady:       true,
	}
	if r.OnDemandUSDPerHour != nil {
		it.Offerings = awsOfferings(r.Name, deref(r.Hypervisor), *r.OnDemandUSDPerHour)
	}
	return it
}

// karpenterAllocatable is the karpenter_allocatable object of a catalog record: Karpenter's
// documented allocatable for the type (see data/README.md).
type karpenterAllocatable struct {
	CPUMillicores int64  `json:"cpu_millicores"`
	MemoryMiB     int64  `json:"memory_mib"`
	Ephemeral     string `json:"ephemeral_storage"`
	Pods          int64  `json:"pods"`
	PodENI        *int64 `json:"pod_eni"`
	EFA           *int64 `json:"efa"`
	NVIDIAGPU     *int64 `json:"nvidia_gpu"`
	AMDGPU        *int64 `json:"amd_gpu"`
	Neuron        *int64 `json:"neuron"`
	NeuronCore    *int64 `json:"neuroncore"`
}
