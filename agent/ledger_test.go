package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/consolidate"
	"github.com/dovetail-dev/dovetail/functions/drift"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// ledgerNode is an initialized, Ready node of the pool "default" with its NodeClaim.
func ledgerNode(name, instanceType string) (*corev1.Node, *apisv1.NodeClaim) {
	it := catalog.MustAWS().Get(instanceType)
	pid := "aws:///us-east-1a/i-" + name
	labels := map[string]string{apisv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: instanceType,
		corev1.LabelTopologyZone: "us-east-1a", apisv1.LabelCapacityType: "on-demand", corev1.LabelHostname: name,
		apisv1.LabelNodeInitialized: "true", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: labels,
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Spec: corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable(), Capacity: it.Capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name, UID: types.UID("nc-uid-" + name),
		Labels:            map[string]string{apisv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: instanceType, apisv1.LabelManagedBy: apisv1.ManagedByAgent},
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
		Status: apisv1.NodeClaimStatus{NodeName: name, ProviderID: pid}}
	return n, nc
}

// One disruption ledger: consolidation and drift decide on the same snapshot, each finding the
// pool's budget (nodes: 1) free: consolidation would delete the empty node, drift replace the
// drifted one. Both publish their taints at once; the agent grants the first and refuses the
// second (and the drain behind it), so together they disrupt one node, as the budget says.
func TestConsolidationAndDriftShareOneBudget(t *testing.T) {
	var objs []runtime.Object
	var claims []*apisv1.NodeClaim
	for _, n := range []struct{ name, it string }{{"empty", "m5.large"}, {"drifted", "c5.large"}, {"busy-1", "m5.large"}, {"busy-2", "m5.large"}} {
		node, nc := ledgerNode(n.name, n.it)
		objs = append(objs, node)
		claims = append(claims, nc)
	}
	yes := true
	for i, on := range []string{"drifted", "busy-1", "busy-2"} {
		p := testPod(fmt.Sprintf("web-%d", i), on)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: &yes}}
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = *resourceQuantity("250m")
		objs = append(objs, p)
	}
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, objs...)
	ctx := e.ctx
	after := apisv1.MustParseNillableDuration("0s")
	pool := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "np"}}
	pool.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
	}
	pool.Spec.Disruption = apisv1.Disruption{ConsolidationPolicy: apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: &after,
		Budgets: []apisv1.Budget{{Nodes: "1"}}}
	u, err := kube.ToUnstructured(pool, apisv1.GroupVersion, "NodePool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(kube.NodePoolGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims {
		u, err := kube.ToUnstructured(nc, apisv1.GroupVersion, "NodeClaim")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.dyn.Resource(kube.NodeClaimGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitSynced(t)
	var snap *events.Snapshot
	eventually(t, "a snapshot with the pool, 4 nodes, their claims and 3 pods", func() bool {
		snap, err = e.agent.builder.Build()
		return err == nil && len(snap.NodePools) == 1 && len(snap.Nodes) == 4 && len(snap.NodeClaims) == 4 && len(snap.Pods) == 3
	})

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: cluster, Logger: quiet})
	codec := events.Codec{Blobs: &events.MemoryBlobStore{}}
	now := func() time.Time { return snap.Time.Time }
	cons := &consolidate.Handler{Cluster: cluster, Catalog: cat, NodeSettings: cloud.NodeSettingsFor, Provider: fc, Publisher: e.publisher, Codec: codec, Log: quiet, Now: now}
	dr := &drift.Handler{Cluster: cluster, Catalog: cat, NodeSettings: cloud.NodeSettingsFor, Provider: fc, Publisher: e.publisher, Codec: codec, Log: quiet, Now: now}
	var wg sync.WaitGroup
	var consOut consolidate.Outcome
	var driftOut drift.Decision
	var consErr, driftErr error
	wg.Add(2)
	go func() { defer wg.Done(); consOut, consErr = cons.Process(ctx, snap) }()
	go func() { defer wg.Done(); driftOut, driftErr = dr.Decide(ctx, snap) }()
	wg.Wait()
	if consErr != nil || driftErr != nil {
		t.Fatalf("consolidate: %v; drift: %v", consErr, driftErr)
	}
	// Both found the budget free on the same snapshot: each decided to disrupt a node.
	if consOut.Decision == nil || len(consOut.Decision.Candidates) != 1 || consOut.Decision.Candidates[0].Node != "empty" {
		t.Fatalf("consolidation decided %+v (report %+v), want the empty node", consOut.Decision, consOut.Report)
	}
	if len(driftOut.Steps) != 1 || driftOut.Steps[0].Node != "drifted" || driftOut.Steps[0].Step != drift.StepStart {
		t.Fatalf("drift decided %v, want to start replacing the drifted node", driftOut)
	}
	// The agent applies them in order: one taint granted, the other refused with an Event naming
	// the budget; the drain behind the refused taint is refused too.
	tainted := func() []string {
		var out []string
		l, _ := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range l.Items {
			for _, tt := range n.Spec.Taints {
				if tt.Key == apisv1.TaintKeyDisrupted {
					out = append(out, n.Name)
				}
			}
		}
		return out
	}
	refusals := func() []string {
		var out []string
		l, _ := e.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		for _, ev := range l.Items {
			if ev.Reason == kube.ReasonCommandRefused && strings.Contains(ev.Message, "disruption budget of NodePool default") {
				out = append(out, ev.InvolvedObject.Name)
			}
		}
		return out
	}
	eventually(t, "one taint granted and one refused for the budget", func() bool { return len(tainted()) == 1 && len(refusals()) == 1 })
	time.Sleep(500 * time.Millisecond) // every command applied: nothing more changes
	if got := tainted(); len(got) != 1 || got[0] == refusals()[0] {
		t.Fatalf("tainted %v, refused %v: want exactly one node disrupting (budget 1)", got, refusals())
	}
	if refusals()[0] == "drifted" { // drift's drain followed its taint in the same decision
		eventually(t, "the drain behind the refused taint refused", func() bool {
			l, _ := e.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
			for _, ev := range l.Items {
				if ev.InvolvedObject.Name == "drifted" && strings.Contains(ev.Message, "DrainNode") && strings.Contains(ev.Message, "is not tainted") {
					return true
				}
			}
			return false
		})
	}
}

func resourceQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// The agent keeps its latest snapshot in the claim-check store under the cluster's well-known
// key, for the functions that read it there (the interruption function on Lambda).
func TestAgentStoresTheLatestSnapshot(t *testing.T) {
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, testNode("n1"))
	e.waitSynced(t)
	store := &events.MemoryBlobStore{}
	e.agent.cfg.Blobs = store
	if got, err := events.ReadLatestSnapshot(e.ctx, store, cluster); err != nil || got != nil {
		t.Fatalf("before any snapshot: %v, %v; want none", got, err)
	}
	if err := e.agent.PublishSnapshot(e.ctx); err != nil {
		t.Fatal(err)
	}
	env := e.nextEvent(t)
	got, err := events.ReadLatestSnapshot(e.ctx, store, cluster)
	if err != nil || got == nil || len(got.Nodes) != 1 || got.Nodes[0].Name != "n1" || !got.Complete {
		t.Fatalf("latest snapshot %+v, %v; want the one published, with n1", got, err)
	}
	published, err := events.Codec{Blobs: store}.Snapshot(e.ctx, env)
	if err != nil || published.Revision != got.Revision {
		t.Fatalf("published revision %v (%v), stored %d: want the same snapshot", published, err, got.Revision)
	}
}

// A pods-pending batch stores its snapshot as the latest too: the one inside the batch, from the
// same marshal (events.EncodeSnapshotWithPods).
func TestAgentStoresAPendingBatchsSnapshotAsTheLatest(t *testing.T) {
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, testNode("n1"))
	e.waitSynced(t)
	store := &events.MemoryBlobStore{}
	e.agent.cfg.Blobs = store
	if _, err := e.kube.CoreV1().Pods("default").Create(e.ctx, testPod("web-0", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := e.nextEvent(t)
	pp, err := events.Codec{Blobs: store}.PodsPending(e.ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.ReadLatestSnapshot(e.ctx, store, cluster)
	if err != nil || got == nil {
		t.Fatalf("latest snapshot %v, %v; want the batch's", got, err)
	}
	if got.Revision != pp.Snapshot.Revision || len(got.PendingPods) != 1 || got.PendingPods[0].Name != "web-0" {
		t.Fatalf("latest snapshot at revision %d with %d pending pods, want the batch's (revision %d, web-0)",
			got.Revision, len(got.PendingPods), pp.Snapshot.Revision)
	}
}

// A leader reserves its snapshot revisions before it publishes (the floor on the ledger
// ConfigMap is the end of its reservation, and its revisions start above the floor it found),
// and publishes no snapshot beyond the end of its reservation.
func TestLeaderPublishesWithinItsReservedRevisions(t *testing.T) {
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, testNode("n1"))
	e.waitSynced(t)
	end := e.agent.revisionsEnd.Load()
	cm, err := e.kube.CoreV1().ConfigMaps("dovetail-system").Get(e.ctx, kube.DisruptionLedgerConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The base is where the reservation starts, or a few revisions above it when informer events
	// landed between the floor's read and the tracker's advance (ReserveRevisions: the span
	// covers them).
	if got, base := cm.Annotations[kube.RevisionFloorAnnotation], e.agent.watcher.Revisions().Base(); got != strconv.FormatInt(end, 10) ||
		base < end-kube.RevisionTerm || base >= end-kube.RevisionTerm+8 {
		t.Fatalf("floor %s, reservation end %d, base %d: want the floor at the end, base + 2^40 (up to 8 events later)", got, end, base)
	}
	if err := e.agent.PublishSnapshot(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.nextEvent(t)
	e.agent.revisionsEnd.Store(e.agent.watcher.Revision()) // used up
	if err := e.agent.PublishSnapshot(e.ctx); !errors.Is(err, errRevisionsExhausted) {
		t.Fatalf("publishing at the end of the reservation: %v, want %v", err, errRevisionsExhausted)
	}
}
