package disruption

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// TestTargetIndexMatchesTargetFor: the index gives every node the Target TargetFor's scans
// give, on the joins' awkward cases: a NodeClaim matching by node name ahead of one matching
// by provider ID (the first in snapshot order wins), a NodeClaim without a provider ID, a node
// without one, two NodePools of one name (the last wins), DaemonSet and terminal pods (not
// evacuable), a tainted node.
func TestTargetIndexMatchesTargetFor(t *testing.T) {
	pool := func(name string, w int32) apisv1.NodePool {
		return apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apisv1.NodePoolSpec{Weight: &w}}
	}
	node := func(name, pid, np string, taints ...corev1.Taint) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apisv1.LabelNodePool: np,
			corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a", apisv1.LabelCapacityType: "spot"}},
			Spec: corev1.NodeSpec{ProviderID: pid, Taints: taints}}
	}
	claim := func(name, pid, nodeName string) apisv1.NodeClaim {
		return apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: apisv1.NodeClaimStatus{ProviderID: pid, NodeName: nodeName}}
	}
	yes := true
	pod := func(name, node string, mod func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mod != nil {
			mod(&p)
		}
		return p
	}
	snap := &events.Snapshot{
		NodePools: []apisv1.NodePool{pool("a", 1), pool("b", 1), pool("a", 2)},
		Nodes: []corev1.Node{
			node("n1", "aws:///us-east-1a/i-1", "a"),
			node("n2", "aws:///us-east-1a/i-2", "b", corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: TaintValueDrifted, Effect: corev1.TaintEffectNoSchedule}),
			node("n3", "", "a"),
			node("n4", "aws:///us-east-1a/i-4", "gone"),
		},
		NodeClaims: []apisv1.NodeClaim{
			claim("c-by-name", "", "n1"),                   // matches n1 by name, first in order
			claim("c-by-pid", "aws:///us-east-1a/i-1", ""), // matches n1 by provider ID, later
			claim("c2", "aws:///us-east-1a/i-2", "n2"),
			claim("c-empty", "", ""), // no provider ID, no node: matches nothing of these
			claim("c3", "", "n3"),
		},
		Pods: []corev1.Pod{
			pod("p1", "n1", nil),
			pod("ds", "n1", func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "d", APIVersion: "apps/v1", Controller: &yes}}
			}),
			pod("done", "n1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			pod("p2", "n2", nil),
			pod("p1b", "n1", nil),
		},
	}
	idx := newTargetIndex(snap)
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		want, got := TargetFor(snap, n), idx.target(n)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("node %s: index gives %+v, TargetFor %+v", n.Name, got, want)
		}
	}
	// The joins by hand: n1 takes c-by-name (first in order) and pods p1, p1b; NodePool "a" is
	// the second of that name (weight 2); n4's pool is gone.
	n1 := idx.target(&snap.Nodes[0])
	if n1.NodeClaim.Name != "c-by-name" || len(n1.Pods) != 2 || n1.Pods[0].Name != "p1" || n1.Pods[1].Name != "p1b" || *n1.NodePool.Spec.Weight != 2 {
		t.Errorf("n1: claim %s, %d pods, pool weight %d; want c-by-name, p1 and p1b, weight 2", n1.NodeClaim.Name, len(n1.Pods), *n1.NodePool.Spec.Weight)
	}
	if n4 := idx.target(&snap.Nodes[3]); n4.NodeClaim != nil || n4.NodePool != nil {
		t.Errorf("n4: claim %v, pool %v; want neither", n4.NodeClaim, n4.NodePool)
	}
	if n2 := idx.target(&snap.Nodes[1]); !n2.Disrupting || n2.TaintValue != TaintValueDrifted || n2.NodeClaim.Name != "c2" {
		t.Errorf("n2: %+v; want disrupting by drift, claim c2", n2)
	}
}
