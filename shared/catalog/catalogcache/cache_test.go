package catalogcache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// inputs stand for what a cloud's APIs answer: one size and its price.
type inputs struct {
	Size  string  `json:"size"`
	Price float64 `json:"price"`
}

type counter struct {
	refreshes int
	answer    inputs
	err       error
}

func (c *counter) source() Source[inputs] {
	return Source[inputs]{Key: Key("azure", "westeurope"), Region: "westeurope",
		Refresh: func(context.Context) (inputs, error) { c.refreshes++; return c.answer, c.err },
		Build: func(in inputs) (*catalog.Catalog, error) {
			if in.Size == "" {
				return nil, errors.New("no size")
			}
			return catalog.New("westeurope", []*catalog.InstanceType{{Name: in.Size, Offerings: []catalog.Offering{{Zone: "westeurope-1", CapacityType: "on-demand", PricePerHour: in.Price, Available: true}}}}), nil
		}}
}

func price(c *catalog.Catalog) float64 { return c.Get("Standard_D2s_v5").Offerings[0].PricePerHour }

func TestCachedSharesOneRefreshPerTTL(t *testing.T) {
	ctx := context.Background()
	store := &events.MemoryBlobStore{}
	c := &counter{answer: inputs{Size: "Standard_D2s_v5", Price: 0.096}}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cat, err := Cached(ctx, store, 0, t0, c.source())
	if err != nil || c.refreshes != 1 || price(cat) != 0.096 || store.Len() != 1 {
		t.Fatalf("first: %v, %d refreshes, %d blobs", err, c.refreshes, store.Len())
	}
	// Another function 14 minutes later reads the stored inputs, even after the API changed.
	c.answer.Price = 0.2
	cat, err = Cached(ctx, store, 0, t0.Add(14*time.Minute), c.source())
	if err != nil || c.refreshes != 1 || price(cat) != 0.096 {
		t.Fatalf("within the TTL: %v, %d refreshes, price %v; want the stored 0.096", err, c.refreshes, price(cat))
	}
	// At 15 minutes (DefaultTTL) the inputs are refreshed and stored again.
	cat, err = Cached(ctx, store, 0, t0.Add(DefaultTTL), c.source())
	if err != nil || c.refreshes != 2 || price(cat) != 0.2 {
		t.Fatalf("at the TTL: %v, %d refreshes, price %v", err, c.refreshes, price(cat))
	}
	// A clock behind the stored refresh (skew) does not trust it.
	if _, err := Cached(ctx, store, 0, t0, c.source()); err != nil || c.refreshes != 3 {
		t.Fatalf("clock behind: %v, %d refreshes", err, c.refreshes)
	}
	// No store: every call refreshes.
	if _, err := Cached(ctx, nil, 0, t0, c.source()); err != nil || c.refreshes != 4 {
		t.Fatalf("no store: %v, %d refreshes", err, c.refreshes)
	}
}

type brokenStore struct{ events.MemoryBlobStore }

func (*brokenStore) Put(context.Context, string, []byte) (string, error) {
	return "", errors.New("403 AuthorizationPermissionMismatch")
}

func TestCachedStoreTroubleIsNotFatal(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := &counter{answer: inputs{Size: "Standard_D2s_v5", Price: 0.096}}
	cat, err := Cached(ctx, &brokenStore{}, 0, t0, c.source())
	if cat == nil || err == nil || !strings.Contains(err.Error(), "caching catalog catalog/azure/westeurope.json") {
		t.Fatalf("a store that refuses writes: %v, %v; want the catalog and the error", cat, err)
	}
	store := &events.MemoryBlobStore{}
	if _, err := store.Put(ctx, Key("azure", "westeurope"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	cat, err = Cached(ctx, store, 0, t0, c.source())
	if cat == nil || err == nil || c.refreshes != 2 {
		t.Fatalf("a corrupt stored document: %v, %v, %d refreshes; want a refresh and the error", cat, err, c.refreshes)
	}
	// A failed refresh is fatal: no catalog.
	c.err = errors.New("retail prices answered 503")
	if cat, err := Cached(ctx, nil, 0, t0, c.source()); cat != nil || err == nil {
		t.Fatalf("failed refresh: %v, %v", cat, err)
	}
}
