package azurerefresh

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	computefake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"

	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// skuClient lists the recorded southcentralus Resource SKUs response (20 SKUs, recorded from the
// live API; shared/catalog/data/azure) through the real SDK client against the SDK's server fake,
// in two pages. Only the token is fake: nothing can authenticate offline.
func skuClient(t *testing.T, filter *string) *armcompute.ResourceSKUsClient {
	t.Helper()
	raw, err := os.ReadFile("../data/azure/resource_skus_southcentralus_karpenter_fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	var page armcompute.ResourceSKUsResult
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	srv := computefake.ResourceSKUsServer{NewListPager: func(o *armcompute.ResourceSKUsClientListOptions) (resp azfake.PagerResponder[armcompute.ResourceSKUsClientListResponse]) {
		*filter = *o.Filter
		half := len(page.Value) / 2
		resp.AddPage(http.StatusOK, armcompute.ResourceSKUsClientListResponse{ResourceSKUsResult: armcompute.ResourceSKUsResult{Value: page.Value[:half]}}, nil)
		resp.AddPage(http.StatusOK, armcompute.ResourceSKUsClientListResponse{ResourceSKUsResult: armcompute.ResourceSKUsResult{Value: page.Value[half:]}}, nil)
		return
	}}
	c, err := armcompute.NewResourceSKUsClient("00000000-0000-0000-0000-000000000000", &azfake.TokenCredential{},
		&arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: computefake.NewResourceSKUsServerTransport(&srv)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pricesServer(t *testing.T) *httptest.Server {
	t.Helper()
	var ts *httptest.Server
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "testdata/retail_prices_southcentralus_page1.json"
		if r.URL.Query().Get("page") == "2" {
			name = "testdata/retail_prices_southcentralus_page2.json"
		} else if !strings.Contains(r.URL.Query().Get("$filter"), "armRegionName eq 'southcentralus'") {
			http.Error(w, "filter", http.StatusBadRequest)
			return
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Error(err)
		}
		w.Write([]byte(strings.Replace(string(b), `"NEXT"`, `"`+ts.URL+`/api/retail/prices?page=2"`, 1)))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestPrices(t *testing.T) {
	ts := pricesServer(t)
	od, spot, err := Prices(context.Background(), ts.Client(), ts.URL+"/api/retail/prices", "southcentralus")
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
	var filter string
	ts := pricesServer(t)
	cat, err := Build(context.Background(), Options{Region: "southcentralus", SKUs: skuClient(t, &filter), HTTP: ts.Client(), PricesURL: ts.URL + "/api/retail/prices"})
	if err != nil {
		t.Fatal(err)
	}
	if filter != "location eq 'southcentralus'" || cat.Source != catalog.SourceLive || cat.Region != "southcentralus" {
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
