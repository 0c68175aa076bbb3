package emit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

func TestPoisonIfMalformed(t *testing.T) {
	malformed := fmt.Errorf("snapshot: %w", events.ErrMalformed)
	if err := PoisonIfMalformed(malformed); !errors.Is(err, queue.ErrPoison) || !errors.Is(err, events.ErrMalformed) {
		t.Fatalf("a malformed payload must be poison and keep its cause: %v", err)
	}
	version := fmt.Errorf("v9: %w", events.ErrUnsupportedVersion)
	if err := PoisonIfMalformed(version); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("an unsupported version must be poison: %v", err)
	}
	transient := errors.New("blob store timeout")
	if err := PoisonIfMalformed(transient); errors.Is(err, queue.ErrPoison) {
		t.Fatal("a transient failure must be redelivered, not dead-lettered")
	}
}

func TestSnapshotOf(t *testing.T) {
	ctx := context.Background()
	data, err := events.NewEvent("prod", "agent", events.TypeSnapshot, "snap-1", &events.Snapshot{Cluster: "prod", Revision: 3, Time: metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	rec := prom.NewRecorder()
	snap, err := SnapshotOf(ctx, events.Codec{}, "prod", env, rec, "provision")
	if err != nil || snap.Revision != 3 {
		t.Fatalf("got %+v, %v; want revision 3", snap, err)
	}
	if _, err := SnapshotOf(ctx, events.Codec{}, "other", env, nil, "provision"); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("another cluster's snapshot must be poison, got %v", err)
	}
	cmd, err := events.NewEvent("prod", "provision", events.TypeCommand, "cmd-1", &events.Command{ID: "cmd-1",
		Kind: events.CommandDeleteNode, Cluster: "prod", NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	cenv, err := events.Decode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SnapshotOf(ctx, events.Codec{}, "prod", cenv, rec, "provision"); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("a command carries no snapshot: want poison, got %v", err)
	}
	// A corrupt payload is decoded (and refused): its decode is recorded too.
	bad := env
	bad.Data = []byte("not zstd")
	if _, err := SnapshotOf(ctx, events.Codec{}, "prod", bad, rec, "drift"); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("a corrupt payload must be poison, got %v", err)
	}

	// The two decodes, one series each (function, kind); the command, never decoded, none.
	// Values are wall time: only their count and that they are not negative are asserted.
	if n := testutil.CollectAndCount(rec.Registry(), telemetry.SnapshotDecode.Name); n != 2 {
		t.Fatalf("%s has %d series, want 2 (provision and drift, kind snapshot)", telemetry.SnapshotDecode.Name, n)
	}
	fams, err := rec.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != telemetry.SnapshotDecode.Name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if m.GetHistogram().GetSampleSum() < 0 {
				t.Errorf("%v: sum %g s, want >= 0", labels, m.GetHistogram().GetSampleSum())
			}
			got[labels["function"]+" "+labels["kind"]] = m.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{"provision " + events.TypeSnapshot: 1, "drift " + events.TypeSnapshot: 1}
	if !maps.Equal(got, want) {
		t.Fatalf("%s observations by function and kind: %v, want %v", telemetry.SnapshotDecode.Name, got, want)
	}
}

func TestDated(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	snap := &events.Snapshot{Cluster: "prod", Revision: 3, Time: metav1.NewTime(now.Add(90 * time.Second))}
	d, err := Dated(snap, now)
	if err != nil || !d.Time.Time.Equal(now) || !snap.Time.Time.Equal(now.Add(90*time.Second)) || d.Revision != 3 {
		t.Fatalf("within the bound: %+v, %v; want a copy dated by the function's clock, the original untouched", d, err)
	}
	snap.Time = metav1.NewTime(now.Add(events.MaxClockSkew + time.Second))
	if _, err := Dated(snap, now); !errors.Is(err, queue.ErrPoison) || !errors.Is(err, events.ErrClockSkew) {
		t.Fatalf("dated ahead beyond the bound: %v, want poison (a wrong clock)", err)
	}
	snap.Time = metav1.NewTime(now.Add(-events.MaxClockSkew - time.Second))
	if _, err := Dated(snap, now); !errors.Is(err, ErrStaleSnapshot) || errors.Is(err, queue.ErrPoison) {
		t.Fatalf("older than the bound: %v, want stale (skipped), not poison", err)
	}
}

// A message decides on the cluster's latest stored snapshot when the agent stored a newer one:
// a late, duplicated or replayed message never decides on what the cluster was.
func TestFreshest(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	msg := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: "prod", Revision: 5, Time: metav1.NewTime(at)}
	if got, err := Freshest(ctx, nil, msg, 1); err != nil || got != msg {
		t.Fatalf("no store: %v, %v; want the message's snapshot", got, err)
	}
	store := &events.MemoryBlobStore{}
	if got, err := Freshest(ctx, store, msg, 1); err != nil || got != msg {
		t.Fatalf("nothing stored: %v, %v; want the message's snapshot", got, err)
	}
	put := func(rev int64) {
		s := *msg
		s.Revision = rev
		enc, err := events.EncodeSnapshot(&s)
		if err != nil {
			t.Fatal(err)
		}
		if err := events.PutLatestSnapshot(ctx, store, "prod", enc); err != nil {
			t.Fatal(err)
		}
	}
	put(4)
	if got, err := Freshest(ctx, store, msg, 1); err != nil || got != msg {
		t.Fatalf("an older one stored: %v, %v; want the message's snapshot", got, err)
	}
	put(7)
	if got, err := Freshest(ctx, store, msg, 1); err != nil || got.Revision != 7 {
		t.Fatalf("a newer one stored: %v, %v; want revision 7", got, err)
	}
	if got, err := Freshest(ctx, store, msg, 2); err != nil || got != msg {
		t.Fatalf("a redelivery: %v, %v; want the message's snapshot (it completes its own decision)", got, err)
	}
}

// Open: a first delivery whose event names an older revision than the stored latest decides on
// the latest without reading its own payload (here corrupt, so a read would be poison); one that
// is the latest, a redelivery, or an event without the revision reads its payload as SnapshotOf
// does, and only those reads are recorded.
func TestOpenDecodesOnlyTheLatest(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	event := func(rev int64, withRevision bool) events.Envelope {
		t.Helper()
		var opts []events.Option
		if withRevision {
			opts = append(opts, events.WithRevision(rev))
		}
		data, err := events.NewEvent("prod", "agent", events.TypeSnapshot, fmt.Sprintf("snap-%d", rev),
			&events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: "prod", Revision: rev, Time: metav1.NewTime(at)}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		env, err := events.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	store := &events.MemoryBlobStore{}
	codec := events.Codec{Blobs: store}
	rec := prom.NewRecorder()
	decodes := func() int {
		t.Helper()
		fams, err := rec.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range fams {
			if f.GetName() == telemetry.SnapshotDecode.Name {
				for _, m := range f.GetMetric() {
					n += int(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return n
	}

	if got, err := Open(ctx, codec, "prod", event(5, true), 1, rec, "lifecycle"); err != nil || got.Revision != 5 {
		t.Fatalf("nothing stored: %v, %v; want the message's revision 5", got, err)
	}
	latest := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: "prod", Revision: 7, Time: metav1.NewTime(at)}
	enc, err := events.EncodeSnapshot(latest)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.PutLatestSnapshot(ctx, store, "prod", enc); err != nil {
		t.Fatal(err)
	}
	behind := event(5, true)
	behind.Data = []byte("not zstd")
	if got, err := Open(ctx, codec, "prod", behind, 1, rec, "lifecycle"); err != nil || got.Revision != 7 {
		t.Fatalf("behind the latest: %v, %v; want revision 7, the message's payload unread", got, err)
	}
	if _, err := Open(ctx, codec, "prod", behind, 2, rec, "lifecycle"); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("a redelivery reads its own payload (here corrupt): %v, want poison", err)
	}
	if got, err := Open(ctx, codec, "prod", event(7, true), 1, rec, "lifecycle"); err != nil || got.Revision != 7 {
		t.Fatalf("the latest itself: %v, %v; want revision 7", got, err)
	}
	if got, err := Open(ctx, codec, "prod", event(5, false), 1, rec, "lifecycle"); err != nil || got.Revision != 7 {
		t.Fatalf("no revision on the event: %v, %v; want its payload read, then the newer latest (revision 7)", got, err)
	}
	if got, err := Open(ctx, codec, "", event(5, true), 1, rec, "lifecycle"); err != nil || got.Revision != 7 {
		t.Fatalf("no cluster: %v, %v; want its payload read, then the newer latest of its own cluster (revision 7)", got, err)
	}
	// Read: nothing stored (5), the corrupt redelivery, the latest's own event (7), the event
	// without revision, the one without cluster; not the corrupt first delivery.
	if n := decodes(); n != 5 {
		t.Fatalf("%d payload decodes recorded, want 5", n)
	}
}

// Decided: an event holding an older snapshot than one decided on is superseded on its first
// delivery; the same revision is not (an unchanged cluster's tick), nor a redelivery, nor an
// event without the revision; Record keeps the newest revision whatever the order.
func TestDecidedSupersedes(t *testing.T) {
	var d Decided
	env := func(rev int64) events.Envelope { return events.Envelope{Revision: rev} }
	if d.Superseded(env(3), 1) {
		t.Fatal("nothing decided yet: superseded")
	}
	d.Record(7)
	d.Record(5) // a slower decision finishing later does not lower it
	for _, c := range []struct {
		rev     int64
		attempt int
		want    bool
	}{{6, 1, true}, {7, 1, false}, {8, 1, false}, {6, 2, false}, {0, 1, false}} {
		if got := d.Superseded(env(c.rev), c.attempt); got != c.want {
			t.Errorf("revision %d attempt %d after deciding 7: superseded %v, want %v", c.rev, c.attempt, got, c.want)
		}
	}
}

// TestLimitHits checks the metric's labels come from the solver's typed result: each
// (NodePool, limit) once, sorted, the price guardrail's resource spelled "price"; a refusal
// that names no limit counts nothing.
func TestLimitHits(t *testing.T) {
	gpu := provisioning.LimitHit{NodePool: "gpu", Resource: "nvidia.com/gpu"}
	plan := &provisioning.Plan{Unschedulable: []provisioning.Unschedulable{
		{Reason: "limits", LimitsExceeded: []provisioning.LimitHit{gpu}},
		{Reason: "limits", LimitsExceeded: []provisioning.LimitHit{gpu}},
		{Reason: "limits", LimitsExceeded: []provisioning.LimitHit{{NodePool: "web", Resource: provisioning.ResourcePricePerHour}, {NodePool: "web", Resource: "memory"}}},
		{Reason: `nodepool "x": no compatible instance type`},
	}}
	got := fmt.Sprint(LimitHits(plan))
	if want := "[[gpu nvidia.com/gpu] [web memory] [web price]]"; got != want {
		t.Errorf("LimitHits = %s, want %s", got, want)
	}
}
