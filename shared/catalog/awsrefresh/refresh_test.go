package awsrefresh_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/awsrefresh"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

// load decodes a recorded response (testdata/README.md) into the SDK's output type: the files use
// the SDK's member names, which encoding/json matches to the struct fields.
func load[T any](t *testing.T, name string) *T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func TestTypeFactsFromKarpenterFixture(t *testing.T) {
	out := load[ec2.DescribeInstanceTypesOutput](t, "describe_instance_types_karpenter_fixture.json")
	facts := map[string]catalog.AWSTypeFacts{}
	for _, info := range out.InstanceTypes {
		f, err := awsrefresh.TypeFacts(info)
		if err != nil {
			t.Fatal(err)
		}
		facts[f.Name] = f
	}
	if len(facts) != 17 {
		t.Fatalf("%d types, want the fixture's 17", len(facts))
	}
	// Expected values read from the fixture's entries.
	m5 := facts["m5.large"]
	if m5.VCPU != 2 || m5.MemoryMiB != 8192 || m5.Arch != "amd64" || m5.CPUManufacturer != "intel" || m5.SustainedClockMHz != 3100 ||
		m5.DefaultCardMaxENIs != 3 || m5.IPv4PerENI != 10 || m5.EBSBandwidthMbps != 4750 || m5.Hypervisor != "nitro" ||
		m5.EncryptionInTransit == nil || *m5.EncryptionInTransit {
		t.Errorf("m5.large facts %+v", m5)
	}
	inf := facts["inf2.xlarge"]
	if inf.AcceleratorCount != 1 || inf.AcceleratorName != "inferentia2" || inf.AcceleratorManufacturer != "aws" || inf.NeuronCores != 2 {
		t.Errorf("inf2.xlarge facts %+v", inf)
	}
	g := facts["g4dn.8xlarge"]
	if g.GPUCount != 1 || g.GPUName != "t4" || g.GPUManufacturer != "nvidia" || g.GPUMemoryMiB != 16384 || g.EFA != 1 || g.LocalNVMeGB != 900 {
		t.Errorf("g4dn.8xlarge facts %+v", g)
	}
	if facts["t4g.small"].Arch != "arm64" || facts["t4g.small"].CPUManufacturer != "aws" {
		t.Errorf("t4g.small facts %+v", facts["t4g.small"])
	}
}

func TestRefreshedTypeMatchesKarpenterAllocatable(t *testing.T) {
	out := load[ec2.DescribeInstanceTypesOutput](t, "describe_instance_types_karpenter_fixture.json")
	for _, info := range out.InstanceTypes {
		if info.InstanceType != "m5.large" {
			continue
		}
		f, err := awsrefresh.TypeFacts(info)
		if err != nil {
			t.Fatal(err)
		}
		it, err := catalog.NewAWSInstanceType(f, "us-east-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		// Karpenter's instance-types reference for m5.large (AL2023): cpu 1930m, memory 6903Mi,
		// pods 29 = 3 ENIs × (10 − 1) + 2.
		alloc := it.Allocatable()
		for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "1930m", corev1.ResourceMemory: "6903Mi", corev1.ResourcePods: "29"} {
			if q := alloc[name]; q.Cmp(resource.MustParse(want)) != 0 {
				t.Errorf("allocatable %s = %s, want %s", name, q.String(), want)
			}
		}
		embedded := catalog.MustAWS().Get("m5.large")
		for _, k := range []string{apisv1.LabelInstanceCategory, apisv1.LabelInstanceFamily, apisv1.LabelInstanceGeneration, apisv1.LabelInstanceSize,
			apisv1.LabelInstanceCPU, apisv1.LabelInstanceMemory, apisv1.LabelInstanceHypervisor, catalog.LabelInstanceCPUManufacturer, corev1.LabelArchStable} {
			if it.Labels[k] != embedded.Labels[k] {
				t.Errorf("label %s = %q, embedded catalog has %q", k, it.Labels[k], embedded.Labels[k])
			}
		}
		return
	}
	t.Fatal("m5.large not in the fixture")
}

func TestInstanceSelectorFixtureParses(t *testing.T) {
	out := load[ec2.DescribeInstanceTypesOutput](t, "describe_instance_types_instance_selector_25.json")
	if len(out.InstanceTypes) != 25 {
		t.Fatalf("%d types", len(out.InstanceTypes))
	}
	for _, info := range out.InstanceTypes {
		f, err := awsrefresh.TypeFacts(info)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := catalog.NewAWSInstanceType(f, "us-east-2", nil); err != nil {
			t.Fatal(err)
		}
		if f.Name == "a1.2xlarge" {
			// 8 vCPU, 16384 MiB, arm64, 4 ENIs × 15 IPv4 (the fixture's entry).
			if f.VCPU != 8 || f.MemoryMiB != 16384 || f.Arch != "arm64" || f.DefaultCardMaxENIs != 4 || f.IPv4PerENI != 15 {
				t.Errorf("a1.2xlarge %+v", f)
			}
		}
	}
}

func TestLatestSpotPricesFromRealHistory(t *testing.T) {
	out := load[ec2.DescribeSpotPriceHistoryOutput](t, "describe_spot_price_history_m5_large_us_east_1.json")
	got, err := awsrefresh.LatestSpotPrices(out.SpotPriceHistory)
	if err != nil {
		t.Fatal(err)
	}
	// The newest entry of each zone in the fixture (2021-02-08/09).
	want := map[awsrefresh.SpotKey]float64{
		{"m5.large", "us-east-1a"}: 0.0423, {"m5.large", "us-east-1b"}: 0.0389, {"m5.large", "us-east-1c"}: 0.0381,
		{"m5.large", "us-east-1d"}: 0.0431, {"m5.large", "us-east-1f"}: 0.0437,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("latest spot prices %v, want %v", got, want)
	}
	if _, err := awsrefresh.LatestSpotPrices(append(out.SpotPriceHistory[:1:1], out.SpotPriceHistory[0])); err != nil {
		t.Fatal(err)
	}
	bad := out.SpotPriceHistory[0]
	s := "n/a"
	bad.SpotPrice = &s
	if _, err := awsrefresh.LatestSpotPrices(append(out.SpotPriceHistory[:1:1], bad)); err == nil || !strings.Contains(err.Error(), "SpotPriceHistory[1]") {
		t.Fatalf("err %v, want one naming SpotPriceHistory[1]", err)
	}
}

func TestOnDemandPriceFromRealProduct(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "pricing_get_products_m5_large_us_east_1.json"))
	if err != nil {
		t.Fatal(err)
	}
	typ, price, err := awsrefresh.OnDemandPrice(string(b))
	// "$0.096 per On Demand Linux m5.large Instance Hour" in the fixture; the Reserved terms must
	// not be read.
	if err != nil || typ != "m5.large" || price != 0.096 {
		t.Fatalf("OnDemandPrice = %s %g %v, want m5.large 0.096", typ, price, err)
	}
	if _, _, err := awsrefresh.OnDemandPrice(`{"product":{}}`); err == nil {
		t.Fatal("a product without instanceType must be refused")
	}
}

func TestZonesByType(t *testing.T) {
	k := load[ec2.DescribeInstanceTypeOfferingsOutput](t, "describe_instance_type_offerings_karpenter_fixture.json")
	z := awsrefresh.ZonesByType(k.InstanceTypeOfferings)
	if want := []string{"test-zone-1a", "test-zone-1a-local", "test-zone-1b", "test-zone-1c"}; !reflect.DeepEqual(z["m5.large"], want) {
		t.Errorf("m5.large zones %v, want %v", z["m5.large"], want)
	}
	o := load[ec2.DescribeInstanceTypeOfferingsOutput](t, "describe_instance_type_offerings_us_east_2a.json")
	z = awsrefresh.ZonesByType(o.InstanceTypeOfferings)
	if len(z) != 228 || !reflect.DeepEqual(z["m5.12xlarge"], []string{"us-east-2a"}) {
		t.Errorf("%d types (want 228), m5.12xlarge %v", len(z), z["m5.12xlarge"])
	}
}

func TestBuildFromFixtures(t *testing.T) {
	types := load[ec2.DescribeInstanceTypesOutput](t, "describe_instance_types_karpenter_fixture.json")
	offs := load[ec2.DescribeInstanceTypeOfferingsOutput](t, "describe_instance_type_offerings_karpenter_fixture.json")
	spot := map[awsrefresh.SpotKey]float64{{"m5.large", "test-zone-1b"}: 0.04}
	c, err := awsrefresh.Build("test-region", types.InstanceTypes, offs.InstanceTypeOfferings, spot, map[string]float64{"m5.large": 0.096}, catalog.PriceSourceLive)
	if err != nil {
		t.Fatal(err)
	}
	m5 := c.Get("m5.large")
	// 4 zones on-demand at 0.096 + 1 spot at 0.04, sorted by price.
	if len(m5.Offerings) != 5 || m5.Offerings[0] != (catalog.Offering{Zone: "test-zone-1b", CapacityType: "spot", PricePerHour: 0.04, PriceSource: catalog.PriceSourceLive, Available: true}) {
		t.Fatalf("m5.large offerings %+v", m5.Offerings)
	}
	for _, o := range m5.Offerings {
		if o.PriceSource != catalog.PriceSourceLive {
			t.Errorf("offering %+v not live", o)
		}
	}
	if len(c.Get("inf2.xlarge").Offerings) != 0 {
		t.Errorf("inf2.xlarge has no price, so no offerings: %+v", c.Get("inf2.xlarge").Offerings)
	}
}

// TestRefreshOverTheWire runs the whole refresh through the real SDK clients (EC2 Query and
// Price List JSON) against the fake cloud's endpoint over the embedded catalog.
func TestRefreshOverTheWire(t *testing.T) {
	cat := catalog.MustAWS()
	srv, err := ec2api.New(ec2api.Options{Cloud: fake.New(fake.Options{Catalog: cat, Cluster: "test"}),
		Now: func() time.Time { return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	cfg, err := dvaws.NewConfig(context.Background(), dvaws.ConfigOptions{Endpoint: hs.URL, Region: "us-east-1", MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ec2c, _ := dvaws.Clients(cfg)
	o := awsrefresh.Options{Region: "us-east-1", EC2: ec2c, Pricing: pricing.NewFromConfig(cfg)}
	live, err := awsrefresh.Refresh(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(live.Types()); n != len(cat.Types()) {
		t.Errorf("%d types, want the endpoint's %d", n, len(cat.Types()))
	}
	got, want := live.Get("m5.large"), cat.Get("m5.large")
	if len(got.Offerings) != len(want.Offerings) {
		t.Fatalf("m5.large: %d offerings, endpoint sells %d", len(got.Offerings), len(want.Offerings))
	}
	for i := range want.Offerings {
		g, w := got.Offerings[i], want.Offerings[i]
		if g.Zone != w.Zone || g.CapacityType != w.CapacityType || g.PricePerHour != w.PricePerHour || g.PriceSource != catalog.PriceSourceLive {
			t.Errorf("offering %d = %+v, endpoint sells %+v (and the refresh must say live)", i, g, w)
		}
	}
	if a, b := got.Allocatable(), want.Allocatable(); !a.Cpu().Equal(*b.Cpu()) || !a.Memory().Equal(*b.Memory()) || !a.Pods().Equal(*b.Pods()) {
		t.Errorf("m5.large allocatable %v, embedded %v", a, b)
	}

	// A failing API falls back to the embedded catalog and says why.
	srv.InjectThrottle("DescribeInstanceTypes", 100)
	c, err := awsrefresh.RefreshOrEmbedded(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "RequestLimitExceeded") || c != cat {
		t.Fatalf("fallback: catalog %p (embedded %p), err %v", c, cat, err)
	}
}
