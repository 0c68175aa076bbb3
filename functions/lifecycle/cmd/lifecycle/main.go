// Command lifecycle runs the lifecycle function: under AWS Lambda (its own SQS FIFO queue of the
// agent's events, partial batch responses) when Lambda starts it, otherwise as a NATS JetStream
// worker on the events subject (durable "lifecycle"; see shared/runtime). Every snapshot moves
// each NodeClaim one step through registration, initialization, liveness and termination. The
// cloud is the in-memory fake unless --cloud aws (DOVETAIL_CLOUD=aws) selects EC2.
//
// Build for Lambda (provided.al2023) with `make package`.
package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	core "github.com/dovetail-dev/dovetail/shared/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

func main() { runtime.Main(function()) }

func function() runtime.Function {
	o := &cloudflags.Options{}
	var f lifecycle.Flags
	return runtime.Function{
		Name:  lifecycle.Component,
		Short: "Dovetail's lifecycle function: snapshots in, NodeClaims registered, initialized, reaped and terminated",
		Flags: func(fs *pflag.FlagSet) {
			o.Register(fs)
			f.Register(fs)
		},
		Build: func(ctx context.Context, t runtime.Transport) (queue.Handler, error) {
			d, err := f.Parse()
			if err != nil {
				return nil, err
			}
			env, err := o.Setup(ctx, t)
			if err != nil {
				return nil, err
			}
			h := &lifecycle.Handler{Cluster: t.Cluster, Provider: env.Provider, Publisher: t.Publisher,
				Codec: events.Codec{Blobs: t.Blobs}, Log: t.Logger, Metrics: t.Metrics, Options: core.Options{RegistrationTTL: d, PricePerHour: core.CatalogPrice(env.Catalog), Catalog: env.Catalog},
				DisableRepair: !f.NodeRepair}
			return h.Handle, nil
		},
	}
}
