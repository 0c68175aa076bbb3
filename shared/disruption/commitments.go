package disruption

import (
	"github.com/dovetail-dev/dovetail/shared/commitments"
)

// Commitments in consolidation (the snapshot's Savings Plans and Reserved Instances / Azure
// reservations, package commitments): a node is priced at what it costs under them, as the
// solver prices its replacements, so moving pods off a paid commitment saves nothing.
//
//   - priceCommitments, once per State: the nodes (by name) consume the commitments, each at
//     its offering's list price under its NodePool's overlays; Node.Price becomes the effective
//     price (0 under a Reserved Instance, the discounted rate on a Savings Plan's share) and
//     listPrice keeps the list price.
//   - every simulation plans with the commitments consumed by the nodes it keeps and the
//     NodeClaims in flight (commitmentUsage): what the candidates held is free again for their
//     replacements, as it would be once they are gone. A replacement costs its effective
//     price (NodeClaimPlan.PricePerHour).
//   - a move that saves nothing (a node under a Reserved Instance whose pods fit elsewhere) is
//     not taken: evaluate refuses it (noCommitmentSaving).

// priceCommitments sets each node's effective price under the snapshot's commitments; nothing
// without them.
func (s *State) priceCommitments() {
	l := commitments.NewLedger(s.Snapshot.Commitments)
	if l == nil {
		return
	}
	us := make([]commitments.Usage, 0, len(s.Nodes))
	priced := make([]*Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		n.listPrice = n.Price
		if !n.PriceKnown {
			continue
		}
		us = append(us, commitments.Usage{InstanceType: n.InstanceType, Zone: n.Zone, Region: s.Catalog.Region,
			CapacityType: n.CapacityType, ListPricePerHour: n.Price})
		priced = append(priced, n)
	}
	for i, p := range l.Consume(us) {
		priced[i].Price = p
	}
}

// commitmentUsage is what consumes the commitments before a simulation's plan: every node not
// removed (by name, at its list price) and every NodeClaim with no node yet (from its labels and
// the catalog). Nil without commitments.
func (s *State) commitmentUsage(remove map[string]bool) []commitments.Usage {
	if s.Snapshot.Commitments == nil {
		return nil
	}
	us := make([]commitments.Usage, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		if remove[n.Name()] || !n.PriceKnown {
			continue
		}
		us = append(us, commitments.Usage{InstanceType: n.InstanceType, Zone: n.Zone, Region: s.Catalog.Region,
			CapacityType: n.CapacityType, ListPricePerHour: n.listPrice})
	}
	for _, nc := range s.claims {
		if s.registered[nc] {
			continue
		}
		if u, ok := commitments.NodeUsage(nc.Labels, s.Catalog); ok {
			us = append(us, u)
		}
	}
	return us
}

// noCommitmentSaving says why a move is refused when the snapshot has commitments and the move
// saves nothing (its candidates cost nothing more than what replaces them); "" otherwise.
func (s *State) noCommitmentSaving(d *Decision) string {
	if s.Snapshot.Commitments == nil || d.Savings > savingsEpsilon {
		return ""
	}
	return "saves nothing: the candidates run on paid commitments (Reserved Instances or Savings Plans)"
}
