package kube

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func markJSON(t *testing.T, m events.UnavailableOfferingMark) string {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSnapshotFromInformers(t *testing.T) {
	deleting := metav1.NewTime(t0)
	live := events.UnavailableOfferingMark{OfferingKey: events.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}, Reason: "InsufficientInstanceCapacity", Expires: metav1.NewTime(t0.Add(2 * time.Minute))}
	expired := events.UnavailableOfferingMark{OfferingKey: events.OfferingKey{InstanceType: "c5.large", Zone: "us-east-1b", CapacityType: "spot"}, Reason: "InsufficientInstanceCapacity", Expires: metav1.NewTime(t0.Add(-time.Second))}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: UnavailableOfferingsConfigMap, Namespace: testNamespace},
		Data: map[string]string{
			"spot_us-east-1a_m5.large": markJSON(t, live),
			"spot_us-east-1b_c5.large": markJSON(t, expired),
			"spot_us-east-1c_r5.large": "{not json",
		},
	}
	// Another ConfigMap in the namespace: the fake ignores the name field selector, the code
	// must still read only ours.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: testNamespace}, Data: map[string]string{"spot_us-east-1a_x.large": "{}"}}
	objs := []runtime.Object{
		node("n2"), node("n1"),
		pod("default", "bound-a", "n1"),
		pod("default", "bound-done", "n1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("kube-system", "ds-n1", "n1", ownedByDaemonSet),
		pod("default", "pending-b", ""),
		pod("default", "pending-a", "", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		}),
		pod("prod", "pending-c", ""),
		pod("default", "gated", "", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}} }),
		pod("default", "ds-unbound", "", ownedByDaemonSet),
		pod("default", "deleting", "", func(p *corev1.Pod) { p.DeletionTimestamp = &deleting; p.Finalizers = []string{"x"} }),
		pod("default", "nominated", "", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n2" }),
		daemonSet("kube-system", "ds"),
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: "default"}},
		cm, other,
	}
	f := newFixture(t, objs, nodePoolObj(t, "default"), nodeClassObj(t, "default"),
		nodeClaimObj(t, "nc-b", "n2"), nodeClaimObj(t, "nc-a", "n1"))

	// 10 pods + 2 nodes + 1 DS + 1 PDB + 2 ConfigMaps (the fake ignores the field selector) +
	// 1 NodePool + 1 EC2NodeClass + 2 NodeClaims = 20 add events after the base.
	base := f.watcher.Revisions().Base()
	eventually(t, "20 initial add events", func() bool { return f.watcher.Revision() == base+20 })

	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != base+20 || !snap.Time.Time.Equal(t0) || snap.Cluster != "test" || snap.SchemaVersion != events.SnapshotSchemaVersion {
		t.Fatalf("header: revision %d (want %d), time %v, cluster %q, schema %d", snap.Revision, base+20, snap.Time, snap.Cluster, snap.SchemaVersion)
	}
	// Expected sets follow IsProvisionable / IsBoundActive, sorted by namespace/name.
	assertNames(t, "pendingPods", podNames(snap.PendingPods), []string{"default/pending-a", "default/pending-b", "prod/pending-c"})
	assertNames(t, "pods", podNames(snap.Pods), []string{"default/bound-a", "kube-system/ds-n1"})
	var nodes, claims []string
	for _, n := range snap.Nodes {
		nodes = append(nodes, n.Name)
	}
	for _, c := range snap.NodeClaims {
		claims = append(claims, c.Name+"@"+c.Status.NodeName)
	}
	assertNames(t, "nodes", nodes, []string{"n1", "n2"})
	assertNames(t, "nodeClaims", claims, []string{"nc-a@n1", "nc-b@n2"})
	if len(snap.DaemonSets) != 1 || len(snap.PDBs) != 1 || len(snap.NodePools) != 1 || len(snap.NodeClasses) != 1 {
		t.Fatalf("daemonSets %d pdbs %d nodePools %d nodeClasses %d, want 1 each", len(snap.DaemonSets), len(snap.PDBs), len(snap.NodePools), len(snap.NodeClasses))
	}
	if d := snap.NodePools[0].Spec.Template.Spec.ExpireAfter.Duration; d == nil || *d != 720*time.Hour {
		t.Errorf("NodePool expireAfter = %v, want 720h (converted from unstructured through NillableDuration)", d)
	}
	if got := snap.NodeClasses[0].EC2.Spec.AMISelectorTerms; len(got) != 1 || got[0].Alias != "bottlerocket@latest" {
		t.Errorf("EC2NodeClass amiSelectorTerms = %+v", got)
	}
	// Only the unexpired, well-formed mark of our ConfigMap.
	if len(snap.UnavailableOfferings) != 1 || !sameMark(snap.UnavailableOfferings[0], live) {
		t.Errorf("unavailableOfferings = %+v, want only %+v", snap.UnavailableOfferings, live)
	}
	// Two minutes later the live mark has expired too (Expires <= now drops it).
	f.clock.Step(2 * time.Minute)
	snap2, _ := f.builder.Build()
	if len(snap2.UnavailableOfferings) != 0 {
		t.Errorf("after expiry: %+v", snap2.UnavailableOfferings)
	}

	// The snapshot goes through the events codec unchanged.
	enc, err := events.EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := events.DecodeSnapshot(enc)
	if err != nil {
		t.Fatal(err)
	}
	assertNames(t, "decoded pendingPods", podNames(dec.PendingPods), podNames(snap.PendingPods))

	// A new pending pod bumps the revision and appears in the next snapshot.
	if _, err := f.kube.CoreV1().Pods("default").Create(f.ctx, pod("default", "pending-d", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod add event", func() bool { return f.watcher.Revision() == base+21 })
	snap3, _ := f.builder.Build()
	assertNames(t, "pendingPods after add", podNames(snap3.PendingPods), []string{"default/pending-a", "default/pending-b", "default/pending-d", "prod/pending-c"})
	if !f.watcher.ChangedSince(KindPod, "default/pending-d", snap.Revision) || f.watcher.ChangedSince(KindPod, "default/pending-a", snap.Revision) {
		t.Errorf("ChangedSince: pending-d was added after the first snapshot, pending-a was not changed")
	}
}

func podNames(ps []corev1.Pod) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func assertNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func sameMark(a, b events.UnavailableOfferingMark) bool {
	return a.InstanceType == b.InstanceType && a.Zone == b.Zone && a.CapacityType == b.CapacityType &&
		a.Reason == b.Reason && a.Expires.Time.Equal(b.Expires.Time)
}

// A pod the lifecycle function nominated to the node planned for it stays pending (the solver
// keeps it on that node); a pod the scheduler nominated for preemption does not.
func TestSnapshotKeepsPodsDovetailNominated(t *testing.T) {
	nc := nodeClaimObj(t, "nc-a", "n2").(*unstructured.Unstructured)
	nc.SetAnnotations(map[string]string{apisv1.AnnotationPlannedPods: "default/ours,default/moved"})
	objs := []runtime.Object{node("n1"), node("n2"),
		pod("default", "ours", "", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n2" }),
		pod("default", "moved", "", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n1" }),
		pod("default", "preempting", "", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n2" }),
	}
	f := newFixture(t, objs, nc)
	base := f.watcher.Revisions().Base()
	eventually(t, "6 initial add events", func() bool { return f.watcher.Revision() == base+6 })
	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	assertNames(t, "pendingPods", podNames(snap.PendingPods), []string{"default/ours"})
}

// TestSnapshotLeavesOutANodeItsRevisionHasNotCounted: a Node that reaches the informer's store
// after Build read its revision (client-go fills the store before it calls the handlers that
// count revisions) is left out of that snapshot, since every command naming it on that snapshot
// would be refused as created after it; the next snapshot shows it.
func TestSnapshotLeavesOutANodeItsRevisionHasNotCounted(t *testing.T) {
	f := newFixture(t, []runtime.Object{node("n1")})
	// The store holds n1 before its handler counts it (the very race under test), so wait for the
	// count, a change after the tracker's base: a snapshot read before it rightly leaves n1 out too.
	// (CreatedSince at the current revision cannot tell: no add is ever past the current one.)
	base := f.watcher.Revisions().Base()
	eventually(t, "n1 counted", func() bool {
		return f.watcher.Node("n1") != nil && f.watcher.ChangedSince(KindNode, "n1", base)
	})
	f.builder.afterRevision = func() {
		if _, err := f.kube.CoreV1().Nodes().Create(f.ctx, node("n9"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "n9 in the store", func() bool { return f.watcher.Node("n9") != nil })
	}
	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != 1 || snap.Nodes[0].Name != "n1" {
		t.Fatalf("snapshot of revision %d: nodes %v, want only n1 (n9 came after it)", snap.Revision, nodeNames(snap.Nodes))
	}
	f.builder.afterRevision = nil
	eventually(t, "n9 counted", func() bool { return f.watcher.ChangedSince(KindNode, "n9", base) })
	next, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeNames(next.Nodes); len(got) != 2 || got[1] != "n9" {
		t.Errorf("the next snapshot: nodes %v, want n1 and n9", got)
	}
}

func nodeNames(ns []corev1.Node) []string {
	out := make([]string, len(ns))
	for i := range ns {
		out[i] = ns[i].Name
	}
	return out
}
