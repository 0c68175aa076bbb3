package events

import (
	"testing"
	"time"
)

func TestUnavailableAtHonoursTheThreeMinuteMark(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k := OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}
	m := MarkUnavailable(k, "InsufficientInstanceCapacity", t0)
	if want := t0.Add(3 * time.Minute); !m.Expires.Time.Equal(want) {
		t.Fatalf("expires %v, want %v (Karpenter's 3-minute UnavailableOfferingsTTL)", m.Expires.Time, want)
	}
	if UnavailableAt(nil, t0) != nil {
		t.Error("no marks: want a nil lookup (every offering available)")
	}
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {3*time.Minute - time.Second, true}, {3 * time.Minute, false}, {4 * time.Minute, false}} {
		if got := UnavailableAt([]UnavailableOfferingMark{m}, t0.Add(tc.at))(k.InstanceType, k.Zone, k.CapacityType); got != tc.want {
			t.Errorf("at t0+%v: unavailable %v, want %v", tc.at, got, tc.want)
		}
	}
	if UnavailableAt([]UnavailableOfferingMark{m}, t0)("m5.large", "us-east-1b", "spot") {
		t.Error("another zone is marked")
	}
	// A second, later mark of the same offering extends it; an earlier one never shortens it.
	later := MarkUnavailable(k, "again", t0.Add(2*time.Minute))
	if !UnavailableAt([]UnavailableOfferingMark{later, m}, t0.Add(4*time.Minute))(k.InstanceType, k.Zone, k.CapacityType) {
		t.Error("the later mark (until t0+5m) lost to the earlier one")
	}
	if got := k.String(); got != "m5.large/us-east-1a/spot" {
		t.Errorf("key %q", got)
	}
}
