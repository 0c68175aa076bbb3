// Command interruption runs the interruption function: cloud notices in; replacement capacity,
// offering marks and taint/drain/delete commands out.
//
// Cloud notices carry no cluster state, and the function keeps none:
//
//   - AWS Lambda: the notices queue (EventBridge rule → SQS) feeds the function, and every
//     invocation reads the cluster's latest snapshot from the claim-check bucket
//     (interruption.BlobSnapshot: the agent writes it under events.LatestSnapshotKey with every
//     snapshot), so any execution environment, cold or warm, one or many, decides alike. A notice
//     that waits (for a snapshot showing its instance, or for its replacement) is re-driven
//     within interruption.RedriveInterval by ChangeMessageVisibility, not after the queue's
//     120 s visibility timeout, so its drain starts before deadline − margin. Records of the
//     events subject (an older deployment's snapshot queue) are acknowledged and ignored. Without
//     a bucket (--blob-bucket) it falls back to the snapshots those records carry, kept in the
//     execution environment.
//   - NATS worker (the default): it consumes the notices subject (durable "interruption") and
//     follows the events subject with its own ordered consumer (runtime.Transport.Follow:
//     shared/queue/nats.Follow), which starts at the last event stored, so a restarted worker
//     has a snapshot at once.
//
// The cloud is the in-memory fake unless --cloud aws (DOVETAIL_CLOUD=aws) selects EC2.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

func main() { runtime.Main(function(nil)) }

// followRetry is the pause before following the events subject again after the follower failed
// (the stream was re-created, the connection dropped).
const followRetry = time.Second

// function returns the function; onBuild, when set, receives the handler and snapshot source it
// built (tests).
func function(onBuild func(*interruption.Handler, *interruption.LatestSnapshot)) runtime.Function {
	o := &cloudflags.Options{}
	var rebalance string
	return runtime.Function{
		Name:          interruption.Component,
		Short:         "Dovetail's interruption function: cloud notices in; replacements launched before the reclaim, then taint and drain",
		Subject:       queue.NoticesSubject,
		MaxDeliver:    interruption.MaxDeliveries,
		MaxAckPending: interruption.MaxNoticesInFlight,
		Flags: func(fs *pflag.FlagSet) {
			o.Register(fs)
			fs.StringVar(&rebalance, "rebalance", runtime.EnvDefault("rebalance", string(interruption.RebalanceRecord)),
				"what a rebalance recommendation does: Record (log it) or Replace (replace the node proactively); env "+runtime.EnvName("rebalance"))
		},
		Build: func(ctx context.Context, t runtime.Transport) (queue.Handler, error) {
			policy := interruption.RebalancePolicy(rebalance)
			if policy != interruption.RebalanceRecord && policy != interruption.RebalanceReplace {
				return nil, fmt.Errorf("--rebalance (%s) %q: must be %s or %s", runtime.EnvName("rebalance"), rebalance,
					interruption.RebalanceRecord, interruption.RebalanceReplace)
			}
			env, err := o.Setup(ctx, t)
			if err != nil {
				return nil, err
			}
			codec := events.Codec{Blobs: t.Blobs}
			latest := &interruption.LatestSnapshot{Cluster: t.Cluster, Codec: codec, Metrics: t.Metrics}
			h := &interruption.Handler{Cluster: t.Cluster, Catalog: env.Catalog, NodeSettings: env.NodeSettings, Policies: env.Policies, Provider: env.Provider, Publisher: t.Publisher,
				Codec: codec, Snapshots: latest, Log: t.Logger, Metrics: t.Metrics, Rebalance: policy}
			if onBuild != nil {
				onBuild(h, latest)
			}
			// On the last delivery the handler drains rather than wait (see Handler.MaxAttempts):
			// the NATS consumer and the notice queue's redrive policy allow MaxDeliveries.
			h.MaxAttempts = interruption.MaxDeliveries
			switch {
			case t.Mode == runtime.ModeNATS:
				go follow(ctx, t, latest)
				return h.Handle, nil
			case t.Blobs != nil:
				h.Snapshots = interruption.BlobSnapshot{Cluster: t.Cluster, Blobs: t.Blobs}
				return Dispatch(t.Cluster, nil, h.Handle), nil
			default:
				return Dispatch(t.Cluster, latest, h.Handle), nil
			}
		},
	}
}

// Dispatch routes a record of the function's Lambda event sources: one published on the
// cluster's events subject feeds latest (acknowledged and ignored when latest is nil: the
// snapshot comes from the claim-check store), anything else is a notice.
func Dispatch(cluster string, latest *interruption.LatestSnapshot, notices queue.Handler) queue.Handler {
	eventsSubject := queue.EventsSubject(cluster)
	return func(ctx context.Context, msg queue.Message) error {
		switch {
		case msg.Subject != eventsSubject:
			return notices(ctx, msg)
		case latest == nil:
			return nil
		}
		return latest.Observe(ctx, msg)
	}
}

// follow feeds latest from the events subject until ctx ends, starting again after a failure.
// A transport that cannot follow (a test's, built without a NATS connection) is logged, and
// latest stays empty.
func follow(ctx context.Context, t runtime.Transport, latest *interruption.LatestSnapshot) {
	if t.Follow == nil {
		t.Logger.Error("the NATS transport cannot follow the events subject: no snapshots")
		return
	}
	for ctx.Err() == nil {
		err := t.Follow(ctx, queue.EventsSubject(t.Cluster), latest.Observe)
		if err == nil {
			return
		}
		t.Logger.Error("following the events subject for snapshots; retrying", "err", err, "after", followRetry)
		select {
		case <-ctx.Done():
		case <-time.After(followRetry):
		}
	}
}
