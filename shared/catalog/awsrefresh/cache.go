package awsrefresh

import (
	"context"
	"fmt"
	"time"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/catalogcache"
)

// cachedType is what the store keeps of each type: its API facts and offerings, from which
// NewAWSInstanceType rebuilds it exactly.
type cachedType struct {
	Facts     catalog.AWSTypeFacts `json:"facts"`
	Offerings []catalog.Offering   `json:"offerings"`
}

// Cached returns the region's catalog from the types the deployment's functions stored less than
// ttl ago (catalogcache.Key("aws", region)), else refreshes them from the APIs and stores them;
// catalogcache.Cached says which errors are fatal. now is the function's clock.
func Cached(ctx context.Context, store catalogcache.Store, ttl time.Duration, now time.Time, o Options) (*catalog.Catalog, error) {
	return catalogcache.Cached(ctx, store, ttl, now, catalogcache.Source[[]cachedType]{
		Key: catalogcache.Key("aws", o.Region), Region: o.Region,
		Refresh: func(ctx context.Context) ([]cachedType, error) { return refreshFacts(ctx, o) },
		Build:   func(types []cachedType) (*catalog.Catalog, error) { return fromCache(o.Region, types) },
	})
}

func fromCache(region string, cached []cachedType) (*catalog.Catalog, error) {
	types := make([]*catalog.InstanceType, 0, len(cached))
	for _, t := range cached {
		it, err := catalog.NewAWSInstanceType(t.Facts, region, t.Offerings)
		if err != nil {
			return nil, fmt.Errorf("cached catalog %s: %w", region, err)
		}
		types = append(types, it)
	}
	c := catalog.New(region, types)
	c.Source = catalog.SourceLive
	return c, nil
}
