package interruption

import (
	"context"
	"fmt"
	"sync"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// SnapshotSource gives the interruption function the cluster's latest snapshot. Cloud notices
// carry no cluster state, and a function keeps none, so the snapshot comes from where the agent
// already puts it:
//
//   - On Lambda (and wherever a claim-check store is configured): BlobSnapshot, the snapshot the
//     agent writes under events.LatestSnapshotKey with every snapshot it publishes (at least
//     every 30 s, within a second of a node change). Nothing lives in the execution environment.
//   - On a long-running NATS worker without a store: LatestSnapshot, the newest snapshot event
//     the worker followed on the events subject.
//   - When the source has nothing recent enough (no snapshot, one dated more than
//     events.MaxClockSkew from the function's clock, or one that predates the notice and does
//     not show the instance yet), the handler returns ErrAwaitingSnapshot: the notice comes back
//     within RedriveInterval (5 s) until a snapshot shows the instance.
type SnapshotSource interface {
	// Latest returns the newest snapshot known, or nil when there is none yet.
	Latest(ctx context.Context) (*events.Snapshot, error)
}

// LatestSnapshot is a SnapshotSource fed by the events subject: pass its Observe as the queue
// handler of a consumer of queue.EventsSubject. It keeps the snapshot with the highest revision
// (redeliveries and out-of-order deliveries never move it back). Safe for concurrent use.
type LatestSnapshot struct {
	Cluster string
	Codec   events.Codec
	// Metrics receives the decode time of each snapshot it reads (nil: none).
	Metrics telemetry.Recorder

	mu   sync.Mutex
	snap *events.Snapshot
}

// Observe reads a TypeSnapshot or TypePodsPending event and keeps its snapshot if it is newer.
// Other event types are acknowledged and ignored (the subject also carries other events); a
// malformed event wraps queue.ErrPoison.
func (l *LatestSnapshot) Observe(ctx context.Context, msg queue.Message) error {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return fmt.Errorf("%w: %w", queue.ErrPoison, err)
	}
	if env.Type != events.TypeSnapshot && env.Type != events.TypePodsPending {
		return nil
	}
	snap, err := emit.SnapshotOf(ctx, l.Codec, l.Cluster, env, l.Metrics, Component)
	if err != nil {
		return err
	}
	l.Set(snap)
	return nil
}

// Set keeps snap if its revision is higher than the one held.
func (l *LatestSnapshot) Set(snap *events.Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.snap == nil || snap.Revision > l.snap.Revision {
		l.snap = snap
	}
}

// Latest returns the snapshot held (shared: callers must not modify it), or nil.
func (l *LatestSnapshot) Latest(context.Context) (*events.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snap, nil
}

// BlobSnapshot is a SnapshotSource reading the latest snapshot the agent stored in the
// claim-check store (events.ReadLatestSnapshot): each call reads it afresh, so the function
// keeps nothing between invocations.
type BlobSnapshot struct {
	Cluster string
	Blobs   events.BlobStore
}

// Latest returns the stored snapshot, or nil when the agent stored none yet. A stored snapshot
// that does not decode is an error (the notice waits, and the agent's next write replaces it).
func (b BlobSnapshot) Latest(ctx context.Context) (*events.Snapshot, error) {
	return events.ReadLatestSnapshot(ctx, b.Blobs, b.Cluster)
}
