package v1

import (
	"strings"
	"testing"
	"time"
)

func TestParseReservationCounts(t *testing.T) {
	got, err := ParseReservationCounts(" cr-0a=3, cr-0b=1/4 ,")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["cr-0a"] != (ReservationCount{Available: 3}) || got["cr-0b"] != (ReservationCount{Available: 1, Total: 4}) {
		t.Fatalf("got %+v", got)
	}
	if s := FormatReservationCounts(got); s != "cr-0a=3,cr-0b=1/4" {
		t.Fatalf("format: %q", s)
	}
	for in, want := range map[string]string{
		"cr-0a":     "want cr-<id>",
		"x-1=2":     "want cr-<id>",
		"cr-0a=-1":  "whole number >= 0",
		"cr-0a=3/2": "total instances",
		"cr-0a=a":   "whole number >= 0",
	} {
		if _, err := ParseReservationCounts(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

// Karpenter's rule: a capacity block is expiring from 40 minutes before its end; a default
// reservation never is.
func TestReservationState(t *testing.T) {
	end := time.Date(2026, 3, 2, 16, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		typ  string
		now  time.Time
		want string
	}{
		{CapacityReservationTypeCapacityBlock, end.Add(-41 * time.Minute), CapacityReservationStateActive},
		{CapacityReservationTypeCapacityBlock, end.Add(-40 * time.Minute), CapacityReservationStateExpiring},
		{CapacityReservationTypeCapacityBlock, end.Add(time.Minute), CapacityReservationStateExpiring},
		{CapacityReservationTypeDefault, end, CapacityReservationStateActive},
	} {
		if got := ReservationState(c.typ, &end, c.now); got != c.want {
			t.Errorf("%s at end-%v: %s, want %s", c.typ, end.Sub(c.now), got, c.want)
		}
	}
	if got := ReservationState(CapacityReservationTypeCapacityBlock, nil, end); got != CapacityReservationStateActive {
		t.Errorf("no end time: %s", got)
	}
}
