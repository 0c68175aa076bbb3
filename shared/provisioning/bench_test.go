package provisioning

import (
	"fmt"
	appsv1 "k8s.io/api/apps/v1"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// BenchmarkSolve packs N unconstrained pods (CPU 100–1500m, memory 100–4096Mi, fixed seed)
// with the seed NodePool's requirements (c/m/r, generation > 5, amd64+arm64, spot+on-demand)
// over the real embedded catalog, with two DaemonSets.
func BenchmarkSolve(b *testing.B) {
	c := cat(b)
	np := benchNodePool()
	for _, n := range []int{100, 1000, 10000} {
		rng := rand.New(rand.NewPCG(1, 2))
		ps := make([]*corev1.Pod, n)
		for i := range ps {
			ps[i] = pod(fmt.Sprintf("p-%d", i), fmt.Sprintf("%dm", 100+rng.IntN(1401)), fmt.Sprintf("%dMi", 100+rng.IntN(3997)))
		}
		in := Input{Pods: ps, NodePools: []*apisv1.NodePool{np}, Catalog: c,
			DaemonSets: []*appsv1.DaemonSet{daemonSet("kube-proxy", "100m"), daemonSet("aws-node", "25m")}}
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchSolve(b, in) })
	}
}

// benchNodePool is the seed NodePool's requirements: c/m/r, generation > 5, amd64 and arm64,
// spot and on-demand.
func benchNodePool() *apisv1.NodePool {
	return nodePool("default",
		req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
		req(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"),
		req(apisv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		req(apisv1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "5"))
}

// benchSolve solves in b.N times and reports pods/s (pending pods per second of Solve) and the
// last plan's NodeClaims and price (USD per hour).
func benchSolve(b *testing.B, in Input) {
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
	b.ReportMetric(float64(len(in.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(cost, "$/h")
}

// BenchmarkSolveZoneSpread packs N pending pods of 50 Deployments (CPU 100–1500m, memory
// 100–4096Mi, fixed seed), each Deployment spread across zones (maxSkew 1, DoNotSchedule), with
// BenchmarkSolve's NodePool and DaemonSets. Each pod tolerates the dovetail.dev/planned taint of
// one of N/10 planned NodeClaims, as pods still pending on nodes launched for them do in make
// scale: that gives N/10 scheduling signatures, each of which finds its zones once. The cluster
// has N/30 full m5.large nodes (a bound 1900m pod each) spread over six zones, so the zones of
// existing nodes are looked up too.
func BenchmarkSolveZoneSpread(b *testing.B) {
	c := cat(b)
	np := benchNodePool()
	for _, n := range []int{1000, 5000} {
		rng := rand.New(rand.NewPCG(1, 2))
		ps := make([]*corev1.Pod, n)
		for i := range ps {
			app := fmt.Sprint("app-", i%50)
			p := pod(fmt.Sprintf("p-%d", i), fmt.Sprintf("%dm", 100+rng.IntN(1401)), fmt.Sprintf("%dMi", 100+rng.IntN(3997)))
			p.Labels = map[string]string{"app": app}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
			p.Spec.Tolerations = []corev1.Toleration{apisv1.PlannedToleration(fmt.Sprint("default-", i%(n/10)))}
			ps[i] = p
		}
		var nodes []*corev1.Node
		var bound []*corev1.Pod
		for i := range n / 30 {
			nd := existingNode(fmt.Sprint("node-", i))
			nd.Labels[corev1.LabelHostname] = nd.Name
			nd.Labels[corev1.LabelTopologyZone] = fmt.Sprintf("us-east-1%c", 'a'+i%6)
			nodes = append(nodes, nd)
			full := pod(fmt.Sprint("full-", i), "1900m", "1Gi")
			full.Spec.NodeName = nd.Name
			bound = append(bound, full)
		}
		in := Input{Pods: ps, Nodes: nodes, BoundPods: bound, NodePools: []*apisv1.NodePool{np}, Catalog: c,
			DaemonSets: []*appsv1.DaemonSet{daemonSet("kube-proxy", "100m"), daemonSet("aws-node", "25m")}}
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchSolve(b, in) })
	}
}
