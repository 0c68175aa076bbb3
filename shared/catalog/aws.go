package catalog

import (
	"bytes"
	_ "embed"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// awsRecordsGobZstd holds the records of data/ec2_instance_types.json (a byte-identical copy of
// shared/data/aws/ec2_instance_types.json; provenance and licences in data/README.md), validated,
// gob-encoded (gobRecord) and zstd-compressed. TestEmbeddedAWSRecordsAreTheJSON writes it when
// given -write-embedded (`make generate`) and otherwise checks it holds exactly the JSON's
// records; the JSON stays beside it for review. Decoding it is several times as fast as
// parsing the 1.7 MB of JSON, which a function's cold start paid once (BenchmarkAWSLoad).
//
//go:generate go test -run ^TestEmbeddedAWSRecordsAreTheJSON$ -count=1 . -args -write-embedded
//go:embed data/ec2_instance_types.gob.zst
var awsRecordsGobZstd []byte

// gobRecord is how a record is gob-encoded. Gob leaves out zero values, so a pointer to false,
// 0 or "" (a known fact, e.g. encryption_in_transit false) would decode as nil (unknown, so a
// label left out): Set and SetAllocatable keep which pointer fields are non-nil (bit i: field i).
type gobRecord struct {
	R              awsRecord
	Set            uint64
	SetAllocatable uint64
}

// restorePointers points every nil pointer field of v that set lists at a new zero value.
func restorePointers(v reflect.Value, set uint64) {
	for i := range v.NumField() {
		if f := v.Field(i); set&(1<<i) != 0 && f.Kind() == reflect.Pointer && f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
	}
}

// embeddedAWSRecords decodes and validates the embedded records. An error means a corrupt build.
func embeddedAWSRecords() ([]awsRecord, error) {
	raw, err := unzstd("AWS catalog", awsRecordsGobZstd)
	if err != nil {
		return nil, err
	}
	var in []gobRecord
	if err := gob.NewDecoder(bytes.NewReader(raw)).Decode(&in); err != nil {
		return nil, fmt.Errorf("embedded AWS catalog: %w", err)
	}
	recs := make([]awsRecord, len(in))
	for i := range in {
		recs[i] = in[i].R
		restorePointers(reflect.ValueOf(&recs[i]).Elem(), in[i].Set)
		if ka := recs[i].KarpenterAllocatable; ka != nil {
			restorePointers(reflect.ValueOf(ka).Elem(), in[i].SetAllocatable)
		}
	}
	if err := validateRecords(recs); err != nil {
		return nil, fmt.Errorf("embedded AWS catalog: %w", err)
	}
	return recs, nil
}

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
	// NetworkCards is the type's network card count (DescribeInstanceTypes
	// NetworkInfo.MaximumNetworkCards, from Karpenter's vpclimits): an EFA launch puts one
	// interface on each card index below it.
	NetworkCards *int64 `json:"network_cards"`
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
		recs, err := embeddedAWSRecords()
		if err != nil {
			return nil, err
		}
		return buildAWS(recs), nil
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

// parseAWS decodes and validates a file of the embedded JSON's shape and builds the catalog.
func parseAWS(data []byte) (*Catalog, error) {
	recs, err := parseRecords(data)
	if err != nil {
		return nil, err
	}
	return buildAWS(recs), nil
}

// buildAWS builds the us-east-1 catalog from validated records.
func buildAWS(recs []awsRecord) *Catalog {
	types := make([]*InstanceType, 0, len(recs))
	for i := range recs {
		types = append(types, recs[i].instanceType())
	}
	c := New(AWSRegion, types)
	c.Source = SourceEmbedded
	return c
}

// Catalog sources.
const (
	SourceEmbedded = "embedded"
	SourceLive     = "live"
)

// parseRecords decodes and validates instance-type facts in the embedded JSON's shape.
func parseRecords(data []byte) ([]awsRecord, error) {
	var f awsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("embedded AWS catalog: %w", err)
	}
	if err := validateRecords(f.InstanceTypes); err != nil {
		return nil, fmt.Errorf("embedded AWS catalog: %w", err)
	}
	return f.InstanceTypes, nil
}

// validateRecords checks every record, joining the errors.
func validateRecords(recs []awsRecord) error {
	seen := make(map[string]bool, len(recs))
	var errs []error
	for i := range recs {
		if err := recs[i].validate(i, seen); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
	s.InstanceStoreGB = deref(r.LocalNVMeGB)
	s.NetworkCards = deref(r.NetworkCards)
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
