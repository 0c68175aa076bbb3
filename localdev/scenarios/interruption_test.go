package scenarios

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// The interruption scenario end to end: the replacement must register before the drain and the
// drain before the reclaim, and no pod may be lost. Expected times by hand: notice at 12:00:40
// (after the first 40 s boot), replacement launched at once and registered 40 s later; the drain
// waits for it (the deadline rule would force it at 12:02:40 − 15 s − 30 s = 12:01:55).
func TestInterruptionScenario(t *testing.T) {
	var out bytes.Buffer
	res, err := Interruption(context.Background(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := Start.Add(40 * time.Second); !res.NoticeTime.Equal(want) {
		t.Fatalf("notice at %v, want %v", res.NoticeTime, want)
	}
	if want := res.NoticeTime.Add(2 * time.Minute); !res.ReclaimTime.Equal(want) {
		t.Fatalf("reclaim at %v, want notice + 2 min", res.ReclaimTime)
	}
	if !res.MarkedOffering {
		t.Fatal("the interrupted offering must be marked unavailable")
	}
	if !res.ReplacementUsed {
		t.Fatalf("the replacement %q must avoid the interrupted offering %q", res.Replacement, res.Offering)
	}
	if want := res.NoticeTime.Add(40 * time.Second); !res.ReplacementUp.Equal(want) {
		t.Fatalf("replacement launched at the notice must register one boot delay (40 s) later, %v; got %v", want, res.ReplacementUp)
	}
	if res.DrainTime.Before(res.ReplacementUp) {
		t.Fatalf("drain at %v must come after the replacement registered at %v", res.DrainTime, res.ReplacementUp)
	}
	if !res.DrainTime.Before(res.ReclaimTime) {
		t.Fatalf("drain at %v must come before the reclaim at %v", res.DrainTime, res.ReclaimTime)
	}
	if res.Lost != 0 || res.Evicted == 0 || res.Bound != res.Total {
		t.Fatalf("want no pod lost and all bound: evicted %d, lost %d, bound %d/%d", res.Evicted, res.Lost, res.Bound, res.Total)
	}
}
