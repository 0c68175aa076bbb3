package lowerbound

import (
	"math"
	"sort"
)

// Pattern is one node configuration: an option and how many pods of each class it holds.
type Pattern struct {
	Option int
	// Counts per class (indexed like Problem.Classes).
	Counts []int
}

// PatternResult is the outcome of column generation over node patterns.
type PatternResult struct {
	// PricePerHour is a certified lower bound (USD per hour) on any plan: Farley's bound from
	// the last duals, max(it, the fit-cut bound) is what callers report.
	PricePerHour float64
	// Patterns and Use are the restricted master LP's columns and their (fractional) number of
	// nodes in its last solution; Σ_P Use_P·Counts_P[k] ≥ Count_k for every class k.
	Patterns []Pattern
	Use      []float64
	// Optimal reports that no pattern prices out: Use is an optimal LP solution.
	Optimal bool
	// Work is the knapsack nodes and Simplex pivots spent.
	Work int
}

// PatternBudget bounds the work of Patterns deterministically (no clock): column-generation
// rounds, and knapsack search nodes over the whole run.
type PatternBudget struct {
	Rounds        int
	KnapsackNodes int
	// Floor is a bound the caller already has (the fit-cut bound), 0 when none. Once
	// GiveUpNodes knapsack nodes are spent and this run's bound is still below half of Floor,
	// it stops: on such inputs (hundreds of types, nodes holding thousands of small pods) every
	// knapsack exhausts its nodes, θ stays near 30 and the bound never nears Floor, while on
	// inputs where the pattern LP pays its bound is past 0.59 of Floor by then (svc+batch-323;
	// 0.81–0.95 on the other cost mixes: docs/cost.md).
	//
	// It also stops the first round when the bound that round can reach at best is below a
	// quarter of Floor. The first round's duals come from one-class patterns, and the candidates
	// not searched keep their relaxation ratio in θ, so dual objective / the
	// (pricedPerRound+1)-th largest ratio is what the round can show if its searched candidates
	// add a column: it stops before its knapsacks when there are no more candidates than it
	// searches, else at the first column one of them adds (when none does, the round goes on
	// down the list, and its bound can be anything up to the LP optimum). On the cost mixes
	// that figure is 0.59–1.3 of Floor; on Karpenter's benchmark pods (400 types holding up to
	// 4,000 pods, 60 classes) it is 0.055–0.057, and the round would spend 370,000–480,000
	// knapsack nodes to give up after it.
	Floor       float64
	GiveUpNodes int
}

// Patterns solves the configuration LP
//
//	minimise Σ_P p_{j(P)}·λ_P  subject to  Σ_P Counts_P[k]·λ_P ≥ n_k (every class k),  λ ≥ 0
//
// over every pattern P (an option j and a multiset of pods of the classes allowed on it that
// fits its allocatable, with at most one pod of each exclusive set) by column generation: the
// master LP over the patterns found so far gives dual prices π; for every option a bounded
// integer knapsack finds the pattern of highest value Σ_k π_k·c_k; patterns worth more than
// their price enter. Every pattern's value is at most θ·p_j with θ = max_j UB_j/p_j (UB_j the
// knapsack's upper bound), so π/θ is dual feasible and (Σ_k π_k·n_k)/θ a lower bound on the LP,
// hence on every plan (Farley's bound) — after any number of rounds. It is never weaker than the
// LP optimum once no pattern prices out.
func Patterns(p Problem, budget PatternBudget) (*PatternResult, error) {
	if err := validate(p); err != nil {
		return nil, err
	}
	res := &PatternResult{}
	if len(p.Classes) == 0 {
		return res, nil
	}
	g := newPatternGen(p)
	lp := newCoverLP(len(p.Classes))
	seen := map[string]bool{}
	add := func(pt Pattern) bool {
		key := patternKey(pt)
		if seen[key] {
			return false
		}
		seen[key] = true
		col := make([]float64, len(p.Classes))
		for k, c := range pt.Counts {
			col[k] = float64(min(c, p.Classes[k].Count)) / float64(p.Classes[k].Count)
		}
		lp.addColumn(col, p.Options[pt.Option].PricePerHour)
		res.Patterns = append(res.Patterns, pt)
		return true
	}
	for k := range p.Classes {
		add(g.single(k))
	}
	nodes := 0
	for round := 0; round < max(budget.Rounds, 1); round++ {
		lp.solve(maxPivots(len(p.Classes), len(res.Patterns)))
		pi := make([]float64, len(p.Classes))
		var dualObj float64
		for k := range pi {
			y := max(lp.y[k], 0)
			dualObj += y
			pi[k] = y / float64(p.Classes[k].Count)
		}
		theta := 1.0
		added := 0
		// Partial pricing: every option's relaxation bound is cheap; only the most promising
		// options get the branch and bound, the others' relaxation bounds enter θ as they are.
		var cands []cand
		for _, j := range g.options {
			price := p.Options[j].PricePerHour
			ub := g.rootBound(j, pi)
			switch {
			case price <= 0 && ub > 0:
				theta = math.Inf(1)
			case price <= 0:
			case ub > price*(1+1e-9):
				cands = append(cands, cand{j, ub / price})
			default:
				theta = math.Max(theta, ub/price)
			}
		}
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].ratio > cands[b].ratio })
		// A first round that cannot show a quarter of Floor is not run (PatternBudget.Floor).
		// With more candidates than are priced, that holds only once one of the priced ones
		// adds a column: until then the round goes on down the list, and knapsacks that prove
		// nothing prices out can bring θ below the ratios it projected.
		hopeless, gaveUp := round == 0 && budget.hopeless(dualObj, theta, cands), false
		if hopeless && len(cands) <= pricedPerRound {
			break
		}
		for i, c := range cands {
			left := budget.KnapsackNodes - nodes
			// A round that found nothing yet goes on down the list: stopping there would take
			// the top candidates' failure for the LP's optimum.
			if (i >= pricedPerRound && added > 0) || left <= 0 {
				theta = math.Max(theta, c.ratio)
				continue
			}
			pt, value, ub, used := g.knapsack(c.j, pi, min(left, nodesPerKnapsack))
			nodes += used
			price := p.Options[c.j].PricePerHour
			theta = math.Max(theta, ub/price)
			if value > price*(1+1e-9)+1e-12 && add(pt) {
				added++
			}
			if hopeless && added > 0 && i < pricedPerRound {
				gaveUp = true // θ lacks the candidates left: no bound from this round
				break
			}
		}
		if gaveUp {
			break
		}
		if !math.IsInf(theta, 1) {
			res.PricePerHour = math.Max(res.PricePerHour, dualObj/theta*(1-1e-9))
		}
		if budget.Floor > 0 && budget.GiveUpNodes > 0 && nodes >= budget.GiveUpNodes && res.PricePerHour < budget.Floor/2 {
			break
		}
		if added == 0 {
			res.Optimal = theta <= 1+1e-6
			break
		}
		if nodes >= budget.KnapsackNodes {
			lp.solve(maxPivots(len(p.Classes), len(res.Patterns)))
			break
		}
	}
	res.Use = lp.primal()
	res.Work = nodes + lp.Pivots
	return res, nil
}

// hopeless reports whether the first round, with dual objective dualObj, θ so far theta (the
// options not worth searching) and its candidates by decreasing ratio, cannot show a quarter of
// Floor (PatternBudget.Floor).
func (b PatternBudget) hopeless(dualObj, theta float64, cands []cand) bool {
	if b.Floor <= 0 || b.GiveUpNodes <= 0 {
		return false
	}
	if len(cands) > pricedPerRound {
		theta = math.Max(theta, cands[pricedPerRound].ratio)
	}
	return dualObj/theta < b.Floor/4
}

// pricedPerRound and nodesPerKnapsack bound one round's branch and bound.
const (
	pricedPerRound   = 24
	nodesPerKnapsack = 20_000
)

// rootBound is an upper bound on the value of any pattern on option j under duals pi: per
// resource, the remaining room times the best value per unit among the classes that use it,
// and the value of every pod of every class; the smallest of these.
func (g *patternGen) rootBound(j int, pi []float64) float64 {
	var all float64
	nd := len(g.dims)
	best := make([]float64, nd)
	for _, k := range g.allowed[j] {
		if pi[k] <= 0 {
			continue
		}
		c := g.p.Classes[k]
		n := float64(c.Count)
		if c.Exclusive != 0 {
			n = 1
		}
		all += pi[k] * n
		for d := range nd {
			if r := g.req[k][d]; r > 0 {
				best[d] = math.Max(best[d], pi[k]/float64(r))
			} else {
				best[d] = math.Inf(1)
			}
		}
	}
	b := all
	for d := range nd {
		if a := g.alloc[j][d]; a != math.MaxInt64 && best[d] > 0 && !math.IsInf(best[d], 1) {
			b = math.Min(b, float64(a)*best[d])
		}
	}
	return b
}

// cand is an option worth a knapsack in a round, with its relaxation bound / price.
type cand struct {
	j     int
	ratio float64
}

func patternKey(pt Pattern) string {
	b := make([]byte, 0, 4+2*len(pt.Counts))
	b = append(b, byte(pt.Option), byte(pt.Option>>8), byte(pt.Option>>16))
	for _, c := range pt.Counts {
		b = append(b, byte(c), byte(c>>8))
	}
	return string(b)
}

// patternGen prices patterns: the resources as integer vectors, and which classes each option
// takes.
type patternGen struct {
	p       Problem
	dims    []dim
	req     [][]int64 // per class, per dim
	alloc   [][]int64 // per option, per dim (math.MaxInt64 for an unlimited dimension)
	allowed [][]int   // per option: classes allowed on it whose pod fits
	options []int     // options worth pricing (undominated, some class allowed)
}

func newPatternGen(p Problem) *patternGen {
	g := &patternGen{p: p, dims: dimensionsOf(p.Classes)}
	for _, c := range p.Classes {
		v := make([]int64, len(g.dims))
		for d, dm := range g.dims {
			v[d] = dm.get(c.Requests)
		}
		g.req = append(g.req, v)
	}
	for _, o := range p.Options {
		al := clamp(o.Allocatable)
		v := make([]int64, len(g.dims))
		for d, dm := range g.dims {
			v[d] = dm.get(al)
			if v[d] == 0 && dm.unlimitedIfZero {
				v[d] = math.MaxInt64
			}
		}
		g.alloc = append(g.alloc, v)
	}
	g.allowed = make([][]int, len(p.Options))
	for k, c := range p.Classes {
		for _, j := range c.Options {
			if g.fitsOne(k, j) {
				g.allowed[j] = append(g.allowed[j], k)
			}
		}
	}
	for j := range p.Options {
		if len(g.allowed[j]) > 0 && !g.dominated(j) {
			g.options = append(g.options, j)
		}
	}
	return g
}

func (g *patternGen) fitsOne(k, j int) bool {
	for d := range g.dims {
		if g.req[k][d] > g.alloc[j][d] {
			return false
		}
	}
	return g.alloc[j][2] >= 1 // pods
}

// dominated: another option takes every class j takes, offers at least as much of every
// resource and costs no more (ties keep the lower index), so no pattern of j is worth more
// per dollar than the same pattern on it.
func (g *patternGen) dominated(j int) bool {
	for o := range g.p.Options {
		if o == j || len(g.allowed[o]) < len(g.allowed[j]) {
			continue
		}
		po, pj := g.p.Options[o].PricePerHour, g.p.Options[j].PricePerHour
		if po > pj || (po == pj && o > j && sameInts(g.allowed[o], g.allowed[j]) && sameI64(g.alloc[o], g.alloc[j])) {
			continue
		}
		ge := true
		for d := range g.dims {
			if g.alloc[o][d] < g.alloc[j][d] {
				ge = false
				break
			}
		}
		if ge && subset(g.allowed[j], g.allowed[o]) {
			return true
		}
	}
	return false
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameI64(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// subset reports whether sorted a ⊆ sorted b.
func subset(a, b []int) bool {
	i := 0
	for _, x := range a {
		for i < len(b) && b[i] < x {
			i++
		}
		if i == len(b) || b[i] != x {
			return false
		}
	}
	return true
}

// single returns the cheapest pattern per pod made of class k alone.
func (g *patternGen) single(k int) Pattern {
	best, bestCost, bestN := -1, math.Inf(1), 0
	for _, j := range g.p.Classes[k].Options {
		if !g.fitsOne(k, j) {
			continue
		}
		n := g.p.Classes[k].Count
		for d := range g.dims {
			if g.req[k][d] > 0 {
				n = min(n, int(g.alloc[j][d]/g.req[k][d]))
			}
		}
		if g.p.Classes[k].Exclusive != 0 {
			n = min(n, 1)
		}
		if c := g.p.Options[j].PricePerHour / float64(n); c < bestCost {
			best, bestCost, bestN = j, c, n
		}
	}
	counts := make([]int, len(g.p.Classes))
	counts[k] = bestN
	return Pattern{Option: best, Counts: counts}
}

// knapsack finds the most valuable pattern on option j under duals pi (depth-first branch and
// bound over the classes in decreasing value density, at most maxNodes nodes). It returns the
// best pattern found, its value, an upper bound on every pattern's value on j (the best value
// when the search finished, else the root's relaxation), and the nodes used.
func (g *patternGen) knapsack(j int, pi []float64, maxNodes int) (Pattern, float64, float64, int) {
	type item struct {
		k       int
		v       float64
		density float64
	}
	var items []item
	for _, k := range g.allowed[j] {
		if pi[k] <= 0 {
			continue
		}
		var w float64
		for d := range g.dims {
			if a := g.alloc[j][d]; a > 0 && a != math.MaxInt64 {
				w += float64(g.req[k][d]) / float64(a)
			}
		}
		items = append(items, item{k: k, v: pi[k], density: pi[k] / math.Max(w, 1e-12)})
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].density > items[b].density })
	nd := len(g.dims)
	// suffixV[i]: the value of taking every remaining pod of items i….
	suffixV := make([]float64, len(items)+1)
	for i := len(items) - 1; i >= 0; i-- {
		suffixV[i] = suffixV[i+1] + items[i].v*float64(g.p.Classes[items[i].k].Count)
	}
	left := append([]int64(nil), g.alloc[j]...)
	ks, vs := make([]int, len(items)), make([]float64, len(items))
	for i, it := range items {
		ks[i], vs[i] = it.k, it.v
	}
	sur := g.surrogates(j, ks, vs)
	// rootUB is the least of the relaxations' bounds on the whole option; prune reports whether
	// one of them shows that items i… cannot add more than enough. It tries first the relaxation
	// that pruned last, and each stops summing once past enough.
	rootUB := suffixV[0]
	for _, s := range sur {
		rootUB = math.Min(rootUB, s.bound(0, left, rootUB))
	}
	prune := func(i int, enough float64) bool {
		if suffixV[i] <= enough {
			return true
		}
		for x, s := range sur {
			if s.bound(i, left, enough) <= enough {
				sur[0], sur[x] = sur[x], sur[0]
				return true
			}
		}
		return false
	}
	counts := make([]int, len(g.p.Classes))
	best := make([]int, len(g.p.Classes))
	bestV := 0.0
	usedExcl := map[int]bool{}
	nodes := 0
	var rec func(i int, v float64)
	rec = func(i int, v float64) {
		nodes++
		if v > bestV {
			bestV = v
			copy(best, counts)
		}
		if i == len(items) || nodes >= maxNodes {
			return
		}
		if prune(i, bestV*(1+1e-12)-v) {
			return
		}
		it := items[i]
		c := g.p.Classes[it.k]
		n := c.Count
		for d := range nd {
			if r := g.req[it.k][d]; r > 0 && left[d] != math.MaxInt64 {
				n = min(n, int(left[d]/r))
			}
		}
		if c.Exclusive != 0 {
			if usedExcl[c.Exclusive] {
				n = 0
			}
			n = min(n, 1)
		}
		for x := n; x >= 0; x-- {
			for d := range nd {
				if left[d] != math.MaxInt64 {
					left[d] -= int64(x) * g.req[it.k][d]
				}
			}
			counts[it.k] = x
			if c.Exclusive != 0 && x > 0 {
				usedExcl[c.Exclusive] = true
			}
			rec(i+1, v+float64(x)*it.v)
			if c.Exclusive != 0 && x > 0 {
				usedExcl[c.Exclusive] = false
			}
			counts[it.k] = 0
			for d := range nd {
				if left[d] != math.MaxInt64 {
					left[d] += int64(x) * g.req[it.k][d]
				}
			}
			if nodes >= maxNodes {
				break
			}
		}
	}
	rec(0, 0)
	ub := bestV
	if nodes >= maxNodes {
		ub = math.Max(rootUB, bestV)
	}
	return Pattern{Option: j, Counts: best}, bestV, ub, nodes
}

// surrogate is one relaxation of the pattern knapsack on an option: the resources, each as a
// share of the option's allocatable, weighted by mu (Σ mu = 1), become one resource. A pattern
// within every resource is within their weighted mean, so the fractional optimum of the one-
// resource knapsack (items by decreasing value per weighted unit, each up to its count, the last
// in part) bounds the value of every pattern that completes the current one. It is much tighter
// than one resource at a time when pods differ in shape (CPU-heavy batch pods next to
// memory-heavy ones), which is what lets the branch and bound finish.
type surrogate struct {
	scale []float64 // per dim: mu_d / allocatable_d (0 for a dim this surrogate ignores)
	from  [][]int   // from[i]: the item positions ≥ i by decreasing value per weighted unit
	w, v  []float64 // per item position: weighted size and value of one pod
	n     []float64 // per item position: the most pods of it in a pattern
}

// bound returns the relaxation's bound for items i… within left, or, as soon as the sum passes
// stop, that partial sum (the bound is above stop then).
func (s *surrogate) bound(i int, left []int64, stop float64) float64 {
	var room float64
	for d, sc := range s.scale {
		if sc > 0 {
			room += sc * float64(left[d])
		}
	}
	var b float64
	for _, x := range s.from[i] {
		if b > stop {
			return b
		}
		if s.w[x] <= 0 {
			b += s.v[x] * s.n[x]
			continue
		}
		if room <= 0 {
			break
		}
		take := room / s.w[x]
		if take > s.n[x] {
			take = s.n[x]
		}
		b += take * s.v[x]
		room -= take * s.w[x]
	}
	return b
}

// surrogates returns the relaxations used to bound patterns on option j: every resource the
// items use alone, every pair of them at equal weight, and all of them at equal weight.
func (g *patternGen) surrogates(j int, ks []int, vs []float64) []*surrogate {
	var active []int
	for d := range g.dims {
		a := g.alloc[j][d]
		if a <= 0 || a == math.MaxInt64 {
			continue
		}
		for _, k := range ks {
			if g.req[k][d] > 0 {
				active = append(active, d)
				break
			}
		}
	}
	var sets [][]int
	for x, d := range active {
		sets = append(sets, []int{d})
		for _, e := range active[x+1:] {
			sets = append(sets, []int{d, e})
		}
	}
	if len(active) > 2 {
		sets = append(sets, active)
	}
	out := make([]*surrogate, 0, len(sets))
	for _, set := range sets {
		order := make([]int, len(ks))
		s := &surrogate{scale: make([]float64, len(g.dims)), from: make([][]int, len(ks)+1),
			w: make([]float64, len(ks)), v: vs, n: make([]float64, len(ks))}
		for _, d := range set {
			s.scale[d] = 1 / (float64(len(set)) * float64(g.alloc[j][d]))
		}
		for x, k := range ks {
			for d, sc := range s.scale {
				s.w[x] += sc * float64(g.req[k][d])
			}
			s.n[x] = float64(g.p.Classes[k].Count)
			if g.p.Classes[k].Exclusive != 0 {
				s.n[x] = 1
			}
			order[x] = x
		}
		sort.SliceStable(order, func(a, b int) bool {
			return density(s.v[order[a]], s.w[order[a]]) > density(s.v[order[b]], s.w[order[b]])
		})
		for i := range s.from {
			s.from[i] = make([]int, 0, len(ks)-min(i, len(ks)))
			for _, x := range order {
				if x >= i {
					s.from[i] = append(s.from[i], x)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

func density(v, w float64) float64 {
	if w <= 0 {
		return math.Inf(1)
	}
	return v / w
}
