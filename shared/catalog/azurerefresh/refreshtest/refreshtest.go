// Package refreshtest serves the Azure catalog APIs for tests, offline: the recorded
// southcentralus Resource SKUs response (shared/catalog/data/azure, recorded from the live API)
// through the SDK's own server fake for armcompute's ResourceSKUsClient, in two pages, and the
// Retail Prices API as two pages of the documented shape (azurerefresh/testdata) from a local
// HTTP server. Mocks at the edge: neither API runs offline.
package refreshtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	computefake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"
)

// Region is the region the recorded responses are of.
const Region = "southcentralus"

// dir is this package's folder, so tests of any package find the recorded files.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// SKUs is the Resource SKUs API: ClientOptions for armcompute clients and the $filter of the
// last list call.
type SKUs struct {
	ClientOptions *arm.ClientOptions
	filter        atomic.Value
}

// Filter is the $filter of the last list call ("" before any).
func (s *SKUs) Filter() string {
	f, _ := s.filter.Load().(string)
	return f
}

// NewSKUs serves the recorded southcentralus response in two pages.
func NewSKUs(t testing.TB) *SKUs {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir(), "..", "..", "data", "azure", "resource_skus_southcentralus_karpenter_fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var page armcompute.ResourceSKUsResult
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	s := &SKUs{}
	srv := computefake.ResourceSKUsServer{NewListPager: func(o *armcompute.ResourceSKUsClientListOptions) (resp azfake.PagerResponder[armcompute.ResourceSKUsClientListResponse]) {
		if o != nil && o.Filter != nil {
			s.filter.Store(*o.Filter)
		}
		half := len(page.Value) / 2
		resp.AddPage(http.StatusOK, armcompute.ResourceSKUsClientListResponse{ResourceSKUsResult: armcompute.ResourceSKUsResult{Value: page.Value[:half]}}, nil)
		resp.AddPage(http.StatusOK, armcompute.ResourceSKUsClientListResponse{ResourceSKUsResult: armcompute.ResourceSKUsResult{Value: page.Value[half:]}}, nil)
		return
	}}
	s.ClientOptions = &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: computefake.NewResourceSKUsServerTransport(&srv)}}
	return s
}

// Client is a ResourceSKUsClient over the fake (the token is fake: nothing authenticates offline).
func (s *SKUs) Client(t testing.TB) *armcompute.ResourceSKUsClient {
	t.Helper()
	c, err := armcompute.NewResourceSKUsClient("00000000-0000-0000-0000-000000000000", &azfake.TokenCredential{}, s.ClientOptions)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Prices is the Retail Prices API on loopback; Endpoint is its /api/retail/prices URL and Requests
// counts the pages served.
type Prices struct {
	*httptest.Server
	Endpoint string
	Requests atomic.Int64
}

// NewPrices serves the two recorded pages for southcentralus; another region's $filter is a 400.
func NewPrices(t testing.TB) *Prices {
	t.Helper()
	p := &Prices{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Requests.Add(1)
		name := "retail_prices_southcentralus_page1.json"
		if r.URL.Query().Get("page") == "2" {
			name = "retail_prices_southcentralus_page2.json"
		} else if !strings.Contains(r.URL.Query().Get("$filter"), "armRegionName eq '"+Region+"'") {
			http.Error(w, "filter", http.StatusBadRequest)
			return
		}
		b, err := os.ReadFile(filepath.Join(dir(), "..", "testdata", name))
		if err != nil {
			t.Error(err)
		}
		_, _ = w.Write([]byte(strings.Replace(string(b), `"NEXT"`, `"`+p.Server.URL+`/api/retail/prices?page=2"`, 1)))
	}))
	p.Endpoint = p.Server.URL + "/api/retail/prices"
	t.Cleanup(p.Server.Close)
	return p
}
