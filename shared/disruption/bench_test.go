package disruption

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// BenchmarkConsolidate decides one consolidation on clusters of N nodes with 30 pods each
// (random m5/c5/r5 sizes and pod requests filling each node to 20-90%, fixed seed) and the
// default budget (10% of the pool's nodes),
// from building the State to the Decision. Reported: ns/op (decision time), B/op, and
// peak-heap-MiB (live heap after the decision, with the snapshot, State and decision held).
func BenchmarkConsolidate(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		c := csGen{nodes: n, maxPods: 30, types: []string{"m5.2xlarge", "m5.4xlarge", "c5.4xlarge", "r5.2xlarge"}, exact: true}.build(b, rand.New(rand.NewPCG(42, 42)))
		for i := range c.snap.NodePools {
			c.snap.NodePools[i].Spec.Disruption.Budgets = nil // Karpenter's default budget: 10%
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var d *Decision
			var sims int64
			var heap uint64
			for b.Loop() {
				s, err := NewState(c.snap, csCat, cloud.NodeSettingsFor)
				if err != nil {
					b.Fatal(err)
				}
				var r *Report
				d, r = Consolidate(s, Options{})
				sims = r.Simulations
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap = max(heap, ms.HeapAlloc)
			}
			b.ReportMetric(float64(len(c.snap.Pods))/float64(n), "pods/node")
			b.ReportMetric(float64(sims), "sims")
			b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
			if d != nil {
				b.ReportMetric(d.Savings, "saved-$/h")
				b.ReportMetric(float64(len(d.Candidates)), "nodes-disrupted")
			}
		})
	}
}
