package ledger

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

var t10 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

// records: a consolidation at 10:00 takes the pool from six m5.xlarge (6 × 0.192 = 1.152 $/h) to
// two (0.384 $/h); a drain at 10:10 (no price); a launch at 10:30 adds a third (0.576 $/h).
func records() []telemetry.Audit {
	return []telemetry.Audit{
		{Action: telemetry.ActionDelete, Function: "consolidate", Decision: "c1", Time: t10, NodePools: []telemetry.PoolCost{{
			NodePool: "default", PriceBefore: 1.152, PriceAfter: 0.384, Consolidation: true, StaticBaseline: 0.384,
			AllocatableMilliCPU: 8000, RequestedMilliCPU: 4200, AllocatableMiB: 30000, RequestedMiB: 6144}}},
		{Action: telemetry.ActionDrain, Function: "interruption", Decision: "n1", Time: t10.Add(10 * time.Minute)},
		{Action: telemetry.ActionLaunch, Function: "provision", Decision: "revision-9", Time: t10.Add(30 * time.Minute), NodePools: []telemetry.PoolCost{{
			NodePool: "default", PriceBefore: 0.384, PriceAfter: 0.576, StaticBaseline: 0.768, LowerBound: 0.5,
			AllocatableMilliCPU: 12000, RequestedMilliCPU: 6000, AllocatableMiB: 45000, RequestedMiB: 9216}}},
	}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %.6f, want %.6f", what, got, want)
	}
}

func TestReportHandCalculation(t *testing.T) {
	var l Ledger
	for _, a := range records() {
		if err := l.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	r := l.Report(t10.Add(2 * time.Hour)) // until 12:00
	// Spend: 0.384 $/h for 0.5 h + 0.576 $/h for 1.5 h = 0.192 + 0.864.
	near(t, "spend", r.Total.Spend, 1.056)
	// No consolidation: the six nodes' 1.152 $/h until the launch, then 1.152 + 0.192 = 1.344.
	near(t, "no consolidation", r.Total.NoConsolidation, 1.152*0.5+1.344*1.5)
	near(t, "saving vs no consolidation", r.Total.SavingVsNoConsolidation, 2.592-1.056)
	// Static baseline: 0.384 for 0.5 h, then 0.768 for 1.5 h = 0.192 + 1.152.
	near(t, "static baseline", r.Total.StaticBaseline, 1.344)
	near(t, "saving vs static", r.Total.SavingVsStatic, 1.344-1.056)
	near(t, "baseline hours", r.Total.BaselineHours, 2)
	// Waste: CPU dominates; 0.384 × (1 − 4200/8000) × 0.5 + 0.576 × (1 − 6000/12000) × 1.5.
	near(t, "waste", r.Total.Waste, 0.384*0.475*0.5+0.576*0.5*1.5)
	if len(r.Hours) != 2 || !r.Hours[0].Start.Equal(t10) {
		t.Fatalf("hours = %+v, want 10:00 and 11:00", r.Hours)
	}
	near(t, "10:00 spend", r.Hours[0].Spend, 0.384*0.5+0.576*0.5)
	near(t, "11:00 spend", r.Hours[1].Spend, 0.576)
	if len(r.Days) != 1 {
		t.Fatalf("days = %+v", r.Days)
	}
	near(t, "day spend", r.Days[0].Spend, 1.056)
	if len(r.Decisions) != 3 || r.Decisions[1].NodePool != "" || r.Decisions[2].Delta < 0.192-1e-9 {
		t.Errorf("decisions = %+v", r.Decisions)
	}
	// The cluster series: before (1.152), after the consolidation (0.384), after the launch (0.576).
	if len(r.Series) != 2 || r.Series[0].Price != 0.384 || r.Series[1].Price != 0.576 || r.Series[1].LowerBound != 0.5 {
		t.Errorf("series = %+v", r.Series)
	}
}

func TestAddRefuses(t *testing.T) {
	var l Ledger
	for _, c := range []struct {
		a    telemetry.Audit
		want string
	}{
		{telemetry.Audit{Decision: "old"}, "no time"},
		{telemetry.Audit{Decision: "x", Time: t10, NodePools: []telemetry.PoolCost{{PriceAfter: 1}}}, "nodePools[0].nodePool: empty"},
		{telemetry.Audit{Decision: "x", Time: t10, NodePools: []telemetry.PoolCost{{NodePool: "a", PriceAfter: -1}}}, "negative price"},
	} {
		if err := l.Add(c.a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Add(%s) = %v, want %q", c.a.Decision, err, c.want)
		}
	}
	if err := l.Add(telemetry.Audit{Decision: "a", Time: t10}); err != nil {
		t.Fatal(err)
	}
	if err := l.Add(telemetry.Audit{Decision: "b", Time: t10.Add(-time.Second)}); err == nil || !strings.Contains(err.Error(), "before the previous") {
		t.Errorf("out of order: %v", err)
	}
}

// TestReportEffectiveSpend: the 10:30 launch of records() also counts commitments: a Compute
// Savings Plan of 0.10 $/h at 30 % fully used covers 0.10 / 0.7 = 0.142857 $/h of list usage and
// saves 0.3 × 0.142857 = 0.042857 $/h; a Reserved Instance covers one m5.xlarge, saving its
// 0.192 $/h list price. That saving holds from 10:30 to 12:00 (1.5 h): 0.234857 × 1.5 =
// 0.352286 USD off the list-priced spend of 1.056: 0.703714 at the effective rates.
func TestReportEffectiveSpend(t *testing.T) {
	rs := records()
	rs[2].Commitments = []telemetry.CommitmentUse{
		{Name: "compute", Kind: "SavingsPlan", CommittedPerHour: 0.10, UsedPerHour: 0.10, Utilisation: 1, SavedPerHour: 0.3 * 0.10 / 0.7},
		{Name: "ri", Kind: "Reservation", Count: 1, Used: 1, Utilisation: 1, SavedPerHour: 0.192},
	}
	var l Ledger
	for _, a := range rs {
		if err := l.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	r := l.Report(t10.Add(2 * time.Hour))
	saved := (0.3*0.10/0.7 + 0.192) * 1.5
	near(t, "commitment savings", r.CommitmentSavings, saved)
	near(t, "effective spend", r.EffectiveSpend, 1.056-saved)
	near(t, "list spend", r.Total.Spend, 1.056)

	var none Ledger
	for _, a := range records() {
		if err := none.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	if r := none.Report(t10.Add(2 * time.Hour)); r.CommitmentSavings != 0 || r.EffectiveSpend != 0 {
		t.Errorf("no commitments: savings %.6f, effective %.6f, want 0 and 0", r.CommitmentSavings, r.EffectiveSpend)
	}
}
