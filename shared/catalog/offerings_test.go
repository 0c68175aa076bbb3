package catalog

import (
	"math"
	"sort"
	"strconv"
	"testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func TestLabels(t *testing.T) {
	c := MustAWS()
	// Expected values are the record's columns in shared/data/aws/ec2_instance_types.csv, in the
	// formats of Karpenter's published label table (reference/instance-types.md).
	for name, want := range map[string]map[string]string{
		"m5.large": {
			"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.large",
			"topology.kubernetes.io/region": "us-east-1",
			apisv1.LabelInstanceCategory:    "m", apisv1.LabelInstanceFamily: "m5", apisv1.LabelInstanceGeneration: "5",
			apisv1.LabelInstanceSize: "large", apisv1.LabelInstanceCPU: "2", apisv1.LabelInstanceMemory: "8192",
			apisv1.LabelInstanceHypervisor: "nitro", LabelInstanceCPUManufacturer: "intel",
			LabelInstanceNetworkBandwidth: "750", LabelInstanceEBSBandwidth: "4750",
			LabelInstanceEncryptionInTransitSupported: "false", LabelInstanceCPUSustainedClockSpeedMhz: "3100",
		},
		"g5.xlarge": {
			apisv1.LabelInstanceGPUName: "a10g", LabelInstanceGPUManufacturer: "nvidia", apisv1.LabelInstanceGPUCount: "1",
			LabelInstanceGPUMemory: "22888", LabelInstanceLocalNVME: "250", LabelInstanceCPUManufacturer: "amd",
		},
		"g4ad.xlarge":     {apisv1.LabelInstanceGPUName: "radeon-pro-v520", LabelInstanceGPUManufacturer: "amd"},
		"inf2.xlarge":     {LabelInstanceAcceleratorName: "inferentia2", LabelInstanceAcceleratorManufacturer: "aws", LabelInstanceAcceleratorCount: "1"},
		"a1.2xlarge":      {"kubernetes.io/arch": "arm64", LabelInstanceCPUManufacturer: "aws", apisv1.LabelInstanceMemory: "16384"},
		"m5.metal":        {apisv1.LabelInstanceHypervisor: ""}, // bare metal: Karpenter's table shows an empty value
		"u-6tb1.56xlarge": {apisv1.LabelInstanceCategory: "u", apisv1.LabelInstanceFamily: "u-6tb1", apisv1.LabelInstanceGeneration: "1"},
	} {
		it := c.Get(name)
		if it == nil {
			t.Errorf("%s missing", name)
			continue
		}
		for k, v := range want {
			got, ok := it.Labels[k]
			if !ok || got != v {
				t.Errorf("%s: label %s = %q (present %v), want %q", name, k, got, ok, v)
			}
		}
	}
	// No GPU labels on a type without a GPU.
	if _, ok := c.Get("m5.large").Labels[apisv1.LabelInstanceGPUName]; ok {
		t.Error("m5.large has a gpu-name label")
	}
}

func TestOfferings(t *testing.T) {
	c := MustAWS()
	rows := readCSV(t, "testdata/ec2_instance_types.csv")
	var priced, pricedXen, total int
	for _, row := range rows {
		it := c.Get(row["name"])
		total += len(it.Offerings)
		if row["on_demand_usd_per_hour_us_east_1"] == "" {
			if len(it.Offerings) != 0 {
				t.Errorf("%s has no price but %d offerings", it.Name, len(it.Offerings))
			}
			continue
		}
		priced++
		want := 10 // 5 zones (a, b, c, d, f) × 2 capacity types
		if row["hypervisor"] == "xen" {
			pricedXen++
			want = 12 // + us-east-1e
		}
		if len(it.Offerings) != want {
			t.Errorf("%s: %d offerings, want %d", it.Name, len(it.Offerings), want)
		}
		od, _ := strconv.ParseFloat(row["on_demand_usd_per_hour_us_east_1"], 64)
		for _, o := range it.Offerings {
			switch o.CapacityType {
			case apisv1.CapacityTypeOnDemand:
				if o.PricePerHour != od || o.PriceSource != PriceSourceEmbedded || o.IsEstimate() {
					t.Errorf("%s on-demand %+v, want list price %g", it.Name, o, od)
				}
			case apisv1.CapacityTypeSpot:
				// Every spot price is labelled as the model's estimate and lies within the model's band.
				if o.PriceSource != PriceSourceSpotModel || !o.IsEstimate() {
					t.Errorf("%s spot offering not labelled as estimate: %+v", it.Name, o)
				}
				if o.PricePerHour >= od || o.PricePerHour < od*SpotModelRatio*(1-2*SpotModelZoneSpread)-1e-6 {
					t.Errorf("%s spot %g outside the model band for on-demand %g", it.Name, o.PricePerHour, od)
				}
			default:
				t.Errorf("%s: unexpected capacity type %q", it.Name, o.CapacityType)
			}
			if !o.Available {
				t.Errorf("%s: offering %+v not available", it.Name, o)
			}
		}
		if !sort.SliceIsSorted(it.Offerings, func(i, j int) bool {
			a, b := it.Offerings[i], it.Offerings[j]
			if a.PricePerHour != b.PricePerHour {
				return a.PricePerHour < b.PricePerHour
			}
			if a.Zone != b.Zone {
				return a.Zone < b.Zone
			}
			return a.CapacityType < b.CapacityType
		}) {
			t.Errorf("%s offerings not sorted by price, zone, capacity type", it.Name)
		}
	}
	// The data has 1,352 priced types (README of shared/data), 80 of them Xen.
	if priced != 1352 || pricedXen != 80 || total != 1352*10+80*2 {
		t.Errorf("priced %d (xen %d), %d offerings; want 1352 (80), %d", priced, pricedXen, total, 1352*10+80*2)
	}
}

// TestSpotModelCalibration checks the model's m5.large figure against the real spot history in
// testdata (median 0.0409 USD/h over 250 prices, 2021): the model's mean over m5.large's zones is
// on-demand 0.096 × 0.426 = 0.040896, within 0.5% of that median.
func TestSpotModelCalibration(t *testing.T) {
	var prices []float64
	for _, row := range readCSV(t, "testdata/spot_price_history_m5_large_us_east_1.csv") {
		p, err := strconv.ParseFloat(row["spot_price_usd_per_hour"], 64)
		if err != nil {
			t.Fatal(err)
		}
		prices = append(prices, p)
	}
	sort.Float64s(prices)
	median := (prices[len(prices)/2-1] + prices[len(prices)/2]) / 2
	var sum float64
	var n int
	for _, o := range MustAWS().Get("m5.large").Offerings {
		if o.CapacityType == apisv1.CapacityTypeSpot {
			sum += o.PricePerHour
			n++
			// Per-zone spread of the model: ±6% of the mean.
			if math.Abs(o.PricePerHour/(0.096*SpotModelRatio)-1) > 2*SpotModelZoneSpread+1e-3 {
				t.Errorf("zone %s spot %g too far from the mean", o.Zone, o.PricePerHour)
			}
		}
	}
	mean := sum / float64(n)
	if n != 5 || math.Abs(mean-median)/median > 0.005 {
		t.Errorf("m5.large model mean %g over %d zones, real median %g", mean, n, median)
	}
	// Determinism: same inputs, same price.
	zones := awsZonesFor("nitro")
	if SpotPriceEstimate("m5.large", "us-east-1a", zones, 0.096) != SpotPriceEstimate("m5.large", "us-east-1a", zones, 0.096) {
		t.Error("spot model not deterministic")
	}
}

func TestAWSCachedAndErrors(t *testing.T) {
	a, err := AWS()
	if err != nil {
		t.Fatal(err)
	}
	if b := MustAWS(); a != b {
		t.Error("AWS() not cached")
	}
	if a.Region != "us-east-1" {
		t.Errorf("region %q", a.Region)
	}
	for _, bad := range []string{
		`{`,
		`{"instance_types":[{"name":"x.large","vcpu":0,"memory_mib":1,"architecture":"amd64"}]}`,
		`{"instance_types":[{"name":"x.large","vcpu":1,"memory_mib":1,"architecture":"s390x"}]}`,
	} {
		if _, err := parseAWS([]byte(bad)); err == nil {
			t.Errorf("parseAWS(%s) accepted bad input", bad)
		}
	}
}

// BenchmarkAWSLoad measures what AWS() does once per process: decode the embedded records and
// build the catalog.
func BenchmarkAWSLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		recs, err := embeddedAWSRecords()
		if err != nil {
			b.Fatal(err)
		}
		buildAWS(recs)
	}
}

// BenchmarkAWSLoadJSON is the same from the JSON, as AWS() did before the records were embedded
// gob-encoded.
func BenchmarkAWSLoadJSON(b *testing.B) {
	data := mustAWSJSON(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseAWS(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllocatableFast is the solver's per-type read.
func BenchmarkAllocatableFast(b *testing.B) {
	types := MustAWS().Types()
	b.ReportAllocs()
	var sink int64
	for i := 0; b.Loop(); i++ {
		sink += types[i%len(types)].AllocatableFast().MilliCPU
	}
	_ = sink
}

// BenchmarkResourcesWith is the per-type cost under an EC2NodeClass kubelet block.
func BenchmarkResourcesWith(b *testing.B) {
	types := MustAWS().Types()
	s, err := NewNodeSettings("Bottlerocket", &apisv1.KubeletConfiguration{MaxPods: ptr(int32(110)), KubeReserved: map[string]string{"cpu": "100m"}}, nil, "spec")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var sink int64
	for i := 0; b.Loop(); i++ {
		_, a := types[i%len(types)].ResourcesWith(s)
		sink += a.MemoryBytes
	}
	_ = sink
}
