package lifecycle

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// steadySnapshot is a settled cluster: nodes registered, initialized NodeClaims of NodePool
// "default", each node with podsPer pods of ten ReplicaSets and a PDB per ReplicaSet allowing 5.
func steadySnapshot(nodes, podsPer int) *events.Snapshot {
	at := t0.Add(time.Hour)
	s := &events.Snapshot{Cluster: "prod", Revision: 7, Time: metav1.NewTime(at)}
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	s.NodePools = []apisv1.NodePool{pool}
	ctrl := true
	for i := range nodes {
		w := newBlockedWorld()
		name, pid := fmt.Sprintf("node-%04d", i), fmt.Sprintf("aws:///us-east-1a/i-%017d", i)
		w.nc.Name, w.nc.UID, w.nc.Status.ProviderID, w.nc.Status.NodeName = fmt.Sprintf("default-%04d", i), types.UID(fmt.Sprintf("uid-nc-%d", i)), pid, name
		w.node.Name, w.node.UID, w.node.Spec.ProviderID, w.node.Labels[corev1.LabelHostname] = name, types.UID(fmt.Sprintf("uid-node-%d", i)), pid, name
		s.NodeClaims = append(s.NodeClaims, w.nc)
		s.Nodes = append(s.Nodes, w.node)
		for j := range podsPer {
			app := fmt.Sprintf("app-%d", j%10)
			s.Pods = append(s.Pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%d", app, i, j), Namespace: "default",
				UID: types.UID(fmt.Sprintf("uid-%d-%d", i, j)), Labels: map[string]string{"app": app},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app, UID: "rs", Controller: &ctrl}}},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
		}
	}
	for j := range 10 {
		app := fmt.Sprintf("app-%d", j)
		s.PDBs = append(s.PDBs, policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, MaxUnavailable: &intstr.IntOrString{IntVal: 5}},
			Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 5}})
	}
	return s
}

// BenchmarkDecideSteady is one lifecycle decision on a settled 500-node, 10,000-pod cluster:
// the per-snapshot cost every timer tick pays.
func BenchmarkDecideSteady(b *testing.B) {
	s := steadySnapshot(500, 20)
	b.ReportAllocs()
	for b.Loop() {
		Decide(s, Options{})
	}
}
