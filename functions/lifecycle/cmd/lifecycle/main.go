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
	"fmt"
	"time"

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
	var ttl string
	var nodeRepair bool
	return runtime.Function{
		Name:  lifecycle.Component,
		Short: "Dovetail's lifecycle function: snapshots in, NodeClaims registered, initialized, reaped and terminated",
		Flags: func(fs *pflag.FlagSet) {
			o.Register(fs)
			fs.StringVar(&ttl, "registration-ttl", runtime.EnvDefault("registration-ttl", core.DefaultRegistrationTTL.String()),
				"how long a launched NodeClaim may wait for its Node before it is deleted and its offering marked unavailable; env "+runtime.EnvName("registration-ttl"))
			fs.BoolVar(&nodeRepair, "node-repair", runtime.EnvBool("node-repair", true),
				"replace Nodes unhealthy past the cloud's repair policies (Karpenter's node repair, with its 20% breaker); env "+runtime.EnvName("node-repair"))
		},
		Build: func(ctx context.Context, t runtime.Transport) (queue.Handler, error) {
			d, err := time.ParseDuration(ttl)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("--registration-ttl (%s) %q: must be a positive duration such as 15m", runtime.EnvName("registration-ttl"), ttl)
			}
			env, err := o.Setup(ctx, t)
			if err != nil {
				return nil, err
			}
			h := &lifecycle.Handler{Cluster: t.Cluster, Provider: env.Provider, Publisher: t.Publisher,
				Codec: events.Codec{Blobs: t.Blobs}, Log: t.Logger, Metrics: t.Metrics, Options: core.Options{RegistrationTTL: d, PricePerHour: core.CatalogPrice(env.Catalog), Catalog: env.Catalog},
				DisableRepair: !nodeRepair}
			return h.Handle, nil
		},
	}
}
