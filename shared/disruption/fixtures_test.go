package disruption

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
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// Test fixtures over the real embedded catalog and real Kubernetes API types.

var (
	csT0  = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC) // a Monday
	csCat = catalog.MustAWS()
)

type csCluster struct {
	snap *events.Snapshot
	t    csTB
}

func csNewCluster(t csTB, now time.Time) *csCluster {
	return &csCluster{t: t, snap: &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: "test", Revision: 7, Time: metav1.NewTime(now)}}
}

func csReq(key string, op corev1.NodeSelectorOperator, vals ...string) apisv1.NodeSelectorRequirementWithMinValues {
	return apisv1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}}
}

// pool adds a NodePool with consolidateAfter 0s, WhenEmptyOrUnderutilized, no budgets set
// (callers set them) and the requirements given (amd64 linux always).
func (c *csCluster) pool(name string, reqs ...apisv1.NodeSelectorRequirementWithMinValues) *apisv1.NodePool {
	after := apisv1.MustParseNillableDuration("0s")
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	np.Spec.Template.Spec.Requirements = append([]apisv1.NodeSelectorRequirementWithMinValues{
		csReq(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		csReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
	}, reqs...)
	np.Spec.Template.Spec.NodeClassRef = &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Disruption = apisv1.Disruption{ConsolidationPolicy: apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: &after,
		Budgets: []apisv1.Budget{{Nodes: "100%"}}}
	c.snap.NodePools = append(c.snap.NodePools, np)
	return &c.snap.NodePools[len(c.snap.NodePools)-1]
}

// node adds a Ready, initialized node of the pool with its NodeClaim, created an hour ago.
func (c *csCluster) node(name, pool, instanceType, capacityType string) *corev1.Node {
	return c.nodeIn(name, pool, instanceType, capacityType, "us-east-1a")
}

func (c *csCluster) nodeIn(name, pool, instanceType, capacityType, zone string) *corev1.Node {
	it := csCat.Get(instanceType)
	if it == nil {
		c.t.Fatalf("no instance type %s", instanceType)
	}
	pid := "aws:///" + zone + "/i-" + name
	labels := map[string]string{}
	for k, v := range it.Labels {
		labels[k] = v
	}
	labels[corev1.LabelHostname] = name
	labels[corev1.LabelTopologyZone] = zone
	labels[apisv1.LabelCapacityType] = capacityType
	labels[apisv1.LabelNodePool] = pool
	created := metav1.NewTime(c.snap.Time.Add(-time.Hour))
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created, UID: types.UID("node-" + name)},
		Spec:       corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Capacity: it.Capacity, Allocatable: it.Allocatable(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	nc := apisv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name, UID: types.UID("nc-uid-" + name), Labels: map[string]string{
			apisv1.LabelNodePool: pool, corev1.LabelInstanceTypeStable: instanceType, corev1.LabelTopologyZone: zone, apisv1.LabelCapacityType: capacityType},
			CreationTimestamp: created},
		Status: apisv1.NodeClaimStatus{NodeName: name, ProviderID: pid, Capacity: it.Capacity, Allocatable: it.Allocatable()},
	}
	c.snap.Nodes = append(c.snap.Nodes, n)
	c.snap.NodeClaims = append(c.snap.NodeClaims, nc)
	return &c.snap.Nodes[len(c.snap.Nodes)-1]
}

// pod adds a Ready pod owned by ReplicaSet app-rs (controller), bound to node, started 30
// minutes before the snapshot.
func (c *csCluster) pod(name, node, cpu, mem string, labels ...string) *corev1.Pod {
	ctrl := true
	l := map[string]string{"app": "app"}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	started := metav1.NewTime(c.snap.Time.Add(-30 * time.Minute))
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: l, UID: types.UID("pod-" + name), CreationTimestamp: started,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: l["app"] + "-rs", UID: "rs", Controller: &ctrl}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	c.snap.Pods = append(c.snap.Pods, p)
	return &c.snap.Pods[len(c.snap.Pods)-1]
}

// pdb adds a PDB over app=<app> whose status says disruptionsAllowed (observedGeneration 1).
func (c *csCluster) pdb(name, app string, allowed int32) {
	c.snap.PDBs = append(c.snap.PDBs, policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, MaxUnavailable: csPtr(intstr.FromInt32(allowed))},
		Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed},
	})
}

func (c *csCluster) state() *State {
	c.t.Helper()
	s, err := NewState(c.snap, csCat, cloud.NodeSettingsFor)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

func csPtr[T any](v T) *T { return &v }

func csNear(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

func csNames(d *Decision) string { return fmt.Sprint(d.NodeNames()) }

// m5OnDemand restricts a pool to m5 on-demand, so expectations can be worked by hand from
// the public m5 list prices (us-east-1: large 0.096, xlarge 0.192, 2xlarge 0.384 USD/h).
func csM5OnDemand() []apisv1.NodeSelectorRequirementWithMinValues {
	return []apisv1.NodeSelectorRequirementWithMinValues{
		csReq(apisv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5"),
		csReq(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeOnDemand),
	}
}

// csTB is what fixtures need of *testing.T, *testing.B and *rapid.T.
type csTB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

var _ csTB = (testing.TB)(nil)
