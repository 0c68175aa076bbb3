package provisioning

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// lifecycleDaemonSet runs only on nodes with key=true, by node affinity (Karpenter issue #919's
// shape: an agent that waits for the node to have joined).
func lifecycleDaemonSet(key, cpu string) *appsv1.DaemonSet {
	ds := daemonSet("agent-"+key, cpu)
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}}}}
	return ds
}

// TestDaemonSetSelectingLifecycleLabelsCounts checks that a DaemonSet selecting
// karpenter.sh/registered or karpenter.sh/initialized counts in the overhead of every node a
// NodePool launches, as Karpenter counts it (NewNodeClaimTemplate adds both as requirements).
// Hand calculation from the catalog's allocatable (m5.large 1930m, m5.xlarge 3920m): a 1500m
// pod fits an m5.large alone (1500 ≤ 1930), not beside a 1000m DaemonSet (1500 > 930), so the
// plan must take an m5.xlarge (1500 ≤ 2920) with 1000m of DaemonSet overhead.
func TestDaemonSetSelectingLifecycleLabelsCounts(t *testing.T) {
	np := nodePool("default", onDemand("m5.large", "m5.xlarge")...)
	for _, key := range []string{apisv1.LabelNodeRegistered, apisv1.LabelNodeInitialized} {
		t.Run(key, func(t *testing.T) {
			p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1500m", "1Gi")}, NodePools: []*apisv1.NodePool{np},
				DaemonSets: []*appsv1.DaemonSet{lifecycleDaemonSet(key, "1")}})
			wantClaims(t, p, "m5.xlarge")
			if got := p.NodeClaims[0].Cheapest().DaemonOverhead.MilliCPU; got != 1000 {
				t.Errorf("DaemonSet overhead = %dm, want 1000m", got)
			}
		})
	}
	t.Run("nodeSelector", func(t *testing.T) {
		ds := daemonSet("agent", "1")
		ds.Spec.Template.Spec.NodeSelector = map[string]string{apisv1.LabelNodeInitialized: "true"}
		p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1500m", "1Gi")}, NodePools: []*apisv1.NodePool{np},
			DaemonSets: []*appsv1.DaemonSet{ds}})
		wantClaims(t, p, "m5.xlarge")
	})
	t.Run("the NodePool's template label", func(t *testing.T) {
		withLabel := np.DeepCopy()
		withLabel.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "web"}
		ds := daemonSet("agent", "1")
		ds.Spec.Template.Spec.NodeSelector = map[string]string{"team": "web", apisv1.LabelNodePool: "default"}
		p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1500m", "1Gi")}, NodePools: []*apisv1.NodePool{withLabel},
			DaemonSets: []*appsv1.DaemonSet{ds}})
		wantClaims(t, p, "m5.xlarge")
	})
	t.Run("a value no node carries", func(t *testing.T) {
		// karpenter.sh/initialized=false is never written: the DaemonSet adds nothing.
		ds := daemonSet("agent", "1")
		ds.Spec.Template.Spec.NodeSelector = map[string]string{apisv1.LabelNodeInitialized: "false"}
		p := solve(t, Input{Pods: []*corev1.Pod{pod("a", "1500m", "1Gi")}, NodePools: []*apisv1.NodePool{np},
			DaemonSets: []*appsv1.DaemonSet{ds}})
		wantClaims(t, p, "m5.large")
	})
}

// TestDaemonSetSelectingLifecycleLabelsOnJoiningCapacity checks the same rule for capacity that
// has not joined yet: an in-flight NodeClaim (m5.large, 1930m allocatable) keeps 1930 − 500 =
// 1430m for pods, so of two 900m pods one lands there and the other needs a new m5.large
// (900 ≤ 1430); a NodePool's registered node not yet initialized keeps room for the DaemonSet
// that will arrive with karpenter.sh/initialized (1930 − 500 = 1430m < 1500m); a node outside
// any NodePool never gets the label and keeps its 1930m.
func TestDaemonSetSelectingLifecycleLabelsOnJoiningCapacity(t *testing.T) {
	np := nodePool("default", onDemand("m5.large", "m5.xlarge")...)
	t.Run("in-flight NodeClaim", func(t *testing.T) {
		nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{
			apisv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64",
			corev1.LabelOSStable: "linux", apisv1.LabelCapacityType: "on-demand", corev1.LabelTopologyZone: "us-east-1a"}},
			Status: apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}}
		p := solve(t, Input{Pods: pods(2, "900m", "1Gi"), NodeClaims: []*apisv1.NodeClaim{nc}, NodePools: []*apisv1.NodePool{np},
			DaemonSets: []*appsv1.DaemonSet{lifecycleDaemonSet(apisv1.LabelNodeRegistered, "500m")}})
		if len(p.ExistingNodes) != 1 || len(p.ExistingNodes[0].Pods) != 1 {
			t.Fatalf("want one pod on the in-flight NodeClaim, got %+v", p.ExistingNodes)
		}
		wantClaims(t, p, "m5.large")
	})
	joining := func(labels map[string]string) *Plan {
		n := existingNode("node-a")
		for k, v := range labels {
			n.Labels[k] = v
		}
		return solve(t, Input{Pods: []*corev1.Pod{pod("a", "1500m", "1Gi")}, Nodes: []*corev1.Node{n}, NodePools: []*apisv1.NodePool{np},
			DaemonSets: []*appsv1.DaemonSet{lifecycleDaemonSet(apisv1.LabelNodeInitialized, "500m")}})
	}
	t.Run("registered, not yet initialized", func(t *testing.T) {
		p := joining(map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelNodeRegistered: "true"})
		if len(p.ExistingNodes) != 0 {
			t.Fatalf("node-a keeps 1430m for pods; the 1500m pod must not land there: %+v", p.ExistingNodes[0].Pods)
		}
		wantClaims(t, p, "m5.xlarge")
	})
	t.Run("no NodePool's node", func(t *testing.T) {
		p := joining(nil)
		if len(p.ExistingNodes) != 1 || len(p.NodeClaims) != 0 {
			t.Fatalf("node-a never gets karpenter.sh/initialized; the pod fits its 1930m: %+v, %d claims", p.ExistingNodes, len(p.NodeClaims))
		}
	})
}
