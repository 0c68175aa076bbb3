package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// healthAfter decides the snapshot and returns the NodePool's NodeRegistrationHealthy as
// written, applying it (and status.nodeClassObservedGeneration) to np as the agent would.
func healthAfter(t *testing.T, np *apisv1.NodePool, snap *events.Snapshot) metav1.Condition {
	t.Helper()
	snap.NodePools = []apisv1.NodePool{*np}
	snap.NodeClasses = []apisv1.NodeClass{apisv1.NodeClassOf(class(metav1.ConditionTrue))}
	cmds := commandsOf(Decide(snap, Options{}), events.CommandSetNodePoolStatus)
	if len(cmds) == 0 {
		c := meta.FindStatusCondition(np.Status.Conditions, ConditionNodeRegistrationHealthy)
		if c == nil {
			t.Fatal("no status written and no condition")
		}
		return *c
	}
	if err := cmds[0].Validate(); err != nil {
		t.Fatalf("the command the agent receives is invalid: %v", err)
	}
	st := cmds[0].NodePool.Status
	c := meta.FindStatusCondition(st.Conditions, ConditionNodeRegistrationHealthy)
	if c == nil {
		t.Fatalf("status without %s: %+v", ConditionNodeRegistrationHealthy, st.Conditions)
	}
	np.Status.NodeClassObservedGeneration = st.NodeClassObservedGeneration
	meta.SetStatusCondition(&np.Status.Conditions, *c)
	return *c
}

// failing is a NodeClaim launched at t0 that no Node registered for; at t0+15m the lifecycle
// reaps it (a registration failure).
func failing(name string) apisv1.NodeClaim {
	nc := claim()
	nc.Name, nc.UID = name, types.UID("uid-"+name)
	return nc
}

// A NodePool's NodeRegistrationHealthy through Karpenter's rules (buffer of 4, unhealthy at 2
// failures): Unknown at first; one registration: True; one failure after it ([ok, fail]: 1 of
// 4): still True; a second ([ok, fail, fail]: 2): False, RegistrationFailed; two registrations
// ([ok, fail, fail, ok] then [fail, fail, ok, ok]): still False (2 failures); a third
// ([fail, ok, ok, ok]: 1): True. A NodeClass change resets it to Unknown, history emptied.
func TestNodeRegistrationHealthy(t *testing.T) {
	np := pool()
	reap := t0.Add(DefaultRegistrationTTL)
	snap := func(at time.Time, ncs []apisv1.NodeClaim, nodes []corev1.Node) *events.Snapshot {
		return &events.Snapshot{Cluster: "c", Revision: 5, Time: metav1.NewTime(at), NodeClaims: ncs, Nodes: nodes}
	}
	if c := healthAfter(t, &np, snap(t0, nil, nil)); c.Status != metav1.ConditionUnknown || c.Reason != "AwaitingReconciliation" ||
		c.Message != "object is awaiting reconciliation" || c.ObservedGeneration != np.Generation {
		t.Fatalf("first look: %+v", c)
	}
	registers := func(name string) metav1.Condition {
		nc, n := claim(), kubeletNode()
		nc.Name = name
		return healthAfter(t, &np, snap(t0.Add(time.Minute), []apisv1.NodeClaim{nc}, []corev1.Node{n}))
	}
	fails := func(name string) metav1.Condition {
		return healthAfter(t, &np, snap(reap, []apisv1.NodeClaim{failing(name)}, nil))
	}
	steps := []struct {
		do     func(string) metav1.Condition
		claim  string
		status metav1.ConditionStatus
		reason string
	}{
		{registers, "a", metav1.ConditionTrue, ConditionNodeRegistrationHealthy},
		{fails, "b", metav1.ConditionTrue, ConditionNodeRegistrationHealthy},
		{fails, "c", metav1.ConditionFalse, ReasonRegistrationFailed},
		{registers, "d", metav1.ConditionFalse, ReasonRegistrationFailed},
		{registers, "e", metav1.ConditionFalse, ReasonRegistrationFailed},
		{registers, "f", metav1.ConditionTrue, ConditionNodeRegistrationHealthy},
	}
	for _, s := range steps {
		if c := s.do(s.claim); c.Status != s.status || c.Reason != s.reason {
			t.Fatalf("after %s: %s %s %q, want %s %s", s.claim, c.Status, c.Reason, c.Message, s.status, s.reason)
		}
	}
	c := meta.FindStatusCondition(np.Status.Conditions, ConditionNodeRegistrationHealthy)
	if want := "recent launches (oldest first): c=failed, d=registered, e=registered, f=registered"; c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
	// The same registration on a second snapshot (the agent has not applied it yet) counts once.
	np2 := pool()
	registersOn := func(np *apisv1.NodePool) metav1.Condition {
		nc, n := claim(), kubeletNode()
		return healthAfter(t, np, snap(t0.Add(time.Minute), []apisv1.NodeClaim{nc}, []corev1.Node{n}))
	}
	for range 2 {
		registersOn(&np2)
	}
	if c := meta.FindStatusCondition(np2.Status.Conditions, ConditionNodeRegistrationHealthy); c.Message != "recent launches (oldest first): default-abc=registered" {
		t.Errorf("repeated registration: %q", c.Message)
	}

	// A failure message keeps Karpenter's words before the history.
	np3 := pool()
	for _, n := range []string{"x", "y"} {
		healthAfter(t, &np3, snap(reap, []apisv1.NodeClaim{failing(n)}, nil))
	}
	if c := meta.FindStatusCondition(np3.Status.Conditions, ConditionNodeRegistrationHealthy); c.Status != metav1.ConditionFalse ||
		c.Message != "Failed to register node; recent launches (oldest first): x=failed, y=failed" {
		t.Errorf("two failures from Unknown: %+v", c)
	}
	// The NodeClass changed (it is at generation 4, the pool observed 3): Unknown, history gone.
	np3.Status.NodeClassObservedGeneration = 3
	if c := healthAfter(t, &np3, snap(reap, nil, nil)); c.Status != metav1.ConditionUnknown || c.Message != "object is awaiting reconciliation" {
		t.Errorf("after a NodeClass change: %+v", c)
	}
	// A NodePool spec change (generation 2 → 3): the same.
	healthAfter(t, &np3, snap(reap, []apisv1.NodeClaim{failing("z1")}, nil))
	np3.Generation = 3
	if c := healthAfter(t, &np3, snap(reap, nil, nil)); c.Status != metav1.ConditionUnknown || c.ObservedGeneration != 3 {
		t.Errorf("after a NodePool change: %+v", c)
	}
}

// A condition without a history in its message (Karpenter wrote it) is restored as Karpenter's
// tracker restores it: False is two failures, so one registration leaves it False
// ([fail, fail, ok]: 2 of 4) and one failure more changes nothing.
func TestNodeRegistrationHealthyRestoredFromTheCondition(t *testing.T) {
	np := pool()
	np.Status.NodeClassObservedGeneration = 4
	np.Status.Conditions = []metav1.Condition{{Type: ConditionNodeRegistrationHealthy, Status: metav1.ConditionFalse,
		Reason: ReasonRegistrationFailed, Message: MessageRegistrationFailed, ObservedGeneration: np.Generation}}
	nc, n := claim(), kubeletNode()
	c := healthAfter(t, &np, &events.Snapshot{Cluster: "c", Revision: 5, Time: metav1.NewTime(t0.Add(time.Minute)),
		NodeClaims: []apisv1.NodeClaim{nc}, Nodes: []corev1.Node{n}})
	if c.Status != metav1.ConditionFalse || c.Message != "Failed to register node; recent launches (oldest first): (restored)=failed, (restored)=failed, default-abc=registered" {
		t.Errorf("restored False, one registration: %+v", c)
	}
}
