package interruption

import (
	"context"
	"fmt"
	"sync"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// SnapshotSource gives the interruption function the cluster's latest snapshot. Cloud notices
// carry no cluster state, and a function keeps none, so the snapshot comes from where the agent
// already puts it:
//
//   - The agent publishes a TypeSnapshot event on a timer (agent.DefaultSnapshotInterval, 30 s)
//     and one with every pending-pods batch. A source keeps the newest one it has seen:
//     LatestSnapshot below (one consumer of the events subject per function instance; in local
//     dev and on a long-running NATS worker), or, on Lambda, the claim-checked snapshot blob the
//     agent writes (issue 4's S3 claim check: the newest object of the cluster's prefix).
//   - When the source has nothing recent enough (no snapshot, or one that predates the notice
//     and does not show the instance yet), the handler returns ErrAwaitingSnapshot: the notice
//     stays pending in the queue and is redelivered with backoff until the next timer snapshot
//     arrives (at most one interval, 30 s, well inside a spot notice's 2 minutes).
//
// Asking the agent for a fresh snapshot through a command would be faster but needs a new
// command kind in the agent; waiting for the timer keeps the agent unchanged and loses nothing.
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
	snap, err := emit.SnapshotOf(ctx, l.Codec, l.Cluster, env)
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
