package kube

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

const (
	pidN1 = "aws:///us-east-1a/i-0123456789abcdef0"
	pidN2 = "aws:///us-east-1b/i-0fedcba9876543210"
)

// registeringNode is a Node as a kubelet registers it from Dovetail's user data: the
// karpenter.sh/unregistered:NoExecute taint and one kubelet label, nothing else.
func registeringNode(name, providerID string) *corev1.Node {
	n := node(name)
	n.ResourceVersion = "41"
	n.Spec.ProviderID = providerID
	n.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}
	return n
}

func nodeClaimWith(t *testing.T, name, providerID string, mod func(*apisv1.NodeClaim)) runtime.Object {
	t.Helper()
	nc := &apisv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, Labels: map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent}},
		Spec:       apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"}},
		Status:     apisv1.NodeClaimStatus{ProviderID: providerID},
	}
	if mod != nil {
		mod(nc)
	}
	u, err := ToUnstructured(nc, apisv1.GroupVersion, "NodeClaim")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func getNodeClaim(t *testing.T, f *fixture, name string) *apisv1.NodeClaim {
	t.Helper()
	u, err := f.dyn.Resource(NodeClaimGVR).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nc := &apisv1.NodeClaim{}
	if err := FromUnstructured(u, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

// registrable gives a NodeClaim what registerCmd writes from it: the agent applies a RegisterNode
// only with the NodeClaim's own labels, annotations and taints.
func registrable(nc *apisv1.NodeClaim) {
	nc.Labels["team"] = "payments"
	nc.Annotations = map[string]string{"karpenter.sh/nodepool-hash": "6821555240594823858"}
	nc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}}
	nc.Spec.StartupTaints = []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}}
}

func registerCmd(id, nodeName, claim string, rev int64) *events.Command {
	return &events.Command{
		ID: id, Kind: events.CommandRegisterNode, Cluster: "test", SnapshotRevision: rev,
		NodeName: nodeName, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim}},
		Labels: map[string]string{
			apisv1.LabelNodePool: "default", "karpenter.sh/registered": "true", "team": "payments",
		},
		Annotations: map[string]string{"karpenter.sh/nodepool-hash": "6821555240594823858"},
		Taints: []corev1.Taint{
			{Key: "dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute},
		},
		Finalizer: events.FinalizerTermination,
	}
}

func patchBodies(actions []k8stesting.Action, resource, subresource, name string) []string {
	var out []string
	for _, a := range actions {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetVerb() == "patch" && a.GetResource().Resource == resource &&
			a.GetSubresource() == subresource && p.GetName() == name {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func TestRegisterNode(t *testing.T) {
	f := newFixture(t, []runtime.Object{registeringNode("n1", pidN1), registeringNode("n2", "aws:///us-east-1b/i-0aaaaaaaaaaaaaaa9")},
		nodeClaimWith(t, "default-a1", pidN1, registrable), nodeClaimWith(t, "default-b2", pidN2, registrable))
	eventually(t, "sync", func() bool { return f.watcher.Node("n2") != nil })
	rev := settledRevision(t, f.watcher)

	cmd := registerCmd("reg-n1", "n1", "default-a1", rev)
	if err := f.applier.Apply(f.ctx, cmd); err != nil {
		t.Fatal(err)
	}
	n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	wantLabels := map[string]string{
		corev1.LabelInstanceTypeStable: "m5.large", // the kubelet's
		apisv1.LabelNodePool:           "default", "karpenter.sh/registered": "true", "team": "payments",
	}
	if !reflect.DeepEqual(n.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", n.Labels, wantLabels)
	}
	if !reflect.DeepEqual(n.Annotations, cmd.Annotations) {
		t.Errorf("annotations = %v, want %v", n.Annotations, cmd.Annotations)
	}
	if !reflect.DeepEqual(n.Spec.Taints, cmd.Taints) {
		t.Errorf("taints = %+v, want exactly the command's %+v (no %s)", n.Spec.Taints, cmd.Taints, apisv1.TaintKeyUnregistered)
	}
	if !reflect.DeepEqual(n.Finalizers, []string{events.FinalizerTermination}) {
		t.Errorf("finalizers = %v, want [%s]", n.Finalizers, events.FinalizerTermination)
	}
	patches := patchBodies(f.kube.Actions(), "nodes", "", "n1")
	if len(patches) != 1 || !strings.Contains(patches[0], `"resourceVersion":"41"`) {
		t.Fatalf("node patches = %v, want one carrying the resourceVersion read (41)", patches)
	}

	// Redelivered: everything is in place, nothing is written.
	if err := f.applier.Apply(f.ctx, cmd); err != nil {
		t.Fatal(err)
	}
	if got := len(patchBodies(f.kube.Actions(), "nodes", "", "n1")); got != 1 {
		t.Fatalf("%d node patches after redelivery, want still 1", got)
	}

	// n2 is another instance than the NodeClaim records: never right.
	err := f.applier.Apply(f.ctx, registerCmd("reg-n2", "n2", "default-b2", rev))
	if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "i-0aaaaaaaaaaaaaaa9") || !strings.Contains(err.Error(), pidN2) {
		t.Fatalf("providerID mismatch: err = %v, want ErrInvalidCommand naming both provider IDs", err)
	}

	// A node not registered yet: retryable, not poison, not a refusal.
	err = f.applier.Apply(f.ctx, registerCmd("reg-n9", "n9", "default-a1", rev))
	var refused *RefusedError
	if err == nil || errors.Is(err, ErrInvalidCommand) || errors.As(err, &refused) || !strings.Contains(err.Error(), "n9") {
		t.Fatalf("absent node: err = %v, want a plain retryable error naming n9", err)
	}
}

func TestRegisterNodeStaleRefused(t *testing.T) {
	f := newFixture(t, []runtime.Object{registeringNode("n1", pidN1)}, nodeClaimWith(t, "default-a1", pidN1, registrable))
	eventually(t, "sync", func() bool { return f.watcher.Node("n1") != nil })
	rev := settledRevision(t, f.watcher)

	// After the decision, n1 is deleted and a new instance registers under the same name.
	if err := f.kube.CoreV1().Nodes().Delete(f.ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n1 gone", func() bool { return f.watcher.Node("n1") == nil })
	again := registeringNode("n1", pidN1)
	again.UID = "uid-n1-again"
	if _, err := f.kube.CoreV1().Nodes().Create(f.ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n1 re-created", func() bool { n := f.watcher.Node("n1"); return n != nil && n.UID == "uid-n1-again" })

	var refused *RefusedError
	if err := f.applier.Apply(f.ctx, registerCmd("reg-n1", "n1", "default-a1", rev)); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "created after") {
		t.Fatalf("err = %v, want a refusal: node created after the revision", err)
	}
	evs := refusalEvents(t, f)
	if len(evs) != 1 || evs[0].InvolvedObject.Kind != "Node" || evs[0].InvolvedObject.Name != "n1" || evs[0].InvolvedObject.UID != "uid-n1-again" ||
		!strings.Contains(evs[0].Message, "reg-n1") {
		t.Fatalf("events = %+v, want one on the new Node n1 naming the command", evs)
	}
	n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != apisv1.TaintKeyUnregistered || len(n.Finalizers) != 0 || n.Labels[apisv1.LabelNodePool] != "" {
		t.Fatalf("refused RegisterNode changed the node: %+v", n)
	}
}

func TestSetNodeClaimStatus(t *testing.T) {
	launchedAt := metav1.NewTime(t0.Add(-5 * time.Minute))
	f := newFixture(t, nil, nodeClaimWith(t, "default-a1", pidN1, func(nc *apisv1.NodeClaim) {
		nc.Status.Conditions = []metav1.Condition{
			{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: launchedAt, ObservedGeneration: 1},
			{Type: apisv1.ConditionRegistered, Status: metav1.ConditionUnknown, Reason: "AwaitingReconciliation", LastTransitionTime: launchedAt, ObservedGeneration: 1},
		}
	}))
	cmd := &events.Command{ID: "status-a1", Kind: events.CommandSetNodeClaimStatus, Cluster: "test",
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a1"}, Status: apisv1.NodeClaimStatus{
			NodeName: "n1",
			Conditions: []metav1.Condition{
				// Launched is re-asserted (same status, a later time): its transition time stays.
				{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(t0)},
				{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered", Message: "node n1 registered"},
			},
		}}}
	for i := 0; i < 2; i++ {
		if err := f.applier.Apply(f.ctx, cmd); err != nil {
			t.Fatalf("apply #%d: %v", i+1, err)
		}
	}
	got := getNodeClaim(t, f, "default-a1")
	want := []metav1.Condition{
		{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: launchedAt, ObservedGeneration: 1},
		{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered", Message: "node n1 registered", LastTransitionTime: metav1.NewTime(t0), ObservedGeneration: 1},
	}
	if len(got.Status.Conditions) != 2 {
		t.Fatalf("conditions = %+v", got.Status.Conditions)
	}
	for i := range want {
		if !conditionEqual(got.Status.Conditions[i], want[i]) {
			t.Errorf("condition %d = %+v, want %+v", i, got.Status.Conditions[i], want[i])
		}
	}
	if got.Status.NodeName != "n1" || got.Status.ProviderID != pidN1 {
		t.Errorf("status.nodeName %q providerID %q, want n1 and the provider ID kept", got.Status.NodeName, got.Status.ProviderID)
	}
	// One write, through /status; the redelivery found it recorded.
	if p, all := countActions(f.dyn.Actions(), "patch", "nodeclaims", "status"), countActions(f.dyn.Actions(), "patch", "nodeclaims", ""); p != 1 || all != 0 {
		t.Fatalf("status patches %d, main-resource patches %d; want 1 and 0", p, all)
	}

	// A NodeClaim gone has nothing to record.
	gone := *cmd
	gone.ID, gone.NodeClaim = "status-gone", &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-zz"}, Status: cmd.NodeClaim.Status}
	if err := f.applier.Apply(f.ctx, &gone); err != nil {
		t.Fatalf("NodeClaim gone: %v", err)
	}
	bad := *cmd
	bad.NodeClaim = &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a1"}, Status: apisv1.NodeClaimStatus{
		Conditions: []metav1.Condition{{Type: apisv1.ConditionReady, Status: "Yes"}}}}
	if err := f.applier.Apply(f.ctx, &bad); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "conditions[0].status") {
		t.Fatalf("bad status: err = %v, want ErrInvalidCommand naming conditions[0].status", err)
	}
	// ClearConditions removes a condition (Karpenter clears Consolidatable and Drifted); a
	// redelivery finds nothing to remove and writes nothing.
	clear := &events.Command{ID: "clear-a1", Kind: events.CommandSetNodeClaimStatus, Cluster: "test",
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a1"}}, ClearConditions: []string{apisv1.ConditionRegistered}}
	for i := 0; i < 2; i++ {
		if err := f.applier.Apply(f.ctx, clear); err != nil {
			t.Fatalf("clear #%d: %v", i+1, err)
		}
	}
	got = getNodeClaim(t, f, "default-a1")
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != apisv1.ConditionLaunched {
		t.Fatalf("after clear: %+v", got.Status.Conditions)
	}
	if p := countActions(f.dyn.Actions(), "patch", "nodeclaims", "status"); p != 2 {
		t.Fatalf("status patches %d, want 2 (the first write and one clear)", p)
	}
	clear.ClearConditions = []string{""}
	if err := f.applier.Apply(f.ctx, clear); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "clearConditions[0]") {
		t.Fatalf("empty clear: %v", err)
	}
}

func TestLabelNode(t *testing.T) {
	f := newOwnedFixture(t, []runtime.Object{node("n1")})
	eventually(t, "sync", func() bool { return f.watcher.Node("n1") != nil })
	rev := settledRevision(t, f.watcher)
	cmd := &events.Command{ID: "init-n1", Kind: events.CommandLabelNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n1",
		Labels: map[string]string{"karpenter.sh/initialized": "true"}}
	if err := f.applier.Apply(f.ctx, cmd); err != nil {
		t.Fatal(err)
	}
	n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	if want := map[string]string{corev1.LabelInstanceTypeStable: "m5.large", "karpenter.sh/initialized": "true"}; !reflect.DeepEqual(n.Labels, want) {
		t.Fatalf("labels = %v, want %v", n.Labels, want)
	}
	gone := *cmd
	gone.ID, gone.NodeName = "init-n9", "n9"
	if err := f.applier.Apply(f.ctx, &gone); err != nil {
		t.Fatalf("node gone: %v", err)
	}
	bad := *cmd
	bad.Labels = map[string]string{"karpenter.sh/initialized": "not a value!"}
	if err := f.applier.Apply(f.ctx, &bad); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), `command.labels["karpenter.sh/initialized"]`) {
		t.Fatalf("bad label: err = %v, want ErrInvalidCommand naming the label", err)
	}
}

func TestRemoveFinalizer(t *testing.T) {
	n1 := node("n1")
	n1.ResourceVersion = "17"
	n1.Finalizers = []string{events.FinalizerTermination, "example.com/keep"}
	n1.Spec.ProviderID = pidN1
	deleting := metav1.NewTime(t0)
	n1.DeletionTimestamp = &deleting
	f := newFixture(t, []runtime.Object{n1}, nodeClaimWith(t, "default-a1", pidN1, func(nc *apisv1.NodeClaim) {
		nc.Finalizers = []string{events.FinalizerTermination}
		nc.Status.NodeName = "n1"
		nc.DeletionTimestamp = &deleting
	}))
	eventually(t, "sync", func() bool {
		nc, _ := f.watcher.NodeClaim("default-a1")
		return f.watcher.Node("n1") != nil && nc != nil
	})
	rev := settledRevision(t, f.watcher)

	gone := &events.InstanceEvidence{ProviderID: pidN1, State: events.InstanceTerminated}
	onNode := &events.Command{ID: "fin-n1", Kind: events.CommandRemoveFinalizer, Cluster: "test", SnapshotRevision: rev, NodeName: "n1",
		Finalizer: events.FinalizerTermination, Instance: gone}
	onClaim := &events.Command{ID: "fin-a1", Kind: events.CommandRemoveFinalizer, Cluster: "test", SnapshotRevision: rev,
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a1"}}, Finalizer: events.FinalizerTermination, Instance: gone}
	for i := 0; i < 2; i++ { // the second time the finalizer is gone: success, no write
		for _, c := range []*events.Command{onNode, onClaim} {
			if err := f.applier.Apply(f.ctx, c); err != nil {
				t.Fatalf("%s #%d: %v", c.ID, i+1, err)
			}
		}
	}
	n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	if !reflect.DeepEqual(n.Finalizers, []string{"example.com/keep"}) {
		t.Errorf("node finalizers = %v, want [example.com/keep]", n.Finalizers)
	}
	if p := patchBodies(f.kube.Actions(), "nodes", "", "n1"); len(p) != 1 || !strings.Contains(p[0], `"resourceVersion":"17"`) {
		t.Errorf("node patches = %v, want one carrying resourceVersion 17", p)
	}
	if nc := getNodeClaim(t, f, "default-a1"); len(nc.Finalizers) != 0 {
		t.Errorf("NodeClaim finalizers = %v, want none", nc.Finalizers)
	}
	if p := countActions(f.dyn.Actions(), "patch", "nodeclaims", ""); p != 1 {
		t.Errorf("%d NodeClaim patches, want 1", p)
	}
	// Objects gone: success.
	absent := *onClaim
	absent.NodeClaim = &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-zz"}}
	if err := f.applier.Apply(f.ctx, &absent); err != nil {
		t.Fatalf("NodeClaim gone: %v", err)
	}
}

// TestNominatePods: the command gives each unbound pod the node's planned-taint toleration, and
// never sets status.nominatedNodeName (design note "Planned pods tolerate, they are not
// nominated"); a bound pod, a pod gone and a redelivery write nothing.
func TestNominatePods(t *testing.T) {
	f := newOwnedFixture(t, []runtime.Object{node("n1"), node("n2"), pod("default", "web-0", ""), pod("default", "web-1", "n1")})
	eventually(t, "sync", func() bool { return len(f.watcher.PodsOnNode("n1")) == 1 && f.watcher.Node("n2") != nil })
	tol := apisv1.PlannedToleration("nc-n2") // n2's NodeClaim in the owned fixture
	cmd := &events.Command{ID: "nominate", Kind: events.CommandNominatePods, Cluster: "test", NodeName: "n2", Toleration: &tol,
		Pods: []events.PodRef{{Namespace: "default", Name: "web-0", UID: "uid-default-web-0"}, {Namespace: "default", Name: "web-1"}, {Namespace: "default", Name: "web-9"}}}
	for i := 0; i < 2; i++ {
		if err := f.applier.Apply(f.ctx, cmd); err != nil {
			t.Fatalf("apply #%d: %v", i+1, err)
		}
		// The second delivery reads web-0 from the cache: let it see the first's write.
		eventually(t, "the toleration in the cache", func() bool {
			p := f.watcher.Pod("default", "web-0")
			return p != nil && apisv1.HasPlannedToleration(p, "nc-n2")
		})
	}
	p0, _ := f.kube.CoreV1().Pods("default").Get(f.ctx, "web-0", metav1.GetOptions{})
	p1, _ := f.kube.CoreV1().Pods("default").Get(f.ctx, "web-1", metav1.GetOptions{})
	if !apisv1.HasPlannedToleration(p0, "nc-n2") || p0.Status.NominatedNodeName != "" {
		t.Errorf("web-0: tolerations %v, nominated %q; want the planned toleration and no nomination", p0.Spec.Tolerations, p0.Status.NominatedNodeName)
	}
	if len(p1.Spec.Tolerations) != 0 || p1.Spec.NodeName != "n1" {
		t.Errorf("web-1 (bound to n1): tolerations %v on %q, want none, still on n1", p1.Spec.Tolerations, p1.Spec.NodeName)
	}
	// One write, for web-0 only, and none through pods/status.
	if n := countActions(f.kube.Actions(), "patch", "pods", "status"); n != 0 {
		t.Errorf("%d pods/status patches, want 0", n)
	}
	if n := countActions(f.kube.Actions(), "patch", "pods", ""); n != 1 {
		t.Errorf("%d pod patches, want 1", n)
	}
}

// TestNominatePodsManyAtOnce: a command of 20 pods gives every one the toleration, reading each
// from the agent's cache (no GET when the cache has the pod), and a pod whose write fails is the
// one the retryable error lists, the others done all the same.
func TestNominatePodsManyAtOnce(t *testing.T) {
	objs := []runtime.Object{node("n1")}
	var refs []events.PodRef
	for i := range 20 {
		name := fmt.Sprintf("web-%d", i)
		objs = append(objs, pod("default", name, "", func(p *corev1.Pod) { p.ResourceVersion = "1" }))
		refs = append(refs, events.PodRef{Namespace: "default", Name: name, UID: "uid-default-" + name})
	}
	f := newOwnedFixture(t, objs)
	eventually(t, "sync", func() bool { return f.watcher.Pod("default", "web-19") != nil && f.watcher.Node("n1") != nil })
	f.kube.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.PatchAction).GetName() == "web-7" {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	f.kube.ClearActions()
	tol := apisv1.PlannedToleration("nc-n1")
	err := f.applier.Apply(f.ctx, &events.Command{ID: "nominate-20", Kind: events.CommandNominatePods, Cluster: "test", NodeName: "n1", Pods: refs, Toleration: &tol})
	if err == nil || !strings.Contains(err.Error(), "1 of 20 pods failed: default/web-7: etcdserver: request timed out") {
		t.Fatalf("err = %v, want one retryable error listing default/web-7 only", err)
	}
	if n := countActions(f.kube.Actions(), "get", "pods", ""); n != 0 {
		t.Errorf("%d pod GETs, want 0 (every pod read from the cache)", n)
	}
	for i := range 20 {
		p, _ := f.kube.CoreV1().Pods("default").Get(f.ctx, fmt.Sprintf("web-%d", i), metav1.GetOptions{})
		if got := apisv1.HasPlannedToleration(p, "nc-n1"); got != (i != 7) {
			t.Errorf("web-%d tolerates nc-n1's planned taint: %v, want %v", i, got, i != 7)
		}
	}
}

func TestDeletePods(t *testing.T) {
	// n1's NodeClaim is being deleted and its terminationGracePeriod is what DeletePods serves.
	terminating := nodeClaimWith(t, "nc-n1", "aws:///us-east-1a/i-n1", func(nc *apisv1.NodeClaim) {
		nc.Labels = map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent}
		nc.Status.NodeName = "n1"
		nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		nc.Finalizers = []string{events.FinalizerTermination}
		nc.DeletionTimestamp = &metav1.Time{Time: t0}
	})
	f := newOwnedFixture(t, []runtime.Object{node("n1"), node("n2"),
		pod("default", "a", "n1"), pod("default", "b", "n1"), pod("default", "c", "n2"), pod("default", "e", "n1"), pod("default", "f", "n1")}, terminating)
	eventually(t, "sync", func() bool { return len(f.watcher.PodsOnNode("n1")) == 4 })
	rev := settledRevision(t, f.watcher)

	// The fake clientset ignores delete preconditions; this reactor stands in for the API
	// server: e was re-created between the agent's read and its delete (409, as the registry
	// answers a failed UID precondition), and f's delete fails outright.
	f.kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.(k8stesting.DeleteAction).GetName() {
		case "e":
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "e", errors.New("Precondition failed: UID in precondition: uid-default-e, UID in object meta: uid-default-e2"))
		case "f":
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	grace := int64(30)
	cmd := &events.Command{ID: "del-pods-n1", Kind: events.CommandDeletePods, Cluster: "test", SnapshotRevision: rev, NodeName: "n1", Pods: []events.PodRef{
		{Namespace: "default", Name: "a", UID: "uid-default-a", GracePeriodSeconds: &grace},
		{Namespace: "default", Name: "b", UID: "uid-default-b-old"}, // re-created since: the pod named is gone
		{Namespace: "default", Name: "c", UID: "uid-default-c"},     // on n2: not this node's
		{Namespace: "default", Name: "d", UID: "uid-default-d"},     // gone
		{Namespace: "default", Name: "e", UID: "uid-default-e"},
		{Namespace: "default", Name: "f"},
	}}
	err := f.applier.Apply(f.ctx, cmd)
	if err == nil || errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "1 of 6 pods failed: default/f: etcdserver: request timed out") {
		t.Fatalf("err = %v, want one retryable error listing default/f only", err)
	}
	deletes := map[string]metav1.DeleteOptions{}
	for _, a := range f.kube.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			deletes[d.GetName()] = d.GetDeleteOptions()
		}
	}
	var names []string
	for n := range deletes {
		names = append(names, n)
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "a,e,f" {
		t.Fatalf("deleted %s, want a,e,f (b re-created, c on n2, d gone)", got)
	}
	a := deletes["a"]
	if a.Preconditions == nil || a.Preconditions.UID == nil || *a.Preconditions.UID != "uid-default-a" || a.GracePeriodSeconds == nil || *a.GracePeriodSeconds != 30 {
		t.Fatalf("delete of a: options %+v, want UID precondition uid-default-a and grace period 30", a)
	}
	if f := deletes["f"]; f.Preconditions == nil || *f.Preconditions.UID != "uid-default-f" || f.GracePeriodSeconds != nil {
		t.Fatalf("delete of f: options %+v, want the UID read (uid-default-f) and the pod's own grace period", f)
	}
	for _, name := range []string{"b", "c"} {
		if _, err := f.kube.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("pod %s: %v, want it left alone", name, err)
		}
	}
	if _, err := f.kube.CoreV1().Pods("default").Get(f.ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod a: %v, want deleted", err)
	}
}

func TestDrainNodeLeavesDoNotDisruptPods(t *testing.T) {
	dnd := func(p *corev1.Pod) { p.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"} }
	n1 := node("n1")
	n1.Labels[apisv1.LabelNodePool] = "default"
	n1.Spec.Taints = []corev1.Taint{disruptedTaint}
	f := newOwnedFixture(t, []runtime.Object{n1, pod("default", "app-1", "n1"), pod("default", "batch-1", "n1", dnd)})
	eventually(t, "sync", func() bool { return len(f.watcher.PodsOnNode("n1")) == 2 })
	rev := settledRevision(t, f.watcher)
	var mu sync.Mutex
	var evicted []string
	f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		mu.Lock()
		evicted = append(evicted, ev.Namespace+"/"+ev.Name)
		mu.Unlock()
		return true, nil, f.kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name)
	})
	cmd := &events.Command{ID: "drain-n1", Kind: events.CommandDrainNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n1"}
	var inc *DrainIncompleteError
	if err := f.applier.Apply(f.ctx, cmd); !errors.As(err, &inc) {
		t.Fatalf("err = %v, want *DrainIncompleteError", err)
	}
	if fmt.Sprint(inc.Evicted) != "[default/app-1]" || fmt.Sprint(inc.Blocked) != "[default/batch-1: karpenter.sh/do-not-disrupt]" {
		t.Fatalf("drain = evicted %v blocked %v", inc.Evicted, inc.Blocked)
	}
	if fmt.Sprint(evicted) != "[default/app-1]" {
		t.Fatalf("evictions %v, want only default/app-1", evicted)
	}
	if _, err := f.kube.CoreV1().Pods("default").Get(f.ctx, "batch-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("do-not-disrupt pod: %v, want it running", err)
	}
}

func TestInvalidLifecycleCommands(t *testing.T) {
	f := newFixture(t, nil)
	nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a1"}}
	neg := int64(-1)
	cases := []struct {
		cmd  *events.Command
		want string
	}{
		{&events.Command{ID: "x", Kind: events.CommandRegisterNode, NodeName: "n1"}, "command.nodeClaim.metadata.name"},
		{&events.Command{ID: "x", Kind: events.CommandRegisterNode, NodeName: "n1", NodeClaim: nc}, "command.finalizer"},
		{&events.Command{ID: "x", Kind: events.CommandRegisterNode, NodeName: "n1", NodeClaim: nc, Finalizer: "termination"}, "command.finalizer"},
		{&events.Command{ID: "x", Kind: events.CommandRegisterNode, NodeName: "n1", NodeClaim: nc, Finalizer: events.FinalizerTermination,
			Taints: []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}, {Key: "b", Effect: "Never"}}}, "command.taints[1].effect"},
		{&events.Command{ID: "x", Kind: events.CommandSetNodeClaimStatus}, "command.nodeClaim.metadata.name"},
		{&events.Command{ID: "x", Kind: events.CommandLabelNode, NodeName: "n1"}, "command.labels"},
		{&events.Command{ID: "x", Kind: events.CommandRemoveFinalizer, NodeName: "n1"}, "command.finalizer"},
		{&events.Command{ID: "x", Kind: events.CommandRemoveFinalizer, Finalizer: events.FinalizerTermination}, "command.nodeName"},
		{&events.Command{ID: "x", Kind: events.CommandNominatePods, NodeName: "n1"}, "command.pods"},
		{&events.Command{ID: "x", Kind: events.CommandDeletePods, NodeName: "n1", Pods: []events.PodRef{{Name: "a"}}}, "command.pods[0]"},
		{&events.Command{ID: "x", Kind: events.CommandDeletePods, NodeName: "n1", Pods: []events.PodRef{{Namespace: "default", Name: "a", GracePeriodSeconds: &neg}}}, "command.pods[0].gracePeriodSeconds"},
	}
	for _, c := range cases {
		err := f.applier.Apply(f.ctx, c.cmd)
		if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInvalidCommand naming %s", c.cmd.Kind, err, c.want)
		}
	}
}

// A Node held by the termination finalizer is being deleted and waits for its taint and drain:
// unlike a node going away on its own (TestStaleNodeCommandsRefusedWithEvent, n3), they apply.
func TestTerminatingNodeTaintedAndDrained(t *testing.T) {
	n1 := node("n1")
	n1.Finalizers = []string{events.FinalizerTermination}
	f := newOwnedFixture(t, []runtime.Object{n1, pod("default", "app-1", "n1")})
	eventually(t, "sync", func() bool { return len(f.watcher.PodsOnNode("n1")) == 1 })
	deleting, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	now := metav1.NewTime(t0)
	deleting.DeletionTimestamp = &now
	if _, err := f.kube.CoreV1().Nodes().Update(f.ctx, deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deletion observed", func() bool { n := f.watcher.Node("n1"); return n != nil && n.DeletionTimestamp != nil })
	rev := settledRevision(t, f.watcher)
	var evicted []string
	f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		evicted = append(evicted, ev.Namespace+"/"+ev.Name)
		return true, nil, f.kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name)
	})
	taint := &events.Command{ID: "terminate-taint", Kind: events.CommandTaintNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n1",
		Taint: &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
	drain := &events.Command{ID: "terminate-drain", Kind: events.CommandDrainNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n1"}
	for _, c := range []*events.Command{taint, drain} {
		if err := f.applier.Apply(f.ctx, c); err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
	}
	n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != apisv1.TaintKeyDisrupted || fmt.Sprint(evicted) != "[default/app-1]" {
		t.Fatalf("taints %+v, evicted %v; want the disrupted taint and default/app-1 evicted", n.Spec.Taints, evicted)
	}
	if evs := refusalEvents(t, f); len(evs) != 0 {
		t.Fatalf("refusals %+v, want none", evs)
	}
}
