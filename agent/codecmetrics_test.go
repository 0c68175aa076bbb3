package agent

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// The snapshot the timer publishes is encoded once (no blob store: nothing else encodes it), and
// that one encoding is what the agent's Prometheus registry holds: its size, the event's payload
// to the byte, in the histogram's buckets as Prometheus counts them (each bucket counts the
// observations <= its upper bound, le), and one encode duration.
func TestSnapshotCodecMetrics(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, clk, 0, 0, 0, testNode("n1"), testPod("running", "n1"))
	e.waitSynced(t)
	eventually(t, "snapshot ticker armed", clk.HasWaiters)
	clk.Step(DefaultSnapshotInterval)
	env := e.nextEvent(t)
	if env.Type != events.TypeSnapshot {
		t.Fatalf("event type %s, want %s", env.Type, events.TypeSnapshot)
	}
	payload, err := events.Codec{}.Payload(e.ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	size := float64(len(payload))

	reg := e.prom.Registry()
	want := &strings.Builder{}
	m := telemetry.SnapshotSize
	fmt.Fprintf(want, "# HELP %s %s\n# TYPE %s histogram\n", m.Name, m.Help, m.Name)
	for _, le := range telemetry.SizeBuckets() {
		n := 0
		if size <= le {
			n = 1
		}
		fmt.Fprintf(want, "%s_bucket{kind=%q,le=%q} %d\n", m.Name, events.TypeSnapshot, strconv.FormatFloat(le, 'f', -1, 64), n)
	}
	fmt.Fprintf(want, "%s_bucket{kind=%q,le=\"+Inf\"} 1\n", m.Name, events.TypeSnapshot)
	fmt.Fprintf(want, "%s_sum{kind=%q} %d\n%s_count{kind=%q} 1\n", m.Name, events.TypeSnapshot, len(payload), m.Name, events.TypeSnapshot)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()), m.Name); err != nil {
		t.Errorf("%s after one snapshot of %d bytes: %v", m.Name, len(payload), err)
	}

	// One series (kind snapshot) with one observation; its value is wall time, so only that it
	// was measured (above zero) is asserted.
	if n := testutil.CollectAndCount(reg, telemetry.SnapshotEncode.Name); n != 1 {
		t.Fatalf("%s has %d series, want 1", telemetry.SnapshotEncode.Name, n)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != telemetry.SnapshotEncode.Name {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 1 || h.GetSampleSum() <= 0 || f.GetMetric()[0].GetLabel()[0].GetValue() != events.TypeSnapshot {
			t.Fatalf("%s: %d observations summing %g s, labels %v; want one above 0 for kind %s", f.GetName(), h.GetSampleCount(), h.GetSampleSum(),
				f.GetMetric()[0].GetLabel(), events.TypeSnapshot)
		}
	}
}
