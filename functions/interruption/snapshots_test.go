package interruption_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

// LatestSnapshot keeps the newest followed event and decodes it only when Latest asks: older
// events never move it back, a skipped event is never decoded, and a newest event that does not
// decode is an error once, then the newest snapshot that did decode is returned again.
func TestLatestSnapshotDecodesOnlyWhatLatestAsksFor(t *testing.T) {
	ctx := context.Background()
	const cluster = "prod"
	at := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	event := func(rev int64, payload any) queue.Message {
		t.Helper()
		data, err := events.NewEvent(cluster, "agent", events.TypeSnapshot, "snap", payload, events.WithRevision(rev))
		if err != nil {
			t.Fatal(err)
		}
		return queue.Message{Data: data, Attempt: 1}
	}
	snap := func(rev int64) queue.Message {
		return event(rev, &events.Snapshot{Cluster: cluster, Revision: rev, Time: metav1.NewTime(at)})
	}
	rec := prom.NewRecorder()
	decodes := func() uint64 {
		t.Helper()
		fams, err := rec.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, f := range fams {
			if f.GetName() == telemetry.SnapshotDecode.Name {
				for _, m := range f.GetMetric() {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
		return n
	}
	l := &interruption.LatestSnapshot{Cluster: cluster, Metrics: rec}
	latest := func(want int64) {
		t.Helper()
		got, err := l.Latest(ctx)
		if err != nil || got == nil || got.Revision != want {
			t.Fatalf("Latest = %v, %v; want revision %d", got, err, want)
		}
	}

	for _, m := range []queue.Message{snap(5), snap(3)} {
		if err := l.Observe(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if n := decodes(); n != 0 {
		t.Fatalf("%d decodes before Latest, want 0", n)
	}
	latest(5)
	latest(5)
	if n := decodes(); n != 1 {
		t.Fatalf("%d decodes after Latest twice, want 1", n)
	}

	// Revisions 7 and 8 followed: only 8 is decoded.
	for _, m := range []queue.Message{snap(7), snap(8), snap(6)} {
		if err := l.Observe(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	latest(8)
	if n := decodes(); n != 2 {
		t.Fatalf("%d decodes after 7 and 8 were followed, want 2 (8 alone)", n)
	}

	// A newer payload that is not a snapshot: an error once, then revision 8 again.
	if err := l.Observe(ctx, event(9, []byte("not zstd"))); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Latest(ctx); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("Latest after a corrupt newest event: err = %v, want poison", err)
	}
	latest(8)
}
