package awsrefresh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// DefaultCacheTTL is how long a refreshed catalog is reused from the claim-check store: 15
// minutes. Karpenter re-describes instance types and offerings every 5 minutes in a process that
// lives for days; a function lives for minutes, so without the store every cold start would
// re-describe the region (hundreds of pages of DescribeSpotPriceHistory and GetProducts). 15
// minutes keeps spot prices about as fresh as Karpenter's and capacity changes are caught sooner
// anyway by the unavailable-offering marks of refused launches.
const DefaultCacheTTL = 15 * time.Minute

// Store is a claim-check store that can name the URI of a key before anything was written there
// (events.FileBlobStore, events.MemoryBlobStore, s3blob.Store).
type Store interface {
	events.BlobStore
	URI(key string) string
}

// CacheKey is where a region's catalog is kept in the store: under the claim-check prefix, so the
// functions' existing s3:GetObject/PutObject permission covers it.
func CacheKey(region string) string { return "catalog/aws/" + region + ".json" }

// cached is the stored form of a catalog: the API facts and offerings of each type, from which
// NewAWSInstanceType rebuilds it exactly.
type cached struct {
	Region    string       `json:"region"`
	Refreshed time.Time    `json:"refreshed"`
	Types     []cachedType `json:"types"`
}

type cachedType struct {
	Facts     catalog.AWSTypeFacts `json:"facts"`
	Offerings []catalog.Offering   `json:"offerings"`
}

// Cached returns the region's catalog from the store when it was refreshed less than ttl ago
// (by any function of the deployment), else refreshes it from the APIs and stores it. now is
// the function's clock. A store that cannot be read or written is not fatal (the refresh still
// answers; the error is returned with the catalog for the caller to log), a failed refresh is.
func Cached(ctx context.Context, store Store, ttl time.Duration, now time.Time, o Options) (*catalog.Catalog, error) {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	key := CacheKey(o.Region)
	var storeErr error
	if store != nil {
		data, err := store.Get(ctx, store.URI(key))
		switch {
		case err == nil:
			var doc cached
			if err := json.Unmarshal(data, &doc); err != nil {
				storeErr = fmt.Errorf("cached catalog %s: %w", key, err)
				break
			}
			if doc.Region == o.Region && !now.Before(doc.Refreshed) && now.Sub(doc.Refreshed) < ttl {
				return fromCache(doc)
			}
		case !errors.Is(err, events.ErrBlobNotFound):
			storeErr = fmt.Errorf("reading cached catalog %s: %w", key, err)
		}
	}
	facts, err := refreshFacts(ctx, o)
	if err != nil {
		return nil, err
	}
	doc := cached{Region: o.Region, Refreshed: now, Types: facts}
	cat, err := fromCache(doc)
	if err != nil {
		return nil, err
	}
	if store != nil {
		data, err := json.Marshal(doc)
		if err == nil {
			_, err = store.Put(ctx, key, data)
		}
		if err != nil {
			storeErr = errors.Join(storeErr, fmt.Errorf("caching catalog %s: %w", key, err))
		}
	}
	return cat, storeErr
}

func fromCache(doc cached) (*catalog.Catalog, error) {
	types := make([]*catalog.InstanceType, 0, len(doc.Types))
	for _, t := range doc.Types {
		it, err := catalog.NewAWSInstanceType(t.Facts, doc.Region, t.Offerings)
		if err != nil {
			return nil, fmt.Errorf("cached catalog %s: %w", doc.Region, err)
		}
		types = append(types, it)
	}
	c := catalog.New(doc.Region, types)
	c.Source = catalog.SourceLive
	return c, nil
}
