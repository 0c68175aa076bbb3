// Package azurerefresh builds an Azure region's catalog from the cloud's APIs: the Resource SKUs
// list through azure-sdk-for-go (armcompute ResourceSKUsClient, filtered to the region) and the
// public Azure Retail Prices API over HTTP (no credentials). The functions decide with it where
// they run online; the embedded catalog (catalog.AzureRegionCatalog) serves offline use.
package azurerefresh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// RetailPricesURL is the Azure Retail Prices API ("Azure Retail Prices REST API overview";
// unauthenticated).
const RetailPricesURL = "https://prices.azure.com/api/retail/prices"

// maxPricePages bounds the pages followed (a region's VM prices are ~30 pages of 1,000 items);
// maxPageBytes bounds one page.
const (
	maxPricePages = 200
	maxPageBytes  = 16 << 20
)

// Options say where to read from.
type Options struct {
	Region string
	// SKUs lists resource SKUs (armcompute.NewResourceSKUsClient).
	SKUs *armcompute.ResourceSKUsClient
	// HTTP reads the Retail Prices API (http.DefaultClient when nil); PricesURL overrides
	// RetailPricesURL (a local endpoint in tests).
	HTTP      *http.Client
	PricesURL string
}

// Build reads both APIs and returns the region's live catalog (catalog.AzureLiveCatalog).
// Errors: a failed call, or an API that answered with nothing for the region.
func Build(ctx context.Context, o Options) (*catalog.Catalog, error) {
	in, err := Read(ctx, o)
	if err != nil {
		return nil, err
	}
	return catalog.AzureLiveCatalog(o.Region, in.SKUs, in.OnDemand, in.Spot), nil
}

// Read reads both APIs for the region. Errors: a failed call, or an API that answered with
// nothing for the region.
func Read(ctx context.Context, o Options) (Inputs, error) {
	if o.Region == "" || o.SKUs == nil {
		return Inputs{}, errors.New("azurerefresh: Options.Region and Options.SKUs are required")
	}
	skus, err := ResourceSKUs(ctx, o.SKUs, o.Region)
	if err != nil {
		return Inputs{}, err
	}
	onDemand, spot, err := Prices(ctx, o.HTTP, o.PricesURL, o.Region)
	if err != nil {
		return Inputs{}, err
	}
	if len(skus) == 0 || len(onDemand) == 0 {
		return Inputs{}, fmt.Errorf("azurerefresh: %s: %d resource SKUs, %d prices", o.Region, len(skus), len(onDemand))
	}
	return Inputs{SKUs: skus, OnDemand: onDemand, Spot: spot}, nil
}

// ResourceSKUs lists the region's SKUs (every page). The SDK's models marshal to the REST shape,
// which catalog.AzureResourceSKU reads.
func ResourceSKUs(ctx context.Context, c *armcompute.ResourceSKUsClient, region string) ([]catalog.AzureResourceSKU, error) {
	filter := fmt.Sprintf("location eq '%s'", region)
	pager := c.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: &filter})
	var out []catalog.AzureResourceSKU
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("resource SKUs of %s: %w", region, err)
		}
		b, err := json.Marshal(page.Value)
		if err != nil {
			return nil, fmt.Errorf("resource SKUs of %s: %w", region, err)
		}
		var skus []catalog.AzureResourceSKU
		if err := json.Unmarshal(b, &skus); err != nil {
			return nil, fmt.Errorf("resource SKUs of %s: %w", region, err)
		}
		out = append(out, skus...)
	}
	return out, nil
}

// priceItem is one item of a Retail Prices page (the fields read).
type priceItem struct {
	CurrencyCode         string  `json:"currencyCode"`
	RetailPrice          float64 `json:"retailPrice"`
	ArmRegionName        string  `json:"armRegionName"`
	ArmSkuName           string  `json:"armSkuName"`
	SkuName              string  `json:"skuName"`
	MeterName            string  `json:"meterName"`
	ProductName          string  `json:"productName"`
	ServiceName          string  `json:"serviceName"`
	UnitOfMeasure        string  `json:"unitOfMeasure"`
	Type                 string  `json:"type"`
	IsPrimaryMeterRegion bool    `json:"isPrimaryMeterRegion"`
}

type pricePage struct {
	Items        []priceItem `json:"Items"`
	NextPageLink string      `json:"NextPageLink"`
}

// Prices reads the region's Linux pay-as-you-go VM prices in USD per hour: on demand and Spot,
// by size. Items kept: serviceName Virtual Machines, type Consumption, unit "1 Hour", USD, the
// primary meter region, a product that is not Windows, and not Low Priority (the retired
// predecessor of Spot). Where a size has two Linux meters (a "Cloud Services" product beside the
// "Virtual Machines" one) the higher is kept, the rate such VMs are billed at. NextPageLink is
// followed, at most maxPricePages pages.
func Prices(ctx context.Context, client *http.Client, base, region string) (onDemand, spot map[string]float64, err error) {
	if client == nil {
		client = http.DefaultClient
	}
	if base == "" {
		base = RetailPricesURL
	}
	q := url.Values{"$filter": {fmt.Sprintf("serviceName eq 'Virtual Machines' and armRegionName eq '%s' and priceType eq 'Consumption'", region)},
		"currencyCode": {"USD"}}
	next := base + "?" + q.Encode()
	onDemand, spot = map[string]float64{}, map[string]float64{}
	for pages := 0; next != ""; pages++ {
		if pages == maxPricePages {
			return nil, nil, fmt.Errorf("retail prices of %s: more than %d pages", region, maxPricePages)
		}
		page, err := getPage(ctx, client, next)
		if err != nil {
			return nil, nil, fmt.Errorf("retail prices of %s: %w", region, err)
		}
		for _, it := range page.Items {
			keep(it, region, onDemand, spot)
		}
		next = page.NextPageLink
	}
	return onDemand, spot, nil
}

func keep(it priceItem, region string, onDemand, spot map[string]float64) {
	switch {
	case it.ServiceName != "Virtual Machines", it.Type != "Consumption", it.UnitOfMeasure != "1 Hour", it.CurrencyCode != "USD",
		!it.IsPrimaryMeterRegion, !strings.EqualFold(it.ArmRegionName, region), it.ArmSkuName == "", it.RetailPrice <= 0,
		strings.Contains(it.ProductName, "Windows"), strings.Contains(it.SkuName, "Low Priority"):
		return
	}
	into := onDemand
	if strings.Contains(it.SkuName, "Spot") || strings.Contains(it.MeterName, "Spot") {
		into = spot
	}
	if it.RetailPrice > into[it.ArmSkuName] {
		into[it.ArmSkuName] = it.RetailPrice
	}
}

func getPage(ctx context.Context, client *http.Client, u string) (*pricePage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPageBytes {
		return nil, fmt.Errorf("a page over %d bytes", maxPageBytes)
	}
	var p pricePage
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("not a Retail Prices page: %w", err)
	}
	return &p, nil
}
