package kube

import (
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/events"
)

// A placement group's scoped mark is its own ConfigMap entry beside the offering's unscoped one.
func TestOfferingMarkKeyScope(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	k := events.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}
	plain, err := OfferingMarkKey(events.MarkUnavailable(k, "InsufficientInstanceCapacity", at))
	if err != nil || plain != "on-demand_us-east-1a_m5.large" {
		t.Errorf("unscoped key %q, %v", plain, err)
	}
	k.Scope = "pg-0abc"
	scoped, err := OfferingMarkKey(events.MarkUnavailable(k, "InsufficientInstanceCapacity", at))
	if err != nil || scoped != "on-demand_us-east-1a_m5.large_pg-0abc" {
		t.Errorf("scoped key %q, %v", scoped, err)
	}
	k.Scope = "pg_0abc"
	if _, err := OfferingMarkKey(events.MarkUnavailable(k, "x", at)); err == nil {
		t.Error("a scope with '_' was accepted")
	}
}
