package scenarios

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/ledger"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// TestConsolidationCostLedger: the ledger of the consolidation scenario's audit stream equals a
// hand calculation from its decisions. The six nodes are m5.xlarge on demand in us-east-1a at
// 0.192 $/h each (1.152 $/h); each consolidation removes the nodes its record names and adds
// the replacements it launched, priced at the same list prices, so the pool's $/h after decision
// i is 0.192 × the m5.xlarge left + its replacements. Spend is each rate times the hours it
// held; "no consolidation" keeps paying 1.152 $/h throughout; the static baseline is one
// m5.2xlarge (0.384 $/h: 8 vCPU, about 7.9 allocatable, holds the 6 remaining 700m pods).
func TestConsolidationCostLedger(t *testing.T) {
	var out, audit bytes.Buffer
	if _, err := ConsolidationAudited(context.Background(), &out, &audit); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var recs []telemetry.Audit
	var l ledger.Ledger
	if err := telemetry.ReadAudit(&audit, func(a telemetry.Audit) error {
		recs = append(recs, a)
		return l.Add(a)
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("no audit records\n%s", out.String())
	}
	until := recs[len(recs)-1].Time.Add(time.Hour)
	r := l.Report(until)

	const m5xlarge, m52xlarge, before = 0.192, 0.384, 6 * 0.192
	nodes := 6.0 // m5.xlarge running
	rate := before
	var spend, noConsolidation, baseline float64
	at := recs[0].Time
	for _, a := range recs {
		h := a.Time.Sub(at).Hours()
		spend += rate * h
		noConsolidation += before * h
		if a.Time.After(recs[0].Time) {
			baseline += m52xlarge * h
		}
		at = a.Time
		nodes -= float64(len(a.Nodes))
		replacements := 0.0
		for _, pc := range a.NodePools {
			replacements = pc.PriceAfter - m5xlarge*nodes // what the record prices beyond the m5.xlarge left
		}
		t.Logf("%s %s: -%d nodes, +%d NodeClaims, replacements %.4f $/h", a.Time.Format(time.RFC3339), a.Decision, len(a.Nodes), len(a.NodeClaims), replacements)
		if len(a.NodeClaims) == 0 && math.Abs(replacements) > 1e-9 {
			t.Errorf("decision %s launched nothing but prices %.4f $/h beyond the %v m5.xlarge left", a.Decision, replacements, nodes)
		}
		rate = m5xlarge*nodes + replacements
	}
	h := until.Sub(at).Hours()
	spend += rate * h
	noConsolidation += before * h
	baseline += m52xlarge * h

	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s = %.6f, want %.6f (hand calculation)", what, got, want)
		}
	}
	near("spend", r.Total.Spend, spend)
	near("no consolidation", r.Total.NoConsolidation, noConsolidation)
	near("saving vs no consolidation", r.Total.SavingVsNoConsolidation, noConsolidation-spend)
	near("static baseline", r.Total.StaticBaseline, baseline)
	t.Logf("spend %.4f, baseline %.4f, no consolidation %.4f over %.2f h\n%s", spend, baseline, noConsolidation, r.Total.Hours, out.String())
}
