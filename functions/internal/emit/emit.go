// Package emit publishes the commands a function decided, as CloudEvents on the cluster's
// commands subject, and classifies bad input as poison. Every function uses it, so commands look
// the same whichever function sent them.
package emit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
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

// Accept is the one rule every function applies to an event's type: a type in handled is
// accepted (nil); any other is poison naming the type, the function and what it handles, so the
// record is dead-lettered with its reason rather than acknowledged and lost. events.Decode has
// already refused types Dovetail does not define, so what reaches here is a Dovetail type sent
// to the wrong function (a command on the events subject, say).
func Accept(component, typ string, handled ...string) error {
	for _, h := range handled {
		if typ == h {
			return nil
		}
	}
	return fmt.Errorf("%w: type: %q is not handled by the %s function (it handles %s)", queue.ErrPoison, typ, component, strings.Join(handled, ", "))
}

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
// not (redelivered). Each decode, successful or not, is recorded in rec (nil: none) as
// telemetry.SnapshotDecode under function's name: the decoder's wall time in seconds, the blob
// store's fetch of a claim-checked payload excluded; a snapshot another handler of the process
// decoded (events.Snapshots) costs this one its copy only.
func SnapshotOf(ctx context.Context, codec events.Codec, cluster string, env events.Envelope, rec telemetry.Recorder, function string) (*events.Snapshot, error) {
	if env.Type != events.TypeSnapshot && env.Type != events.TypePodsPending {
		return nil, fmt.Errorf("%w: type: %q carries no snapshot", queue.ErrPoison, env.Type)
	}
	data, err := codec.Payload(ctx, env)
	if err != nil {
		return nil, PoisonIfMalformed(err)
	}
	begin := time.Now()
	var snap *events.Snapshot
	if env.Type == events.TypeSnapshot {
		snap, err = events.Snapshots.Decode(data) // once per process, a copy per handler
	} else {
		var pp *events.PodsPending
		if pp, err = events.Snapshots.DecodePodsPending(data); err == nil { // memoized alike
			snap = pp.Snapshot
		}
	}
	telemetry.OrNop(rec).Record(telemetry.SnapshotDecode, time.Since(begin).Seconds(), function, env.Type)
	if err != nil {
		return nil, PoisonIfMalformed(err)
	}
	if cluster != "" && snap.Cluster != cluster {
		return nil, fmt.Errorf("%w: snapshot.cluster: %q is not this function's cluster %q", queue.ErrPoison, snap.Cluster, cluster)
	}
	return snap, nil
}

// ErrStaleSnapshot is returned by Dated for a snapshot older than events.MaxClockSkew: a handler
// acknowledges it without a decision (a newer snapshot follows every 30 s).
var ErrStaleSnapshot = errors.New("stale snapshot")

// Dated is the snapshot a function decides on: a shallow copy dated by the function's own clock
// now, so every time-based rule (consolidateAfter, expiry, registration TTL, termination grace,
// mark expiry) reads the function's clock, never the message's. A snapshot dated more than
// events.MaxClockSkew ahead of now is poison (a wrong clock: dead-lettered with the reason); one
// more than that behind wraps ErrStaleSnapshot. Nothing idempotent derives from the time (command
// IDs and NodeClaim names come from revisions and names), so a redelivery decided later is
// deduplicated all the same.
func Dated(snap *events.Snapshot, now time.Time) (*events.Snapshot, error) {
	if err := snap.CheckClock(now); err != nil {
		if snap.Time.After(now) {
			return nil, Poison(err)
		}
		return nil, fmt.Errorf("%w: %w", ErrStaleSnapshot, err)
	}
	d := *snap
	d.Time = metav1.NewTime(now)
	return &d, nil
}

// Clock returns now() or, when now is nil, the wall clock.
func Clock(now func() time.Time) time.Time {
	if now != nil {
		return now()
	}
	return time.Now()
}

// Freshest returns the snapshot to decide on for a message that carried snap: the cluster's
// latest snapshot in the claim-check store (events.LatestSnapshotKey) when the agent has stored
// a newer revision there, else snap. A message delivered late, twice, or after a newer one
// (redelivered after its worker died) then decides on what the cluster is now, never again on
// what it was: an old pods-pending batch would launch capacity for pods that have it already.
// No store, or none stored yet, keeps snap; a store that fails is an error (redelivered).
// A redelivery (attempt > 1) keeps snap: it completes the decision an earlier attempt began
// (its launches found again by their client tokens, which derive from the snapshot's revision),
// where deciding anew would leave those launches without their NodeClaims.
func Freshest(ctx context.Context, blobs events.BlobStore, snap *events.Snapshot, attempt int) (*events.Snapshot, error) {
	if blobs == nil || attempt > 1 {
		return snap, nil
	}
	if _, ok := blobs.(events.KeyedBlobStore); !ok {
		return snap, nil
	}
	latest, err := events.ReadLatestSnapshotAfter(ctx, blobs, snap.Cluster, snap.Revision)
	if err != nil {
		if errors.Is(err, events.ErrMalformed) {
			return snap, nil // a bad stored snapshot is the agent's to replace; the message's own is valid
		}
		return nil, err
	}
	if latest != nil {
		return latest, nil
	}
	return snap, nil
}

// Open returns the snapshot a handler decides on for env: on a first delivery (attempt 1) of an
// event that names its revision (events.ExtensionRevision), the cluster's latest stored snapshot
// when it is newer, without fetching or decoding env's payload; otherwise env's own snapshot
// (SnapshotOf, its decode recorded in rec) checked against the latest (Freshest). The decision
// is the one SnapshotOf and Freshest give (both end on the latest when it is newer), with one
// decode in place of two for a handler behind its queue: make scale at N = 10,000 with pods
// created at the scalability jobs' rate (docs/scale.md, "Tenth pass") had the lifecycle
// function decide every 16–33 s, each decision decoding its message's snapshot and then the
// latest, and nodes waited up to two minutes for their registration. The latest is also the
// snapshot every lagging handler of the process opens, so the memo (events.Snapshots) decodes it
// once for all of them. A payload left unread is older than what the handler decides on, as an
// event Decided.Superseded is, and is acknowledged as such. The latest's decode is not recorded
// in rec (Freshest's never was: its time includes the blob store's read). Errors are those of
// SnapshotOf and Freshest; with cluster "" the payload is read first (SnapshotOf), and Freshest
// then looks up the latest of the snapshot's own cluster.
func Open(ctx context.Context, codec events.Codec, cluster string, env events.Envelope, attempt int, rec telemetry.Recorder, function string) (*events.Snapshot, error) {
	if env.Type != events.TypeSnapshot && env.Type != events.TypePodsPending {
		return nil, fmt.Errorf("%w: type: %q carries no snapshot", queue.ErrPoison, env.Type)
	}
	_, keyed := codec.Blobs.(events.KeyedBlobStore)
	checked := keyed && cluster != "" && attempt <= 1 && env.Revision > 0
	if checked {
		latest, err := events.ReadLatestSnapshotAfter(ctx, codec.Blobs, cluster, env.Revision)
		switch {
		case err != nil && !errors.Is(err, events.ErrMalformed):
			return nil, err
		case latest != nil:
			return latest, nil
		}
	}
	snap, err := SnapshotOf(ctx, codec, cluster, env, rec, function)
	if err != nil {
		return nil, err
	}
	if checked && snap.Revision == env.Revision {
		return snap, nil // the latest was not newer a moment ago; the next event carries what came since
	}
	return Freshest(ctx, codec.Blobs, snap, attempt)
}

// Decided remembers the newest snapshot revision a handler decided on, so that an event holding
// an older snapshot is acknowledged without fetching or decoding its payload. A handler that
// falls behind its queue (snapshots published faster than it decides, as at 1,000 pending pods
// in make scale, where the lifecycle function registered nodes 100 s and more after they were
// Ready) otherwise decoded each backlogged event and then, through Freshest, the latest snapshot
// again, and decided on the same latest state once per event. A snapshot of the same revision is
// not superseded: the agent republishes an unchanged cluster with a new time, the tick of the
// time-based rules. Safe for the handlers whose decision is a function of the snapshot and their
// clock alone (lifecycle, drift, consolidate); the zero value is ready to use.
type Decided struct{ rev atomic.Int64 }

// Superseded reports whether env holds a snapshot older than one this handler decided on. Only a
// first delivery (attempt 1) is: a redelivery completes the decision an earlier attempt began
// (see Freshest). An event without the revision extension is never superseded.
func (d *Decided) Superseded(env events.Envelope, attempt int) bool {
	return env.Revision > 0 && attempt <= 1 && env.Revision < d.rev.Load()
}

// Record notes a decision made on the snapshot of revision rev.
func (d *Decided) Record(rev int64) {
	for {
		cur := d.rev.Load()
		if rev <= cur || d.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// maxEventsPerCommand bounds one RecordEvents command, so a plan that leaves thousands of pods
// pending sends a few modest messages rather than one large one.
const maxEventsPerCommand = 500

// Events publishes recs as RecordEvents commands of the decision named by idParts (its cluster,
// kind and snapshot revision, so a redelivered decision sends the same IDs), at most
// maxEventsPerCommand each. Nothing is sent for none.
func (e Emitter) Events(ctx context.Context, at time.Time, revision int64, recs []events.EventRecord, idParts ...string) error {
	for i := 0; i < len(recs); i += maxEventsPerCommand {
		chunk := recs[i:min(i+maxEventsPerCommand, len(recs))]
		id := events.CommandID(append(append([]string{e.Cluster, "events"}, idParts...), fmt.Sprint(revision), fmt.Sprint(i))...)
		c := events.Command{ID: id, Kind: events.CommandRecordEvents, Cluster: e.Cluster, SnapshotRevision: revision, Events: chunk}
		if err := e.Command(ctx, at, c); err != nil {
			return err
		}
	}
	return nil
}
