package kube

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The fixtures run the real informers against client-go's fake clientset and dynamic fake
// client (nothing else runs a Kubernetes API offline). The fakes ignore field selectors, PDBs on
// eviction and resourceVersion conflicts; those behaviours are checked in the real-control-plane
// e2e, and the code here does not rely on them (it filters by name and node in code).

const testNamespace = "dovetail-system"

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	kube    *fake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	clock   *testingclock.FakeClock
	watcher *Watcher
	applier *Applier
	builder *SnapshotBuilder
	ctx     context.Context
}

func newFixture(t testing.TB, kubeObjs []runtime.Object, dynObjs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		kube:  fake.NewClientset(kubeObjs...),
		dyn:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), ListKinds, dynObjs...),
		clock: testingclock.NewFakeClock(t0),
	}
	w, err := NewWatcher(f.kube, f.dyn, WatcherOptions{Namespace: testNamespace, Clock: f.clock, SyncTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); w.Shutdown() })
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	f.ctx = ctx
	f.watcher = w
	f.applier = NewApplier(f.kube, f.dyn, w, ApplierOptions{Namespace: testNamespace, Clock: f.clock, EvictionTimeout: 200 * time.Millisecond})
	f.builder = NewSnapshotBuilder(w, "test", f.clock)
	return f
}

// eventually polls cond every 5 ms for up to 20 s (informer delivery is asynchronous). The bound
// only ends a failing test, so it is generous for CI's loaded 2-core machine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func node(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7220Mi"),
		}},
	}
}

func pod(ns, name, nodeName string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + ns + "-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name: "app", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if nodeName != "" {
		p.Status.Phase = corev1.PodRunning
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func ownedByDaemonSet(p *corev1.Pod) {
	ctrl := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "uid-ds", Controller: &ctrl}}
}

func daemonSet(ns, name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

func nodePoolObj(t *testing.T, name string) runtime.Object {
	t.Helper()
	np := &apisv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimSpec{
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
				Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"},
			}}},
			NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
			ExpireAfter:  apisv1.MustParseNillableDuration("720h"),
		}}},
	}
	u, err := ToUnstructured(np, apisv1.GroupVersion, "NodePool")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func nodeClassObj(t *testing.T, name string) runtime.Object {
	t.Helper()
	alias := "bottlerocket@latest"
	nc := &apisv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apisv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-test",
			AMISelectorTerms:           []apisv1.AMISelectorTerm{{Alias: alias}},
			SubnetSelectorTerms:        []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []apisv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		},
	}
	u, err := ToUnstructured(nc, apisv1.AWSGroupVersion, "EC2NodeClass")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// newOwnedFixture is newFixture with every Node of kubeObjs made Dovetail's as the agent's own
// launches are (ownAll): for the tests of rules other than ownership.
func newOwnedFixture(t testing.TB, kubeObjs []runtime.Object, dynObjs ...runtime.Object) *fixture {
	t.Helper()
	return newFixture(t, kubeObjs, ownAll(t, kubeObjs, dynObjs)...)
}

// ownAll returns dynObjs plus what makes each Node in kubeObjs Dovetail's (ownership.go): a Node
// that a NodeClaim of dynObjs names in status.nodeName gets that NodeClaim's providerID; any
// other Node gets (unless it has one) the providerID "aws:///us-east-1a/i-<name>" and an
// agent-created NodeClaim "nc-<name>" recording it.
func ownAll(t testing.TB, kubeObjs, dynObjs []runtime.Object) []runtime.Object {
	t.Helper()
	out := append([]runtime.Object(nil), dynObjs...)
	claimed := map[string]string{} // node name → providerID
	for _, o := range dynObjs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || u.GetKind() != "NodeClaim" {
			continue
		}
		nodeName, _, _ := unstructured.NestedString(u.Object, "status", "nodeName")
		pid, _, _ := unstructured.NestedString(u.Object, "status", "providerID")
		if nodeName != "" && pid != "" {
			claimed[nodeName] = pid
		}
	}
	for _, o := range kubeObjs {
		n, ok := o.(*corev1.Node)
		if !ok {
			continue
		}
		if pid, ok := claimed[n.Name]; ok {
			if n.Spec.ProviderID == "" {
				n.Spec.ProviderID = pid
			}
			continue
		}
		if n.Spec.ProviderID == "" {
			n.Spec.ProviderID = "aws:///us-east-1a/i-" + n.Name
		}
		pool := n.Labels[apisv1.LabelNodePool]
		if pool == "" {
			pool = "default"
		}
		out = append(out, nodeClaimWithStatus(t, "nc-"+n.Name, pool, n.Spec.ProviderID, n.Name))
	}
	return out
}

// nodeClaimWithStatus is a NodeClaim the agent created (its ownership mark on) in pool, recording
// providerID and nodeName.
func nodeClaimWithStatus(t testing.TB, name, pool, providerID, nodeName string) runtime.Object {
	t.Helper()
	nc := &apisv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apisv1.LabelNodePool: pool, apisv1.LabelManagedBy: apisv1.ManagedByAgent}},
		Spec:       apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"}},
		Status:     apisv1.NodeClaimStatus{ProviderID: providerID, NodeName: nodeName},
	}
	u, err := ToUnstructured(nc, apisv1.GroupVersion, "NodeClaim")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// nodeClaimObj is a NodeClaim the agent created (its ownership mark on).
func nodeClaimObj(t *testing.T, name, nodeName string) runtime.Object {
	t.Helper()
	nc := &apisv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent}},
		Spec: apisv1.NodeClaimSpec{
			NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
		},
		Status: apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0", NodeName: nodeName},
	}
	u, err := ToUnstructured(nc, apisv1.GroupVersion, "NodeClaim")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// settledRevision waits until the watcher's revision has not moved for 50 ms and returns it:
// an informer updates its cache before its event handler bumps the revision, so a cache that
// already shows every object can still be a revision behind.
func settledRevision(t *testing.T, w *Watcher) int64 {
	t.Helper()
	last, since := w.Revision(), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cur := w.Revision(); cur != last {
			last, since = cur, time.Now()
		} else if time.Since(since) >= 50*time.Millisecond {
			return last
		}
	}
	t.Fatal("the watcher's revision never settled")
	return 0
}
