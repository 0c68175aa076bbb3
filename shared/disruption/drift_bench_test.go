package disruption

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkPlanDrift plans one drift round (PlanDrift: every node's Target, the expired and
// drifted ones chosen) over clusters of N nodes with 19 pods each (5,000 nodes: 95,000 pods,
// the size of issue 28's dump; fixed seed). Nothing has drifted, so the cost measured is
// finding each node's NodeClaim, pods and pool.
func BenchmarkPlanDrift(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		c := csGen{nodes: n, maxPods: 19, types: []string{"m5.2xlarge", "m5.4xlarge", "c5.4xlarge", "r5.2xlarge"}, exact: true}.build(b, rand.New(rand.NewPCG(42, 42)))
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var p DriftPlan
			for b.Loop() {
				p = PlanDrift(c.snap, nil)
			}
			b.ReportMetric(float64(len(c.snap.Pods)), "pods")
			b.ReportMetric(float64(len(p.Selected)+len(p.Expired)), "chosen")
		})
	}
}
