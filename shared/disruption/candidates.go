package disruption

import (
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
}

// Candidates returns the nodes consolidation may disrupt, sorted by name, and why each other
// node of a NodePool is not one. A candidate:
//   - is labelled karpenter.sh/nodepool with an existing NodePool, and has a NodeClaim;
//   - is initialized, not being deleted, not already tainted karpenter.sh/disrupted;
//   - has no karpenter.sh/do-not-disrupt annotation on the node or the NodeClaim;
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
		if reason := s.whyNot(n); reason != "" {
			skipped = append(skipped, Skipped{Node: n.Name(), Reason: reason, Blocker: s.blocker(n)})
			continue
		}
		out = append(out, &Candidate{Node: n, Empty: len(n.Movable) == 0, DisruptionCost: s.DisruptionCost(n)})
	}
	return out, skipped
}

// whyNot returns why n is not a consolidation candidate, or "".
func (s *State) whyNot(n *Node) string {
	switch {
	case n.Pool == nil:
		return fmt.Sprintf("nodepool %q does not exist", n.Node.Labels[apisv1.LabelNodePool])
	case n.Claim == nil:
		return "no NodeClaim records the node"
	case n.Disrupting:
		return "already being disrupted or deleted"
	case !n.Initialized:
		return "not initialized"
	case apisv1.ObjectDoNotDisrupt(&n.Node.ObjectMeta, s.Now):
		return "node is annotated karpenter.sh/do-not-disrupt"
	case apisv1.ObjectDoNotDisrupt(&n.Claim.ObjectMeta, s.Now):
		return "nodeclaim is annotated karpenter.sh/do-not-disrupt"
	case n.Pool.DeletionTimestamp != nil:
		return fmt.Sprintf("nodepool %q is being deleted", n.Pool.Name)
	case n.Pool.Spec.Replicas != nil:
		// Karpenter's consolidation and emptiness skip a static NodePool's candidates
		// (OwnedByStaticNodePool); its size is spec.replicas, whatever consolidationPolicy says.
		return fmt.Sprintf("nodepool %q is static (spec.replicas %d): never consolidated", n.Pool.Name, *n.Pool.Spec.Replicas)
	}
	d := n.Pool.Spec.Disruption
	if d.ConsolidateAfter != nil && d.ConsolidateAfter.IsNever() {
		return fmt.Sprintf("nodepool %q has consolidateAfter Never", n.Pool.Name)
	}
	if s.consolidateAfterLeft(n) > 0 {
		return fmt.Sprintf("pods changed %s ago, consolidateAfter is %s", s.Now.Sub(n.LastPodEvent()).Round(1e9), *d.ConsolidateAfter.Duration)
	}
	if !n.PriceKnown {
		return fmt.Sprintf("no price for offering %s/%s/%s", n.InstanceType, n.Zone, n.CapacityType)
	}
	if reason := PodsBlock(n.Movable, s.Now); reason != "" {
		return reason
	}
	if err := s.PDBs.Check(n.Movable); err != nil {
		return err.Error()
	}
	if len(n.Movable) > 0 && policy(n.Pool) == apisv1.ConsolidationPolicyWhenEmpty {
		return fmt.Sprintf("nodepool %q consolidates only empty nodes (WhenEmpty) and the node has %d pod(s)", n.Pool.Name, len(n.Movable))
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
	for _, p := range pods {
		if apisv1.PodDoNotDisrupt(p, now) {
			return fmt.Sprintf("pod %s is annotated karpenter.sh/do-not-disrupt", podRef(p))
		}
		if metav1.GetControllerOf(p) == nil {
			return fmt.Sprintf("pod %s has no controller owner and could not be recreated elsewhere", podRef(p))
		}
	}
	return ""
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
