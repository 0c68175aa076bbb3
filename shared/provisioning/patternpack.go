package provisioning

import (
	"math"
	"sort"

	"github.com/dovetail-dev/dovetail/shared/provisioning/lowerbound"
)

// Pattern packing: the configuration LP (lowerbound.Patterns) over node patterns — an instance
// type with a multiset of pods that fits it — gives the cheapest fractional mix of whole node
// configurations; rounding it (take ⌊λ⌋ of each pattern, solve again for the pods left, round
// the largest λ up when nothing is whole, first-fit whatever the dives leave) gives plans within
// a few percent of the bound where first-fit-decreasing leaves 15–20 % on mixes of large batch
// pods and small services. Every node is built through tryAdd, so every rule tryAdd enforces
// still holds; the result replaces the current NodeClaims only when it is cheaper.
//
// The work is bounded by deterministic budgets (no clock in the core): column-generation rounds
// and knapsack nodes per solve, and at most maxPatternClasses distinct pod shapes (beyond that
// first-fit and the LP-guided re-pack stand).
const (
	maxPatternClasses = 64
	maxPatternDives   = 32
)

var (
	packBudget  = lowerbound.PatternBudget{Rounds: 300, KnapsackNodes: 5_000_000}
	diveBudget  = lowerbound.PatternBudget{Rounds: 200, KnapsackNodes: 2_000_000}
	boundBudget = lowerbound.PatternBudget{Rounds: 300, KnapsackNodes: 5_000_000}
	// closeEnough: a packing within this fraction (1 %) of the fit-cut bound is not re-packed,
	// nor is the pattern LP run to tighten its bound. Small pods on large types (Karpenter's
	// benchmark pods: first-fit 214.03 $/h against a bound of 213.73) are such a case: every
	// knapsack exhausts its nodes there, for nothing.
	closeEnough = 0.01
	// boundGiveUpNodes: the plan's bound gives up on the pattern LP after this many knapsack
	// nodes if its bound is below half the fit-cut bound (lowerbound.PatternBudget.Floor).
	boundGiveUpNodes = 200_000
	// boundNodesPerPod caps the bound's knapsack nodes by the pods it covers, so a small plan
	// gets a small bound computation (50 pods: 600,000 nodes, tens of milliseconds); the cost
	// mixes need at most 11,000 per pod (svc+batch-323: 3.56 M nodes for 323 pods).
	boundNodesPerPod = 12_000
)

// patternPack re-packs, per NodePool without limits, the NodeClaims whose pods carry no
// topology rule, host port or zone/capacity-type requirement.
func (s *solver) patternPack() {
	for pi, pl := range s.pools {
		if pl.err != nil || pl.limits != nil || pl.reserved {
			continue
		}
		var movable []*claim
		for _, c := range s.claims {
			if c.pool == pl && !c.topo && s.allMovable(pi, c) {
				movable = append(movable, c)
			}
		}
		var pods []*podInfo
		for _, c := range movable {
			pods = append(pods, c.pods...)
		}
		if len(pods) < 2 {
			continue
		}
		sortPods(pods)
		classes := groupClasses(pods)
		if len(classes) > maxPatternClasses {
			continue // too many shapes: first-fit and the LP-guided re-pack stand
		}
		if b, err := lowerbound.FitCut(s.packProblem(pi, classes)); err == nil && plansCost(movable) <= b.PricePerHour*(1+closeEnough) {
			continue // first-fit is within closeEnough of the optimum already
		}
		alt := s.packPatterns(pi, classes)
		if alt == nil || plansCost(alt) >= plansCost(movable)-1e-9 {
			continue
		}
		drop := make(map[*claim]bool, len(movable))
		for _, c := range movable {
			drop[c] = true
		}
		out := make([]*claim, 0, len(s.claims))
		for _, c := range s.claims {
			if !drop[c] {
				out = append(out, c)
			}
		}
		s.claims = append(out, alt...)
	}
}

// allMovable: one node-affinity alternative without zone or capacity-type keys, no host ports.
func (s *solver) allMovable(pi int, c *claim) bool {
	for _, p := range c.pods {
		if len(p.alts) != 1 || len(p.ports) > 0 || len(p.active) > 0 {
			return false
		}
		pp := s.compatibility(pi, p)
		if pp.reason != "" || len(pp.alts) != 1 || pp.alts[0].zoneCT {
			return false
		}
	}
	return true
}

// packClass is a set of interchangeable pods (same requests and scheduling signature).
type packClass struct {
	pods []*podInfo // first-fit-decreasing order; consumed from the front
}

// packPatterns returns new claims holding every pod of the classes (consumed), or nil when some
// pod cannot be placed.
func (s *solver) packPatterns(pi int, classes []*packClass) []*claim {
	var out []*claim
	budget := packBudget
	for dive := 0; dive < maxPatternDives; dive++ {
		left := remainingClasses(classes)
		if len(left) == 0 {
			return out
		}
		prob := s.packProblem(pi, left)
		res, err := lowerbound.Patterns(prob, budget)
		if err != nil {
			return nil
		}
		budget = diveBudget
		built := s.roundPatterns(pi, left, res, false)
		if len(built) == 0 {
			built = s.roundPatterns(pi, left, res, true)
		}

		if len(built) == 0 {
			break
		}
		out = append(out, built...)
	}
	// Whatever the dives left: first-fit-decreasing, each claim refined.
	var rest []*podInfo
	for _, c := range classes {
		rest = append(rest, c.pods...)
	}
	sortPods(rest)
	ffd := s.firstFitRefined(pi, rest)
	if ffd == nil && len(rest) > 0 {
		return nil
	}
	return append(out, ffd...)
}

// firstFitRefined packs pods (in first-fit-decreasing order) first-fit onto new claims of pool
// pi, each claim then refined; nil when some pod fits no new claim.
func (s *solver) firstFitRefined(pi int, pods []*podInfo) []*claim {
	var ffd []*claim
	for _, p := range pods {
		placed := false
		for _, c := range ffd {
			if s.tryAdd(c, p) {
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		c := s.newClaim(pi)
		if !s.tryAdd(c, p) {
			return nil
		}
		ffd = append(ffd, c)
	}
	var out []*claim
	for _, c := range ffd {
		out = append(out, s.refineClaim(c)...)
	}
	return out
}

func groupClasses(pods []*podInfo) []*packClass {
	index := map[string]*packClass{}
	var out []*packClass
	for _, p := range pods {
		key := p.requests.String() + "\x00" + p.sig
		c := index[key]
		if c == nil {
			c = &packClass{}
			index[key] = c
			out = append(out, c)
		}
		c.pods = append(c.pods, p)
	}
	return out
}

func remainingClasses(cs []*packClass) []*packClass {
	var out []*packClass
	for _, c := range cs {
		if len(c.pods) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// packProblem: one option per pool type (its cheapest offering, allocatable after DaemonSets);
// a class may use the types its signature allows, accelerator and metal types only when it needs
// an accelerator or nothing else holds it (the solver's rule for new nodes).
func (s *solver) packProblem(pi int, classes []*packClass) lowerbound.Problem {
	pl := s.pools[pi]
	prob := lowerbound.Problem{Options: make([]lowerbound.Option, len(pl.types))}
	for ti, t := range pl.types {
		prob.Options[ti] = lowerbound.Option{Name: t.it.Name, Allocatable: clampRes(t.avail), PricePerHour: t.minPrice}
	}
	for _, c := range classes {
		rep := c.pods[0]
		ac := s.compatibility(pi, rep).alts[0]
		special := needsSpecial(rep.requests)
		var plain, all []int
		for ti, t := range pl.types {
			if !ac.types[ti] || !rep.requests.Fits(t.avail) {
				continue
			}
			all = append(all, ti)
			if !t.special {
				plain = append(plain, ti)
			}
		}
		opts := all
		if !special && len(plain) > 0 {
			opts = plain
		}
		prob.Classes = append(prob.Classes, lowerbound.Class{Requests: rep.requests, Count: len(c.pods), Options: opts})
	}
	return prob
}

// newClaim opens an empty claim of pool pi whose candidates are every type of the pool (the
// pool's shared list until a pod narrows it).
func (s *solver) newClaim(pi int) *claim {
	pl := s.pools[pi]
	if len(pl.allTypes) != len(pl.types) {
		pl.allTypes = make([]int, len(pl.types))
		for ti := range pl.types {
			pl.allTypes[ti] = ti
		}
		c := &claim{pool: pl, types: pl.allTypes}
		c.updateHead()
		pl.allMax = c.maxAvail
	}
	return &claim{pool: pl, limits: pl.limits, reqs: pl.reqs, types: pl.allTypes, sharedTypes: true, maxAvail: pl.allMax, maxOK: true}
}

// roundPatterns builds ⌊λ⌋ nodes of every pattern (or, with up, one node of the pattern with
// the largest λ), taking pods from the classes' fronts; pods a node cannot take go back.
func (s *solver) roundPatterns(pi int, classes []*packClass, res *lowerbound.PatternResult, up bool) []*claim {
	order := make([]int, len(res.Patterns))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return res.Use[order[a]] > res.Use[order[b]] })
	var out []*claim
	for _, i := range order {
		n := int(math.Floor(res.Use[i] + 1e-6))
		if up {
			// Nothing is whole: round up the largest λ, and every other λ ≥ ½.
			if res.Use[i] <= 1e-6 || (len(out) > 0 && res.Use[i] < 0.5) {
				break
			}
			n = 1
		}
		pt := res.Patterns[i]
		for ; n > 0; n-- {
			c := s.buildNode(pi, classes, pt)
			if c == nil {
				break
			}
			out = append(out, c)
		}
	}
	return out
}

// buildNode opens a claim with the pattern's pods (as many as remain), or nil when none remain.
func (s *solver) buildNode(pi int, classes []*packClass, pt lowerbound.Pattern) *claim {
	c := s.newClaim(pi)
	for k, n := range pt.Counts {
		cl := classes[k]
		var back []*podInfo
		for ; n > 0 && len(cl.pods) > 0; n-- {
			p := cl.pods[0]
			cl.pods = cl.pods[1:]
			if !s.tryAdd(c, p) {
				back = append(back, p)
			}
		}
		cl.pods = append(back, cl.pods...)
	}
	if len(c.pods) == 0 {
		return nil
	}
	return c
}
