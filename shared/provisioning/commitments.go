package provisioning

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/commitments"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Commitments (Input.Commitments; the rules are package commitments'). The solver prices an
// on-demand offering at what the cluster leaves of each commitment:
//
//   - compile consumes the commitments with the cluster's nodes and in-flight NodeClaims first
//     (existingCommitments), each at its offering's list price under its NodePool's overlays;
//   - a Reserved Instance or Azure reservation with instances left becomes a reserved pool
//     ahead of its NodePool (compileCommitted), as capacity reservations do: a NodeClaim of it
//     holds one instance, on-demand, at 0 USD per hour (already paid), and the pool's count goes
//     down as NodeClaims take it, so no instance is planned twice;
//   - a Savings Plan with commitment left discounts every on-demand offering in its scope to
//     list × (1 − its rate) (discountOfferings), which every stage then ranks, packs and bounds;
//   - after finalize, priceCommitments runs the plan's NodeClaims through the ledger: the price a
//     NodeClaim really costs (EffectivePricePerHour: its Savings Plan share at the discount, the
//     rest at list once the commitment runs out) and each commitment's utilisation.
//
// With Input.Commitments nil none of this runs: the ledger is nil and every step returns at once.

// existingCommitments returns the ledger after the cluster's nodes and in-flight NodeClaims
// (those no Node names yet) have consumed it; nil without commitments.
func existingCommitments(in *Input) *commitments.Ledger {
	l := commitments.NewLedger(in.Commitments)
	if l == nil {
		return nil
	}
	if in.CommitmentUsage != nil {
		l.Consume(in.CommitmentUsage)
		return l
	}
	var us []commitments.Usage
	nodes := map[string]bool{}
	for _, n := range in.Nodes {
		nodes[n.Spec.ProviderID] = true
		if u, ok := usageOf(in, n.Labels); ok {
			us = append(us, u)
		}
	}
	for _, nc := range in.NodeClaims {
		if nc.Status.ProviderID != "" && nodes[nc.Status.ProviderID] {
			continue
		}
		if u, ok := usageOf(in, nc.Labels); ok {
			us = append(us, u)
		}
	}
	l.Consume(us)
	return l
}

// usageOf is a node's or NodeClaim's usage from its labels, at its offering's price under its
// NodePool's overlays (what consolidation prices it at).
func usageOf(in *Input, labels map[string]string) (commitments.Usage, bool) {
	u, ok := commitments.NodeUsage(labels, in.Catalog)
	if !ok {
		return u, false
	}
	if it := in.Overlays.Apply(labels[apisv1.LabelNodePool], in.Catalog.Get(u.InstanceType)); it != nil {
		for _, o := range it.Offerings {
			if o.Zone == u.Zone && o.CapacityType == u.CapacityType {
				u.ListPricePerHour = o.PricePerHour
			}
		}
	}
	return u, true
}

// discountOfferings prices the type's on-demand offerings (copies, in place) at the best
// Savings Plan rate with commitment left: list × (1 − rate), at most the effective price
// (commitments.Ledger.PlanningRate), so the lower bound over these prices stays a bound.
func discountOfferings(in *Input, instanceType string, offs []catalog.Offering) {
	if !in.ledger.HasSavingsPlanLeft() {
		return
	}
	rate := in.ledger.PlanningRate(instanceType, in.Catalog.Region)
	if rate <= 0 {
		return
	}
	for i := range offs {
		if offs[i].CapacityType == apisv1.CapacityTypeOnDemand {
			offs[i].PricePerHour *= 1 - rate
			offs[i].PriceSource = catalog.PriceSourceCommitment
		}
	}
}

// committedKey is a reservation's key among the solver's counted reservations (solver.left).
func committedKey(name string) string { return "commitment/" + name }

// compileCommitted builds the pool of the Reserved Instances and Azure reservations with
// instances left that a compiled NodePool pool may launch: one type per reservation (its
// instance type as the pool sees it, with the on-demand offerings the reservation covers in
// zones the pool allows, at 0 USD per hour), or nil when there is none or the pool does not
// allow on-demand. Each reservation's instances left are counted in left.
func compileCommitted(in *Input, p *pool, daemons []daemon, left map[string]int) *pool {
	c := in.ledger.Commitments()
	if c == nil || len(c.Reservations) == 0 || p.err != nil {
		return nil
	}
	if ct := p.reqs[apisv1.LabelCapacityType]; ct != nil && !ct.Has(apisv1.CapacityTypeOnDemand) {
		return nil
	}
	rp := &pool{np: p.np, labels: p.labels, taints: p.taints, limits: p.limits, minValues: p.minValues,
		zoneLabels: p.zoneLabels, reserved: true, committed: true, nodeClass: p.nodeClass, settings: p.settings,
		limitsNodes: p.limitsNodes, priceCapped: p.priceCapped, aliases: p.aliases}
	rp.reqs = p.reqs.Intersect(scheduling.Requirements{apisv1.LabelCapacityType: scheduling.MustRequirement(
		apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeOnDemand)})
	zoneReq := rp.reqs[corev1.LabelTopologyZone]
	for i := range c.Reservations {
		r := &c.Reservations[i]
		n := in.ledger.ReservationLeft(i)
		base := in.Catalog.Get(r.InstanceType).ForAMIFamily(p.settings.AMIFamily)
		if n <= 0 || base == nil {
			continue
		}
		it := in.Overlays.Apply(p.np.Name, base)
		if !typeMatches(rp.reqs, it) {
			continue
		}
		var offs []catalog.Offering
		for _, o := range it.Offerings {
			if !o.Available || o.CapacityType != apisv1.CapacityTypeOnDemand || !r.Covers(it.Name, o.Zone, in.Catalog.Region) ||
				(zoneReq != nil && !zoneReq.Has(o.Zone)) ||
				(in.Unavailable != nil && in.Unavailable(it.Name, o.Zone, o.CapacityType, p.settings.CapacityScope)) {
				continue
			}
			o.PricePerHour, o.PriceSource = 0, catalog.PriceSourceCommitment
			offs = append(offs, o)
		}
		if len(offs) == 0 {
			continue
		}
		sortOfferings(offs)
		left[committedKey(r.Name)] = n
		rp.addType(&poolType{it: it, offerings: offs, res: committedKey(r.Name)}, daemons)
	}
	if len(rp.types) == 0 {
		return nil
	}
	rp.sortTypes()
	rp.indexOffers()
	return rp
}

// committedPlan renders a claim of a committed pool: the on-demand offerings of the one
// reservation it holds (its cheapest type), at 0 USD per hour; the fleet launches on-demand and
// the cloud's billing applies the reservation.
func (s *solver) committedPlan(c *claim) *NodeClaimPlan {
	t := c.pool.types[c.types[0]]
	offs := make([]Offering, 0, len(t.offerings))
	for _, o := range t.offerings {
		offs = append(offs, Offering{InstanceType: t.it, Offering: o, DaemonOverhead: t.daemon})
	}
	return s.claimPlan(c, offs)
}

// priceCommitments is the commitments' last step, after finalize: when some NodeClaim would
// cost more than it was planned at (a Savings Plan's commitment runs out within the plan),
// followCommitments re-ranks the NodeClaims' offerings at their effective prices; then the
// plan's NodeClaims consume what the cluster left of the commitments (a copy of the ledger, in
// plan order, each at its first offering's list price), each NodeClaim gets its effective price
// and the plan each commitment's utilisation. It returns how much the ledger priced NodeClaims
// below the prices the solver planned them at (a Reserved Instance left over that covers a
// NodeClaim of its NodePool's own pool), which the lower bound, computed over the planned
// prices, gives up so it stays at most the plan's effective total. 0 and nothing set without
// commitments.
func (s *solver) priceCommitments(plan *Plan) float64 {
	if s.in.ledger == nil {
		return 0
	}
	planned := make([]float64, len(plan.NodeClaims))
	for i, n := range plan.NodeClaims {
		planned[i] = n.Cheapest().PricePerHour
	}
	if s.capRunsOut(plan, planned) {
		planned = s.followCommitments(plan)
	}
	l := s.in.ledger.Clone()
	us := make([]commitments.Usage, len(plan.NodeClaims))
	for i, n := range plan.NodeClaims {
		us[i] = s.usageOfOffering(n.Cheapest())
	}
	below := 0.0
	for i, p := range l.Consume(us) {
		n := plan.NodeClaims[i]
		n.EffectivePricePerHour, n.Committed = p, true
		below += max(planned[i]-p, 0)
	}
	plan.Commitments = l.Utilisation()
	return below
}

// usageOfOffering is a planned offering as billing sees it, at its list price (before
// discountOfferings).
func (s *solver) usageOfOffering(o Offering) commitments.Usage {
	u := commitments.Usage{InstanceType: o.InstanceType.Name, Zone: o.Zone, Region: s.in.Catalog.Region,
		CapacityType: o.CapacityType, ListPricePerHour: o.PricePerHour}
	for _, lo := range o.InstanceType.Offerings {
		if lo.Zone == o.Zone && lo.CapacityType == o.CapacityType {
			u.ListPricePerHour = lo.PricePerHour
		}
	}
	return u
}

// capRunsOut reports whether the plan's NodeClaims, consuming the commitments in plan order,
// would cost more than planned: some were planned at a Savings Plan's discount its commitment
// no longer covers by their turn.
func (s *solver) capRunsOut(plan *Plan, planned []float64) bool {
	if !s.in.ledger.HasSavingsPlanLeft() {
		return false
	}
	us := make([]commitments.Usage, len(plan.NodeClaims))
	for i, n := range plan.NodeClaims {
		us[i] = s.usageOfOffering(n.Cheapest())
	}
	for i, p := range s.in.ledger.Clone().Consume(us) {
		if p > planned[i]+1e-12 {
			return true
		}
	}
	return false
}

// followCommitments makes each NodeClaim's offering choice follow what is left of the
// commitments as NodeClaims are added: the Reserved Instance pool's NodeClaims take their
// instances first (AWS applies Reserved Instances before Savings Plans), then each other
// NodeClaim in plan order has its on-demand offerings priced at Ledger.Quote (the discount on
// the share the Savings Plans still cover, list beyond), its offerings re-ranked by that price
// (stable: ties keep finalize's order), and its first offering consumed before the next
// NodeClaim is quoted. So once the commitment runs out, a NodeClaim whose spot (or another
// type's) offering is cheaper than on-demand at list takes it. The packing itself, done at the
// planning prices, is not revisited. It returns each NodeClaim's first offering's planning
// price (what the lower bound was computed over).
//
// A NodeClaim whose quotes all equal its planned prices keeps its list; once the commitments
// are exhausted every quote is the list price, so NodeClaims sharing finalize's offering list
// share one re-ranked copy too.
func (s *solver) followCommitments(plan *Plan) []float64 {
	l := s.in.ledger.Clone()
	planned := make([]float64, len(plan.NodeClaims))
	var first []commitments.Usage
	for i, n := range plan.NodeClaims {
		planned[i] = n.Cheapest().PricePerHour
		if s.claims[i].pool.committed {
			first = append(first, s.usageOfOffering(n.Cheapest()))
		}
	}
	l.Consume(first)
	type reranked struct {
		offs    []Offering
		planned float64
	}
	exhausted := map[*Offering]reranked{} // finalize's list (by its first element) → its re-ranked copy at list prices
	var quotes []float64
	var idx []int
	for i, n := range plan.NodeClaims {
		if s.claims[i].pool.reserved || len(n.Offerings) == 0 { // Reserved Instances (consumed above) and capacity reservations
			continue
		}
		offs, done := n.Offerings, l.Exhausted()
		if r, ok := exhausted[&offs[0]]; ok && done && len(r.offs) == len(offs) {
			n.Offerings, planned[i] = r.offs, r.planned
			continue // nothing is left to consume
		}
		quotes, idx = quotes[:0], idx[:0]
		changed := false
		for j, o := range offs {
			q := o.PricePerHour
			if o.CapacityType == apisv1.CapacityTypeOnDemand {
				q = l.Quote(s.usageOfOffering(o))
			}
			changed = changed || q != o.PricePerHour
			quotes, idx = append(quotes, q), append(idx, j)
		}
		if changed {
			sort.SliceStable(idx, func(a, b int) bool { return quotes[idx[a]] < quotes[idx[b]] })
			out := make([]Offering, len(offs)) // a new list: finalize shares lists between claims
			for k, j := range idx {
				out[k] = offs[j]
				if q := quotes[j]; q != offs[j].PricePerHour {
					out[k].PricePerHour, out[k].PriceSource = q, catalog.PriceSourceCommitment
					if q >= s.usageOfOffering(offs[j]).ListPricePerHour {
						out[k].PriceSource = listSource(offs[j])
					}
				}
			}
			planned[i] = offs[idx[0]].PricePerHour
			if done {
				exhausted[&offs[0]] = reranked{out, planned[i]}
			}
			n.Offerings = out
		}
		if !done {
			l.Consume([]commitments.Usage{s.usageOfOffering(n.Offerings[0])})
		}
	}
	return planned
}

// listSource is the price source of the offering's list price.
func listSource(o Offering) catalog.PriceSource {
	for _, lo := range o.InstanceType.Offerings {
		if lo.Zone == o.Zone && lo.CapacityType == o.CapacityType {
			return lo.PriceSource
		}
	}
	return o.PriceSource
}
