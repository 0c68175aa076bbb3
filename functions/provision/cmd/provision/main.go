// Command provision runs the provision function: under AWS Lambda (SQS event source, partial
// batch responses) when Lambda starts it, otherwise as a NATS JetStream worker (see
// shared/runtime). The cloud is the in-memory fake (local dev) unless --cloud aws
// (DOVETAIL_CLOUD=aws) selects EC2.
//
// Build for Lambda (provided.al2023) with: CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build
// -tags lambda.norpc -o bootstrap ./functions/provision/cmd/provision (or `make package`).
package main

import (
	"context"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

func main() {
	o := &cloudflags.Options{}
	runtime.Main(runtime.Function{
		Name:  provision.Component,
		Short: "Dovetail's provision function: pending pods in, NodeClaims launched, commands out",
		Flags: o.Register,
		Build: func(ctx context.Context, t runtime.Transport) (queue.Handler, error) {
			env, err := o.Setup(ctx, t)
			if err != nil {
				return nil, err
			}
			h := &provision.Handler{Cluster: t.Cluster, Catalog: env.Catalog, NodeSettings: env.NodeSettings, Policies: env.Policies, Provider: env.Provider, Publisher: t.Publisher,
				Codec: events.Codec{Blobs: t.Blobs}, Log: t.Logger, Metrics: t.Metrics}
			return h.Handle, nil
		},
	})
}
