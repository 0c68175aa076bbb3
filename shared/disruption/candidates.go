package disruption

import (
	"errors"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kevents"
)

// Candidate is a node consolidation may disrupt.
type Candidate struct {
	*Node
	// Empty: no movable pod (only DaemonSet and mirror pods).
	Empty bool
	// DisruptionCost orders candidates (State.DisruptionCost).
	DisruptionCost float64
}

// Skipped is a node that is not a candidate, with the reason.
type Skipped struct {
	Node   string
	Reason string
	// Blocker is Karpenter's DisruptionBlocked message when a PodDisruptionBudget or a
	// karpenter.sh/do-not-disrupt annotation keeps the node (kevents), else "".
	Blocker string
	// First is Reason's rule, typed, with the object it names (State.Blockers lists them all).
	First Blocker
}

// Candidates returns the nodes consolidation may disrupt, sorted by name, and why each other
// node of a NodePool is not one. A candidate:
//   - is labelled karpenter.sh/nodepool with an existing NodePool, and has a NodeClaim;
//   - is initialized, not being deleted, not already tainted karpenter.sh/disrupted;
//   - has no karpenter.sh/do-not-disrupt annotation on the node or the NodeClaim;
//   - holds no pod of a live ProvisioningRequest booking, and was not launched for a
//     best-effort-atomic-scale-up request whose pods are not all bound (bookings.go);
//   - belongs to a pool whose consolidateAfter is not Never and has passed since the node's
//     last pod event (Node.LastPodEvent, against the snapshot's time);
//   - has a known offering price (consolidation must prove a saving);
//   - has only movable pods: none annotated karpenter.sh/do-not-disrupt, none without a
//     controller owner (a bare pod would be lost), and its PodDisruptionBudgets allow evicting all
//     of them together;
//   - is empty, when its pool's policy is WhenEmpty.
func (s *State) Candidates() ([]*Candidate, []Skipped) {
	var out []*Candidate
	var skipped []Skipped
	for _, n := range s.Nodes {
		if n.Node.Labels[apisv1.LabelNodePool] == "" {
			continue // not Dovetail's node
		}
		if bs := s.blockers(n, rules{}); len(bs) > 0 {
			skipped = append(skipped, Skipped{Node: n.Name(), Reason: bs[0].Message, Blocker: s.blocker(n), First: bs[0]})
			continue
		}
		out = append(out, &Candidate{Node: n, Empty: len(n.Movable) == 0, DisruptionCost: s.DisruptionCost(n)})
	}
	return out, skipped
}

// whyNot returns why n is not a consolidation candidate (the first of its Blockers), or "".
func (s *State) whyNot(n *Node) string {
	if bs := s.blockers(n, rules{}); len(bs) > 0 {
		return bs[0].Message
	}
	return ""
}

// blocker is Karpenter's DisruptionBlocked message for a node that is not a candidate because of
// a karpenter.sh/do-not-disrupt annotation or a PodDisruptionBudget, else "".
func (s *State) blocker(n *Node) string {
	switch {
	case n.Pool == nil || n.Claim == nil || n.Disrupting || !n.Initialized:
		return "" // not a node disruption would consider at all
	case apisv1.ObjectDoNotDisrupt(&n.Node.ObjectMeta, s.Now):
		return kevents.DoNotDisruptObject("Node")
	case apisv1.ObjectDoNotDisrupt(&n.Claim.ObjectMeta, s.Now):
		return kevents.DoNotDisruptObject("NodeClaim")
	}
	for _, p := range n.Movable {
		if apisv1.PodDoNotDisrupt(p, s.Now) {
			return kevents.DoNotDisruptPod(podRef(p))
		}
	}
	var pe *PDBError
	if errors.As(s.PDBs.Check(n.Movable), &pe) {
		return kevents.PDBBlocks(pe.PDBs...)
	}
	return ""
}

// PodsBlock returns why some pod cannot be moved voluntarily at now, or "": a pod whose
// karpenter.sh/do-not-disrupt annotation protects it at now ("true", or a duration not yet run
// out since the pod started: apisv1.PodDoNotDisrupt), or a pod without a controller owner
// (nothing would recreate it elsewhere).
func PodsBlock(pods []*corev1.Pod, now time.Time) string {
	if b, ok := PodsBlocker(pods, now); ok {
		return b.Message
	}
	return ""
}

// PodsBlocker is PodsBlock's answer typed: the first pod's Blocker (BlockerDoNotDisrupt or
// BlockerNoController, naming the pod), and whether there is one.
func PodsBlocker(pods []*corev1.Pod, now time.Time) (Blocker, bool) {
	if bs := podBlockers(pods, now, false); len(bs) > 0 {
		return bs[0], true
	}
	return Blocker{}, false
}

// policy returns the pool's consolidation policy; the v1beta1 name WhenUnderutilized (already
// converted by shared/apis, but accepted here too) means WhenEmptyOrUnderutilized, and an unset
// policy means Karpenter's default WhenEmptyOrUnderutilized.
func policy(np *apisv1.NodePool) string {
	switch p := np.Spec.Disruption.ConsolidationPolicy; p {
	case apisv1.ConsolidationPolicyWhenEmpty:
		return p
	default:
		return apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	}
}

// sortByCost orders candidates by disruption cost, then name (Karpenter's order).
func sortByCost(cs []*Candidate) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].DisruptionCost != cs[j].DisruptionCost {
			return cs[i].DisruptionCost < cs[j].DisruptionCost
		}
		return cs[i].Name() < cs[j].Name()
	})
}
