package disruption

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The Balanced consolidation policy (Karpenter v1.14, kubernetes-sigs/karpenter
// pkg/controllers/disruption/balanced.go and types.go). A pool with
// consolidationPolicy: Balanced consolidates empty nodes as every policy does, and
// underutilized nodes only through moves that save enough for the disruption they cause:
//
//	savings fraction    = move's savings ($/h)            / pool's total cost ($/h)
//	disruption fraction = move's disruption cost          / pool's total disruption cost
//	score               = savings fraction / disruption fraction
//	approved            ⇔ score ≥ 1/apisv1.BalancedK (0.5)
//
// A node's disruption cost here is PerNodeBaseDisruptionCost plus the positive eviction costs
// of its movable pods (EvictionCost), without the lifetime scaling that orders candidates
// (Karpenter computeRescheduleDisruptionCost; the lifetime share only orders, the score
// judges). The pool's totals run over every node of the pool, candidates or not.

// PerNodeBaseDisruptionCost is the disruption cost of draining any node, pods or not
// (cordon, drain, API calls, replacement latency): Karpenter's PerNodeBaseDisruptionCost.
const PerNodeBaseDisruptionCost = 1.0

// PoolTotals are a pool's cost and disruption cost, the denominators of the Balanced score.
type PoolTotals struct {
	// Cost is the sum of the prices (USD per hour) of the pool's nodes whose price is known.
	Cost float64
	// DisruptionCost is the sum of RescheduleDisruptionCost over the pool's nodes.
	DisruptionCost float64
}

// RescheduleDisruptionCost is what moving every movable pod off n costs in disruption:
// PerNodeBaseDisruptionCost plus the positive EvictionCost of each movable pod (a pod whose
// priority or pod-deletion-cost makes its cost negative adds nothing).
func RescheduleDisruptionCost(n *Node) float64 {
	c := PerNodeBaseDisruptionCost
	for _, p := range n.Movable {
		c += math.Max(0, EvictionCost(p))
	}
	return c
}

// poolTotals computes PoolTotals for every pool with nodes in the state (NewState keeps them).
func (s *State) poolTotals() map[string]PoolTotals {
	totals := map[string]PoolTotals{}
	for _, n := range s.Nodes {
		pool := n.Node.Labels[apisv1.LabelNodePool]
		if pool == "" {
			continue
		}
		t := totals[pool]
		if n.PriceKnown {
			t.Cost += n.Price
		}
		t.DisruptionCost += RescheduleDisruptionCost(n)
		totals[pool] = t
	}
	return totals
}

// PoolTotals returns the Balanced score's denominators of pool (zero for a pool without nodes).
func (s *State) PoolTotals(pool string) PoolTotals { return s.totals[pool] }

// Score is one pool's Balanced score of a move.
type Score struct {
	Pool string
	// SavingsFraction and DisruptionFraction are the move's shares of the pool's totals.
	SavingsFraction, DisruptionFraction float64
}

// Value is SavingsFraction / DisruptionFraction: 0 when nothing is saved, +Inf when nothing
// is disrupted (Karpenter ScoreResult.Score).
func (sc Score) Value() float64 {
	switch {
	case sc.SavingsFraction <= 0:
		return 0
	case sc.DisruptionFraction == 0:
		return math.Inf(1)
	}
	return sc.SavingsFraction / sc.DisruptionFraction
}

// Approved reports whether the score reaches the threshold 1/apisv1.BalancedK.
func (sc Score) Approved() bool { return sc.Value() >= 1.0/apisv1.BalancedK }

// ScoreMove scores a move that saves savings (USD per hour) and costs disruption against a
// pool's totals. With a zero total (no priced node, or no node) there is nothing to normalise
// against and the move is not approved (Karpenter ScoreMove).
func ScoreMove(pool string, savings, disruption float64, t PoolTotals) Score {
	if t.Cost <= 0 || t.DisruptionCost <= 0 {
		return Score{Pool: pool}
	}
	return Score{Pool: pool, SavingsFraction: savings / t.Cost, DisruptionFraction: disruption / t.DisruptionCost}
}

// balanced reports whether the pool consolidates by the Balanced policy.
func balanced(np *apisv1.NodePool) bool {
	return np != nil && np.Spec.Disruption.ConsolidationPolicy == apisv1.ConsolidationPolicyBalanced
}

// balancedGate judges a consolidation move of set saving savings (USD per hour): every
// Balanced pool among the candidates' pools must approve its share, and pools with other
// policies pass. A move spanning pools gives each pool the share of the savings its candidates'
// prices make of the set's (Karpenter EvaluateBalancedMove). It returns "" when approved, else
// why not, naming the pool, the score and the threshold.
func (s *State) balancedGate(set []*Candidate, savings float64) string {
	byPool := map[string][]*Candidate{}
	var total float64
	for _, c := range set {
		byPool[c.Pool.Name] = append(byPool[c.Pool.Name], c)
		total += c.Price
	}
	names := make([]string, 0, len(byPool))
	for name := range byPool {
		names = append(names, name)
	}
	sort.Strings(names)
	var why []string
	for _, name := range names {
		cs := byPool[name]
		if !balanced(cs[0].Pool) {
			continue
		}
		var cost, disruption float64
		for _, c := range cs {
			cost += c.Price
			disruption += RescheduleDisruptionCost(c.Node)
		}
		share := savings
		if len(byPool) > 1 && total > 0 {
			share = savings * cost / total
		}
		if sc := ScoreMove(name, share, disruption, s.totals[name]); !sc.Approved() {
			why = append(why, fmt.Sprintf("nodepool %q (Balanced): score %.3f (saves %.1f%% of the pool's cost for %.1f%% of its disruption cost) is below %.2f",
				name, sc.Value(), 100*sc.SavingsFraction, 100*sc.DisruptionFraction, 1.0/apisv1.BalancedK))
		}
	}
	return strings.Join(why, "; ")
}

// canPassBalanced reports whether deleting c outright, the best any move of c alone can do
// (all its price saved, nothing launched), passes its pool's Balanced gate; a pool with another
// policy, or with no priced node, passes. Single-node consolidation skips a candidate that
// cannot, without a simulation (Karpenter CanPassThreshold).
func (s *State) canPassBalanced(c *Candidate) bool {
	if !balanced(c.Pool) {
		return true
	}
	t := s.totals[c.Pool.Name]
	if t.Cost <= 0 {
		return true
	}
	return ScoreMove(c.Pool.Name, c.Price, RescheduleDisruptionCost(c.Node), t).Approved()
}

// consolidateAfterLeft is how long n stays under its pool's consolidateAfter: the duration less
// the time since the node's last pod event (Node.LastPodEvent), 0 once it has passed, when the
// pool sets no positive duration (unset, "0s" or Never), or before the node is initialized.
// Such a node is not a consolidation candidate (whyNot, Never aside) and, as Karpenter v1.14
// does for destinations (pkg/utils/disruption IsUnderConsolidateAfter, used by the scheduler's
// consolidation simulations), receives no pod moved off a candidate: a node that just launched
// or just received pods is left to settle.
func (s *State) consolidateAfterLeft(n *Node) time.Duration {
	if n.Pool == nil || !n.Initialized {
		return 0
	}
	d := n.Pool.Spec.Disruption.ConsolidateAfter
	if d == nil || d.Duration == nil || *d.Duration <= 0 {
		return 0
	}
	if left := *d.Duration - s.Now.Sub(n.LastPodEvent()); left > 0 {
		return left
	}
	return 0
}
