package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// AzureResourceSKU is one entry of the Resource SKUs API (GET
// /subscriptions/{id}/providers/Microsoft.Compute/skus, api-version 2021-07-01), in its REST JSON
// shape: what the embedded fixtures hold and what the online refresh converts the SDK's
// armcompute.ResourceSKU into.
type AzureResourceSKU struct {
	ResourceType string                 `json:"resourceType"`
	Name         string                 `json:"name"`
	Tier         string                 `json:"tier,omitempty"`
	Size         string                 `json:"size,omitempty"`
	Family       string                 `json:"family,omitempty"`
	Locations    []string               `json:"locations,omitempty"`
	LocationInfo []AzureSKULocationInfo `json:"locationInfo,omitempty"`
	Capabilities []AzureSKUCapability   `json:"capabilities,omitempty"`
	Restrictions []AzureSKURestriction  `json:"restrictions,omitempty"`
}

// AzureSKULocationInfo lists the availability zones ("1", "2", "3") of a SKU in a location.
type AzureSKULocationInfo struct {
	Location string   `json:"location"`
	Zones    []string `json:"zones,omitempty"`
}

// AzureSKUCapability is one name/value capability (vCPUs, MemoryGB, PremiumIO, ...).
type AzureSKUCapability struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// AzureSKURestriction says where a SKU cannot be used by this subscription: type Location (the
// whole region) or Zone (restrictionInfo.zones), with a reason such as NotAvailableForSubscription.
type AzureSKURestriction struct {
	Type            string `json:"type"`
	Values          []string
	RestrictionInfo struct {
		Locations []string `json:"locations,omitempty"`
		Zones     []string `json:"zones,omitempty"`
	} `json:"restrictionInfo"`
	ReasonCode string `json:"reasonCode,omitempty"`
}

// ParseAzureResourceSKUs reads a Resource SKUs list response ({"value": [...]}).
func ParseAzureResourceSKUs(data []byte) ([]AzureResourceSKU, error) {
	var page struct {
		Value []AzureResourceSKU `json:"value"`
	}
	if err := json.Unmarshal(data, &page); err != nil {
		return nil, fmt.Errorf("resource SKUs: %w", err)
	}
	return page.Value, nil
}

// Capability returns the named capability's value.
func (s *AzureResourceSKU) Capability(name string) (string, bool) {
	for _, c := range s.Capabilities {
		if strings.EqualFold(c.Name, name) {
			return c.Value, true
		}
	}
	return "", false
}

func (s *AzureResourceSKU) boolCapability(name string) (value, known bool) {
	v, ok := s.Capability(name)
	return strings.EqualFold(v, "true"), ok
}

// LocationRestricted reports a Location restriction for region: the size cannot be deployed there.
func (s *AzureResourceSKU) LocationRestricted(region string) bool {
	for _, r := range s.Restrictions {
		if strings.EqualFold(r.Type, "Location") && containsFold(r.RestrictionInfo.Locations, region) {
			return true
		}
	}
	return false
}

// Zones returns the SKU's zones in region ("1", "2", "3"), sorted, without the zones a Zone
// restriction takes away.
func (s *AzureResourceSKU) Zones(region string) []string {
	restricted := map[string]bool{}
	for _, r := range s.Restrictions {
		if strings.EqualFold(r.Type, "Zone") && containsFold(r.RestrictionInfo.Locations, region) {
			for _, z := range r.RestrictionInfo.Zones {
				restricted[z] = true
			}
		}
	}
	var out []string
	for _, li := range s.LocationInfo {
		if !strings.EqualFold(li.Location, region) {
			continue
		}
		for _, z := range li.Zones {
			if !restricted[z] && !slices.Contains(out, z) {
				out = append(out, z)
			}
		}
	}
	slices.Sort(out)
	return out
}

// OfferingZones are the topology.kubernetes.io/zone values the SKU is offered in, in region:
// "<region>-N" for each zone it lists there that no Zone restriction takes away; AzureRegionalZone
// alone when it lists the location without zones (a region without availability zones, or a size
// that has none in a zonal region: Karpenter Azure offers it regionally, placement-scope
// regional); none when it does not list the location or every zone it lists is restricted.
func (s *AzureResourceSKU) OfferingZones(region string) []string {
	listed, zonal := false, false
	for _, li := range s.LocationInfo {
		if strings.EqualFold(li.Location, region) {
			listed, zonal = true, zonal || len(li.Zones) > 0
		}
	}
	switch {
	case !listed:
		return nil
	case !zonal:
		return []string{AzureRegionalZone}
	}
	zones := s.Zones(region)
	for i, z := range zones {
		zones[i] = AzureZone(region, z)
	}
	return zones
}

func (s *AzureResourceSKU) Facts() (AzureSizeFacts, error) {
	f := AzureSizeFacts{Name: s.Name, QuotaFamily: s.Family}
	num := func(name string) (float64, error) {
		v, ok := s.Capability(name)
		if !ok {
			return 0, fmt.Errorf("sku %s: capability %s missing", s.Name, name)
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("sku %s: capability %s: %q is not a number", s.Name, name, v)
		}
		return x, nil
	}
	vcpu, err := num("vCPUs")
	if err != nil {
		return f, err
	}
	mem, err := num("MemoryGB")
	if err != nil {
		return f, err
	}
	f.VCPU, f.MemoryMiB = int64(vcpu), int64(mem*1024)
	f.Arch = "amd64"
	if a, ok := s.Capability("CpuArchitectureType"); ok && strings.EqualFold(a, "Arm64") {
		f.Arch = "arm64"
	}
	if g, ok := s.Capability("GPUs"); ok {
		f.GPUCount, _ = strconv.ParseInt(g, 10, 64)
	}
	f.PremiumIO, _ = s.boolCapability("PremiumIO")
	f.AcceleratedNetworking, _ = s.boolCapability("AcceleratedNetworkingEnabled")
	f.SpotCapable, _ = s.boolCapability("LowPriorityCapable")
	if hv, ok := s.Capability("HyperVGenerations"); ok {
		for _, g := range strings.Split(hv, ",") {
			f.HyperVGenerations = append(f.HyperVGenerations, strings.TrimPrefix(strings.TrimSpace(g), "V"))
		}
	}
	f.EphemeralOSMaxGB = s.maxEphemeralOSGB()
	return f, nil
}

// maxEphemeralOSGB is the larger of the cache disk (CachedDiskBytes) and the resource disk
// (MaxResourceVolumeMB, in MiB despite its name), in decimal GB: the sku-storage-ephemeralos-maxsize
// label (provider MaxEphemeralOSDiskSizeGB).
func (s *AzureResourceSKU) maxEphemeralOSGB() int64 {
	var cached, resourceMiB int64
	if v, ok := s.Capability("CachedDiskBytes"); ok {
		cached, _ = strconv.ParseInt(v, 10, 64)
	}
	if v, ok := s.Capability("MaxResourceVolumeMB"); ok {
		resourceMiB, _ = strconv.ParseInt(v, 10, 64)
	}
	return max(cached, resourceMiB<<20) / 1_000_000_000
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
