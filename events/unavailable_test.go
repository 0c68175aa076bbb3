package events

import (
	"strings"
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
		if got := UnavailableAt([]UnavailableOfferingMark{m}, t0.Add(tc.at))(k.InstanceType, k.Zone, k.CapacityType, ""); got != tc.want {
			t.Errorf("at t0+%v: unavailable %v, want %v", tc.at, got, tc.want)
		}
	}
	if UnavailableAt([]UnavailableOfferingMark{m}, t0)("m5.large", "us-east-1b", "spot", "") {
		t.Error("another zone is marked")
	}
	// A second, later mark of the same offering extends it; an earlier one never shortens it.
	later := MarkUnavailable(k, "again", t0.Add(2*time.Minute))
	if !UnavailableAt([]UnavailableOfferingMark{later, m}, t0.Add(4*time.Minute))(k.InstanceType, k.Zone, k.CapacityType, "") {
		t.Error("the later mark (until t0+5m) lost to the earlier one")
	}
	if got := k.String(); got != "m5.large/us-east-1a/spot" {
		t.Errorf("key %q", got)
	}
}

// A mark scoped to a placement group holds only for launches of that scope; an unscoped mark
// holds for every scope. A scope outside [a-z0-9-] is refused by validation, naming the field.
func TestScopedUnavailableMarks(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	scoped := MarkUnavailable(OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", Scope: "pg-0abc"}, "InsufficientInstanceCapacity", t0)
	plain := MarkUnavailable(OfferingKey{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "on-demand"}, "InsufficientInstanceCapacity", t0)
	u := UnavailableAt([]UnavailableOfferingMark{scoped, plain}, t0)
	for _, tc := range []struct {
		it, scope string
		want      bool
	}{{"m5.large", "pg-0abc", true}, {"m5.large", "", false}, {"m5.large", "pg-0def", false}, {"c5.large", "", true}, {"c5.large", "pg-0abc", true}} {
		if got := u(tc.it, "us-east-1a", "on-demand", tc.scope); got != tc.want {
			t.Errorf("%s in scope %q: unavailable %v, want %v", tc.it, tc.scope, got, tc.want)
		}
	}
	if got := scoped.OfferingKey.String(); got != "m5.large/us-east-1a/on-demand@pg-0abc" {
		t.Errorf("key %q", got)
	}
	var errs fieldErrs
	bad := scoped
	bad.Scope = "PG_1"
	bad.validate("unavailable[0]", &errs)
	if err := errs.err(); err == nil || !strings.Contains(err.Error(), "unavailable[0].scope") {
		t.Errorf("scope PG_1: %v, want an error naming unavailable[0].scope", err)
	}
}
