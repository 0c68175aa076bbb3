package catalog

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The embedded Azure data (provenance and licences in data/azure/README.md). The size list and
// the prices are stored compressed by hack/zstdfile (0.01 MB instead of 0.48 MB, 0.28 MB instead
// of 2.47 MB; TestEmbeddedAzureDataIsTheFiles checks they are current). Only the lazy loaders
// below read these variables, so a binary that never builds an Azure catalog (the AWS Lambda
// bootstraps) links none of them.
//
//go:generate go run ../../hack/zstdfile -o data/azure/vm_sizes.json.zst data/azure/vm_sizes.json
//go:generate go run ../../hack/zstdfile -o data/azure/on_demand_prices.csv.zst data/azure/on_demand_prices.csv
var (
	//go:embed data/azure/vm_sizes.json.zst
	azureSizesZstd []byte
	//go:embed data/azure/on_demand_prices.csv.zst
	azurePricesZstd []byte
	//go:embed data/azure/resource_skus_eastus_skewer_fixture.json
	azureSKUsEastUS []byte
	//go:embed data/azure/resource_skus_southcentralus_karpenter_fixture.json
	azureSKUsSouthCentralUS []byte
	//go:embed data/azure/resource_skus_westcentralus_karpenter_fixture.json
	azureSKUsWestCentralUS []byte
)

// AzureRegion is the default region of the embedded Azure catalog.
const AzureRegion = "eastus"

// AzureZonalRegions are the regions with availability zones that the embedded prices cover: the
// provider's zonalRegions list (instancetypes.go, after Azure "Azure regions with availability
// zone support"), less usgovvirginia and chinanorth3, which the price data does not have. Each has
// three zones, labelled <region>-1 … <region>-3.
var AzureZonalRegions = []string{
	"australiaeast", "brazilsouth", "canadacentral", "centralindia", "centralus", "eastasia", "eastus", "eastus2",
	"francecentral", "germanywestcentral", "israelcentral", "italynorth", "japaneast", "koreacentral", "northeurope",
	"norwayeast", "polandcentral", "qatarcentral", "southafricanorth", "southcentralus", "southeastasia", "swedencentral",
	"switzerlandnorth", "uaenorth", "uksouth", "westeurope", "westus2", "westus3",
}

// AzureZone is the topology.kubernetes.io/zone value of an Azure zone: "<region>-<zone>" (eastus-1),
// as the Azure cloud provider labels nodes and the Karpenter provider names offerings.
func AzureZone(region, zone string) string { return region + "-" + zone }

// AzureRegionalZone is the topology.kubernetes.io/zone value of a VM created without a zone (in a
// region without availability zones, or of a size that has no zones there): cloud-provider-azure
// labels such a node with its fault domain, "0" for a standalone VM, and Karpenter Azure offers
// these sizes in zone "0" with placement-scope regional (karpenter-provider-azure #1384, #1615).
const AzureRegionalZone = "0"

// AzureIsZonal reports whether region has availability zones (AzureZonalRegions).
func AzureIsZonal(region string) bool { return slices.Contains(AzureZonalRegions, region) }

// azureDefaultZones are the offering zones of a size no Resource SKUs record lists: zones 1–3
// of a zonal region, else the regional zone.
func azureDefaultZones(region string) []string {
	if !AzureIsZonal(region) {
		return []string{AzureRegionalZone}
	}
	return []string{AzureZone(region, "1"), AzureZone(region, "2"), AzureZone(region, "3")}
}

// AzureSizeFacts are the facts of one VM size in the units the rules use.
type AzureSizeFacts struct {
	Name      string // Standard_D2s_v5
	VCPU      int64
	MemoryMiB int64 // MemoryGB × 1024
	Arch      string
	GPUCount  int64
	// GPUManufacturer is nvidia or amd; GPUModel the accelerator (A100, T4, V100), "" when unknown.
	GPUManufacturer, GPUModel                     string
	PremiumIO, AcceleratedNetworking, SpotCapable bool
	// HyperVGenerations are "1" and/or "2" (nil when unknown).
	HyperVGenerations []string
	// EphemeralOSMaxGB is the largest ephemeral OS disk in GB (0 when unknown or none).
	EphemeralOSMaxGB int64
	// GPUDriverOS are the OSes AKS installs a GPU driver for (supported-gpus), empty without GPUs.
	GPUDriverOS []string
	// QuotaFamily is the size's vCPU quota family, the Resource SKUs API's "family"
	// (standardDSv5Family): the name of its Compute usages entry.
	QuotaFamily string
}

// AKSUnsupportedReason says why AKS Node Auto-Provisioning does not offer a size, or "" when it
// does (provider DefaultProvider.isSupported): fewer than 2 vCPUs or 3.5 GiB, a size AKS
// restricts, a GPU size AKS has no driver for, constrained vCPUs (M8-2ms), confidential DC/EC
// sizes, and names outside the naming convention.
func AKSUnsupportedReason(f AzureSizeFacts, aksGPU bool) string {
	n, ok := ParseAzureSizeName(f.Name)
	switch {
	case !ok:
		return "size name outside the Azure naming convention"
	case f.VCPU < 2:
		return "fewer than 2 vCPUs"
	case f.MemoryMiB < 3584:
		return "less than 3.5 GiB of memory"
	case aksRestrictedSizes[f.Name]:
		return "restricted by AKS"
	case f.GPUCount > 0 && !aksGPU:
		return "GPU size without an AKS-supported driver"
	case n.Constrained != "":
		return "constrained vCPUs"
	case (n.Family == "D" || n.Family == "E") && strings.HasPrefix(n.Subfamily, "C"):
		return "confidential VM"
	}
	return ""
}

// aksRestrictedSizes are the sizes the provider never offers (RestrictedVMSizes, restricted.go).
var aksRestrictedSizes = map[string]bool{
	"Standard_A0": true, "Standard_A1": true, "Standard_A1_v2": true, "Standard_B1s": true, "Standard_B1ms": true,
	"Standard_F1": true, "Standard_F1s": true, "Basic_A0": true, "Basic_A1": true, "Basic_A2": true, "Basic_A3": true, "Basic_A4": true,
}

// NewAzureInstanceType builds a VM size's instance type for region with its offerings (sorted
// here): labels as the Karpenter provider's computeRequirements sets them, capacity and overhead
// from the AKS rules under default settings (azurerules.go).
func NewAzureInstanceType(f AzureSizeFacts, region string, offerings []Offering) *InstanceType {
	spec := &AzureSpec{VCPU: f.VCPU, MemoryMiB: f.MemoryMiB, HyperVGeneration: apisv1.HyperVGenerationV2, GPUDriverOS: f.GPUDriverOS, QuotaFamily: f.QuotaFamily}
	if len(f.HyperVGenerations) > 0 && !slices.Contains(f.HyperVGenerations, apisv1.HyperVGenerationV2) {
		spec.HyperVGeneration = apisv1.HyperVGenerationV1
	}
	switch f.GPUManufacturer {
	case apisv1.ManufacturerNvidia:
		spec.NVIDIAGPU = f.GPUCount
	case apisv1.ManufacturerAMD:
		spec.AMDGPU = f.GPUCount
	}
	n := spec.compute(NodeSettings{})
	labels := azureLabels(f, region)
	// placement-scope: regional for a size offered without a zone, as the provider labels it.
	labels[apisv1.LabelPlacementScope] = apisv1.PlacementScopeZonal
	if slices.ContainsFunc(offerings, func(o Offering) bool { return o.Zone == AzureRegionalZone }) {
		labels[apisv1.LabelPlacementScope] = apisv1.PlacementScopeRegional
	}
	it := &InstanceType{
		Name:         f.Name,
		Labels:       labels,
		Capacity:     n.capacity.List(),
		Overhead:     Overhead{KubeReserved: n.kubeReserved.nonZeroList(), SystemReserved: n.systemReserved.nonZeroList(), EvictionThreshold: n.eviction.nonZeroList()},
		Azure:        spec,
		capacityFast: n.capacity, allocatableFast: n.allocatable(), fastReady: true,
	}
	it.Offerings = append([]Offering(nil), offerings...)
	SortOfferings(it.Offerings)
	return it
}

// azureLabels are a size's node labels (provider computeRequirements): the upstream well-known
// ones, karpenter.azure.com/sku-* (sku-memory in MiB, sku-gpu-count "0" without GPUs, sku-version
// "1" when the name has none) and kubernetes.azure.com/sku-cpu and sku-memory. Labels a NodeClass
// or the offering decides (os-sku, capacity type, zone, mode, cluster) are not the type's.
func azureLabels(f AzureSizeFacts, region string) map[string]string {
	l := map[string]string{
		corev1.LabelArchStable: f.Arch, corev1.LabelOSStable: string(corev1.Linux),
		corev1.LabelInstanceTypeStable: f.Name, corev1.LabelTopologyRegion: region,
		apisv1.LabelSKUName: f.Name, apisv1.LabelSKUCPU: itoa(f.VCPU), apisv1.LabelSKUMemory: itoa(f.MemoryMiB),
		apisv1.AKSLabelCPU: itoa(f.VCPU), apisv1.AKSLabelMemory: itoa(f.MemoryMiB),
		apisv1.LabelSKUGPUCount:              itoa(f.GPUCount),
		apisv1.LabelSKUStoragePremiumCapable: strconv.FormatBool(f.PremiumIO),
		apisv1.LabelSKUAcceleratedNetworking: strconv.FormatBool(f.AcceleratedNetworking),
	}
	if n, ok := ParseAzureSizeName(f.Name); ok {
		l[apisv1.LabelSKUFamily], l[apisv1.LabelSKUSeries], l[apisv1.LabelSKUVersion] = n.Family, n.Series(), n.VersionLabel()
	}
	if f.GPUCount > 0 && f.GPUManufacturer != "" {
		l[apisv1.LabelSKUGPUManufacturer] = f.GPUManufacturer
		if g := azureGPUName(f); g != "" {
			l[apisv1.LabelSKUGPUName] = g
		}
	}
	if f.EphemeralOSMaxGB > 0 {
		l[apisv1.LabelSKUStorageEphemeralOSMaxSize] = itoa(f.EphemeralOSMaxGB)
	}
	return l
}

// azureGPUName is the sku-gpu-name value: the accelerator token of the size name (A100 in
// NC24ads_A100_v4), as the provider parses it, else the data's model when it is one token (V100
// for NC6s_v3, whose name carries none); "A100 PCIE 80GB"-style descriptions are no label value.
func azureGPUName(f AzureSizeFacts) string {
	if n, ok := ParseAzureSizeName(f.Name); ok && n.Accelerator != "" {
		return n.Accelerator
	}
	if strings.ContainsAny(f.GPUModel, " /") {
		return ""
	}
	return f.GPUModel
}

// AzureOfferings are a size's offerings in zones (topology.kubernetes.io/zone values: eastus-1, or
// AzureRegionalZone): on demand at onDemand USD/h, and, when spotCapable, spot at the spot-price
// model's estimate (no Azure spot data is embedded; the model's one ratio is the only calibrated
// figure, see SpotPriceEstimate). Sorted.
func AzureOfferings(name string, zones []string, onDemand float64, spotCapable bool) []Offering {
	labelled := zones
	out := make([]Offering, 0, 2*len(zones))
	for _, z := range labelled {
		out = append(out, Offering{Zone: z, CapacityType: apisv1.CapacityTypeOnDemand, PricePerHour: onDemand, PriceSource: PriceSourceEmbedded, Available: true})
		if spotCapable {
			out = append(out, Offering{Zone: z, CapacityType: apisv1.CapacityTypeSpot, PricePerHour: SpotPriceEstimate(name, z, labelled, onDemand), PriceSource: PriceSourceSpotModel, Available: true})
		}
	}
	SortOfferings(out)
	return out
}

// azureRecord is one size of the embedded vm_sizes.json.
type azureRecord struct {
	Name            string   `json:"name"`
	Family          string   `json:"family"`
	VCPU            int64    `json:"vcpu"`
	MemoryMiB       int64    `json:"memory_mib"`
	Architecture    string   `json:"architecture"`
	GPUCount        int64    `json:"gpu_count"`
	GPUManufacturer *string  `json:"gpu_manufacturer"`
	GPUModel        *string  `json:"gpu_model"`
	AKSGPUOS        *string  `json:"aks_gpu_supported_os"`
	OnDemandEastUS  *float64 `json:"on_demand_usd_per_hour_eastus"`
}

// facts derives what the data lacks from the naming convention and the documented rules
// (premium storage from the "s" feature, accelerated networking and spot by rule).
func (r *azureRecord) facts() AzureSizeFacts {
	n, _ := ParseAzureSizeName(r.Name)
	return AzureSizeFacts{Name: r.Name, VCPU: r.VCPU, MemoryMiB: r.MemoryMiB, Arch: r.Architecture, GPUCount: r.GPUCount,
		GPUManufacturer: deref(r.GPUManufacturer), GPUModel: deref(r.GPUModel), PremiumIO: n.PremiumStorage(),
		AcceleratedNetworking: azureAcceleratedNetworkingByRule(r.Name, r.VCPU), SpotCapable: azureSpotCapableByRule(r.Name),
		GPUDriverOS: r.gpuDriverOS(), QuotaFamily: r.Family}
}

// gpuDriverOS splits aks_gpu_supported_os ("ubuntu;windows;azurelinux3"), Windows left out.
func (r *azureRecord) gpuDriverOS() []string {
	var out []string
	for _, os := range strings.Split(deref(r.AKSGPUOS), ";") {
		if os = strings.TrimSpace(os); os != "" && os != "windows" {
			out = append(out, os)
		}
	}
	return out
}

// aksGPU reports whether AKS installs a driver for the size on Ubuntu (supported-gpus.yaml).
func (r *azureRecord) aksGPU() bool { return strings.Contains(deref(r.AKSGPUOS), "ubuntu") }

var (
	azureRecords  lazy[[]azureRecord]
	azurePrices   lazy[map[string]map[string]float64]
	azureCatalogs sync.Map // region → func() (*Catalog, error)
)

// loadAzureRecords is the embedded vm_sizes.json, decoded and checked once.
func loadAzureRecords() ([]azureRecord, error) {
	return azureRecords.get(func() ([]azureRecord, error) {
		data, err := unzstd("Azure sizes", azureSizesZstd)
		if err != nil {
			return nil, err
		}
		return parseAzureRecords(data)
	})
}

// parseAzureRecords decodes vm_sizes.json ({"vm_sizes": [...]}). Error: a size without a name,
// a positive vcpu, a memory_mib of at least 0 or an amd64/arm64 architecture.
func parseAzureRecords(data []byte) ([]azureRecord, error) {
	var f struct {
		Sizes []azureRecord `json:"vm_sizes"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("embedded Azure sizes: %w", err)
	}
	for i, r := range f.Sizes {
		// memory_mib 0 (Standard_B1ls, whose 0.5 GiB the source truncated) is kept: such a size
		// is below AKS's 3.5 GiB minimum and never offered.
		if r.Name == "" || r.VCPU <= 0 || r.MemoryMiB < 0 || (r.Architecture != "amd64" && r.Architecture != "arm64") {
			return nil, fmt.Errorf("embedded Azure sizes: vm_sizes[%d] (%q): missing name, vcpu, memory or architecture", i, r.Name)
		}
	}
	return f.Sizes, nil
}

// loadAzurePrices is the embedded on_demand_prices.csv as region → size → USD/h, parsed once.
func loadAzurePrices() (map[string]map[string]float64, error) {
	return azurePrices.get(func() (map[string]map[string]float64, error) {
		data, err := unzstd("Azure prices", azurePricesZstd)
		if err != nil {
			return nil, err
		}
		return parseAzurePrices(data)
	})
}

// parseAzurePrices reads region,vm_size,usd_per_hour rows into region → size → USD/h.
func parseAzurePrices(data []byte) (map[string]map[string]float64, error) {
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(rows) < 2 || strings.Join(rows[0], ",") != "region,vm_size,usd_per_hour" {
		return nil, fmt.Errorf("embedded Azure prices: want a region,vm_size,usd_per_hour header (%v)", err)
	}
	out := map[string]map[string]float64{}
	for i, r := range rows[1:] {
		p, err := strconv.ParseFloat(r[2], 64)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("embedded Azure prices row %d: price %q", i+2, r[2])
		}
		if out[r[0]] == nil {
			out[r[0]] = map[string]float64{}
		}
		out[r[0]][r[1]] = p
	}
	return out, nil
}

// azureFixtureSKUs is the recorded Resource SKUs response embedded for region (nil: none): where
// a size is listed, its capabilities, zones and restrictions replace the rules. A function, not a
// map variable, so that only buildAzureRegion's callers link the fixtures.
func azureFixtureSKUs(region string) []byte {
	switch region {
	case "eastus":
		return azureSKUsEastUS
	case "southcentralus":
		return azureSKUsSouthCentralUS
	case "westcentralus":
		return azureSKUsWestCentralUS
	}
	return nil
}

// AzureRegionCatalog returns the embedded catalog of an Azure region ("" is eastus): every size of
// the embedded data that AKS NAP offers (AKSUnsupportedReason) and that has a Linux pay-as-you-go
// price in the region, on demand and, where spot-capable, spot (estimated), in zones 1–3 of a
// zonal region (AzureZonalRegions) or in AzureRegionalZone in a region without zones. Where the
// region's recorded Resource SKUs response lists a size, its capabilities, zones and restrictions
// win (AzureResourceSKU.OfferingZones): a Location restriction (NotAvailableForSubscription)
// removes the size, a Zone restriction its zones, a size listed without zones is offered
// regionally. Errors: a region the embedded prices do not cover. Built once per region and shared.
func AzureRegionCatalog(region string) (*Catalog, error) {
	if region == "" {
		region = AzureRegion
	}
	prices, err := loadAzurePrices()
	if err != nil {
		return nil, err
	}
	if len(prices[region]) == 0 {
		regions := make([]string, 0, len(prices))
		for r := range prices {
			regions = append(regions, r)
		}
		slices.Sort(regions)
		return nil, fmt.Errorf("region %q: no embedded Azure prices (embedded: %s)", region, strings.Join(regions, ", "))
	}
	f, _ := azureCatalogs.LoadOrStore(region, sync.OnceValues(func() (*Catalog, error) { return buildAzureRegion(region) }))
	return f.(func() (*Catalog, error))()
}

func buildAzureRegion(region string) (*Catalog, error) {
	recs, err := loadAzureRecords()
	if err != nil {
		return nil, err
	}
	prices, err := loadAzurePrices()
	if err != nil {
		return nil, err
	}
	skus := map[string]*AzureResourceSKU{}
	if raw := azureFixtureSKUs(region); raw != nil {
		list, err := ParseAzureResourceSKUs(raw)
		if err != nil {
			return nil, fmt.Errorf("embedded %s resource SKUs: %w", region, err)
		}
		for i := range list {
			skus[list[i].Name] = &list[i]
		}
	}
	var types []*InstanceType
	for i := range recs {
		r := &recs[i]
		f, zones := r.facts(), azureDefaultZones(region)
		if s := skus[r.Name]; s != nil {
			if s.LocationRestricted(region) {
				continue
			}
			if sf, err := s.Facts(); err == nil {
				sf.GPUManufacturer, sf.GPUModel, sf.GPUDriverOS = f.GPUManufacturer, f.GPUModel, f.GPUDriverOS
				f = sf
			}
			zones = s.OfferingZones(region)
		}
		price, ok := prices[region][r.Name]
		if !ok || len(zones) == 0 || AKSUnsupportedReason(f, r.aksGPU()) != "" {
			continue
		}
		types = append(types, NewAzureInstanceType(f, region, AzureOfferings(r.Name, zones, price, f.SpotCapable)))
	}
	c := New(region, types)
	c.Source = SourceEmbedded
	return c, nil
}

// AzureLiveCatalog builds a region's catalog from what the cloud's APIs report now: the Resource
// SKUs list (capabilities, zones, restrictions) and the Retail Prices API's Linux pay-as-you-go
// and Spot prices (USD per hour, by size). Sizes are kept under the same AKS rules as the
// embedded catalog (AKSUnsupportedReason; a Location restriction removes a size, a Zone
// restriction its zones, a size listed without zones is offered regionally in AzureRegionalZone; a
// size without an on-demand price, or whose every zone is restricted, is left out); GPU makers and
// models come from the embedded size data. Spot offerings take the API's Spot price, or the
// spot-price model's estimate (labelled) for a spot-capable size the API gave none for.
func AzureLiveCatalog(region string, skus []AzureResourceSKU, onDemand, spot map[string]float64) *Catalog {
	known := map[string]*azureRecord{}
	if recs, err := loadAzureRecords(); err == nil {
		for i := range recs {
			known[recs[i].Name] = &recs[i]
		}
	}
	var types []*InstanceType
	for i := range skus {
		s := &skus[i]
		if !strings.EqualFold(s.ResourceType, "virtualMachines") || s.LocationRestricted(region) {
			continue
		}
		f, err := s.Facts()
		price, priced := onDemand[s.Name]
		zones := s.OfferingZones(region)
		if err != nil || !priced || len(zones) == 0 {
			continue
		}
		aksGPU := f.GPUCount == 0
		if r := known[s.Name]; r != nil {
			f.GPUManufacturer, f.GPUModel, f.GPUDriverOS, aksGPU = deref(r.GPUManufacturer), deref(r.GPUModel), r.gpuDriverOS(), aksGPU || r.aksGPU()
		}
		if AKSUnsupportedReason(f, aksGPU) != "" {
			continue
		}
		offs := AzureOfferings(s.Name, zones, price, f.SpotCapable)
		for j := range offs {
			offs[j].PriceSource = PriceSourceLive
			if offs[j].CapacityType != apisv1.CapacityTypeSpot {
				continue
			}
			if p, ok := spot[s.Name]; ok {
				offs[j].PricePerHour = p
			} else {
				offs[j].PriceSource = PriceSourceSpotModel
			}
		}
		types = append(types, NewAzureInstanceType(f, region, offs))
	}
	c := New(region, types)
	c.Source = SourceLive
	return c
}
