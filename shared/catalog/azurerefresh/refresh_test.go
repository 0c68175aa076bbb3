package azurerefresh

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/azurerefresh/refreshtest"
	"github.com/dovetail-dev/dovetail/shared/catalog/catalogcache"
)

func TestPrices(t *testing.T) {
	ts := refreshtest.NewPrices(t)
	od, spot, err := Prices(context.Background(), ts.Client(), ts.Endpoint, "southcentralus")
	if err != nil {
		t.Fatal(err)
	}
	// Linux pay-as-you-go and Spot only: not Windows (0.178), Low Priority, DevTest (0.05) or the
	// non-primary meter (0.6).
	want := map[string]float64{"Standard_D2as_v6": 0.086, "Standard_D4s_v3": 0.192, "Standard_F16s_v2": 0.677, "Standard_B20ms": 0.832}
	if len(od) != len(want) {
		t.Fatalf("on demand %v, want %v", od, want)
	}
	for k, v := range want {
		if od[k] != v {
			t.Errorf("%s on demand %v, want %v", k, od[k], v)
		}
	}
	if len(spot) != 2 || spot["Standard_D2as_v6"] != 0.0172 || spot["Standard_D4s_v3"] != 0.0384 {
		t.Errorf("spot %v", spot)
	}
}

// TestBuild: the live catalog has the sizes that are both listed and priced, with their zones,
// live on-demand and Spot prices, and a labelled estimate where the API gave no Spot price.
func TestBuild(t *testing.T) {
	ts, skus := refreshtest.NewPrices(t), refreshtest.NewSKUs(t)
	cat, err := Build(context.Background(), Options{Region: "southcentralus", SKUs: skus.Client(t), HTTP: ts.Client(), PricesURL: ts.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if filter := skus.Filter(); filter != "location eq 'southcentralus'" || cat.Source != catalog.SourceLive || cat.Region != "southcentralus" {
		t.Fatalf("filter %q, source %s, region %s", filter, cat.Source, cat.Region)
	}
	var names []string
	for _, it := range cat.Types() {
		names = append(names, it.Name)
	}
	// B20ms is priced but not spot-capable (LowPriorityCapable False): on demand only.
	if strings.Join(names, ",") != "Standard_B20ms,Standard_D2as_v6,Standard_D4s_v3,Standard_F16s_v2" {
		t.Fatalf("types %v", names)
	}
	d2 := cat.Get("Standard_D2as_v6")
	got := map[string]catalog.Offering{}
	for _, o := range d2.Offerings {
		got[o.Zone+"/"+o.CapacityType] = o
	}
	if len(got) != 4 || got["southcentralus-2/on-demand"].PricePerHour != 0.086 || got["southcentralus-3/spot"].PricePerHour != 0.0172 ||
		got["southcentralus-3/spot"].PriceSource != catalog.PriceSourceLive {
		t.Fatalf("D2as_v6 offerings %+v; want zones 2 and 3, live prices", got)
	}
	if o := cat.Get("Standard_F16s_v2").Offerings; o[0].CapacityType != "spot" || o[0].PriceSource != catalog.PriceSourceSpotModel {
		t.Errorf("F16s_v2 without an API spot price: %+v, want the model estimate", o[0])
	}
	if len(cat.Get("Standard_B20ms").Offerings) != 3 {
		t.Errorf("B20ms offerings %+v", cat.Get("Standard_B20ms").Offerings)
	}
}

// TestCached: the first function of a deployment reads both APIs and stores what they answered
// under catalog/azure/<region>.json in the claim-check store; the next one within the TTL builds
// the same catalog from it without calling either API (the prices server is gone).
func TestCached(t *testing.T) {
	ctx := context.Background()
	ts, skus := refreshtest.NewPrices(t), refreshtest.NewSKUs(t)
	store := &events.MemoryBlobStore{}
	o := Options{Region: "southcentralus", SKUs: skus.Client(t), HTTP: ts.Client(), PricesURL: ts.Endpoint}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	first, err := Cached(ctx, store, 0, t0, o)
	if err != nil || ts.Requests.Load() != 2 {
		t.Fatalf("first: %v, %d price pages read; want both pages", err, ts.Requests.Load())
	}
	if _, err := store.Get(ctx, store.URI(catalogcache.Key("azure", "southcentralus"))); err != nil {
		t.Fatalf("nothing stored: %v", err)
	}
	ts.Close()
	second, err := Cached(ctx, store, 0, t0.Add(10*time.Minute), o)
	if err != nil || second.Source != catalog.SourceLive || ts.Requests.Load() != 2 {
		t.Fatalf("within the TTL: %v, source %s, %d pages; want the stored inputs", err, second.Source, ts.Requests.Load())
	}
	if len(first.Types()) != len(second.Types()) || len(second.Types()) != 4 {
		t.Fatalf("stored catalog has %d types, the first %d", len(second.Types()), len(first.Types()))
	}
	for _, it := range first.Types() {
		a, b := it.Offerings, second.Get(it.Name).Offerings
		if len(a) != len(b) {
			t.Fatalf("%s: offerings %v and %v", it.Name, a, b)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s: offering %+v from the APIs, %+v from the store", it.Name, a[i], b[i])
			}
		}
	}
	// Past the TTL the APIs are read again: with the prices server gone that fails.
	if cat, err := Cached(ctx, store, 0, t0.Add(catalogcache.DefaultTTL), o); cat != nil || err == nil {
		t.Fatalf("past the TTL without the API: %v, %v; want the refresh's error", cat, err)
	}
}
