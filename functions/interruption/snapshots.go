package interruption

import (
	"context"
	"errors"
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
//
// It decodes lazily: an event whose envelope names its snapshot's revision is kept as it came,
// and decoded only when Latest asks for it, so of the snapshots the worker follows (one or more
// a second at scale) it decodes the few a notice needs. Decoding each cost the local dev
// process a fifth of its CPU at 10,000 pods in make scale (docs/scale.md, "Eighth pass").
type LatestSnapshot struct {
	Cluster string
	Codec   events.Codec
	// Metrics receives the decode time of each snapshot it reads (nil: none).
	Metrics telemetry.Recorder

	mu   sync.Mutex
	snap *events.Snapshot
	// next is a followed event newer than snap, not decoded yet (nil: none).
	next *events.Envelope
}

// Observe reads a TypeSnapshot or TypePodsPending event and keeps it if it is newer. Other event
// types are acknowledged and ignored (the subject also carries other events); an envelope that
// does not decode wraps queue.ErrPoison. An event without its revision in the envelope is decoded
// at once (its revision is in its payload), and a malformed payload then wraps queue.ErrPoison;
// one with it is decoded by Latest.
func (l *LatestSnapshot) Observe(ctx context.Context, msg queue.Message) error {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return fmt.Errorf("%w: %w", queue.ErrPoison, err)
	}
	if env.Type != events.TypeSnapshot && env.Type != events.TypePodsPending {
		return nil
	}
	if env.Revision > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if env.Revision > l.revision() {
			l.next = &env
		}
		return nil
	}
	snap, err := emit.SnapshotOf(ctx, l.Codec, l.Cluster, env, l.Metrics, Component)
	if err != nil {
		return err
	}
	l.Set(snap)
	return nil
}

// revision is the newest revision held, decoded or not; l.mu is held.
func (l *LatestSnapshot) revision() int64 {
	rev := int64(-1)
	if l.snap != nil {
		rev = l.snap.Revision
	}
	if l.next != nil {
		rev = max(rev, l.next.Revision)
	}
	return rev
}

// Set keeps snap if its revision is higher than the one held.
func (l *LatestSnapshot) Set(snap *events.Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set(snap)
}

func (l *LatestSnapshot) set(snap *events.Snapshot) {
	if l.snap == nil || snap.Revision > l.snap.Revision {
		l.snap = snap
	}
	if l.next != nil && l.next.Revision <= l.snap.Revision {
		l.next = nil
	}
}

// Latest returns the snapshot held (shared: callers must not modify it), or nil, decoding the
// newest followed event first if it is not yet. An event that does not decode (or is another
// cluster's) is an error, and dropped: the next call returns the newest snapshot that did decode,
// and the agent's next snapshot replaces it.
func (l *LatestSnapshot) Latest(ctx context.Context) (*events.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if next := l.next; next != nil {
		l.next = nil
		snap, err := emit.SnapshotOf(ctx, l.Codec, l.Cluster, *next, l.Metrics, Component)
		if err != nil {
			if !errors.Is(err, queue.ErrPoison) {
				l.next = next // the blob store failed: try it again on the next call
			}
			return nil, err
		}
		l.set(snap)
	}
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
