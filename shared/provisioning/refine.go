package provisioning

import (
	"math"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// refine re-packs each NodeClaim's pods onto smaller instance types when that is cheaper.
// First-fit-decreasing fills a claim up to the largest type that fits, which costs nothing while
// prices are linear in size but leaves the last claim (and any claim cut short by a constraint)
// on a type far larger than its pods: 4.3 vCPU of pods on an 8-vCPU type instead of a 4-vCPU
// and a 1-vCPU one. For each claim, caps of 1/2, 1/4, ... of its type's vCPUs are tried (never
// below 1 vCPU), re-packing its pods first-fit under the cap, and the cheapest result is kept.
// A claim of a pool with limits is replaced only by claims that fit the limits in its place.
func (s *solver) refine() {
	out := make([]*claim, 0, len(s.claims))
	for _, c := range s.claims {
		out = append(out, s.refineClaim(c)...)
	}
	s.claims = out
}

// topoRefineBudget bounds, for n pending pods, the pod placements refine may spend re-packing
// claims that hold topology-counted pods (each try of a cap places every pod of the claim again,
// and keeping the best places them once more), so large solves stay within their time target;
// a claim the budget cannot give one try and the keeping stays as packed, and one it runs out
// on keeps the best cap tried. At 500 + n/20 the first zone-spread claim of a 1,000-pod batch
// (155 pods, eight caps: 1,240 placements) was already beyond it, so every claim of make
// scale's mix stayed on one large node per zone: 14.27 USD/h for 1,000 pods against a lower
// bound of 10.48 and Karpenter's 13.11 (docs/scale.md, "Tenth pass"). At ten placements per pod
// that mix, solved as one batch, costs 11.47 USD/h at N = 1,000 and 115.56 at N = 10,000
// (148.93 before); at four, 12.51 and 128.91.
var topoRefineBudget = func(n int) int { return 500 + 10*n }

// topoRefineGain is the smallest saving (a fraction of the claim's price) that a re-packing of a
// claim holding topology-counted pods must be able to reach, by splitFloor, to be tried.
const topoRefineGain = 0.02

// refineClaim returns the cheapest re-packing of one claim under halving vCPU caps (the claim
// itself when nothing is cheaper). A claim holding pods that topology counts is re-packed onto
// claims pinned to its own domains (zone, capacity type, any key a group counts by), its pods
// taken out of the counts first and each placed again through tryAdd, so every rule is checked
// against the counts as they are; only hostname domains change, which tryAdd checks per node.
func (s *solver) refineClaim(c *claim) []*claim {
	if len(c.pods) < 2 || c.pinFailed || c.pool.reserved {
		return []*claim{c}
	}
	pl := c.pool
	own := pl.types[c.types[0]].capacity
	bestLimit, bestCost := int64(0), claimCost(c)
	// A claim whose pods topology counts is re-packed only for a saving of at least
	// topoRefineGain: taking its pods out of the counts and placing them again costs far more
	// than re-packing free pods.
	want := bestCost - 1e-9
	if c.topo {
		want = bestCost * (1 - topoRefineGain)
	}
	var limits []int64
	for limit := own.MilliCPU / 2; limit >= 1000; limit /= 2 {
		if s.splitFloor(pl, c.requests, limit) < want {
			limits = append(limits, limit)
		}
	}
	if len(limits) == 0 {
		return []*claim{c} // no re-packing under any cap can be cheaper
	}
	var pins [][2]string
	if c.topo {
		// Bounded work (deterministic, see topoRefineBudget): each try places every pod again,
		// and so does keeping the best; a claim the budget cannot give one try and the keeping
		// stays as packed.
		if 2*len(c.pods) > s.topoRefineLeft {
			return []*claim{c}
		}
		s.topoRefineLeft -= len(c.pods) // the keeping, charged up front
		pins = s.domainPins(c)
		s.forget(c)
	}
	for _, limit := range limits {
		if c.topo {
			if len(c.pods) > s.topoRefineLeft {
				break
			}
			s.topoRefineLeft -= len(c.pods)
		}
		alt, ok := s.repack(c, limit, pins)
		cost := plansCost(alt)
		s.forget(alt...)
		if !ok {
			break // a pod no longer fits under the cap; smaller caps cannot help
		}
		if cost >= bestCost-1e-9 {
			continue
		}
		if c.limits != nil {
			// The replacement must fit the limit in place of the claim it replaces.
			var sum scheduling.Resources
			for _, a := range alt {
				sum = sum.Add(pl.types[a.types[0]].capacity)
			}
			if !c.limits.fits(sum, c.limits.left().Add(own)) {
				continue
			}
		}
		bestLimit, bestCost = limit, cost
	}
	if bestLimit == 0 {
		s.remember(c)
		return []*claim{c}
	}
	best, _ := s.repack(c, bestLimit, pins) // the same placements again, now kept
	if c.limits != nil {
		// The replacement now counts against the limits in place of the claim.
		c.limits.committed = c.limits.committed.Sub(own)
		for _, a := range best {
			c.limits.committed = c.limits.committed.Add(pl.types[a.types[0]].capacity)
			a.limits = c.limits
		}
	}
	return best
}

// splitFloor is a lower bound (USD/h) on placing requests on nodes of pool types with at most
// maxMilliCPU of CPU capacity: the requested CPU and memory, each at the lowest price per unit
// of room any such type offers. Cached per pool and cap.
func (s *solver) splitFloor(pl *pool, r scheduling.Resources, maxMilliCPU int64) float64 {
	key := [2]int64{int64(pl.index), maxMilliCPU}
	rate, ok := s.unitRates[key]
	if !ok {
		rate = [2]float64{math.Inf(1), math.Inf(1)}
		for _, t := range pl.types {
			if t.capacity.MilliCPU > maxMilliCPU || t.avail.MilliCPU <= 0 || t.avail.Memory <= 0 {
				continue
			}
			rate[0] = min(rate[0], t.minPrice/float64(t.avail.MilliCPU))
			rate[1] = min(rate[1], t.minPrice/float64(t.avail.Memory))
		}
		if s.unitRates == nil {
			s.unitRates = map[[2]int64][2]float64{}
		}
		s.unitRates[key] = rate
	}
	return max(float64(r.MilliCPU)*rate[0], float64(r.Memory)*rate[1])
}

// repack places c's pods (in their packing order) on new claims of c's pool whose types have at
// most maxMilliCPU of CPU capacity, each pinned to the given (key, value) domains. It returns
// the claims built and whether every pod found one; the pods placed are in the topology counts
// either way.
func (s *solver) repack(c *claim, maxMilliCPU int64, pins [][2]string) ([]*claim, bool) {
	pl := c.pool
	var base []int
	for ti, t := range pl.types {
		if t.capacity.MilliCPU <= maxMilliCPU {
			base = append(base, ti)
		}
	}
	if len(base) == 0 {
		return nil, false
	}
	var out []*claim
	for _, p := range c.pods {
		if len(pins) > 0 || len(p.active) > 0 {
			s.prepare(p) // the counts moved since the pod was placed
		}
		placed := false
		for _, a := range out {
			if s.tryAdd(a, p) {
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		// A trial claim counts against no limits (limits nil): refineClaim checks the whole
		// replacement against them in place of c.
		a := &claim{pool: pl, reqs: pl.reqs, types: append([]int(nil), base...)}
		for _, kv := range pins {
			s.pinTo(a, kv[0], kv[1])
		}
		if len(a.types) == 0 || !s.tryAdd(a, p) {
			return out, false
		}
		out = append(out, a)
	}
	return out, true
}

// claimCost is the price of the cheapest offering the claim's requirements allow among the
// types that hold its pods (USD/h), -1 when none does.
func claimCost(c *claim) float64 { return cheapestAllowed(c, false) }

func plansCost(cs []*claim) float64 {
	var t float64
	for _, c := range cs {
		t += claimCost(c)
	}
	return t
}
