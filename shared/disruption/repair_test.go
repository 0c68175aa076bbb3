package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/repair"
)

// A repair is one hand-off step (no launch, no taint, no drain: a forced disruption handed off
// at once), whose DeleteNodeClaim carries Karpenter's DisruptionTerminating events with the
// reason alone: "Disrupting NodeClaim: Unhealthy", "Disrupting Node: Unhealthy".
func TestRepairIsOneHandOffWithDisruptingEvents(t *testing.T) {
	since := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
	nc := apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-1", UID: "c1", Labels: map[string]string{apisv1.LabelNodePool: "default"}}}
	nc.Status.ProviderID, nc.Status.NodeName = node.Spec.ProviderID, node.Name
	snap := &events.Snapshot{Cluster: "c", Revision: 7, Time: metav1.NewTime(since.Add(31 * time.Minute)),
		Nodes: []corev1.Node{node}, NodeClaims: []apisv1.NodeClaim{nc}}
	r := repair.Repair{Node: &snap.Nodes[0], NodeClaim: &snap.NodeClaims[0], NodePool: "default", Match: repair.Match{
		Condition: corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(since)},
		Policy:    repair.Policy{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * time.Minute}}}
	steps, err := Sequence("c", Repair(snap, r))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0].Kind != SeqHandOff || len(steps[0].Commands) != 1 {
		t.Fatalf("steps %+v, want one hand-off with one command", steps)
	}
	c := steps[0].Commands[0]
	if c.Kind != events.CommandDeleteNodeClaim || c.NodeClaim == nil || c.NodeClaim.Name != "nc-1" {
		t.Errorf("command %s %+v, want DeleteNodeClaim nc-1", c.Kind, c.NodeClaim)
	}
	var got []string
	for _, e := range c.Events {
		got = append(got, e.Object.Kind+": "+e.Reason+": "+e.Message)
	}
	want := []string{"NodeClaim: DisruptionTerminating: Disrupting NodeClaim: Unhealthy", "Node: DisruptionTerminating: Disrupting Node: Unhealthy"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("events %q, want %q", got, want)
	}
}
