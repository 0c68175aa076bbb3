package telemetry

import (
	"math"
	"testing"
)

// TestRecordPoolCosts: a consolidation taking pool "default" from 1.152 to 0.384 $/h with 4200
// of 8000 millicores and 6144 of 30000 MiB requested: waste is 0.384 × (1 − 4200/8000) = 0.1824
// (CPU, the larger share, dominates); the saving 0.768 adds to the counter.
func TestRecordPoolCosts(t *testing.T) {
	var m Memory
	pc := PoolCost{NodePool: "default", PriceBefore: 1.152, PriceAfter: 0.384, Consolidation: true, StaticBaseline: 0.384,
		AllocatableMilliCPU: 8000, RequestedMilliCPU: 4200, AllocatableMiB: 30000, RequestedMiB: 6144}
	RecordPoolCosts(&m, []PoolCost{pc, pc})
	for _, c := range []struct {
		m    *Metric
		want float64
	}{{NodePoolPrice, 0.384}, {NodePoolStaticBaseline, 0.384}, {NodePoolWaste, 0.1824}, {ConsolidationSavings, 2 * 0.768}} {
		if got := m.Value(c.m, "default"); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s = %.6f, want %.6f", c.m.Name, got, c.want)
		}
	}
}
