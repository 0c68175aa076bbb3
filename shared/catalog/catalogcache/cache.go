// Package catalogcache keeps a refreshed catalog's inputs in the claim-check store, so the
// functions of one deployment share a refresh of the cloud's catalog APIs per TTL instead of
// paying it at every cold start.
package catalogcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// DefaultTTL is how long a refreshed catalog is reused from the claim-check store: 15 minutes.
// Karpenter re-describes instance types and offerings every 5 minutes in a process that lives for
// days; a function lives for minutes, so without the store every cold start would re-read the
// region (hundreds of pages of DescribeSpotPriceHistory and GetProducts on AWS, tens of Retail
// Prices pages and the Resource SKUs list on Azure). 15 minutes keeps spot prices about as fresh
// as Karpenter's, and capacity changes are caught sooner anyway by the unavailable-offering marks
// of refused launches.
const DefaultTTL = 15 * time.Minute

// Store is a claim-check store that can name the URI of a key before anything was written there
// (events.FileBlobStore, events.MemoryBlobStore, s3blob.Store, azureblob.Store).
type Store interface {
	events.BlobStore
	URI(key string) string
}

// Key is where a cloud's region catalog is kept: under the claim-check prefix, so the functions'
// existing read/write permission on claim checks covers it.
func Key(cloud, region string) string { return "catalog/" + cloud + "/" + region + ".json" }

// Source says how to refresh a region's catalog inputs (T: what the APIs answered, in a form
// that marshals to JSON) and how to build the catalog from them.
type Source[T any] struct {
	Key, Region string
	Refresh     func(context.Context) (T, error)
	Build       func(T) (*catalog.Catalog, error)
}

// doc is the stored form.
type doc[T any] struct {
	Region    string    `json:"region"`
	Refreshed time.Time `json:"refreshed"`
	Inputs    T         `json:"inputs"`
}

// Cached returns the region's catalog built from the inputs stored under s.Key when they were
// refreshed less than ttl (≤ 0: DefaultTTL) before now (the function's clock) by any function of
// the deployment, else refreshes them, builds the catalog and stores them. A nil store refreshes
// every time. A store that cannot be read or written, or a stored document that does not parse,
// is not fatal: the refresh still answers and the error is returned with the catalog for the
// caller to log. A failed refresh or build returns a nil catalog.
func Cached[T any](ctx context.Context, store Store, ttl time.Duration, now time.Time, s Source[T]) (*catalog.Catalog, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	var storeErr error
	if store != nil {
		data, err := store.Get(ctx, store.URI(s.Key))
		switch {
		case err == nil:
			var d doc[T]
			if err := json.Unmarshal(data, &d); err != nil {
				storeErr = fmt.Errorf("cached catalog %s: %w", s.Key, err)
				break
			}
			if d.Region != s.Region || now.Before(d.Refreshed) || now.Sub(d.Refreshed) >= ttl {
				break
			}
			cat, err := s.Build(d.Inputs)
			if err == nil {
				return cat, nil
			}
			storeErr = fmt.Errorf("cached catalog %s: %w", s.Key, err)
		case !errors.Is(err, events.ErrBlobNotFound):
			storeErr = fmt.Errorf("reading cached catalog %s: %w", s.Key, err)
		}
	}
	in, err := s.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	cat, err := s.Build(in)
	if err != nil {
		return nil, err
	}
	if store != nil {
		data, err := json.Marshal(doc[T]{Region: s.Region, Refreshed: now, Inputs: in})
		if err == nil {
			_, err = store.Put(ctx, s.Key, data)
		}
		if err != nil {
			storeErr = errors.Join(storeErr, fmt.Errorf("caching catalog %s: %w", s.Key, err))
		}
	}
	return cat, storeErr
}
