// Command consolidate runs the consolidate function: under AWS Lambda (its own SQS FIFO queue of
// the agent's events, partial batch responses) when Lambda starts it, otherwise as a NATS
// JetStream worker on the events subject (durable "consolidate"; see shared/runtime). It acts on
// the agent's periodic TypeSnapshot events (every 30 s) and acknowledges pods-pending events. The
// cloud is the in-memory fake unless --cloud aws (DOVETAIL_CLOUD=aws) selects EC2.
//
// Build for Lambda (provided.al2023) with `make package`.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/consolidate"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

func main() { runtime.Main(function()) }

// modes maps --mode to the underutilization strategies (shared/disruption.Mode).
var modes = map[string]disruption.Mode{"search": disruption.ModeSearch, "prefix": disruption.ModePrefix}

func function() runtime.Function {
	o := &cloudflags.Options{}
	var mode string
	return runtime.Function{
		Name:  consolidate.Component,
		Short: "Dovetail's consolidate function: snapshots in, cheaper or fewer nodes out (replacements first, then drain)",
		Flags: func(fs *pflag.FlagSet) {
			o.Register(fs)
			fs.StringVar(&mode, "mode", runtime.EnvDefault("mode", "search"), "underutilization strategies: search (Karpenter's prefix and single-node rules and Dovetail's search; the largest saving wins) or prefix (Karpenter's rules only); env "+runtime.EnvName("mode"))
		},
		Build: func(ctx context.Context, t runtime.Transport) (queue.Handler, error) {
			m, ok := modes[mode]
			if !ok {
				return nil, fmt.Errorf("--mode (%s) %q: must be search or prefix", runtime.EnvName("mode"), mode)
			}
			env, err := o.Setup(ctx, t)
			if err != nil {
				return nil, err
			}
			h := &consolidate.Handler{Cluster: t.Cluster, Catalog: env.Catalog, NodeSettings: env.NodeSettings, Policies: env.Policies, Provider: env.Provider, Publisher: t.Publisher,
				Codec: events.Codec{Blobs: t.Blobs}, Log: t.Logger, Metrics: t.Metrics, Options: disruption.Options{Mode: m}}
			return h.Handle, nil
		},
	}
}
