// Command drift runs the drift function: under AWS Lambda (its own SQS FIFO queue of the agent's
// events, partial batch responses) when Lambda starts it, otherwise as a NATS JetStream worker on
// the events subject (durable "drift"; see shared/runtime). Every snapshot moves drifted and
// expired nodes one step through replace → drain → delete, within budgets. The cloud is the
// in-memory fake unless --cloud aws (DOVETAIL_CLOUD=aws) selects EC2.
//
// Build for Lambda (provided.al2023) with `make package`.
package main

import (
	"context"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/drift"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

func main() { runtime.Main(function()) }

func function() runtime.Function {
	o := &cloudflags.Options{}
	return runtime.Function{
		Name:  drift.Component,
		Short: "Dovetail's drift function: snapshots in, drifted and expired nodes replaced within budgets",
		Flags: o.Register,
		Build: func(ctx context.Context, t runtime.Transport) (queue.Handler, error) {
			env, err := o.Setup(ctx, t)
			if err != nil {
				return nil, err
			}
			h := &drift.Handler{Cluster: t.Cluster, Catalog: env.Catalog, NodeSettings: env.NodeSettings, Policies: env.Policies, Provider: env.Provider, Publisher: t.Publisher,
				Codec: events.Codec{Blobs: t.Blobs}, Log: t.Logger, Metrics: t.Metrics}
			return h.Handle, nil
		},
	}
}
