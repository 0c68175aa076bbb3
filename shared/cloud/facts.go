package cloud

import (
	"context"

	"github.com/dovetail-dev/dovetail/events"
)

type factsKey struct{}

// WithClusterFacts returns ctx carrying the cluster facts of the snapshot a call was decided on
// (events.Snapshot.ClusterFacts, discovered by the agent). A provider reads them with
// ClusterFactsFrom where the Provider interface has no request to carry them (ResolveNodeClass);
// a launch carries them in LaunchRequest.ClusterFacts. nil facts leave ctx as it is.
func WithClusterFacts(ctx context.Context, f *events.ClusterFacts) context.Context {
	if f == nil {
		return ctx
	}
	c := *f
	return context.WithValue(ctx, factsKey{}, &c)
}

// ClusterFactsFrom returns the facts WithClusterFacts put in ctx, or nil.
func ClusterFactsFrom(ctx context.Context) *events.ClusterFacts {
	f, _ := ctx.Value(factsKey{}).(*events.ClusterFacts)
	return f
}
