package catalog

import (
	"math"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// TestAKSKubeReservedCPUTable checks the rule against AKS's published CPU table
// (learn.microsoft.com/azure/aks/node-resource-reservations).
func TestAKSKubeReservedCPUTable(t *testing.T) {
	for cores, want := range map[int64]int64{1: 60, 2: 100, 4: 140, 8: 180, 16: 260, 32: 420, 64: 740} {
		if got := AKSKubeReservedMilliCPU(cores); got != want {
			t.Errorf("%d cores: %d m, want %d m (AKS table)", cores, got, want)
		}
	}
}

// TestAKSKubeReservedMemory checks the regressive rate by hand: 25% of 4 GiB, 20% of the next 4,
// 10% of the next 8, 6% of the next 112, 2% above 128 GiB.
func TestAKSKubeReservedMemory(t *testing.T) {
	for mib, want := range map[int64]int64{
		4096:   1024,                                                   // 0.25 × 4096
		8192:   1024 + 819,                                             // + 0.20 × 4096 = 819.2
		16384:  1024 + 819 + 819,                                       // 1024 + 819.2 + 819.2 = 2662.4
		65536:  2662 + 2949,                                            // + 0.06 × 49152 = 2949.12 → 5611.52
		262144: (1024000 + 819200 + 819200 + 6881280 + 2621440) / 1000, // 12165.12
	} {
		if got := AKSKubeReservedMemoryMiB(mib); got != want {
			t.Errorf("%d MiB: %d MiB reserved, want %d", mib, got, want)
		}
	}
}

// TestAzureAllocatableHandCalculation works out two sizes of the embedded eastus catalog by
// hand from the AKS rules (Azure CNI Overlay: 250 pods; 128 GB OS disk).
func TestAzureAllocatableHandCalculation(t *testing.T) {
	cat, err := AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		milliCPU    int64
		memoryBytes int64
	}{
		// Standard_D2s_v5: 2 vCPU, 8 GiB. cpu 2000 − 100 = 1900 m. memory: 8 GiB = 8589934592 B,
		// VM overhead ceil(8589934592 × 0.075) = 644245095 → capacity 7945689497; kube-reserved
		// 1843 MiB = 1932525568; eviction 750 MiB = 786432000 → 5226731929 B.
		{"Standard_D2s_v5", 1900, 7945689497 - 1932525568 - 786432000},
		// Standard_F8s_v2: 8 vCPU, 16 GiB. cpu 8000 − 180 = 7820 m. memory: 17179869184 −
		// ceil(1288490188.8) = 15891378995; kube-reserved 2662 MiB = 2791309312; eviction
		// 786432000 → 12313637683 B.
		{"Standard_F8s_v2", 7820, 15891378995 - 2791309312 - 786432000},
	} {
		it := cat.Get(tc.name)
		if it == nil {
			t.Fatalf("%s: not in the eastus catalog", tc.name)
		}
		a := it.AllocatableFast()
		if a.MilliCPU != tc.milliCPU || a.MemoryBytes != tc.memoryBytes || a.Pods != 250 || a.EphemeralBytes != 128_000_000_000 {
			t.Errorf("%s allocatable = %d m, %d B, %d pods, %d B ephemeral; want %d m, %d B, 250 pods, 128e9 B",
				tc.name, a.MilliCPU, a.MemoryBytes, a.Pods, a.EphemeralBytes, tc.milliCPU, tc.memoryBytes)
		}
	}
	// With an AKSNodeClass maxPods 30 (or Azure CNI on the node subnet) and a 64 GB disk.
	pods := int64(30)
	_, a := cat.Get("Standard_D2s_v5").ResourcesWith(NodeSettings{AMIFamily: apisv1.ImageFamilyUbuntu2204, Kubelet: &KubeletOverrides{MaxPods: &pods}, EphemeralStorageBytes: 64e9})
	if a.Pods != 30 || a.EphemeralBytes != 64e9 || a.MilliCPU != 1900 {
		t.Errorf("D2s_v5 with maxPods 30, 64 GB: %+v", a)
	}
}

func TestAzureLabels(t *testing.T) {
	cat, err := AzureRegionCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	it := cat.Get("Standard_D4pls_v5")
	if it == nil {
		t.Fatal("Standard_D4pls_v5 missing")
	}
	want := map[string]string{
		corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux", corev1.LabelInstanceTypeStable: "Standard_D4pls_v5",
		corev1.LabelTopologyRegion: "eastus", apisv1.LabelSKUName: "Standard_D4pls_v5", apisv1.LabelSKUFamily: "D",
		apisv1.LabelSKUSeries: "Dpls_v5", apisv1.LabelSKUVersion: "5", apisv1.LabelSKUCPU: "4", apisv1.LabelSKUMemory: "8192",
		apisv1.AKSLabelCPU: "4", apisv1.AKSLabelMemory: "8192", apisv1.LabelSKUGPUCount: "0",
		apisv1.LabelSKUStoragePremiumCapable: "true", apisv1.LabelSKUAcceleratedNetworking: "true",
		apisv1.LabelPlacementScope: "zonal",
	}
	for k, v := range want {
		if it.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, it.Labels[k], v)
		}
	}
	if len(it.Labels) != len(want) {
		t.Errorf("labels %v, want exactly %v", it.Labels, want)
	}
	gpu := cat.Get("Standard_NC24ads_A100_v4")
	if gpu == nil || gpu.Labels[apisv1.LabelSKUGPUName] != "A100" || gpu.Labels[apisv1.LabelSKUGPUManufacturer] != "nvidia" || gpu.Labels[apisv1.LabelSKUGPUCount] != "1" {
		t.Errorf("NC24ads_A100_v4 GPU labels: %v", gpu)
	}
	if q := gpu.Capacity[ResourceNVIDIAGPU]; q.Value() != 1 {
		t.Errorf("NC24ads_A100_v4 nvidia.com/gpu = %s", q.String())
	}
}

func TestParseAzureSizeName(t *testing.T) {
	for name, want := range map[string]string{
		"Standard_D4pls_v6": "D||pls|6", "Standard_D2_v2": "D|||2", "Standard_NC24ads_A100_v4": "N|C|ads|4",
		"Standard_M8-2ms": "M||ms|", "Standard_B2s": "B||s|", "Standard_DC8s_v3": "D|C|s|3", "Standard_E96bds_v5": "E||bds|5",
	} {
		n, ok := ParseAzureSizeName(name)
		got := strings.Join([]string{n.Family, n.Subfamily, n.Features, n.Version}, "|")
		if !ok || got != want {
			t.Errorf("%s: %q (ok %v), want %q", name, got, ok, want)
		}
	}
}

// TestAzureZonesAndRestrictions: the recorded eastus Resource SKUs response wins over the rules:
// Standard_NV6 has every zone restricted (NotAvailableForSubscription) and D13_v2_Promo a
// Location restriction, so neither is offered; southcentralus's D2as_v6 is in zones 2 and 3 only.
func TestAzureZonesAndRestrictions(t *testing.T) {
	east, err := AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"Standard_NV6", "Standard_D13_v2_Promo"} {
		if east.Get(n) != nil {
			t.Errorf("%s is restricted in eastus but offered", n)
		}
	}
	scus, err := AzureRegionCatalog("southcentralus")
	if err != nil {
		t.Fatal(err)
	}
	it := scus.Get("Standard_D2as_v6")
	if it == nil {
		t.Fatal("Standard_D2as_v6 missing in southcentralus")
	}
	zones := map[string]bool{}
	for _, o := range it.Offerings {
		zones[o.Zone] = true
	}
	if len(zones) != 2 || !zones["southcentralus-2"] || !zones["southcentralus-3"] {
		t.Errorf("D2as_v6 zones %v, want southcentralus-2 and -3", zones)
	}
	if b := east.Get("Standard_B2s"); b == nil || len(b.Offerings) != 3 {
		t.Errorf("Standard_B2s: want 3 on-demand offerings and no spot (B-series is not spot-capable): %v", b)
	}
}

// TestAzureRegionalOfferings: sizes without availability zones are offered regionally, in zone
// "0" with placement-scope regional, as Karpenter Azure does (#1384, #1615): every size of
// westcentralus (a region without zones; its recorded Resource SKUs list no zones), and
// Standard_NC6s_v3 in southcentralus (a zonal region whose recorded SKUs list that size without
// zones). Prices by hand from on_demand_prices.csv: westcentralus,Standard_D2s_v3 0.11;
// southcentralus,Standard_NC6s_v3 3.366. A size that lists zones keeps only those.
func TestAzureRegionalOfferings(t *testing.T) {
	west, err := AzureRegionCatalog("westcentralus")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range west.Types() {
		if it.Labels[apisv1.LabelPlacementScope] != apisv1.PlacementScopeRegional {
			t.Fatalf("%s: placement-scope %q, want regional", it.Name, it.Labels[apisv1.LabelPlacementScope])
		}
		for _, o := range it.Offerings {
			if o.Zone != AzureRegionalZone {
				t.Fatalf("%s: offering in zone %q, want only zone 0", it.Name, o.Zone)
			}
		}
	}
	d2 := west.Get("Standard_D2s_v3")
	if d2 == nil || len(d2.Offerings) != 2 {
		t.Fatalf("Standard_D2s_v3 in westcentralus: %+v, want an on-demand and a spot offering in zone 0", d2)
	}
	if od, ok := findOffering(d2, "0", apisv1.CapacityTypeOnDemand); !ok || od.PricePerHour != 0.11 {
		t.Errorf("westcentralus D2s_v3 on demand %+v, want 0.11 USD/h", od)
	}
	if len(west.Types()) < 300 {
		t.Errorf("westcentralus: %d sizes; the embedded prices list 931 (most are AKS sizes)", len(west.Types()))
	}

	scus, err := AzureRegionCatalog("southcentralus")
	if err != nil {
		t.Fatal(err)
	}
	nc := scus.Get("Standard_NC6s_v3")
	if nc == nil {
		t.Fatal("Standard_NC6s_v3 (no zones in southcentralus) is not offered")
	}
	if od, ok := findOffering(nc, "0", apisv1.CapacityTypeOnDemand); !ok || od.PricePerHour != 3.366 || nc.Labels[apisv1.LabelPlacementScope] != apisv1.PlacementScopeRegional {
		t.Errorf("NC6s_v3: %+v, placement-scope %q; want zone 0 at 3.366 USD/h, regional", nc.Offerings, nc.Labels[apisv1.LabelPlacementScope])
	}
	if d := scus.Get("Standard_D2s_v3"); d.Labels[apisv1.LabelPlacementScope] != apisv1.PlacementScopeZonal || len(d.Offerings) != 6 {
		t.Errorf("southcentralus D2s_v3: %d offerings, placement-scope %q; want 3 zones × 2, zonal", len(d.Offerings), d.Labels[apisv1.LabelPlacementScope])
	}
	if _, err := AzureRegionCatalog("marsnorth"); err == nil || !strings.Contains(err.Error(), `"marsnorth"`) {
		t.Errorf("unknown region: %v, want an error naming it", err)
	}
}

// TestAzureRulesAgreeWithResourceSKUs checks the rules the embedded catalog uses where no
// Resource SKUs record exists (premium storage from the name, accelerated networking and spot by
// rule) against every recorded SKU with at least 2 vCPUs.
func TestAzureRulesAgreeWithResourceSKUs(t *testing.T) {
	for _, f := range []string{"eastus_skewer", "southcentralus_karpenter", "westcentralus_karpenter"} {
		raw, err := os.ReadFile("data/azure/resource_skus_" + f + "_fixture.json")
		if err != nil {
			t.Fatal(err)
		}
		skus, err := ParseAzureResourceSKUs(raw)
		if err != nil {
			t.Fatal(err)
		}
		for i := range skus {
			s, err := skus[i].Facts()
			if err != nil {
				t.Fatal(err)
			}
			if s.VCPU < 2 {
				continue
			}
			n, _ := ParseAzureSizeName(s.Name)
			if n.PremiumStorage() != s.PremiumIO {
				t.Errorf("%s: PremiumIO %v, name rule %v", s.Name, s.PremiumIO, n.PremiumStorage())
			}
			if r := azureAcceleratedNetworkingByRule(s.Name, s.VCPU); r != s.AcceleratedNetworking {
				t.Errorf("%s: AcceleratedNetworkingEnabled %v, rule %v", s.Name, s.AcceleratedNetworking, r)
			}
			if r := azureSpotCapableByRule(s.Name); r != s.SpotCapable {
				t.Errorf("%s: LowPriorityCapable %v, rule %v", s.Name, s.SpotCapable, r)
			}
		}
	}
}

func TestAzurePricesMatchSizeData(t *testing.T) {
	prices, err := loadAzurePrices()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := loadAzureRecords()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, r := range recs {
		if r.OnDemandEastUS != nil {
			// The CSV keeps 3 decimals where vm_sizes.json kept more (M416ds_6_v3: 58.0665 / 58.06647).
			if p, ok := prices["eastus"][r.Name]; !ok || math.Abs(p-*r.OnDemandEastUS) > 0.0005 {
				t.Errorf("%s: eastus price %v in the CSV, %v in vm_sizes.json", r.Name, p, *r.OnDemandEastUS)
			}
			checked++
		}
	}
	if checked < 1200 {
		t.Errorf("only %d priced sizes checked", checked)
	}
	cat, _ := AzureRegionCatalog("eastus")
	if n := len(cat.Types()); n < 800 {
		t.Errorf("eastus catalog has %d sizes", n)
	}
}

// findOffering is the offering of it in zone at capacity type ct.
func findOffering(it *InstanceType, zone, ct string) (Offering, bool) {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o, true
		}
	}
	return Offering{}, false
}

// TestAzureQuotaFamily: each size keeps its vCPU quota family, the Resource SKUs API's "family"
// (the name of its Compute usages entry): from the embedded data (Standard_D2s_v5 and
// Standard_D96s_v5 are standardDSv5Family, Standard_D2as_v5 standardDASv5Family, as the Resource
// SKUs API lists them) and from a live SKU.
func TestAzureQuotaFamily(t *testing.T) {
	cat, err := AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for size, want := range map[string]string{"Standard_D2s_v5": "standardDSv5Family", "Standard_D96s_v5": "standardDSv5Family", "Standard_D2as_v5": "standardDASv5Family"} {
		if it := cat.Get(size); it == nil || it.Azure.QuotaFamily != want {
			t.Errorf("%s: quota family %v, want %s", size, it, want)
		}
	}
	sku := AzureResourceSKU{ResourceType: "virtualMachines", Name: "Standard_D2s_v5", Family: "standardDSv5Family",
		Capabilities: []AzureSKUCapability{{Name: "vCPUs", Value: "2"}, {Name: "MemoryGB", Value: "8"}}}
	if f, err := sku.Facts(); err != nil || f.QuotaFamily != "standardDSv5Family" {
		t.Errorf("live SKU facts: quota family %q, %v", f.QuotaFamily, err)
	}
}
