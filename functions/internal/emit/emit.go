// Package emit publishes the commands a function decided, as CloudEvents on the cluster's
// commands subject, and classifies bad input as poison. Every function uses it, so commands look
// the same whichever function sent them.
package emit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Emitter publishes commands for one function of one cluster.
type Emitter struct {
	Cluster   string
	Component string // the function's name, in the event source
	Codec     events.Codec
	Publisher queue.Publisher
}

// Command encodes c (event time at, the decision's clock) and publishes it with its ID as the
// queue's deduplication id. Errors name the command and wrap the cause.
func (e Emitter) Command(ctx context.Context, at time.Time, c events.Command) error {
	data, err := e.Codec.NewEvent(ctx, e.Cluster, e.Component, events.TypeCommand, c.ID, &c, events.WithTime(at))
	if err != nil {
		return fmt.Errorf("encoding command %s: %w", c.ID, err)
	}
	if err := e.Publisher.Publish(ctx, queue.CommandsSubject(e.Cluster), c.ID, data); err != nil {
		return fmt.Errorf("publishing command %s: %w", c.ID, err)
	}
	return nil
}

// Poison marks err as a message that can never succeed (dead-lettered with its reason).
func Poison(err error) error { return fmt.Errorf("%w: %w", queue.ErrPoison, err) }

// PoisonIfMalformed marks malformed or unsupported-version payloads as poison and passes other
// errors (a blob store that failed, say) through for redelivery.
func PoisonIfMalformed(err error) error {
	if errors.Is(err, events.ErrMalformed) || errors.Is(err, events.ErrUnsupportedVersion) {
		return Poison(err)
	}
	return err
}

// SnapshotOf opens the snapshot an event carries (a TypeSnapshot event, or the snapshot of a
// TypePodsPending batch) and checks it belongs to cluster (skipped when cluster is ""). Malformed
// payloads, other event types and other clusters' snapshots are poison; a failing blob store is
// not (redelivered).
func SnapshotOf(ctx context.Context, codec events.Codec, cluster string, env events.Envelope) (*events.Snapshot, error) {
	var snap *events.Snapshot
	var err error
	switch env.Type {
	case events.TypeSnapshot:
		snap, err = codec.Snapshot(ctx, env)
	case events.TypePodsPending:
		var pp *events.PodsPending
		if pp, err = codec.PodsPending(ctx, env); err == nil {
			snap = pp.Snapshot
		}
	default:
		return nil, fmt.Errorf("%w: type: %q carries no snapshot", queue.ErrPoison, env.Type)
	}
	if err != nil {
		return nil, PoisonIfMalformed(err)
	}
	if cluster != "" && snap.Cluster != cluster {
		return nil, fmt.Errorf("%w: snapshot.cluster: %q is not this function's cluster %q", queue.ErrPoison, snap.Cluster, cluster)
	}
	return snap, nil
}
