package scenarios

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The AKS preemption scenario end to end, through the Azure provider: the notice is a Scheduled
// Events Preempt with NotBefore 30 s after it; the replacement must register before NotBefore, no
// pod may be lost, and the preempted offering must be marked unavailable. Expected times by hand:
// notice at 12:00:20 (after the first 20 s boot), NotBefore 12:00:50, replacement launched at the
// notice and registered 20 s later (12:00:40).
func TestAzurePreemptionScenario(t *testing.T) {
	var out bytes.Buffer
	res, err := AzurePreemption(context.Background(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := Start.Add(20 * time.Second); !res.NoticeTime.Equal(want) || !res.ReclaimTime.Equal(want.Add(30*time.Second)) {
		t.Fatalf("notice %v, NotBefore %v; want %v and 30 s later", res.NoticeTime, res.ReclaimTime, want)
	}
	if !strings.HasPrefix(res.Offering, "Standard_D") || !strings.HasSuffix(res.Offering, "/spot") || !res.MarkedOffering || !res.ReplacementUsed {
		t.Fatalf("offering %s (marked %v), replacement %s", res.Offering, res.MarkedOffering, res.Replacement)
	}
	if want := res.NoticeTime.Add(20 * time.Second); !res.ReplacementUp.Equal(want) || !res.ReplacementUp.Before(res.ReclaimTime) {
		t.Fatalf("replacement up at %v, want %v, before NotBefore %v", res.ReplacementUp, want, res.ReclaimTime)
	}
	if res.DrainTime.IsZero() || !res.DrainTime.Before(res.ReclaimTime) {
		t.Fatalf("drain at %v, want before NotBefore %v", res.DrainTime, res.ReclaimTime)
	}
	if res.Lost != 0 || res.Evicted == 0 || res.Bound != res.Total {
		t.Fatalf("evicted %d, lost %d, bound %d/%d; want none lost, all bound", res.Evicted, res.Lost, res.Bound, res.Total)
	}
}

// TestAzureEventGridPreemption: the same eviction reported by Event Grid (HealthResources
// ResourceAnnotated VirtualMachinePreempted, deadline now): the offering is marked, the
// replacement launched at the notice, the node drained at once; no pod is lost (all are evicted
// before the VM goes at NotBefore).
func TestAzureEventGridPreemption(t *testing.T) {
	var out bytes.Buffer
	res, err := AzureEventGridPreemption(context.Background(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.MarkedOffering || !res.ReplacementUsed || !res.DrainTime.Equal(res.NoticeTime) {
		t.Fatalf("marked %v, replacement %s, drain %v (notice %v), deliveries %d", res.MarkedOffering, res.Replacement, res.DrainTime, res.NoticeTime, res.Deliveries)
	}
	if res.Lost != 0 || res.Bound != res.Total {
		t.Fatalf("lost %d, bound %d/%d", res.Lost, res.Bound, res.Total)
	}
}
