package disruption

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// StrayTaintTimeout is how long a karpenter.sh/disrupted taint that no Dovetail function owns
// may hold a node before consolidation removes it: ConsolidationTimeout, the longest any of
// Dovetail's own disruptions waits before rolling back. Such taints are left behind by
// Karpenter when it stops in the middle of a disruption (a migration to Dovetail); Karpenter
// itself removes them when it restarts ("idempotently remove this taint from candidates that
// are not in the orchestration queue"). Until then the node takes no new pods and holds a unit
// of its pool's disruption budget, so consolidation and drift stall.
const StrayTaintTimeout = ConsolidationTimeout

// Stray is a karpenter.sh/disrupted taint no Dovetail function owns, and what to do with it.
type Stray struct {
	Node  string
	Taint corev1.Taint
	// Untaint is true when the taint has been there StrayTaintTimeout or longer; false means
	// the taint has no timeAdded yet and is stamped with one, so its age can be told later by
	// a function that keeps no state.
	Untaint bool
	Reason  string
}

// StrayTaints returns the nodes whose karpenter.sh/disrupted taint no Dovetail function owns,
// sorted by node name: a value that is not consolidation's (TaintValuePrefix), drift's or the
// interruption function's, on a node that is not being deleted and whose NodeClaim is not being
// deleted (the termination path taints with an empty value, and such a node is on its way out).
func StrayTaints(s *State, now time.Time) []Stray {
	var out []Stray
	for _, n := range s.Nodes {
		if n.Node.DeletionTimestamp != nil || (n.Claim != nil && n.Claim.DeletionTimestamp != nil) {
			continue
		}
		for _, t := range n.Node.Spec.Taints {
			if t.Key != apisv1.TaintKeyDisrupted || ownedTaintValue(t.Value) {
				continue
			}
			st := Stray{Node: n.Name(), Taint: t}
			switch {
			case t.TimeAdded == nil:
				st.Taint.TimeAdded = &metav1.Time{Time: now}
				st.Reason = fmt.Sprintf("%s=%s owned by no Dovetail function: stamped with the time it was found", t.Key, t.Value)
			case now.Sub(t.TimeAdded.Time) >= StrayTaintTimeout:
				st.Untaint = true
				st.Reason = fmt.Sprintf("%s=%s owned by no Dovetail function, added %s ago (removed after %s)",
					t.Key, t.Value, now.Sub(t.TimeAdded.Time).Round(time.Second), StrayTaintTimeout)
			default:
				continue
			}
			out = append(out, st)
		}
	}
	return out
}

// ownedTaintValue reports whether a karpenter.sh/disrupted value is one of Dovetail's functions'.
func ownedTaintValue(v string) bool {
	return strings.HasPrefix(v, TaintValuePrefix) || v == TaintValueDrifted || v == TaintValueInterrupted
}

// StrayCommands are the commands for the strays: TaintNode with the stamped taint (the agent
// sets timeAdded on the same taint without one), or UntaintNode.
func StrayCommands(cluster string, revision int64, strays []Stray) []events.Command {
	out := make([]events.Command, 0, len(strays))
	for _, st := range strays {
		t := st.Taint
		kind, what := events.CommandTaintNode, "stray-taint-stamp"
		if st.Untaint {
			kind, what = events.CommandUntaintNode, "stray-taint-remove"
		}
		stamp := ""
		if t.TimeAdded != nil {
			stamp = t.TimeAdded.UTC().Format(time.RFC3339)
		}
		out = append(out, events.Command{ID: events.CommandID(cluster, what, st.Node, t.Value, stamp), Kind: kind, Cluster: cluster,
			SnapshotRevision: revision, NodeName: st.Node, Taint: &t, Reason: st.Reason})
	}
	return out
}

// ApplyTaint is how the agent applies a TaintNode command's taint t to a node's taints: a taint
// of the same key and effect means the node is tainted already (nothing changes), except that a
// karpenter.sh/disrupted taint of the same value without a timeAdded takes t's (the stamp
// StrayTaints asks for; only that key, since a NoExecute taint's timeAdded starts its pods'
// tolerationSeconds); otherwise t is appended. It returns the new taints (a copy) and whether
// they changed. One exception: the interruption function's karpenter.sh/disrupted=interrupted
// takes over a node another value holds (a reclaim outranks a voluntary disruption, and a stray
// value would be removed under the drain after StrayTaintTimeout); the taint is replaced, value
// and timeAdded, so the other owner's exact UntaintNode no longer matches it. The agent
// (shared/kube) and the local stand-in agents share it.
func ApplyTaint(taints []corev1.Taint, t corev1.Taint) ([]corev1.Taint, bool) {
	for i, have := range taints {
		if have.Key != t.Key || have.Effect != t.Effect {
			continue
		}
		if have.Key == apisv1.TaintKeyDisrupted && t.Value == TaintValueInterrupted && have.Value != TaintValueInterrupted {
			out := append([]corev1.Taint(nil), taints...)
			out[i] = t
			return out, true
		}
		if have.Key != apisv1.TaintKeyDisrupted || have.TimeAdded != nil || t.TimeAdded == nil || have.Value != t.Value {
			return taints, false
		}
		out := append([]corev1.Taint(nil), taints...)
		out[i].TimeAdded = t.TimeAdded
		return out, true
	}
	return append(append([]corev1.Taint(nil), taints...), t), true
}
