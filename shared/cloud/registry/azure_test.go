//go:build !lambda.norpc

package registry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/azurerefresh/refreshtest"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
)

// TestAzureFunctionCatalog: with a subscription configured the functions decide with the live
// catalog (the Resource SKUs API through the real SDK client against its server fake, the Retail
// Prices API on loopback), shared through the claim-check store; when the APIs cannot be read and
// nothing is stored they fall back to the embedded catalog of the region, and say so in the log.
func TestAzureFunctionCatalog(t *testing.T) {
	ctx := context.Background()
	c, err := Lookup(Azure)
	if err != nil {
		t.Fatal(err)
	}
	prices, skus := refreshtest.NewPrices(t), refreshtest.NewSKUs(t)
	var logs bytes.Buffer
	cfg := Config{Cluster: "prod", Logger: slog.New(slog.NewTextHandler(&logs, nil)), Blobs: &events.MemoryBlobStore{},
		Azure: AzureConfig{Region: refreshtest.Region, SubscriptionID: "00000000-0000-0000-0000-000000000000", Credential: &azfake.TokenCredential{},
			ClientOptions: skus.ClientOptions, RetailPricesURL: prices.Endpoint}}
	cat, err := c.FunctionCatalog(ctx, cfg)
	if err != nil || cat.Source != catalog.SourceLive || cat.Region != refreshtest.Region || len(cat.Types()) != 4 {
		t.Fatalf("live: %v, source %s, %d types; want the 4 listed and priced sizes", err, cat.Source, len(cat.Types()))
	}
	// Standard_D2as_v6's Spot price is the API's 0.0172 USD/h, not the model's estimate.
	for _, o := range cat.Get("Standard_D2as_v6").Offerings {
		if o.CapacityType == "spot" && (o.PricePerHour != 0.0172 || o.PriceSource != catalog.PriceSourceLive) {
			t.Errorf("D2as_v6 spot %+v", o)
		}
	}
	// Another function of the deployment, the prices API now unreachable: the stored inputs.
	prices.Close()
	if cat, err := c.FunctionCatalog(ctx, cfg); err != nil || cat.Source != catalog.SourceLive {
		t.Fatalf("from the store: %v, %v", cat, err)
	}
	// Nothing stored and the API unreachable: the embedded catalog, logged.
	cfg.Blobs = &events.MemoryBlobStore{}
	cat, err = c.FunctionCatalog(ctx, cfg)
	if err != nil || cat.Source != catalog.SourceEmbedded || cat.Region != refreshtest.Region || len(cat.Types()) < 300 {
		t.Fatalf("fallback: %v, source %s, %d types", err, cat.Source, len(cat.Types()))
	}
	if !strings.Contains(logs.String(), "azure catalog refresh failed; deciding with the embedded catalog") {
		t.Errorf("the fallback was not logged: %s", logs.String())
	}
}

// The functions' bootstrappingclient settings become the provider's NodeBootstrapping client:
// each missing setting named by its flag, a server URL that is not http(s) refused, the AKS
// cluster name defaulting to the Dovetail cluster's, the bootstrap token carried over; the other
// modes have no client.
func TestAzureNodeBootstrappingClient(t *testing.T) {
	const sub = "00000000-0000-0000-0000-000000000000"
	cfg := func(a AzureConfig) Config {
		a.ProvisionMode = "bootstrappingclient"
		a.Bootstrap.Token = "abcdef.0123456789abcdef"
		return Config{Cluster: "prod", Azure: a}
	}
	if _, err := nodeBootstrappingClient(cfg(AzureConfig{}), &azfake.TokenCredential{}); err == nil ||
		!strings.Contains(err.Error(), "requires --aks-nodebootstrapping-server-url, --aks-cluster-resource-group, --azure-subscription-id") {
		t.Errorf("nothing set: %v", err)
	}
	for _, u := range []string{"nodebootstrapping.local", "ftp://x", "https://x/?a=1", "http://"} {
		_, err := nodeBootstrappingClient(cfg(AzureConfig{SubscriptionID: sub, ClusterResourceGroup: "rg", NodeBootstrappingServerURL: u}), &azfake.TokenCredential{})
		if err == nil || !strings.Contains(err.Error(), "--aks-nodebootstrapping-server-url") {
			t.Errorf("server URL %q: %v", u, err)
		}
	}
	nb, err := nodeBootstrappingClient(cfg(AzureConfig{SubscriptionID: sub, ClusterResourceGroup: "rg-aks", NodeBootstrappingServerURL: "http://10.0.0.5:8080"}), &azfake.TokenCredential{})
	c, ok := nb.(*azure.NodeBootstrappingClient)
	if err != nil || !ok || c.Endpoint != "http://10.0.0.5:8080" || c.SubscriptionID != sub || c.ResourceGroup != "rg-aks" || c.Cluster != "prod" || c.Token != "abcdef.0123456789abcdef" {
		t.Fatalf("client %+v, %v", nb, err)
	}
	if nb, err := nodeBootstrappingClient(Config{Azure: AzureConfig{ProvisionMode: "aksscriptless"}}, &azfake.TokenCredential{}); nb != nil || err != nil {
		t.Errorf("aksscriptless: %v %v", nb, err)
	}
}
