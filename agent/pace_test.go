package agent

import (
	"testing"
	"time"
)

// A change snapshot holds the next back by four times its cost: at 1 s (10,000 pods in make
// scale) the next may start 4 s after it began; at 3 ms (a small cluster) the 1 s ticker, not
// the holdoff, sets the pace. Changes in the holdoff wait for its end, not for the next change.
func TestChangePacerHoldsBackByCost(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		cost, want time.Duration
	}{{time.Second, 4 * time.Second}, {3 * time.Millisecond, 12 * time.Millisecond}, {0, 0}, {-time.Second, 0}} {
		if got := ChangeSnapshotHoldoff(c.cost); got != c.want {
			t.Errorf("holdoff after a snapshot costing %v: %v, want %v", c.cost, got, c.want)
		}
	}
	var p changePacer
	if !p.ready(t0) {
		t.Fatal("no snapshot yet: held back")
	}
	p.published(t0, time.Second)
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{time.Second, false}, {3 * time.Second, false}, {4 * time.Second, true}, {5 * time.Second, true}} {
		if got := p.ready(t0.Add(c.at)); got != c.want {
			t.Errorf("%v after a 1 s snapshot: ready %v, want %v", c.at, got, c.want)
		}
	}
	p.published(t0.Add(5*time.Second), 3*time.Millisecond)
	if !p.ready(t0.Add(6 * time.Second)) {
		t.Error("a 3 ms snapshot held the next back past the next 1 s tick")
	}
}
