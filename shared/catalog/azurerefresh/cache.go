package azurerefresh

import (
	"context"
	"time"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/catalogcache"
)

// Inputs are what the two APIs answered for a region, as stored in the claim-check store.
type Inputs struct {
	SKUs     []catalog.AzureResourceSKU `json:"skus"`
	OnDemand map[string]float64         `json:"onDemand"`
	Spot     map[string]float64         `json:"spot"`
}

// Cached returns the region's live catalog from the inputs the deployment's functions stored less
// than ttl ago (catalogcache.Key("azure", region)), else reads both APIs and stores what they
// answered; catalogcache.Cached says which errors are fatal.
func Cached(ctx context.Context, store catalogcache.Store, ttl time.Duration, now time.Time, o Options) (*catalog.Catalog, error) {
	return catalogcache.Cached(ctx, store, ttl, now, catalogcache.Source[Inputs]{
		Key: catalogcache.Key("azure", o.Region), Region: o.Region,
		Refresh: func(ctx context.Context) (Inputs, error) { return Read(ctx, o) },
		Build: func(in Inputs) (*catalog.Catalog, error) {
			return catalog.AzureLiveCatalog(o.Region, in.SKUs, in.OnDemand, in.Spot), nil
		},
	})
}
