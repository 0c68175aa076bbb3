package main

import (
	"fmt"
	"testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// BenchmarkDovetail times provisioning.Solve alone on the harness's input (Karpenter's 400 fake
// types, its NodePool, makeDiversePods or generic pods, seed 42), so Dovetail's side can be
// profiled (-cpuprofile, -memprofile) without Karpenter's run in the profile.
func BenchmarkDovetail(b *testing.B) {
	its := karpenterInstanceTypes()
	kPool := karpenterNodePool()
	cat, err := dovetailCatalog(its)
	if err != nil {
		b.Fatal(err)
	}
	dPool := dovetailNodePool(kPool)
	for _, mix := range []string{mixDiverse, mixGeneric} {
		for _, n := range []int{1000, 10000} {
			pods, err := newPodGen(42).pods(mix, n)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/%d", mix, n), func(b *testing.B) {
				b.ReportAllocs()
				var cost float64
				for b.Loop() {
					b.StopTimer()
					in := provisioning.Input{Pods: copyPods(pods), NodePools: []*apisv1.NodePool{dPool}, Catalog: cat}
					b.StartTimer()
					p, err := provisioning.Solve(in)
					if err != nil {
						b.Fatal(err)
					}
					cost = p.TotalPricePerHour()
				}
				b.ReportMetric(cost, "$/h")
			})
		}
	}
}
