package provisioning

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// placements lists the plan's existing-node placements as node → pod names.
func placements(p *Plan) map[string][]string {
	out := map[string][]string{}
	for _, e := range p.ExistingNodes {
		for _, q := range e.Pods {
			out[e.Name] = append(out[e.Name], q.Name)
		}
	}
	return out
}

// TestBinCacheFollowsTheCluster runs the solver with one BinCache over a cluster changed
// between runs as the preview changes it (a pod bound, a node tainted, a pod moved off), and
// checks each plan against the arithmetic of the nodes as they are then, so a bin reused after
// its node changed would show. Two m5.large nodes, 1930m allocatable each (the EKS rule in
// solver_test.go's header).
func TestBinCacheFollowsTheCluster(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	a, b := existingNode("node-a"), existingNode("node-b")
	onA := pod("on-a", "1", "1Gi")
	onA.Spec.NodeName = "node-a"
	cache := NewBinCache()
	run := func(want map[string][]string, bound ...*corev1.Pod) {
		t.Helper()
		p := solve(t, Input{Pods: []*corev1.Pod{pod("new", "900m", "1Gi")}, Nodes: []*corev1.Node{a, b},
			BoundPods: bound, NodePools: []*apisv1.NodePool{np}, Bins: cache})
		got := placements(p)
		if len(got) != len(want) || len(p.NodeClaims) != 0 {
			t.Fatalf("placements %v (%d new claims), want %v", got, len(p.NodeClaims), want)
		}
		for n, ps := range want {
			if len(got[n]) != len(ps) || got[n][0] != ps[0] {
				t.Fatalf("placements %v, want %v", got, want)
			}
		}
	}
	// node-a has 930m free with on-a, node-b 1930m: the 900m pod fits both; nodes are tried in
	// name order, so node-a.
	run(map[string][]string{"node-a": {"new"}}, onA)
	if cache.Misses != 2 || cache.Hits != 0 {
		t.Fatalf("first run: %d hits, %d misses; want 0, 2", cache.Hits, cache.Misses)
	}
	run(map[string][]string{"node-a": {"new"}}, onA)
	if cache.Hits != 2 {
		t.Fatalf("second run over the same cluster: %d hits, want 2", cache.Hits)
	}
	// A second 1-CPU pod bound to node-a leaves it -70m: the pod goes to node-b.
	onA2 := pod("on-a-2", "1", "1Gi")
	onA2.Spec.NodeName = "node-a"
	run(map[string][]string{"node-b": {"new"}}, onA, onA2)
	// on-a-2 gone: node-a again; then node-a tainted NoSchedule (as the preview taints a node
	// it disrupts): node-b.
	run(map[string][]string{"node-a": {"new"}}, onA)
	a.Spec.Taints = append(a.Spec.Taints, corev1.Taint{Key: "example.com/gone", Effect: corev1.TaintEffectNoSchedule})
	run(map[string][]string{"node-b": {"new"}}, onA)
	// The taint removed and on-a moved to node-b in place (the same Pod object, as the preview
	// moves pods): node-a is empty and first by name.
	a.Spec.Taints = nil
	onA.Spec.NodeName = "node-b"
	run(map[string][]string{"node-a": {"new"}}, onA)
	// Back on node-a, then the same Pod object given other containers (a slot of the pod slice
	// reused by another pod, as the preview's compaction does): 1800m leaves node-a 130m, so
	// node-b takes the pod.
	onA.Spec.NodeName = "node-a"
	run(map[string][]string{"node-a": {"new"}}, onA)
	onA.Spec.Containers = pod("x", "1800m", "1Gi").Spec.Containers
	run(map[string][]string{"node-b": {"new"}}, onA)
}

// TestBinCacheFollowsPoolUse checks the cached per-node terms of the NodePool limits: a node of
// pool default with 2 CPUs of capacity leaves a 4-CPU limit room for one m5.large (2 vCPU);
// its capacity map replaced by one of 4 CPUs leaves none, so the 1.5-CPU pod (no room on the
// 1930m node with a 1-CPU pod) is refused for the limits.
func TestBinCacheFollowsPoolUse(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	n := existingNode("node-a")
	n.Labels[apisv1.LabelNodePool] = "default"
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	resident := pod("resident", "1", "1Gi")
	resident.Spec.NodeName = "node-a"
	cache := NewBinCache()
	run := func() *Plan {
		return solve(t, Input{Pods: []*corev1.Pod{pod("new", "1500m", "1Gi")}, Nodes: []*corev1.Node{n},
			BoundPods: []*corev1.Pod{resident}, NodePools: []*apisv1.NodePool{np}, Bins: cache})
	}
	if p := run(); len(p.NodeClaims) != 1 || len(p.Unschedulable) != 0 {
		t.Fatalf("2 of 4 CPUs used: want one new NodeClaim, got %d and %d unschedulable", len(p.NodeClaims), len(p.Unschedulable))
	}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	if p := run(); len(p.NodeClaims) != 0 || len(p.Unschedulable) != 1 || !strings.Contains(p.Unschedulable[0].Reason, "limits") {
		t.Fatalf("4 of 4 CPUs used: want the pod refused for the limits, got %d claims, %+v", len(p.NodeClaims), p.Unschedulable)
	}
}
