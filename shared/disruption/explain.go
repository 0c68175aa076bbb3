package disruption

import (
	"fmt"
	"sort"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// NodeExplanation is why a node is not consolidated, and what removing it would do: the
// consolidate function's rules (Candidates, the NodePool's budget, the Balanced gate, pending
// pods) and its single-node simulation (simulateMove, judge), run on the node alone. Prices are
// USD per hour.
type NodeExplanation struct {
	Node         string  `json:"node"`
	NodeClaim    string  `json:"nodeClaim,omitempty"`
	NodePool     string  `json:"nodePool,omitempty"`
	InstanceType string  `json:"instanceType,omitempty"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	PricePerHour float64 `json:"pricePerHour"`
	PriceKnown   bool    `json:"priceKnown"`
	// Empty: no pod has to move (only DaemonSet and mirror pods).
	Empty bool `json:"empty"`
	// Blockers are every rule that keeps the node from being consolidated now, each naming its
	// object; empty when consolidation would delete or replace it.
	Blockers []Blocker `json:"blockers"`
	// Removal is the simulation of removing the node, run whether or not a blocker holds.
	Removal *Removal `json:"removal,omitempty"`
}

// Removal is what removing one node would do: where each movable pod goes (an existing node, an
// in-flight NodeClaim, or a new NodeClaim, Replacement ≥ 0), the pods that would have no place,
// and the price before (the node) and after (the new NodeClaims' cheapest offerings).
type Removal struct {
	Moves        []Move             `json:"moves"`
	Replacements []ReplacementOffer `json:"replacements,omitempty"`
	Stranded     []StrandedPod      `json:"stranded,omitempty"`
	PriceBefore  float64            `json:"pricePerHourBefore"`
	PriceAfter   float64            `json:"pricePerHourAfter"`
	Savings      float64            `json:"savingsPerHour"`
}

// Move is where one pod goes: an existing node or in-flight NodeClaim (Node), or the new
// NodeClaim Replacements[Replacement] (Replacement ≥ 0, else -1).
type Move struct {
	Pod         string `json:"pod"`
	Node        string `json:"node,omitempty"`
	Replacement int    `json:"replacement"`
}

// ReplacementOffer is a new NodeClaim the removal needs: its NodePool and cheapest offering.
type ReplacementOffer struct {
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
}

// StrandedPod is a pod that would have no place, with the solver's reason.
type StrandedPod struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// ExplainNode explains node name on the state. Errors: the node is not in the snapshot, or the
// simulation failed (node settings).
func (s *State) ExplainNode(name string) (*NodeExplanation, error) {
	n := s.byName[name]
	if n == nil {
		return nil, fmt.Errorf("node %q: not in the cluster's state", name)
	}
	x := &NodeExplanation{Node: name, NodePool: n.Node.Labels[apisv1.LabelNodePool], InstanceType: n.InstanceType, Zone: n.Zone,
		CapacityType: n.CapacityType, PricePerHour: n.Price, PriceKnown: n.PriceKnown, Empty: len(n.Movable) == 0, Blockers: s.Blockers(n)}
	if n.Claim != nil {
		x.NodeClaim = n.Claim.Name
	}
	if x.NodePool == "" { // Candidates passes over it: not a NodePool's node at all
		x.Blockers = []Blocker{{BlockerNoNodePool, nodeRef(n), "node has no karpenter.sh/nodepool label: no NodePool manages it"}}
	}
	if n.Pool != nil {
		x.Blockers = append(x.Blockers, s.budgetBlockers(n)...)
	}
	x.Blockers = append(x.Blockers, s.pendingBlockers()...)
	remove := map[string]bool{name: true}
	plan, err := s.simulateMove(remove, n.Movable)
	if err != nil {
		return nil, err
	}
	x.Removal = removal(n, plan)
	if n.Pool == nil || n.Claim == nil || x.Empty {
		return x, nil // emptiness deletes an empty candidate without a simulation
	}
	c := &Candidate{Node: n, DisruptionCost: s.DisruptionCost(n)}
	if !s.canPassBalanced(c) {
		x.Blockers = append(x.Blockers, Blocker{BlockerBalanced, poolRef(n.Pool.Name),
			fmt.Sprintf("even deleting it would not pass nodepool %q's Balanced score", n.Pool.Name)})
	}
	if _, b := s.judge([]*Candidate{c}, plan, 1, StrategySingleNode); b != nil {
		x.Blockers = append(x.Blockers, *b)
	}
	return x, nil
}

// budgetBlockers is the NodePool's disruption budget for the reason consolidation would
// disrupt n for (Empty, else Underutilized), when it allows no more node now.
func (s *State) budgetBlockers(n *Node) []Blocker {
	reason := apisv1.DisruptionReasonUnderutilized
	if len(n.Movable) == 0 {
		reason = apisv1.DisruptionReasonEmpty
	}
	c := s.Counts[n.Pool.Name]
	allowed, err := AllowedDisruptions(n.Pool, reason, c.Nodes, c.Disrupting, s.Now)
	switch {
	case err != nil:
		return []Blocker{{BlockerBudget, poolRef(n.Pool.Name), err.Error() + " (fails closed: no disruption)"}}
	case allowed <= 0:
		return []Blocker{{BlockerBudget, poolRef(n.Pool.Name), fmt.Sprintf("NodePool %s: disruption budget for %s allows 0 node(s) now (%d of %d nodes already disrupting)",
			n.Pool.Name, reason, c.Disrupting, c.Nodes)}}
	}
	return nil
}

// pendingBlockers is Consolidate's wait for pending pods the cluster can place (placeablePending):
// one blocker naming the first such pod.
func (s *State) pendingBlockers() []Blocker {
	if len(s.pending) == 0 {
		return nil
	}
	plan, err := s.Simulate(nil, s.pending)
	if err != nil {
		return []Blocker{{BlockerPendingPods, podObject(s.pending[0]), "pending pods could not be simulated: " + err.Error()}}
	}
	stuck := map[string]bool{}
	for _, u := range plan.Unschedulable {
		stuck[podRef(u.Pod)] = true
	}
	for _, p := range s.pending {
		if !stuck[podRef(p)] {
			return []Blocker{{BlockerPendingPods, podObject(p), fmt.Sprintf("%d pod(s) pending (%s first): consolidation waits until they are placed",
				len(s.pending)-len(plan.Unschedulable), podRef(p))}}
		}
	}
	return nil
}

// removal reads the simulation of removing n.
func removal(n *Node, plan *provisioning.Plan) *Removal {
	r := &Removal{Moves: []Move{}, PriceBefore: n.Price}
	for _, np := range plan.ExistingNodes {
		for _, p := range np.Pods {
			r.Moves = append(r.Moves, Move{Pod: podRef(p), Node: np.Name, Replacement: -1})
		}
	}
	for i, nc := range plan.NodeClaims {
		o := nc.Cheapest()
		r.Replacements = append(r.Replacements, ReplacementOffer{NodePool: nc.NodePool.Name, InstanceType: o.InstanceType.Name, Zone: o.Zone,
			CapacityType: o.CapacityType, PricePerHour: o.PricePerHour})
		r.PriceAfter += o.PricePerHour
		for _, p := range nc.Pods {
			r.Moves = append(r.Moves, Move{Pod: podRef(p), Replacement: i})
		}
	}
	for _, u := range plan.Unschedulable {
		r.Stranded = append(r.Stranded, StrandedPod{Pod: podRef(u.Pod), Reason: u.Reason})
	}
	sort.Slice(r.Moves, func(i, j int) bool { return r.Moves[i].Pod < r.Moves[j].Pod })
	r.Savings = r.PriceBefore - r.PriceAfter
	return r
}
