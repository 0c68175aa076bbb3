package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Consolidatable as Karpenter's nodeclaim disruption controller keeps it: True once
// consolidateAfter (30s here) has passed since the last pod event, else since Initialized;
// removed while it has not, and when consolidateAfter is Never.
func TestConsolidatableCondition(t *testing.T) {
	nc, n := registered()
	initAt := t0.Add(time.Minute)
	nc.Status.Conditions = []metav1.Condition{
		{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: ReasonRegistered},
		{Type: apisv1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: ReasonInitialized, LastTransitionTime: metav1.NewTime(initAt)},
		{Type: apisv1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReady},
		{Type: ConditionConsistentStateFound, Status: metav1.ConditionTrue, Reason: ConditionConsistentStateFound},
	}
	n.Labels[apisv1.LabelNodeInitialized] = "true"
	after := apisv1.MustParseNillableDuration("30s")
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption.ConsolidateAfter = &after
	decide := func(at time.Time) Decision {
		s := snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n})
		s.NodePools = []apisv1.NodePool{np}
		return Decide(s, Options{})
	}
	statusCmds := func(d Decision) []events.Command {
		var out []events.Command
		for _, c := range d.Commands {
			// consolidateAfter Never also sets DisruptionBlocked (disruptionblocked_test.go).
			if c.Kind == events.CommandSetNodeClaimStatus && condOf(c, ConditionDisruptionBlocked) == nil {
				out = append(out, c)
			}
		}
		return out
	}
	// 29 s after Initialized: not yet, and nothing to remove.
	if c := statusCmds(decide(initAt.Add(29 * time.Second))); len(c) != 0 {
		t.Fatalf("at +29s: %+v", c)
	}
	// 30 s: True.
	c := statusCmds(decide(initAt.Add(30 * time.Second)))
	if len(c) != 1 || condOf(c[0], ConditionConsolidatable) == nil || condOf(c[0], ConditionConsolidatable).Status != metav1.ConditionTrue {
		t.Fatalf("at +30s: %+v", c)
	}
	nc.Status.Conditions = append(nc.Status.Conditions, *condOf(c[0], ConditionConsolidatable))
	if c := statusCmds(decide(initAt.Add(40 * time.Second))); len(c) != 0 {
		t.Fatalf("already True: %+v", c)
	}
	// A pod event 10 s ago: removed (Karpenter clears it) until 30 s after that event.
	nc.Status.LastPodEventTime = &metav1.Time{Time: initAt.Add(50 * time.Second)}
	c = statusCmds(decide(initAt.Add(60 * time.Second)))
	if len(c) != 1 || len(c[0].ClearConditions) != 1 || c[0].ClearConditions[0] != ConditionConsolidatable {
		t.Fatalf("after a pod event: %+v", c)
	}
	// consolidateAfter Never removes it too.
	never := apisv1.MustParseNillableDuration("Never")
	np.Spec.Disruption.ConsolidateAfter = &never
	if c = statusCmds(decide(initAt.Add(time.Hour))); len(c) != 1 || len(c[0].ClearConditions) != 1 {
		t.Fatalf("Never: %+v", c)
	}
}
