package provisioning

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Improvement by emptying NodeClaims: after packing (first-fit, refine, the LP and pattern
// re-packs), each NodeClaim in turn, the least used first, is emptied into the others' room: its
// pods are taken out of the topology counts and placed again, one by one, on the other
// NodeClaims through tryAdd (which may move a claim to a larger type), and the move is kept only
// when the plan gets cheaper (at the prices finalize will pick); otherwise every claim it touched
// is restored, topology counts included. Every rule tryAdd enforces holds for each pod moved
// (node affinity, taints, host ports, volume topology and attach limits, minValues, its own
// topology constraints against the counts as they are). What tryAdd does not see is kept
// unchanged instead:
//
//   - a pod some topology group counts, or that carries a constraint, moves only onto a claim
//     pinned to the same domain for every non-hostname key it is counted or constrained by, so
//     every zone (or other key) count other pods' spreads, affinities and anti-affinities were
//     checked against stays what it was; only hostname domains change, and tryAdd checks those
//     per node for the pod, while taking pods off the emptied node only lowers its counts;
//   - a pod moves only within its NodePool (the highest-weight pool that took it keeps it), and
//     pods needing an accelerator only onto claims of such pods, plain pods onto plain claims;
//   - NodePools with limits or a price cap (their accounting is per claim), reserved pools (a
//     claim holds one reservation instance) and claims whose topology key could not be pinned
//     (pinFailed: their counts do not follow their requirements) take no part.
//
// The work is bounded deterministically, never by a clock: improveBudget tryAdd calls per solve.

// improveBudget returns the tryAdd calls the improvement may spend for n pods on new claims:
// enough for a small plan to try every move, and a fraction of a call per pod beyond that so
// large solves stay within their time target. A package variable so tests can switch it off.
var improveBudget = func(n int) int { return 500 + n/20 }

// claimState is what tryAdd may change on a claim, saved so a move can be undone.
type claimState struct {
	reqs                           scheduling.Requirements
	npods, nports                  int
	requests, head, maxAvail       scheduling.Resources
	types                          []int
	maxOK, topo, pinFailed, shared bool
	cost                           float64
}

func (s *solver) saveClaim(c *claim) claimState {
	types := c.types // the pool's shared list is never written; a claim's own list is (commit)
	if !c.sharedTypes {
		types = append([]int(nil), c.types...)
	}
	return claimState{reqs: c.reqs, npods: len(c.pods), nports: len(c.ports), requests: c.requests, head: c.head,
		maxAvail: c.maxAvail, types: types, maxOK: c.maxOK, topo: c.topo, pinFailed: c.pinFailed,
		shared: c.sharedTypes, cost: s.finalCost(c)}
}

// restoreClaim undoes the placements made on c since st was saved, topology counts included
// (each pod taken out for the domains it was counted in, before the requirements go back).
func (s *solver) restoreClaim(c *claim, st claimState) {
	for i := len(c.pods) - 1; i >= st.npods; i-- {
		p := c.pods[i]
		s.topo.unrecordGroups(s.groupsOf(p), p.active, c, c.domainOf)
	}
	c.reqs, c.pods, c.ports, c.requests, c.head, c.maxAvail = st.reqs, c.pods[:st.npods], c.ports[:st.nports], st.requests, st.head, st.maxAvail
	c.types, c.maxOK, c.topo, c.pinFailed, c.sharedTypes = st.types, st.maxOK, st.topo, st.pinFailed, st.shared
	s.index.update(c)
}

// improvable reports whether a claim may take part in the improvement (see above).
func improvable(c *claim) bool {
	return c.pool.limits == nil && !c.pool.reserved && !c.pinFailed
}

// improve empties claims into the others while that makes the plan cheaper.
func (s *solver) improve() {
	var n int
	for _, c := range s.claims {
		n += len(c.pods)
	}
	budget := improveBudget(n)
	if budget <= 0 || len(s.claims) < 2 {
		return
	}
	// Every claim's head is current (placed, widen and restore keep it so); only the index is
	// rebuilt, over the claims the first-fit pass left and those the re-packs made.
	s.index = claimIndex{}
	type ranked struct {
		c    *claim
		fill float64
	}
	order := make([]ranked, 0, len(s.claims))
	for _, c := range s.claims {
		c.slot = 0
		if improvable(c) {
			s.index.add(c)
			if len(c.pods) > 0 {
				order = append(order, ranked{c, claimFill(c)})
			}
		}
	}
	slices.SortStableFunc(order, func(a, b ranked) int { return cmp.Compare(a.fill, b.fill) })
	gone := map[*claim]bool{}
	for _, r := range order {
		if budget <= 0 {
			break
		}
		if s.emptyClaim(r.c, &budget) {
			gone[r.c] = true
		}
	}
	if len(gone) == 0 {
		return
	}
	out := s.claims[:0]
	for _, c := range s.claims {
		if !gone[c] {
			out = append(out, c)
		}
	}
	s.claims = out
}

// claimFill is the larger of the claim's CPU and memory use of its cheapest type's room.
func claimFill(c *claim) float64 {
	a := c.pool.types[c.types[0]].avail
	if a.MilliCPU <= 0 || a.Memory <= 0 {
		return math.Inf(1)
	}
	return max(float64(c.requests.MilliCPU)/float64(a.MilliCPU), float64(c.requests.Memory)/float64(a.Memory))
}

// emptyClaim moves every pod of x onto other claims and keeps the move when the plan is
// cheaper; it reports whether x was emptied (and must be dropped from the plan).
func (s *solver) emptyClaim(x *claim, budget *int) bool {
	// Give up early when even free room elsewhere could not pay: the claims that would take the
	// pods can only get dearer, so the move saves at most x's own price.
	xCost := s.finalCost(x)
	if xCost <= 1e-9 {
		return false
	}
	saved := map[*claim]claimState{}
	var touched []*claim
	s.forget(x)
	s.index.remove(x)
	undo := func() {
		for i := len(touched) - 1; i >= 0; i-- {
			s.restoreClaim(touched[i], saved[touched[i]])
		}
		s.index.update(x)
		s.remember(x)
	}
	for _, p := range x.pods {
		if len(p.active) > 0 || x.topo {
			s.prepare(p)
		}
		keys := s.movedKeys(p)
		for _, k := range keys {
			if x.domainOf(k) == "" {
				undo() // not counted where it is: moving it would add a count
				return false
			}
		}
		aborted := false
		special := needsSpecial(p.requests)
		// Two walks: first only onto claims whose price the pod leaves as it is, then onto any.
		// The first claim that takes a pod is often a nearly full one it would move to a dearer
		// type, which makes the whole move dearer while a half-empty claim further on had the
		// room (issue 28: batch pods kept a node of their own beside five half-empty nodes).
		walk := func(samePrice bool) bool {
			return s.index.each(p.requests, s.index.bits.need(p), func(c *claim) bool {
				// NodePool weights decide which pool takes a pod, and accelerator nodes are for pods
				// that need them (tryAdd refuses plain pods there; here, neither way).
				if c.pool != x.pool || needsSpecial(c.requests) != special {
					return false
				}
				if *budget--; *budget < 0 {
					aborted = true
					return true // stop the walk; the move is undone below
				}
				for _, k := range keys {
					if c.domainOf(k) != x.domainOf(k) {
						return false
					}
				}
				st, seen := saved[c]
				if !seen {
					st = s.saveClaim(c)
				}
				var before claimState
				if samePrice {
					before = s.saveClaim(c)
				}
				if !s.tryAdd(c, p) {
					return false
				}
				if samePrice && s.finalCost(c) > before.cost+1e-9 {
					s.restoreClaim(c, before)
					return false
				}
				if !seen {
					saved[c] = st
					touched = append(touched, c)
				}
				if c.pinFailed && !st.pinFailed {
					aborted = true // its counts no longer follow its requirements: undo everything
				}
				return true
			})
		}
		ok := walk(true)
		if !ok && !aborted {
			ok = walk(false)
		}
		if !ok || aborted {
			undo()
			return false
		}
	}
	delta := -xCost
	for _, c := range touched {
		delta += s.finalCost(c) - saved[c].cost
	}
	if delta >= -1e-9 {
		undo()
		return false
	}
	return true
}

// movedKeys are the non-hostname keys whose domain a pod must keep when it moves: those the
// groups counting it and its own constraints use.
func (s *solver) movedKeys(p *podInfo) []string {
	if len(p.active) == 0 && !s.counted(p) {
		return nil
	}
	if !p.keysSet {
		p.keys, p.keysSet = s.topo.countedKeys(s.groupsOf(p), p.active), true
	}
	return p.keys
}

// finalCost is the price (USD/h) finalize will give the claim: its cheapest allowed offering
// among the fitting types it will rank (accelerator and metal types left out for pods needing
// none while another type fits, minValues judged over the types ranked).
func (s *solver) finalCost(c *claim) float64 {
	pl := c.pool
	if len(c.pods) == 0 {
		return 0
	}
	plainOnly := !needsSpecial(c.requests)
	if len(pl.minValues) > 0 && plainOnly {
		var fitting []int
		for _, ti := range c.types {
			if c.fits(ti) {
				fitting = append(fitting, ti)
			}
		}
		plainOnly = s.plainForMinValues(c, fitting)
	}
	if plainOnly {
		if p := cheapestAllowed(c, true); p >= 0 {
			return p
		}
	}
	return max(cheapestAllowed(c, false), 0)
}

// cheapestAllowed is claimCost restricted to non-special types when plainOnly; -1 when no
// candidate fits.
func cheapestAllowed(c *claim, plainOnly bool) float64 {
	zr, cr := c.reqs[corev1.LabelTopologyZone], c.reqs[apisv1.LabelCapacityType]
	best := -1.0
	for _, ti := range c.types {
		t := c.pool.types[ti]
		if best >= 0 && t.minPrice >= best {
			break // types are sorted by their cheapest offering; none later can beat best
		}
		if (plainOnly && t.special) || !c.fits(ti) {
			continue
		}
		for _, o := range t.offerings {
			if (zr == nil || zr.Has(o.Zone)) && (cr == nil || cr.Has(o.CapacityType)) {
				if best < 0 || o.PricePerHour < best {
					best = o.PricePerHour
				}
				break // offerings are sorted by price
			}
		}
	}
	return best
}
