package launch

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// Which tagged instances count as in flight, one rule per row.
func TestInFlightCountsOnlyUnrecordedRecentLaunchesOfOtherDecisions(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	inst := func(id, claim, pool, rev, state string, age time.Duration) cloud.Instance {
		return cloud.Instance{ID: id, ProviderID: "aws:///us-east-1a/" + id, InstanceType: "m5.large", Zone: "us-east-1a",
			CapacityType: "spot", State: state, LaunchTime: now.Add(-age),
			Tags: map[string]string{apisv1.TagNodeClaim: claim, apisv1.TagNodePool: pool, apisv1.TagSnapshotRevision: rev}}
	}
	snap := &events.Snapshot{Revision: 9,
		NodePools: []apisv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
			ObjectMeta: apisv1.ObjectMeta{Labels: map[string]string{"team": "a"}},
			Spec: apisv1.NodeClaimSpec{Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}},
				Requirements: []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
					Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}}}}},
		NodeClaims: []apisv1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "default-recorded"}}},
		Nodes:      []corev1.Node{{Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-registered"}}},
	}
	insts := []cloud.Instance{
		inst("i-inflight", "default-a", "default", "8", cloud.StatePending, time.Minute),
		inst("i-recorded", "default-recorded", "default", "8", cloud.StateRunning, time.Minute),
		inst("i-registered", "default-b", "default", "8", cloud.StateRunning, time.Minute),
		inst("i-own", "default-c", "default", "9", cloud.StatePending, time.Minute),
		inst("i-orphan", "default-d", "default", "8", cloud.StateRunning, DefaultInFlightWindow),
		inst("i-gone", "default-e", "default", "8", cloud.StateShuttingDown, time.Minute),
		inst("i-nopool", "other-f", "other", "8", cloud.StateRunning, time.Minute),
	}
	got := InFlight(insts, snap, catalog.MustAWS(), snap.Revision, now, DefaultInFlightWindow)
	if len(got) != 1 || got[0].Name != "default-a" {
		t.Fatalf("in flight = %v, want only default-a", got)
	}
	nc := got[0]
	want := map[string]string{"team": "a", corev1.LabelArchStable: "amd64", apisv1.LabelNodePool: "default",
		corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a", apisv1.LabelCapacityType: "spot"}
	for k, v := range want {
		if nc.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, nc.Labels[k], v)
		}
	}
	if nc.Status.ProviderID != "aws:///us-east-1a/i-inflight" || len(nc.Spec.Taints) != 1 || nc.Status.Allocatable.Cpu().IsZero() {
		t.Errorf("claim %+v: want the instance's provider ID, the pool's taint and m5.large's allocatable", nc)
	}
}
