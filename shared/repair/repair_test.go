package repair

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// policies are a subset of the AWS ones (aws.RepairPolicies).
var policies = []Policy{
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * time.Minute},
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
}

func node(name, pool string, conds ...corev1.NodeCondition) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{apisv1.LabelNodePool: pool}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name}, Status: corev1.NodeStatus{Conditions: conds}}
}

func claim(name, pool string) apisv1.NodeClaim {
	nc := apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name, Labels: map[string]string{apisv1.LabelNodePool: pool}}}
	nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
	return nc
}

func cond(typ corev1.NodeConditionType, st corev1.ConditionStatus, since time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: typ, Status: st, LastTransitionTime: metav1.NewTime(since)}
}

func TestThresholdRoundsUp(t *testing.T) {
	// ceil(20% of n): 10 → 2, 3 → ceil(0.6) = 1, 11 → ceil(2.2) = 3, 5 → 1, 1 → ceil(0.2) = 1, 0 → 0.
	for n, want := range map[int]int{10: 2, 3: 1, 11: 3, 5: 1, 1: 1, 0: 0, 100: 20, 101: 21} {
		if got := Threshold(n); got != want {
			t.Errorf("Threshold(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestReadyUnknownRepairedAfterToleration(t *testing.T) {
	snap := &events.Snapshot{Cluster: "c", Revision: 3}
	snap.Nodes = []corev1.Node{node("a", "p", cond(corev1.NodeReady, corev1.ConditionUnknown, t0))}
	snap.NodeClaims = []apisv1.NodeClaim{claim("a", "p")}
	// 29m59s after the transition: inside the 30m toleration, nothing.
	snap.Time = metav1.NewTime(t0.Add(30*time.Minute - time.Second))
	if d := Decide(snap, policies); len(d.Repairs)+len(d.Blocked) != 0 {
		t.Fatalf("before toleration: %+v", d)
	}
	// At exactly lastTransitionTime + 30m it is due (Karpenter: now is not before terminationTime).
	snap.Time = metav1.NewTime(t0.Add(30 * time.Minute))
	d := Decide(snap, policies)
	if len(d.Repairs) != 1 || d.Repairs[0].Node.Name != "a" || d.Repairs[0].Match.Condition.Status != corev1.ConditionUnknown {
		t.Fatalf("repairs = %+v", d.Repairs)
	}
	// One of one node unhealthy: Threshold(1) = 1, 1 > 1 is false, so the breaker does not hold.
	if len(d.Blocked) != 0 {
		t.Fatalf("blocked = %+v", d.Blocked)
	}
	// Repair disabled (no policies): nothing.
	if d := Decide(snap, nil); len(d.Repairs) != 0 {
		t.Fatalf("no policies: %+v", d)
	}
}

func TestEarliestConditionWins(t *testing.T) {
	// Ready False since t0 (due t0+30m) and AcceleratedHardwareReady False since t0+5m (due
	// t0+15m): the accelerator's toleration ends first.
	n := node("a", "p", cond(corev1.NodeReady, corev1.ConditionFalse, t0), cond("AcceleratedHardwareReady", corev1.ConditionFalse, t0.Add(5*time.Minute)))
	m, ok := Find(&n, policies)
	if !ok || m.Condition.Type != "AcceleratedHardwareReady" || !m.Due.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("match = %+v, %v", m, ok)
	}
}

func TestBreakerHoldsAtThreeOfTen(t *testing.T) {
	// 10 nodes of pool p, 3 with Ready Unknown for an hour. Threshold(10) = ceil(10 × 0.2) = 2;
	// 3 > 2 (30 % > 20 %), so all three are held and none is repaired.
	snap := &events.Snapshot{Cluster: "c", Revision: 1, Time: metav1.NewTime(t0.Add(time.Hour))}
	for i := range 10 {
		name := fmt.Sprintf("n%02d", i)
		c := cond(corev1.NodeReady, corev1.ConditionTrue, t0)
		if i < 3 {
			c = cond(corev1.NodeReady, corev1.ConditionUnknown, t0)
		}
		snap.Nodes = append(snap.Nodes, node(name, "p", c))
		snap.NodeClaims = append(snap.NodeClaims, claim(name, "p"))
	}
	d := Decide(snap, policies)
	if len(d.Repairs) != 0 || len(d.Blocked) != 3 {
		t.Fatalf("repairs %d blocked %d, want 0 and 3", len(d.Repairs), len(d.Blocked))
	}
	if b := d.Blocked[0]; b.Unhealthy != 3 || b.Total != 10 || b.Threshold != 2 || b.NodePool != "p" {
		t.Fatalf("blocked = %+v", b)
	}
	// With 2 of 10 unhealthy (2 ≤ 2) both are repaired.
	snap.Nodes[2].Status.Conditions[0].Status = corev1.ConditionTrue
	if d := Decide(snap, policies); len(d.Repairs) != 2 || len(d.Blocked) != 0 {
		t.Fatalf("2 of 10: repairs %d blocked %d", len(d.Repairs), len(d.Blocked))
	}
	// The count is per pool: the same 3 unhealthy nodes among 20 nodes of other pools still trip p's breaker.
	snap.Nodes[2].Status.Conditions[0].Status = corev1.ConditionUnknown
	for i := range 20 {
		snap.Nodes = append(snap.Nodes, node(fmt.Sprintf("q%02d", i), "q", cond(corev1.NodeReady, corev1.ConditionTrue, t0)))
	}
	if d := Decide(snap, policies); len(d.Repairs) != 0 || len(d.Blocked) != 3 {
		t.Fatalf("other pools: repairs %d blocked %d", len(d.Repairs), len(d.Blocked))
	}
}

func TestNotRepaired(t *testing.T) {
	now := t0.Add(time.Hour)
	deleting := metav1.NewTime(now)
	cases := map[string]func(*events.Snapshot){
		"no NodeClaim (not ours)":  func(s *events.Snapshot) { s.NodeClaims = nil },
		"node being deleted":       func(s *events.Snapshot) { s.Nodes[0].DeletionTimestamp = &deleting },
		"NodeClaim being deleted":  func(s *events.Snapshot) { s.NodeClaims[0].DeletionTimestamp = &deleting },
		"no lastTransitionTime":    func(s *events.Snapshot) { s.Nodes[0].Status.Conditions[0].LastTransitionTime = metav1.Time{} },
		"status not in any policy": func(s *events.Snapshot) { s.Nodes[0].Status.Conditions[0].Status = corev1.ConditionTrue },
		"condition not in policy":  func(s *events.Snapshot) { s.Nodes[0].Status.Conditions[0].Type = corev1.NodeMemoryPressure },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			snap := &events.Snapshot{Cluster: "c", Time: metav1.NewTime(now)}
			snap.Nodes = []corev1.Node{node("a", "p", cond(corev1.NodeReady, corev1.ConditionUnknown, t0))}
			snap.NodeClaims = []apisv1.NodeClaim{claim("a", "p")}
			mutate(snap)
			if d := Decide(snap, policies); len(d.Repairs) != 0 {
				t.Fatalf("repaired: %+v", d.Repairs)
			}
		})
	}
}
