package catalog

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// NodeSettings are the EC2NodeClass settings that change a node's capacity and allocatable.
// The zero value is Karpenter's default: AL2023, default kubelet, 20Gi ephemeral storage.
type NodeSettings struct {
	// AMIFamily is the EC2NodeClass spec.amiFamily value (AL2023, AL2, Bottlerocket, Custom,
	// Windows2019, Windows2022, Windows2025); "" means AL2023. It selects Karpenter's per-family
	// flags: e.g. Bottlerocket counts maxPods (not ENI-limited pods) in kube-reserved memory and
	// ignores podsPerCore and evictionSoft; Windows families get 110 pods by default and count
	// them in kube-reserved memory. Only the overhead changes here: a Windows family's labels
	// come from InstanceType.ForAMIFamily.
	AMIFamily string
	// Kubelet holds the parsed kubelet overrides; nil = defaults.
	Kubelet *KubeletOverrides
	// EphemeralStorageBytes is the size of the volume backing ephemeral storage (the root volume
	// in blockDeviceMappings); 0 = 20Gi.
	EphemeralStorageBytes int64
	// InstanceStoreRAID0 is an EC2NodeClass's instanceStorePolicy: RAID0: the node's boot agent
	// builds one RAID0 array of the instance-store volumes and keeps ephemeral storage there, so
	// a type with instance store gets its total size (Spec.InstanceStoreGB × 10^9 bytes) as
	// ephemeral-storage capacity instead of EphemeralStorageBytes; a type without instance store
	// keeps EphemeralStorageBytes (karpenter-provider-aws pkg/providers/instancetype/types.go
	// ephemeralStorage: InstanceStorageInfo.TotalSizeInGB as "%dG" when the policy is RAID0).
	InstanceStoreRAID0 bool
	// Images, when non-nil, are the requirements of each node image the NodeClass resolved
	// (AKSNodeClass status.images: architecture and Hyper-V generation): a type none serves
	// (matched on InstanceType.ImageLabels) cannot boot and is not planned.
	Images [][]corev1.NodeSelectorRequirement
	// ZoneLabels are the labels a node of the NodeClass carries by zone beyond the zone itself,
	// as the cloud discovered them (zone → label key → value): for an EC2NodeClass,
	// topology.k8s.aws/zone-id from status.subnets' zoneID, which karpenter-provider-aws puts on
	// every offering of that zone (offering/base_resolver.go) and on the NodeClaim. The solver
	// plans a requirement or topology constraint on such a key onto the offerings of the zones
	// whose value it allows; a zone with no value satisfies only requirements that allow absence.
	ZoneLabels map[string]map[string]string
	// CapacityScope is the scope of the NodeClass's launches for unavailable-offering marks
	// (events.OfferingKey.Scope): an EC2NodeClass's placement group (apisv1.NodeClass.CapacityScope),
	// "" otherwise. The solver skips offerings marked unavailable without a scope or in this one.
	CapacityScope string
}

// NewNodeSettings validates and parses an EC2NodeClass's overhead-relevant settings: its AMI family
// (as resolved by EC2NodeClass.AMIFamily()), its kubelet block and the root volume size (nil = 20Gi).
// fieldPath prefixes error messages (e.g. "spec"); all problems are reported together.
func NewNodeSettings(amiFamily string, kubelet *apisv1.KubeletConfiguration, rootVolume *resource.Quantity, fieldPath string) (NodeSettings, error) {
	var errs []error
	s := NodeSettings{AMIFamily: amiFamily}
	if amiFamily == "" {
		s.AMIFamily = DefaultAMIFamily
	} else if _, ok := familyFlags[amiFamily]; !ok {
		errs = append(errs, fmt.Errorf("%s.amiFamily: %q is not one of AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025", fieldPath, amiFamily))
	}
	k, err := ParseKubelet(kubelet, fieldPath+".kubelet")
	if err != nil {
		errs = append(errs, err)
	}
	s.Kubelet = k
	if rootVolume != nil {
		if rootVolume.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("%s.blockDeviceMappings.ebs.volumeSize: %s must be positive", fieldPath, rootVolume.String()))
		} else {
			s.EphemeralStorageBytes = rootVolume.Value()
		}
	}
	return s, errors.Join(errs...)
}

// KubeletOverrides are the parsed kubelet settings Karpenter lets an EC2NodeClass set that change
// allocatable. Reservation values: cpu in millicores, memory and ephemeral-storage in bytes.
type KubeletOverrides struct {
	MaxPods        *int64
	PodsPerCore    *int64
	KubeReserved   Reservation
	SystemReserved Reservation
	EvictionHard   evictionSignals
	EvictionSoft   evictionSignals
}

// Reservation is a parsed kubeReserved / systemReserved map; nil fields were not set and keep the
// default (Karpenter merges the user's map over its computed defaults key by key).
type Reservation struct {
	MilliCPU       *int64
	MemoryBytes    *int64
	EphemeralBytes *int64
}

func (r Reservation) apply(to *Resources) {
	if r.MilliCPU != nil {
		to.MilliCPU = *r.MilliCPU
	}
	if r.MemoryBytes != nil {
		to.MemoryBytes = *r.MemoryBytes
	}
	if r.EphemeralBytes != nil {
		to.EphemeralBytes = *r.EphemeralBytes
	}
}

// evictionSignals are the two eviction signals that reduce allocatable.
type evictionSignals struct {
	Memory evictionSignal // memory.available
	NodeFS evictionSignal // nodefs.available
}

// evictionSignal is an absolute quantity (bytes) or a percentage of capacity.
type evictionSignal struct {
	Set     bool
	Percent float64 // used when IsPct
	IsPct   bool
	Bytes   int64
}

func (e evictionSignal) amount(capacity int64) int64 {
	if e.IsPct {
		return percentOf(capacity, e.Percent)
	}
	return e.Bytes
}

// Reserved resource names Karpenter accepts in kubeReserved / systemReserved; pid is accepted and
// has no effect on allocatable.
var reservedKeys = map[string]bool{"cpu": true, "memory": true, "ephemeral-storage": true, "pid": true}

// Eviction signals Karpenter accepts in evictionHard / evictionSoft; only memory.available and
// nodefs.available change allocatable.
var evictionKeys = map[string]bool{
	"memory.available": true, "nodefs.available": true, "nodefs.inodesFree": true,
	"imagefs.available": true, "imagefs.inodesFree": true, "pid.available": true,
}

// ParseKubelet validates a kubelet configuration and parses the settings that change allocatable.
// nil gives nil (defaults). On error the returned overrides still hold every valid entry. Errors name the field path and the reason, e.g.
// `spec.kubelet.kubeReserved["memory"]: "12x" is not a quantity`; all problems are joined.
func ParseKubelet(k *apisv1.KubeletConfiguration, fieldPath string) (*KubeletOverrides, error) {
	if k == nil {
		return nil, nil
	}
	var errs []error
	o := &KubeletOverrides{}
	if k.MaxPods != nil {
		if *k.MaxPods < 0 {
			errs = append(errs, fmt.Errorf("%s.maxPods: %d must not be negative", fieldPath, *k.MaxPods))
		} else {
			v := int64(*k.MaxPods)
			o.MaxPods = &v
		}
	}
	if k.PodsPerCore != nil {
		if *k.PodsPerCore < 0 {
			errs = append(errs, fmt.Errorf("%s.podsPerCore: %d must not be negative", fieldPath, *k.PodsPerCore))
		} else {
			v := int64(*k.PodsPerCore)
			o.PodsPerCore = &v
		}
	}
	var err error
	if o.KubeReserved, err = parseReservation(k.KubeReserved, fieldPath+".kubeReserved"); err != nil {
		errs = append(errs, err)
	}
	if o.SystemReserved, err = parseReservation(k.SystemReserved, fieldPath+".systemReserved"); err != nil {
		errs = append(errs, err)
	}
	if o.EvictionHard, err = parseEviction(k.EvictionHard, fieldPath+".evictionHard"); err != nil {
		errs = append(errs, err)
	}
	if o.EvictionSoft, err = parseEviction(k.EvictionSoft, fieldPath+".evictionSoft"); err != nil {
		errs = append(errs, err)
	}
	// The overrides keep every valid entry even when others are refused, so best-effort callers
	// (AllocatableWith) still honour them.
	return o, errors.Join(errs...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parseReservation(m map[string]string, path string) (Reservation, error) {
	var r Reservation
	var errs []error
	for _, key := range sortedKeys(m) {
		p := fmt.Sprintf("%s[%q]", path, key)
		if !reservedKeys[key] {
			errs = append(errs, fmt.Errorf("%s: unknown resource, want one of cpu, memory, ephemeral-storage, pid", p))
			continue
		}
		q, err := resource.ParseQuantity(m[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a quantity", p, m[key]))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s: %q must not be negative", p, m[key]))
			continue
		}
		switch key {
		case "cpu":
			v := q.MilliValue()
			r.MilliCPU = &v
		case "memory":
			v := q.Value()
			r.MemoryBytes = &v
		case "ephemeral-storage":
			v := q.Value()
			r.EphemeralBytes = &v
		}
	}
	return r, errors.Join(errs...)
}

func parseEviction(m map[string]string, path string) (evictionSignals, error) {
	var s evictionSignals
	var errs []error
	for _, key := range sortedKeys(m) {
		p := fmt.Sprintf("%s[%q]", path, key)
		if !evictionKeys[key] {
			errs = append(errs, fmt.Errorf("%s: unknown eviction signal, want one of memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available", p))
			continue
		}
		sig, err := parseSignal(m[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", p, err))
			continue
		}
		switch key {
		case "memory.available":
			s.Memory = sig
		case "nodefs.available":
			s.NodeFS = sig
		}
	}
	return s, errors.Join(errs...)
}

// parseSignal reads "500Mi" or "10%" (a percentage of capacity, 0–100).
func parseSignal(v string) (evictionSignal, error) {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || f < 0 || f > 100 {
			return evictionSignal{}, fmt.Errorf("%q is not a percentage between 0%% and 100%%", v)
		}
		return evictionSignal{Set: true, IsPct: true, Percent: f}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return evictionSignal{}, fmt.Errorf("%q is neither a quantity nor a percentage", v)
	}
	if q.Sign() < 0 {
		return evictionSignal{}, fmt.Errorf("%q must not be negative", v)
	}
	return evictionSignal{Set: true, Bytes: q.Value()}, nil
}
