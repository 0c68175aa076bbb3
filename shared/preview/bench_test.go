package preview

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// benchCluster is a Karpenter cluster of n m5.xlarge nodes of NodePool "default" (budget:
// 10 % of the nodes), each running three 500m/512Mi pods: a quarter used, so consolidation
// has most of the cluster to remove, a budget's worth of nodes per round.
func benchCluster(n int) *events.Snapshot {
	snap := &events.Snapshot{Cluster: "bench", Time: metav1.NewTime(t0)}
	snap.NodePools = []apisv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{
		Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge", "m5.2xlarge"}}},
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}}}}}}}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("node-%04d", i)
		node := caNode(name, "", "m5.xlarge")
		delete(node.Labels, LabelEKSNodeGroup)
		node.Labels[apisv1.LabelNodePool] = "default"
		node.Labels[apisv1.LabelCapacityType] = "on-demand"
		node.Labels[apisv1.LabelNodeInitialized] = "true"
		snap.Nodes = append(snap.Nodes, node)
		snap.NodeClaims = append(snap.NodeClaims, apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: node.Labels,
			CreationTimestamp: node.CreationTimestamp}, Status: apisv1.NodeClaimStatus{NodeName: name, ProviderID: node.Spec.ProviderID}})
		for j := 0; j < 3; j++ {
			snap.Pods = append(snap.Pods, caPod(fmt.Sprintf("app-%04d-%d", i, j), name, "500m", "512Mi", nil))
		}
	}
	return snap
}

// BenchmarkPreview runs the whole preview (every round to the fixed point) over clusters of
// 50, 200 and 1,000 nodes.
func BenchmarkPreview(b *testing.B) {
	cat := catalog.MustAWS()
	for _, n := range []int{50, 200, 1000} {
		snap := benchCluster(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			res := runPreviews(b, snap, cat)
			b.ReportMetric(res.Today.PricePerHour, "today$/h")
		})
	}
}

// BenchmarkPreviewExpiry is BenchmarkPreview with every seventh NodeClaim at expireAfter 1h
// (created 48 hours before the preview, so expired in its first round), the share of expired
// nodes in hack/gendump's dumps: round 1 hands them all to the termination path.
func BenchmarkPreviewExpiry(b *testing.B) {
	cat := catalog.MustAWS()
	for _, n := range []int{200, 1000} {
		snap := benchCluster(n)
		for i := 0; i < n; i += 7 {
			snap.NodeClaims[i].Spec.ExpireAfter = apisv1.MustParseNillableDuration("1h")
		}
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { runPreviews(b, snap, cat) })
	}
}

// runPreviews runs the whole preview b.N times, reporting allocations, its rounds and the
// converged USD per hour; it returns the last result.
func runPreviews(b *testing.B, snap *events.Snapshot, cat *catalog.Catalog) *Result {
	b.ReportAllocs()
	var res *Result
	for i := 0; i < b.N; i++ {
		var err error
		if res, err = Run(snap, Options{Catalog: cat}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(res.Rounds)), "rounds")
	b.ReportMetric(res.Converged.PricePerHour, "converged$/h")
	return res
}
