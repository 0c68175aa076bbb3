package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func createCmd(name, providerID string, rev int64) *events.Command {
	return &events.Command{
		ID: events.CommandID("test", "create", name), Kind: events.CommandCreateNodeClaim, Cluster: "test", SnapshotRevision: rev,
		NodeClaim: &apisv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apisv1.LabelNodePool: "default"}, CreationTimestamp: metav1.NewTime(t0)},
			Spec: apisv1.NodeClaimSpec{
				NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
				Requirements: []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
					Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"},
				}}},
			},
			Status: apisv1.NodeClaimStatus{ProviderID: providerID, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
		},
	}
}

func countActions(actions []k8stesting.Action, verb, resource, subresource string) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

func TestCreateNodeClaimIdempotent(t *testing.T) {
	f := newFixture(t, nil)
	const pid = "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1"
	// Revision 0 predates the agent: CreateNodeClaim is still applied, never refused.
	cmd := createCmd("default-abc12", pid, 0)
	for i := 0; i < 2; i++ {
		if err := f.applier.Apply(f.ctx, cmd); err != nil {
			t.Fatalf("apply #%d: %v", i+1, err)
		}
	}
	list, err := f.dyn.Resource(NodeClaimGVR).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d NodeClaims after applying twice, want 1", len(list.Items))
	}
	got := &apisv1.NodeClaim{}
	if err := FromUnstructured(&list.Items[0], got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ProviderID != pid || got.Spec.NodeClassRef == nil || got.Spec.NodeClassRef.Name != "default" || got.Labels[apisv1.LabelNodePool] != "default" {
		t.Fatalf("stored NodeClaim = %+v", got)
	}
	acts := f.dyn.Actions()
	// Two creates (the second answered AlreadyExists), one status patch: the second apply saw
	// the provider ID already recorded.
	if c, p := countActions(acts, "create", "nodeclaims", ""), countActions(acts, "patch", "nodeclaims", "status"); c != 2 || p != 1 {
		t.Fatalf("creates %d, status patches %d; want 2 and 1", c, p)
	}

	// Killed between create and status: the NodeClaim exists without a provider ID; the
	// redelivered command completes it.
	bare := createCmd("default-def34", "aws:///us-east-1b/i-0bbbbbbbbbbbbbbb2", 0)
	u, _ := ToUnstructured(&apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-def34",
		Labels: map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelManagedBy: apisv1.ManagedByAgent}}}, apisv1.GroupVersion, "NodeClaim")
	if _, err := f.dyn.Resource(NodeClaimGVR).Create(f.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.applier.Apply(f.ctx, bare); err != nil {
		t.Fatal(err)
	}
	got2, _ := f.dyn.Resource(NodeClaimGVR).Get(f.ctx, "default-def34", metav1.GetOptions{})
	if pid2, _, _ := unstructuredString(got2.Object, "status", "providerID"); pid2 != "aws:///us-east-1b/i-0bbbbbbbbbbbbbbb2" {
		t.Fatalf("providerID after completion = %q", pid2)
	}

	// A different instance for the same NodeClaim can never be right.
	err = f.applier.Apply(f.ctx, createCmd("default-abc12", "aws:///us-east-1a/i-0ccccccccccccccc3", 0))
	if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "status.providerID") {
		t.Fatalf("conflicting providerID: err = %v, want ErrInvalidCommand naming status.providerID", err)
	}
}

func unstructuredString(m map[string]any, path ...string) (string, bool, error) {
	cur := any(m)
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = mm[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

func refusalEvents(t *testing.T, f *fixture) []corev1.Event {
	t.Helper()
	list, err := f.kube.CoreV1().Events(metav1.NamespaceDefault).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == ReasonCommandRefused {
			out = append(out, e)
		}
	}
	return out
}

func TestStaleNodeCommandsRefusedWithEvent(t *testing.T) {
	f := newOwnedFixture(t, []runtime.Object{node("n1"), node("n2"), node("n3"), pod("default", "old", "n1")})
	// 3 nodes, their 3 NodeClaims, 1 pod.
	eventually(t, "initial sync events", func() bool { return f.watcher.Revision() == f.watcher.Revisions().Base()+7 })
	rev := f.watcher.Revision() // the revision a function decided on

	// After the decision, a pod lands on n1.
	if _, err := f.kube.CoreV1().Pods("default").Create(f.ctx, pod("default", "new", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod bound to n1 observed", func() bool { return f.watcher.NodePodsChangedSince("n1", rev) })

	taint := &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}
	cmd := &events.Command{ID: "cmd-taint-n1", Kind: events.CommandTaintNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n1", Taint: taint, Reason: "Underutilized"}
	for i := 0; i < 2; i++ { // a redelivered refusal records no second Event
		var refused *RefusedError
		if err := f.applier.Apply(f.ctx, cmd); !errors.As(err, &refused) {
			t.Fatalf("apply #%d: err = %v, want *RefusedError", i+1, err)
		}
	}
	evs := refusalEvents(t, f)
	if len(evs) != 1 {
		t.Fatalf("%d refusal events, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != "n1" || ev.InvolvedObject.UID != "uid-n1" || ev.Type != corev1.EventTypeWarning ||
		!strings.Contains(ev.Message, "cmd-taint-n1") || !ev.LastTimestamp.Time.Equal(t0) {
		t.Fatalf("event = %+v", ev)
	}
	if n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{}); len(n.Spec.Taints) != 0 {
		t.Fatalf("refused command tainted n1: %+v", n.Spec.Taints)
	}

	// n2 got no pod: applied, and applying again adds no second taint.
	cmd2 := *cmd
	cmd2.ID, cmd2.NodeName = "cmd-taint-n2", "n2"
	for i := 0; i < 2; i++ {
		if err := f.applier.Apply(f.ctx, &cmd2); err != nil {
			t.Fatalf("taint n2 #%d: %v", i+1, err)
		}
	}
	if n, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n2", metav1.GetOptions{}); len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != apisv1.TaintKeyDisrupted {
		t.Fatalf("n2 taints = %+v, want exactly the disrupted taint", n.Spec.Taints)
	}
	// The taint updated n2, but adds no pod: a DeleteNode of the same decision still applies.
	eventually(t, "taint observed", func() bool { return f.watcher.ChangedSince(KindNode, "n2", rev) })
	del := &events.Command{ID: "cmd-del-n2", Kind: events.CommandDeleteNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n2"}
	if err := f.applier.Apply(f.ctx, del); err != nil {
		t.Fatalf("delete n2: %v", err)
	}
	if err := f.applier.Apply(f.ctx, del); err != nil { // already gone: success
		t.Fatalf("delete n2 again: %v", err)
	}

	// n3 is being deleted: taint refused.
	n3, _ := f.kube.CoreV1().Nodes().Get(f.ctx, "n3", metav1.GetOptions{})
	now := metav1.NewTime(t0)
	n3.DeletionTimestamp = &now
	if _, err := f.kube.CoreV1().Nodes().Update(f.ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n3 deletion observed", func() bool { n := f.watcher.Node("n3"); return n != nil && n.DeletionTimestamp != nil })
	cmd3 := *cmd
	cmd3.ID, cmd3.NodeName = "cmd-taint-n3", "n3"
	var refused *RefusedError
	if err := f.applier.Apply(f.ctx, &cmd3); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "being deleted") {
		t.Fatalf("taint n3: err = %v, want refusal 'being deleted'", err)
	}

	// A revision from before this agent started has no history: refused.
	old := *cmd
	old.ID, old.NodeName, old.SnapshotRevision = "cmd-old", "n2", f.watcher.Revisions().Base()-1
	if err := f.applier.Apply(f.ctx, &old); !errors.As(err, &refused) {
		t.Fatalf("pre-start revision: err = %v, want refusal", err)
	}
	if got := len(refusalEvents(t, f)); got != 3 {
		t.Fatalf("%d refusal events, want 3 (n1, n3, pre-start)", got)
	}
}

func TestDeleteNodeClaimStaleness(t *testing.T) {
	f := newOwnedFixture(t, []runtime.Object{node("n1")}, nodeClaimObj(t, "nc-a", "n1"), nodeClaimObj(t, "nc-b", "n1"))
	eventually(t, "sync", func() bool { return f.watcher.Revision() == f.watcher.Revisions().Base()+3 })
	rev := f.watcher.Revision()
	fresh := &events.Command{ID: "del-nc-b", Kind: events.CommandDeleteNodeClaim, Cluster: "test", SnapshotRevision: rev, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-b"}}}
	if err := f.applier.Apply(f.ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(NodeClaimGVR).Get(f.ctx, "nc-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("nc-b still there: %v", err)
	}
	if err := f.applier.Apply(f.ctx, fresh); err != nil { // gone already: success
		t.Fatal(err)
	}

	if _, err := f.kube.CoreV1().Pods("default").Create(f.ctx, pod("default", "late", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod bound", func() bool { return f.watcher.NodePodsChangedSince("n1", rev) })
	stale := &events.Command{ID: "del-nc-a", Kind: events.CommandDeleteNodeClaim, Cluster: "test", SnapshotRevision: rev, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-a"}}}
	var refused *RefusedError
	if err := f.applier.Apply(f.ctx, stale); !errors.As(err, &refused) {
		t.Fatalf("err = %v, want refusal", err)
	}
	evs := refusalEvents(t, f)
	if len(evs) != 1 || evs[0].InvolvedObject.Kind != "NodeClaim" || evs[0].InvolvedObject.APIVersion != apisv1.GroupVersion || evs[0].InvolvedObject.Name != "nc-a" {
		t.Fatalf("events = %+v, want one on NodeClaim nc-a", evs)
	}
	if _, err := f.dyn.Resource(NodeClaimGVR).Get(f.ctx, "nc-a", metav1.GetOptions{}); err != nil {
		t.Fatalf("refused delete removed nc-a: %v", err)
	}
}

func TestDrainNodeEvictsThroughEvictionAPI(t *testing.T) {
	mirror := func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationMirrorPod: "hash"} }
	done := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	tolerant := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: apisv1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	n1 := node("n1")
	n1.Labels[apisv1.LabelNodePool] = "default"     // a node Dovetail manages: the agent drains no other
	n1.Spec.Taints = []corev1.Taint{disruptedTaint} // and only once its disruption is reserved
	f := newOwnedFixture(t, []runtime.Object{
		n1, node("n2"),
		pod("default", "app-1", "n1"), pod("default", "app-2", "n1"), pod("default", "app-3", "n1"),
		pod("kube-system", "ds-1", "n1", ownedByDaemonSet), pod("kube-system", "static-1", "n1", mirror),
		pod("default", "job-1", "n1", done), pod("default", "other", "n2"), pod("default", "tolerant", "n1", tolerant),
	})
	eventually(t, "sync", func() bool { return len(f.watcher.PodsOnNode("n1")) == 7 })
	rev := settledRevision(t, f.watcher)

	// The fake clientset does not implement the Eviction API (it neither deletes the pod nor
	// checks PDBs), so this reactor stands in for the API server: app-2 is held by a PDB (429,
	// as policy/v1 eviction answers), app-3's call runs past its deadline, others are deleted.
	var mu sync.Mutex
	var evicted []string
	pdbHolds := true
	f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.Name == "app-2" && pdbHolds:
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		case ev.Name == "app-3" && pdbHolds:
			return true, nil, fmt.Errorf("waiting for retry: %w", context.DeadlineExceeded)
		}
		if ev.DeleteOptions == nil || ev.DeleteOptions.Preconditions == nil || string(*ev.DeleteOptions.Preconditions.UID) != "uid-"+ev.Namespace+"-"+ev.Name {
			return true, nil, fmt.Errorf("eviction of %s without the pod's UID precondition", ev.Name)
		}
		evicted = append(evicted, ev.Namespace+"/"+ev.Name)
		return true, nil, f.kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name)
	})

	cmd := &events.Command{ID: "drain-n1", Kind: events.CommandDrainNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n1"}
	err := f.applier.Apply(f.ctx, cmd)
	var inc *DrainIncompleteError
	if !errors.As(err, &inc) {
		t.Fatalf("err = %v, want *DrainIncompleteError", err)
	}
	sort.Strings(inc.Blocked)
	if len(inc.Evicted) != 1 || inc.Evicted[0] != "default/app-1" || len(inc.Blocked) != 2 ||
		!strings.Contains(inc.Blocked[0], "default/app-2: eviction refused (429") || !strings.Contains(inc.Blocked[1], "default/app-3: eviction not accepted within 200ms") {
		t.Fatalf("drain = evicted %v blocked %v", inc.Evicted, inc.Blocked)
	}
	// Mirror, finished and disrupted-tolerating pods are never evicted; the DaemonSet pod waits
	// for the workloads.
	if got := strings.Join(evicted, ","); got != "default/app-1" {
		t.Fatalf("evicted %s", got)
	}

	// The PDB allows it now; the redelivered command evicts the rest of the first group, and
	// the DaemonSet pod (the next group, Karpenter's order) still waits for them to be gone.
	mu.Lock()
	pdbHolds = false
	mu.Unlock()
	err = f.applier.Apply(f.ctx, cmd)
	if !errors.As(err, &inc) || len(inc.Blocked) != 1 || !strings.Contains(inc.Blocked[0], "wait for the non-critical pods to be gone") {
		t.Fatalf("second drain: %v", err)
	}
	mu.Lock()
	got := strings.Join(sortedCopy(evicted), ",")
	mu.Unlock()
	if got != "default/app-1,default/app-2,default/app-3" && got != "default/app-1,default/app-1,default/app-2,default/app-3" {
		t.Fatalf("evicted %s", got)
	}
	// Once the workloads are gone, the DaemonSet pod is evicted and the drain completes.
	eventually(t, "workloads gone", func() bool { return len(f.watcher.PodsOnNode("n1")) == 4 })
	if err := f.applier.Apply(f.ctx, cmd); err != nil {
		t.Fatalf("third drain: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if last := evicted[len(evicted)-1]; last != "kube-system/ds-1" || strings.Contains(strings.Join(evicted, ","), "tolerant") {
		t.Fatalf("evicted %v", evicted)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func TestMarkOfferingsUnavailable(t *testing.T) {
	f := newFixture(t, nil)
	mark := func(it string, expires time.Time) events.UnavailableOfferingMark {
		m := events.UnavailableOfferingMark{OfferingKey: events.OfferingKey{InstanceType: it, Zone: "us-east-1a", CapacityType: "spot"}, Reason: "InsufficientInstanceCapacity"}
		if !expires.IsZero() {
			m.Expires = metav1.NewTime(expires)
		}
		return m
	}
	apply := func(id string, ms ...events.UnavailableOfferingMark) {
		t.Helper()
		if err := f.applier.Apply(f.ctx, &events.Command{ID: id, Kind: events.CommandMarkUnavailable, Cluster: "test", Unavailable: ms}); err != nil {
			t.Fatal(err)
		}
	}
	snapMarks := func() []events.UnavailableOfferingMark {
		s, err := f.builder.Build()
		if err != nil {
			t.Fatal(err)
		}
		return s.UnavailableOfferings
	}
	// No expiry given: events.UnavailableOfferingTTL (3 min) from the agent's clock.
	apply("m1", mark("m5.large", time.Time{}))
	eventually(t, "ConfigMap in the cache", func() bool { return len(snapMarks()) == 1 })
	if got := snapMarks()[0].Expires.Time; !got.Equal(t0.Add(3 * time.Minute)) {
		t.Fatalf("expires %v, want t0+3m", got)
	}
	// An earlier expiry does not shorten a stored mark.
	apply("m2", mark("m5.large", t0.Add(time.Minute)))
	cm, _ := f.kube.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, UnavailableOfferingsConfigMap, metav1.GetOptions{})
	if !strings.Contains(cm.Data["spot_us-east-1a_m5.large"], "12:03:00") {
		t.Fatalf("stored mark %s, want expiry 12:03:00", cm.Data["spot_us-east-1a_m5.large"])
	}
	// Four minutes later the m5 mark has expired: the next write prunes it.
	f.clock.Step(4 * time.Minute)
	apply("m3", mark("c5.large", t0.Add(10*time.Minute)))
	cm, _ = f.kube.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, UnavailableOfferingsConfigMap, metav1.GetOptions{})
	if _, ok := cm.Data["spot_us-east-1a_m5.large"]; ok || len(cm.Data) != 1 {
		t.Fatalf("ConfigMap data = %v, want only the c5.large mark", cm.Data)
	}
	eventually(t, "pruned ConfigMap in the cache", func() bool {
		ms := snapMarks()
		return len(ms) == 1 && ms[0].InstanceType == "c5.large"
	})

	err := f.applier.Apply(f.ctx, &events.Command{ID: "bad", Kind: events.CommandMarkUnavailable, Cluster: "test",
		Unavailable: []events.UnavailableOfferingMark{{OfferingKey: events.OfferingKey{InstanceType: "m5.large", CapacityType: "spot"}}}})
	if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "unavailable[0].zone") {
		t.Fatalf("err = %v, want ErrInvalidCommand naming unavailable[0].zone", err)
	}
}

func TestInvalidCommands(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		cmd  *events.Command
		want string
	}{
		{&events.Command{ID: "x", Kind: "Reboot"}, "command.kind"},
		{&events.Command{ID: "x", Kind: events.CommandDrainNode}, "command.nodeName"},
		{&events.Command{ID: "x", Kind: events.CommandTaintNode, NodeName: "n1", Taint: &corev1.Taint{Key: "k", Effect: "Sometimes"}}, "command.taint.effect"},
		{&events.Command{ID: "x", Kind: events.CommandCreateNodeClaim, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, "status.providerID"},
		{&events.Command{Kind: events.CommandDeleteNode, NodeName: "n1"}, "command.id"},
	}
	for _, c := range cases {
		err := f.applier.Apply(f.ctx, c.cmd)
		if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInvalidCommand naming %s", c.cmd.Kind, err, c.want)
		}
	}
}

// The agent defends itself whatever a function decided: it drains only nodes Dovetail owns (a
// karpenter.sh/nodepool label is not enough), and deletes a node without the termination
// finalizer only once its pods are drained.
func TestAgentRefusesUnsafeNodeCommands(t *testing.T) {
	managed := node("managed")
	managed.Labels[apisv1.LabelNodePool] = "default"
	managed.Spec.ProviderID = "aws:///us-east-1a/i-0managed"
	foreign := node("foreign")
	foreign.Labels[apisv1.LabelNodePool] = "default"
	foreign.Spec.ProviderID = "aws:///us-east-1a/i-0foreign"
	f := newFixture(t, []runtime.Object{foreign, managed, pod("default", "app", "managed"), pod("default", "db", "foreign")},
		nodeClaimWithStatus(t, "nc-managed", "default", managed.Spec.ProviderID, "managed"))
	eventually(t, "sync", func() bool {
		return len(f.watcher.PodsOnNode("managed")) == 1 && len(f.watcher.PodsOnNode("foreign")) == 1
	})
	rev := settledRevision(t, f.watcher)
	var refused *RefusedError
	drain := &events.Command{ID: "drain-foreign", Kind: events.CommandDrainNode, Cluster: "test", SnapshotRevision: rev, NodeName: "foreign"}
	if err := f.applier.Apply(f.ctx, drain); !errors.As(err, &refused) || !strings.Contains(refused.Reason, `no NodeClaim the agent created records node foreign's spec.providerID "aws:///us-east-1a/i-0foreign"`) {
		t.Errorf("drain of an unmanaged node: %v, want a refusal", err)
	}
	if n := countActions(f.kube.Actions(), "create", "pods", "eviction"); n != 0 {
		t.Errorf("%d evictions on an unmanaged node", n)
	}
	del := &events.Command{ID: "del-managed", Kind: events.CommandDeleteNode, Cluster: "test", SnapshotRevision: rev, NodeName: "managed"}
	if err := f.applier.Apply(f.ctx, del); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "1 pods that were not drained (default/app)") {
		t.Errorf("delete of an undrained node: %v, want a refusal naming the pod", err)
	}
	if _, err := f.kube.CoreV1().Nodes().Get(f.ctx, "managed", metav1.GetOptions{}); err != nil {
		t.Errorf("node deleted: %v", err)
	}
}

// disruptedTaint is the taint every function puts on a node before it drains it.
var disruptedTaint = corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}

// A TaintNode whose taint is on the node already without a timeAdded stamps it (once, the same
// value only): how consolidation dates a karpenter.sh/disrupted taint no Dovetail function owns
// (disruption.StrayTaints). Any other TaintNode of a key and effect the node has changes nothing.
func TestTaintNodeStampsTheSameTaint(t *testing.T) {
	n1 := node("n1")
	n1.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoExecute}, {Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}}
	f := newOwnedFixture(t, []runtime.Object{n1})
	eventually(t, "initial sync", func() bool { return f.watcher.Revision() == f.watcher.Revisions().Base()+2 }) // the node and its NodeClaim
	rev := f.watcher.Revision()
	at := metav1.NewTime(t0.Add(-time.Hour).UTC())
	apply := func(id string, taint corev1.Taint) {
		t.Helper()
		cmd := &events.Command{ID: id, Kind: events.CommandTaintNode, Cluster: "test", SnapshotRevision: rev, NodeName: "n1", Taint: &taint, Reason: "stray"}
		if err := f.applier.Apply(f.ctx, cmd); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	apply("other-value", corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: "drifted", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at})
	apply("stamp", corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at})
	later := metav1.NewTime(t0.UTC())
	apply("restamp", corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &later})
	n, err := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := n.Spec.Taints
	if len(ts) != 2 || ts[0].Key != "other" || ts[1].Key != apisv1.TaintKeyDisrupted || ts[1].Value != "" || ts[1].TimeAdded == nil || !ts[1].TimeAdded.Time.Equal(at.Time) {
		t.Fatalf("taints %+v: want the other taint, and the disrupted one with value \"\" stamped %s once", ts, at)
	}
}

// An UntaintNode whose taint carries timeAdded (consolidation removing a stray
// karpenter.sh/disrupted taint it saw) removes only that taint: not one of another value or
// time that took its place since, and not one the termination path drains under (its NodeClaim
// or Node being deleted). Without timeAdded it removes the key and effect as before.
func TestUntaintNodeExactTaint(t *testing.T) {
	old := metav1.NewTime(t0.Add(-time.Hour).UTC())
	stray := corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &old}
	later := metav1.NewTime(t0.UTC())
	mk := func(name string, taint corev1.Taint) *corev1.Node {
		n := node(name)
		n.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}, taint}
		return n
	}
	restamped := stray
	restamped.TimeAdded = &later
	revalued := stray
	revalued.Value = "drifted"
	deleting := nodeClaimWith(t, "nc-gone", "aws:///us-east-1a/i-gone", func(nc *apisv1.NodeClaim) {
		now := metav1.NewTime(t0)
		nc.DeletionTimestamp, nc.Finalizers, nc.Status.NodeName = &now, []string{events.FinalizerTermination}, "deleting"
	})
	f := newOwnedFixture(t, []runtime.Object{mk("stray", stray), mk("restamped", restamped), mk("revalued", revalued), mk("deleting", stray), mk("plain", revalued)}, deleting)
	eventually(t, "sync", func() bool {
		nc, _ := f.watcher.NodeClaim("nc-gone")
		return nc != nil && f.watcher.Node("plain") != nil
	})
	rev := f.watcher.Revision()
	for _, c := range []struct {
		node  string
		taint corev1.Taint
		gone  bool
	}{
		{"stray", stray, true},
		{"restamped", stray, false},
		{"revalued", stray, false},
		{"deleting", stray, false},
		{"plain", corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}, true},
	} {
		taint := c.taint
		cmd := &events.Command{ID: "untaint-" + c.node, Kind: events.CommandUntaintNode, Cluster: "test", SnapshotRevision: rev, NodeName: c.node, Taint: &taint, Reason: "stray"}
		if err := f.applier.Apply(f.ctx, cmd); err != nil {
			t.Fatalf("%s: %v", c.node, err)
		}
		n, err := f.kube.CoreV1().Nodes().Get(f.ctx, c.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if gone := len(n.Spec.Taints) == 1; gone != c.gone || n.Spec.Taints[0].Key != "other" {
			t.Errorf("%s: taints %+v, want the disrupted one removed: %v", c.node, n.Spec.Taints, c.gone)
		}
	}
}

// The stamp is karpenter.sh/disrupted's only: a TaintNode of another taint the node has without
// a timeAdded (a NoExecute one, whose timeAdded starts its pods' tolerationSeconds) is an invalid
// command (the agent adds no taint but karpenter.sh/disrupted) and changes nothing.
func TestTaintNodeStampsOnlyDisrupted(t *testing.T) {
	n1 := node("n1")
	n1.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}}
	f := newOwnedFixture(t, []runtime.Object{n1})
	eventually(t, "initial sync", func() bool { return f.watcher.Node("n1") != nil })
	at := metav1.NewTime(t0.Add(-time.Hour).UTC())
	cmd := &events.Command{ID: "stamp", Kind: events.CommandTaintNode, Cluster: "test", SnapshotRevision: f.watcher.Revision(), NodeName: "n1",
		Taint: &corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute, TimeAdded: &at}, Reason: "stamp"}
	if err := f.applier.Apply(f.ctx, cmd); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("TaintNode of node.kubernetes.io/unreachable: %v, want ErrInvalidCommand", err)
	}
	n, err := f.kube.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].TimeAdded != nil {
		t.Fatalf("taints %+v: want the NoExecute taint unstamped", n.Spec.Taints)
	}
}
