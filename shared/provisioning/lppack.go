package provisioning

import (
	"math"
	"sort"

	"github.com/dovetail-dev/dovetail/shared/provisioning/lowerbound"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// lpMinPods is the smallest number of interchangeable pods worth an LP-guided re-pack.
const lpMinPods = 8

// lpRepack re-packs, per NodePool, the pods that carry no constraint beyond the pool itself
// (no node requirements, topology, host ports or volumes) guided by the LP relaxation of the
// packing problem (package lowerbound): the LP's optimal mix of instance types says which node
// shapes match the pods' aggregate CPU:memory:pods demand. ⌊x_t⌋ nodes of each type t of that
// mix are opened, each pod goes to the open node whose remaining capacity its shape best
// matches (the dot-product heuristic for vector bin packing: maximise Σ_r pod_r·free_r /
// capacity_r²), and the pods left over are packed first-fit-decreasing as usual and refined.
// First-fit-decreasing alone puts same-shaped pods together, so each node gets the type that
// suits one shape; the LP mix mixes shapes onto complementary types. The result replaces the
// first-fit plan only when it is cheaper. Pools with limits are left as packed.
func (s *solver) lpRepack() {
	for pi, pl := range s.pools {
		if pl.err != nil || pl.limits != nil || pl.reserved {
			continue
		}
		var movable, keep []*claim
		for _, c := range s.claims {
			switch {
			case c.pool != pl:
			case !c.topo && allPlain(c):
				movable = append(movable, c)
			default:
				keep = append(keep, c)
			}
		}
		var pods []*podInfo
		for _, c := range movable {
			pods = append(pods, c.pods...)
		}
		if len(pods) < lpMinPods {
			continue
		}
		mix := s.lpMix(pi, pods)
		if mix == nil {
			continue
		}
		var alt []*claim
		for _, v := range []struct {
			fill fillMode
			ceil bool
		}{{fillSequential, false}, {fillRoundRobin, false}, {fillDot, false}, {fillSequential, true}, {fillRoundRobin, true}, {fillDot, true}} {
			a := s.lpPlan(pi, pods, mix, v.fill, v.ceil)
			if a != nil && (alt == nil || plansCost(a) < plansCost(alt)-1e-9) {
				alt = a
			}
		}
		if alt == nil || plansCost(alt) >= plansCost(movable)-1e-9 {
			continue
		}
		out := make([]*claim, 0, len(s.claims))
		for _, c := range s.claims {
			if c.pool != pl {
				out = append(out, c)
			}
		}
		out = append(out, keep...)
		s.claims = append(out, alt...)
	}
}

// allPlain reports whether every pod of the claim is constrained by nothing but the pool.
func allPlain(c *claim) bool {
	for _, p := range c.pods {
		if !plain(p) {
			return false
		}
	}
	return true
}

func plain(p *podInfo) bool {
	if len(p.alts) != 1 || len(p.alts[0]) != 0 || len(p.active) != 0 || len(p.ports) != 0 {
		return false
	}
	return len(p.requests.Scalar) == 0
}

// lpMix solves the LP relaxation for the pods over the pool's (non-accelerator) types and
// returns the fractional number of nodes per pool type index, or nil.
func (s *solver) lpMix(pi int, pods []*podInfo) map[int]float64 {
	pl := s.pools[pi]
	opts := make([]lowerbound.Option, 0, len(pl.types))
	byName := make(map[string]int, len(pl.types))
	for ti, t := range pl.types {
		if t.special {
			continue // the pods need no accelerator; keep those types out of the mix
		}
		opts = append(opts, lowerbound.Option{Name: t.it.Name, Allocatable: t.avail, PricePerHour: t.minPrice})
		byName[t.it.Name] = ti
	}
	reqs := make([]scheduling.Resources, len(pods))
	for i, p := range pods {
		reqs[i] = p.requests
	}
	b, err := lowerbound.Compute(reqs, opts)
	if err != nil || len(b.Mix) == 0 {
		return nil
	}
	mix := map[int]float64{}
	for _, u := range b.Mix {
		if ti, ok := byName[u.Name]; ok {
			mix[ti] = u.Nodes
		}
	}
	return mix
}

// lpPlan packs pods (already in first-fit-decreasing order) onto nodes of the LP mix (⌊x_t⌋ or
// ⌈x_t⌉ of each type), filled bin by bin or round robin, then packs the rest first-fit; nil
// when a pod cannot be placed.
func (s *solver) lpPlan(pi int, pods []*podInfo, mix map[int]float64, fill fillMode, ceil bool) []*claim {
	pl := s.pools[pi]
	tis := make([]int, 0, len(mix))
	for ti := range mix {
		tis = append(tis, ti)
	}
	sort.Ints(tis)
	var bins []*claim
	for _, ti := range tis {
		n := int(mix[ti] + 1e-6)
		if ceil {
			n = int(math.Ceil(mix[ti] - 1e-6))
		}
		for ; n > 0; n-- {
			bins = append(bins, &claim{pool: pl, limits: pl.limits, reqs: pl.reqs, types: []int{ti}})
		}
	}
	var left []*podInfo
	if fill == fillDot {
		for _, p := range pods {
			if best := bestBin(bins, p); best != nil && s.tryAdd(best, p) {
				continue
			}
			left = append(left, p)
		}
	} else {
		left = s.fillBalanced(bins, pods, fill == fillRoundRobin)
	}
	var out []*claim
	for _, c := range bins {
		if len(c.pods) == 0 {
			continue
		}
		s.widen(c)
		out = append(out, c)
	}
	rest := s.firstFitRefined(pi, left)
	if rest == nil && len(left) > 0 {
		return nil
	}
	return append(out, rest...)
}

// fillMode is how pods are spread over the LP mix's nodes; lpRepack tries each and keeps the
// cheapest plan.
type fillMode int

const (
	fillSequential fillMode = iota // fillBalanced, bin by bin
	fillRoundRobin                 // fillBalanced, one pod per bin per round
	fillDot                        // pods in first-fit-decreasing order, each to bestBin
)

// bestBin picks the bin whose free capacity the pod's shape best matches (the dot-product
// heuristic for vector bin packing: maximise Σ_r pod_r·free_r / capacity_r², over CPU, memory
// and pod slots), among bins the pod fits.
func bestBin(bins []*claim, p *podInfo) *claim {
	var best *claim
	bestScore := -1.0
	r := p.requests
	for _, c := range bins {
		t := c.pool.types[c.types[0]]
		if !r.FitsAfter(c.requests, t.avail) {
			continue
		}
		capCPU, capMem, capPods := float64(t.avail.MilliCPU), float64(t.avail.Memory), float64(t.avail.Pods)
		score := float64(r.MilliCPU)*float64(t.avail.MilliCPU-c.requests.MilliCPU)/(capCPU*capCPU) +
			float64(r.Memory)*float64(t.avail.Memory-c.requests.Memory)/(capMem*capMem) +
			float64(r.Pods)*float64(t.avail.Pods-c.requests.Pods)/(capPods*capPods)
		if score > bestScore {
			best, bestScore = c, score
		}
	}
	return best
}

// fillBalanced fills each bin in turn, each step adding the pod whose shape keeps the bin's
// CPU and memory use closest to even (|used_cpu/alloc_cpu − used_mem/alloc_mem| smallest, the
// larger pod on ties), so a compute-optimised node gets a mix of pods whose aggregate matches its
// 1:2 shape instead of whichever pods come first. Pods are grouped into buckets of similar shape
// (memory:CPU ratio and size, on log scales) so each step looks at a bounded number of
// candidates: the largest pod of each bucket. It returns the pods no bin took.
func (s *solver) fillBalanced(bins []*claim, pods []*podInfo, roundRobin bool) []*podInfo {
	type bucket struct {
		key  [2]int
		pods []*podInfo // largest CPU first (pods arrive in first-fit-decreasing order)
	}
	idx := map[[2]int]*bucket{}
	var buckets []*bucket
	for _, p := range pods {
		k := shapeKey(p.requests)
		b := idx[k]
		if b == nil {
			b = &bucket{key: k}
			idx[k] = b
			buckets = append(buckets, b)
		}
		b.pods = append(b.pods, p)
	}
	sort.Slice(buckets, func(i, j int) bool {
		if buckets[i].key[0] != buckets[j].key[0] {
			return buckets[i].key[0] < buckets[j].key[0]
		}
		return buckets[i].key[1] < buckets[j].key[1]
	})
	// addBest adds to c the pod that keeps its use most even; false when none fits.
	addBest := func(c *claim) bool {
		t := c.pool.types[c.types[0]]
		capCPU, capMem := float64(t.avail.MilliCPU), float64(t.avail.Memory)
		var pick *bucket
		best := 0.0
		for _, b := range buckets {
			if len(b.pods) == 0 {
				continue
			}
			r := b.pods[0].requests
			if !r.FitsAfter(c.requests, t.avail) {
				continue
			}
			u := math.Abs(float64(c.requests.MilliCPU+r.MilliCPU)/capCPU - float64(c.requests.Memory+r.Memory)/capMem)
			if pick == nil || u < best-1e-12 || (u < best+1e-12 && r.MilliCPU > pick.pods[0].requests.MilliCPU) {
				pick, best = b, u
			}
		}
		if pick == nil || !s.tryAdd(c, pick.pods[0]) {
			return false
		}
		pick.pods = pick.pods[1:]
		return true
	}
	if roundRobin {
		// Every bin takes one pod per round, so the scarce balancing pods (small, CPU-heavy
		// ones) are shared out evenly instead of being used up by the first bins.
		open := append([]*claim(nil), bins...)
		for len(open) > 0 {
			next := open[:0]
			for _, c := range open {
				if addBest(c) {
					next = append(next, c)
				}
			}
			open = next
		}
	} else {
		for _, c := range bins {
			for addBest(c) {
			}
		}
	}
	remaining := map[*podInfo]bool{}
	for _, b := range buckets {
		for _, p := range b.pods {
			remaining[p] = true
		}
	}
	var left []*podInfo
	for _, p := range pods { // the leftovers keep first-fit-decreasing order
		if remaining[p] {
			left = append(left, p)
		}
	}
	return left
}

// shapeKey buckets a request by memory:CPU ratio (quarter steps of log2 MiB per millicore) and
// by CPU size (half steps of log2 millicores).
func shapeKey(r scheduling.Resources) [2]int {
	cpu := float64(max(r.MilliCPU, 1))
	mem := float64(max(r.Memory>>20, 1))
	return [2]int{int(math.Floor(4 * math.Log2(mem/cpu))), int(math.Floor(2 * math.Log2(cpu)))}
}

// widen gives a claim packed onto one target type every type of its pool that also fits its
// pods, cheapest first, so the fleet keeps its fallbacks.
func (s *solver) widen(c *claim) {
	pl := c.pool
	var types []int
	for ti, t := range pl.types {
		if c.requests.Fits(t.avail) && hasOffering(t, c.reqs) {
			types = append(types, ti)
		}
	}
	sort.SliceStable(types, func(i, j int) bool { return pl.types[types[i]].minPrice < pl.types[types[j]].minPrice })
	if len(types) > 0 {
		c.types = types
		c.maxOK = false
		c.updateHead()
	}
}
