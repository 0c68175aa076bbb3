package catalog

import (
	"regexp"
	"strconv"
	"strings"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The AKS node-overhead rules, as AKS Node Auto-Provisioning computes them when it builds an
// instance type (Azure/karpenter-provider-azure pkg/providers/instancetype/instancetype.go:
// KubeReservedResources, EvictionThreshold, CalculateMemoryWithoutOverhead, ephemeralStorage, pods;
// read at commit 00ae11268ef84e134ea41d7701262d2d246decd4, the commit of infra/crds' AKSNodeClass
// CRD). The kube-reserved tables are AKS's published ones ("Node resource reservations in Azure
// Kubernetes Service", learn.microsoft.com/azure/aks/node-resource-reservations: the CPU table
// 60/100/140/180/260/420/740 m for 1/2/4/8/16/32/64 cores, and the regressive memory rate).
//
// One difference from the AKS page, deliberately: for Kubernetes 1.29+ AKS documents kube-reserved
// memory as min(20 MiB × maxPods + 50 MiB, 25% of memory) and a 100Mi eviction threshold, but the
// provider (whose allocatable a NAP user sees Karpenter plan with) still applies the regressive
// rate and 750Mi. Dovetail follows the provider, so its plans match NAP's.
const (
	// AKSEvictionMemoryAvailableMiB is the hard eviction threshold memory.available=750Mi (the
	// provider's DefaultMemoryAvailable; AKS before 1.29).
	AKSEvictionMemoryAvailableMiB = 750
	// AKSVMMemoryOverheadPercent is the provider's --vm-memory-overhead-percent default (0.075):
	// capacity memory = floor(GiB) GiB − ceil(that × 0.075), in bytes.
	AKSVMMemoryOverheadPercent = 0.075
	// AKSDefaultOSDiskSizeGB is the AKSNodeClass CRD default of spec.osDiskSizeGB; ephemeral-storage
	// capacity is osDiskSizeGB × 10^9 bytes (decimal GB), with no kube-reserved or eviction share.
	AKSDefaultOSDiskSizeGB = 128
)

// Default pods per node by network plugin when spec.maxPods is unset (provider utils.GetMaxPods;
// AKS "Configure Azure CNI" and "Azure CNI Overlay" pages): Azure CNI Overlay and "none" (BYO CNI)
// 250, Azure CNI with pod IPs from the node subnet 30, kubenet 110 (the kubelet default).
const (
	AKSMaxPodsOverlay    = 250
	AKSMaxPodsNone       = 250
	AKSMaxPodsNodeSubnet = 30
	AKSMaxPodsKubenet    = 110
)

// AKS network plugins (the --network-plugin / --network-plugin-mode pair of az aks create).
const (
	AKSNetworkOverlay    = "azure-overlay" // --network-plugin azure --network-plugin-mode overlay (NAP's requirement, the default here)
	AKSNetworkNodeSubnet = "azure"         // --network-plugin azure, pod IPs from the node subnet
	AKSNetworkKubenet    = "kubenet"
	AKSNetworkNone       = "none" // bring your own CNI
)

// AKSDefaultMaxPods returns the pods per node of a network plugin (AKSNetworkOverlay when "");
// ok is false for a plugin that is none of the four.
func AKSDefaultMaxPods(plugin string) (int64, bool) {
	switch plugin {
	case "", AKSNetworkOverlay:
		return AKSMaxPodsOverlay, true
	case AKSNetworkNone:
		return AKSMaxPodsNone, true
	case AKSNetworkNodeSubnet:
		return AKSMaxPodsNodeSubnet, true
	case AKSNetworkKubenet:
		return AKSMaxPodsKubenet, true
	}
	return 0, false
}

// AKSKubeReservedMilliCPU is AKS kube-reserved CPU in millicores: 6% of the first core, 4% of the
// second, 2% of cores 3–4 and 1% of every core above 4 (exact integer arithmetic; the AKS table).
// Examples: 2 vCPU → 60 + 40 = 100 m; 8 vCPU → 60 + 40 + 40 + 40 = 180 m; 64 vCPU → 740 m.
func AKSKubeReservedMilliCPU(vcpu int64) int64 {
	// Rates in millicores per core of each band.
	return bandTax(vcpu, []taxBand{{1, 60}, {2, 40}, {4, 20}, {1 << 40, 10}})
}

// AKSKubeReservedMemoryMiB is AKS kube-reserved memory in MiB for a VM of memoryMiB: 25% of the
// first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112 and 2% above 128 GiB,
// truncated to whole MiB (the provider: int64(1024 × tax(GiB))). Example: 8 GiB → 1024 + 819.2 →
// 1843 MiB; 16 GiB → 2662 MiB.
func AKSKubeReservedMemoryMiB(memoryMiB int64) int64 {
	// Rates in thousandths per MiB of each band (bounds in MiB); the sum is in MiB × 1000.
	milli := bandTax(memoryMiB, []taxBand{{4 << 10, 250}, {8 << 10, 200}, {16 << 10, 100}, {128 << 10, 60}, {1 << 40, 20}})
	return milli / 1000
}

// taxBand is one bracket of a regressive rate: up to upper (exclusive of the next), rate per unit.
type taxBand struct{ upper, rate int64 }

func bandTax(amount int64, bands []taxBand) int64 {
	var tax, lower int64
	for _, b := range bands {
		if amount <= lower {
			break
		}
		tax += (min(amount, b.upper) - lower) * b.rate
		lower = b.upper
	}
	return tax
}

// AKSCapacityMemoryBytes is the memory capacity the provider expects a VM of memoryMiB to report:
// whole GiB (the fraction of sizes such as 218.75 GiB is dropped, as the provider does), minus
// ceil(bytes × AKSVMMemoryOverheadPercent). Example: 8 GiB → 8589934592 − 644245095 = 7945689497.
func AKSCapacityMemoryBytes(memoryMiB int64) int64 {
	b := (memoryMiB / 1024) << 30
	return b - ceilMul(b, AKSVMMemoryOverheadPercent)
}

func ceilMul(v int64, f float64) int64 {
	x := float64(v) * f
	n := int64(x)
	if float64(n) < x {
		n++
	}
	return n
}

// AzureSpec is the hardware an Azure VM size's capacity and overhead are computed from.
type AzureSpec struct {
	VCPU      int64
	MemoryMiB int64 // the Resource SKUs MemoryGB capability × 1024 (GiB despite its name)
	NVIDIAGPU int64
	AMDGPU    int64
	// HyperVGeneration is the image generation the size boots: "2" when its HyperVGenerations
	// capability lists V2 (or is unknown), else "1" (the provider's sku-hyperv-generation
	// requirement). It selects the node image; it is no node label.
	HyperVGeneration string
	// GPUDriverOS are the node OSes AKS installs a GPU driver for on this size ("ubuntu",
	// "azurelinux", "azurelinux3"; the provider's supported-gpus data); empty without GPUs.
	GPUDriverOS []string
	// QuotaFamily is the vCPU quota family (standardDSv5Family), the Compute usages entry a
	// launch of the size counts against; "" when the catalog's source did not say.
	QuotaFamily string
}

// AKSImageOS is the GPU-driver OS of an AKS image family: "ubuntu" for the Ubuntu families,
// "azurelinux" for AzureLinux, "" for others.
func AKSImageOS(family string) string {
	switch family {
	case apisv1.ImageFamilyUbuntu, apisv1.ImageFamilyUbuntu2204, apisv1.ImageFamilyUbuntu2404, "":
		return "ubuntu"
	case apisv1.ImageFamilyAzureLinux:
		return "azurelinux"
	}
	return ""
}

// BootsWith reports whether a node of this size can run an AKS image family: a GPU size only
// where AKS installs a driver for it on that OS (the provider's isInstanceTypeSupportedByImageFamily:
// the Ubuntu families take the NVIDIA sizes supported-gpus lists for ubuntu, AzureLinux those it
// lists for azurelinux or azurelinux3); sizes without GPUs boot every Linux family. Non-Azure
// types report true.
func (it *InstanceType) BootsWith(family string) bool {
	if it.Azure == nil || it.Azure.NVIDIAGPU+it.Azure.AMDGPU == 0 {
		return true
	}
	os := AKSImageOS(family)
	for _, g := range it.Azure.GPUDriverOS {
		if os != "" && (g == os || (os == "azurelinux" && g == "azurelinux3")) {
			return true
		}
	}
	return false
}

// ImageLabels are the labels a node image's requirements are matched against: the type's labels
// plus, for an Azure size, karpenter.azure.com/sku-hyperv-generation (a requirement of the
// provider's images that it never puts on the node).
func (it *InstanceType) ImageLabels() map[string]string {
	if it.Azure == nil || it.Azure.HyperVGeneration == "" {
		return it.Labels
	}
	out := make(map[string]string, len(it.Labels)+1)
	for k, v := range it.Labels {
		out[k] = v
	}
	out[apisv1.LabelSKUHyperVGeneration] = it.Azure.HyperVGeneration
	return out
}

// compute applies the AKS rules under node settings: Kubelet.MaxPods (the AKSNodeClass maxPods
// or the network plugin's default, see cloud.NodeSettingsFor) else AKSMaxPodsOverlay;
// EphemeralStorageBytes (osDiskSizeGB × 10^9) else 128 GB. AKS exposes no kube-reserved,
// system-reserved or eviction override, so none is read.
func (s *AzureSpec) compute(settings NodeSettings) nodeResources {
	pods := int64(AKSMaxPodsOverlay)
	if k := settings.Kubelet; k != nil && k.MaxPods != nil {
		pods = *k.MaxPods
	}
	eph := settings.EphemeralStorageBytes
	if eph <= 0 {
		eph = AKSDefaultOSDiskSizeGB * 1_000_000_000
	}
	var n nodeResources
	n.capacity = Resources{MilliCPU: s.VCPU * 1000, MemoryBytes: AKSCapacityMemoryBytes(s.MemoryMiB), EphemeralBytes: eph, Pods: pods,
		NVIDIAGPU: s.NVIDIAGPU, AMDGPU: s.AMDGPU}
	n.kubeReserved = Resources{MilliCPU: AKSKubeReservedMilliCPU(s.VCPU), MemoryBytes: AKSKubeReservedMemoryMiB(s.MemoryMiB) * bytesPerMiB}
	n.eviction = Resources{MemoryBytes: AKSEvictionMemoryAvailableMiB * bytesPerMiB}
	return n
}

// AzureSizeName is a VM size name split as the Azure naming convention reads it
// (learn.microsoft.com/azure/virtual-machines/vm-naming-conventions: [Family] + [Sub-family]* +
// [# of vCPUs] + [Constrained vCPUs]* + [Additive Features] + [Accelerator Type]* + [Version]).
type AzureSizeName struct {
	// Family is the one upper-case letter (D); Subfamily the optional one or two after it (C in DC).
	Family, Subfamily string
	// Constrained is the constrained vCPU count of sizes such as M8-2ms ("" when none).
	Constrained string
	// Features are the additive feature letters (s: premium storage capable, p: Arm, d: local
	// disk, a: AMD, l: low memory, m: memory-intensive, i: isolated...).
	Features string
	// Accelerator is the accelerator token (A100, T4, MI300X; "" when none).
	Accelerator string
	// Version is the version without its "v" ("5"); "" when the name has none.
	Version string
	// Promo marks the discontinued _Promo sizes.
	Promo bool
}

// azureSizePattern reads the size part of a VM size name (the naming convention above; the same
// grammar Azure/skewer's VM size parser accepts, written here from the convention).
var azureSizePattern = regexp.MustCompile(`^([A-Z])([A-Z]{0,2})([0-9]+)(?:-([0-9]+))?([a-z]*|C+|NP)?(?:_(?:xl_)?([A-Z]+[0-9]+[A-Z]*))?(?:_cc)?(?:_[0-9]+)?(?:_[vV]([1-9]))?(_Promo)?$`)

// ParseAzureSizeName parses "Standard_D4pls_v6" (or "D4pls_v6"); ok is false for a name outside
// the convention.
func ParseAzureSizeName(name string) (AzureSizeName, bool) {
	size := strings.TrimPrefix(strings.TrimPrefix(name, "Standard_"), "Basic_")
	m := azureSizePattern.FindStringSubmatch(size)
	if m == nil {
		return AzureSizeName{}, false
	}
	return AzureSizeName{Family: m[1], Subfamily: m[2], Constrained: m[4], Features: m[5], Accelerator: m[6], Version: m[7], Promo: m[8] != ""}, true
}

// Series is Family + Subfamily + Features + "_v" + Version (Dpls_v6), the sku-series label value.
func (n AzureSizeName) Series() string {
	s := n.Family + n.Subfamily + n.Features
	if n.Version != "" {
		s += "_v" + n.Version
	}
	return s
}

// VersionLabel is the sku-version label value: the version number, "1" when the name has none
// (the provider backfills 1).
func (n AzureSizeName) VersionLabel() string {
	if n.Version == "" {
		return "1"
	}
	return n.Version
}

// PremiumStorage reports premium SSD support from the name: the "s" feature, or the S
// sub-family of the older DS and GS series (naming convention).
func (n AzureSizeName) PremiumStorage() bool {
	return strings.Contains(n.Features, "s") || strings.Contains(n.Subfamily, "S")
}

// azureAcceleratedNetworkingByRule is the embedded catalog's rule for sizes the Resource SKUs
// fixtures do not cover: Accelerated Networking is supported on sizes with 2 or more vCPUs
// (Azure "Accelerated Networking overview", supported VM instances), except the A family, Basic
// sizes and the first NV series (Standard_NV6/12/24), which the Resource SKUs API reports without
// it. TestAzureRulesAgreeWithResourceSKUs checks this rule against every SKU of the fixtures.
func azureAcceleratedNetworkingByRule(name string, vcpu int64) bool {
	n, ok := ParseAzureSizeName(name)
	switch {
	case !ok, vcpu < 2, strings.HasPrefix(name, "Basic_"), n.Family == "A":
		return false
	case n.Family == "N" && n.Subfamily == "V" && n.Version == "":
		return false
	}
	return true
}

// azureSpotCapableByRule is the rule for the LowPriorityCapable capability where the fixtures do
// not cover a size: Azure Spot VMs are not offered for B-series and _Promo sizes (Azure "Spot
// Virtual Machines": limitations), nor for Basic sizes.
func azureSpotCapableByRule(name string) bool {
	n, ok := ParseAzureSizeName(name)
	return ok && n.Family != "B" && !n.Promo && !strings.HasPrefix(name, "Basic_")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// AKSCapacityTypeLabels are the labels whose value follows an Azure offering's capacity type, by
// label and value: every on-demand offering of the Azure Karpenter provider carries
// kubernetes.azure.com/scalesetpriority=regular (and kubernetes.azure.com/priority=regular),
// every spot offering =spot (provider pkg/providers/instancetype createOfferings; its instance
// types require both keys In [regular, spot], so a NodePool or pod may select on them and get
// the matching capacity type: its e2e "Spot (nonstandard node pool)" provisions spot from a
// NodePool that requires only scalesetpriority=spot). Reserved capacity has no value here: the
// provider's reserved offerings are not launched by Dovetail on Azure.
var AKSCapacityTypeLabels = map[string]map[string]string{
	apisv1.AKSLabelScaleSetPriority: {apisv1.ScaleSetPrioritySpot: apisv1.CapacityTypeSpot, apisv1.ScaleSetPriorityRegular: apisv1.CapacityTypeOnDemand},
	apisv1.AKSLabelPriority:         {apisv1.PrioritySpot: apisv1.CapacityTypeSpot, apisv1.PriorityRegular: apisv1.CapacityTypeOnDemand},
}
