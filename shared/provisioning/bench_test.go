package provisioning

import (
	"fmt"
	appsv1 "k8s.io/api/apps/v1"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// BenchmarkSolve packs N unconstrained pods (CPU 100–1500m, memory 100–4096Mi, fixed seed)
// with the seed NodePool's requirements (c/m/r, generation > 5, amd64+arm64, spot+on-demand)
// over the real embedded catalog, with two DaemonSets.
func BenchmarkSolve(b *testing.B) {
	c := cat(b)
	np := nodePool("default",
		req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
		req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"),
		req(apisv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		req(apisv1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "5"))
	for _, n := range []int{100, 1000, 10000} {
		rng := rand.New(rand.NewPCG(1, 2))
		ps := make([]*corev1.Pod, n)
		for i := range ps {
			ps[i] = pod(fmt.Sprintf("p-%d", i), fmt.Sprintf("%dm", 100+rng.IntN(1401)), fmt.Sprintf("%dMi", 100+rng.IntN(3997)))
		}
		in := Input{Pods: ps, NodePools: []*apisv1.NodePool{np}, Catalog: c,
			DaemonSets: []*appsv1.DaemonSet{daemonSet("kube-proxy", "100m"), daemonSet("aws-node", "25m")}}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var nodes int
			var cost float64
			for b.Loop() {
				p, err := Solve(in)
				if err != nil {
					b.Fatal(err)
				}
				nodes = len(p.NodeClaims)
				cost = p.TotalPricePerHour()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			b.ReportMetric(float64(nodes), "nodes")
			b.ReportMetric(cost, "$/h")
		})
	}
}
