package lowerbound

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strconv"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Class is a set of pods that schedule alike for the bound: the same requests and the same
// options.
type Class struct {
	// Requests are one pod's effective requests (Pods = 1).
	Requests scheduling.Resources
	// Count is the number of pods of the class (≥ 1).
	Count int
	// Options are the indices (into Problem.Options) of the options one pod of the class may
	// use: its node requirements, tolerations, zone and capacity type allow them, and the pod
	// fits one node of the option on its own.
	Options []int
	// Exclusive, when non-zero, names a set of classes whose pods never share a node (required
	// pod anti-affinity on kubernetes.io/hostname among them): at most one per node.
	Exclusive int
}

// Problem is a bound instance: options (instance type × NodePool × offering group, each with
// its price) and the pod classes that must be placed on new nodes of them.
type Problem struct {
	Options []Option
	Classes []Class
}

// MaxFitSets caps how many distinct fit sets get their own rows; the ones with the most demand
// (relative to the whole) are kept, and the union of all always is.
const MaxFitSets = 40

// fitSet is a set of options (a bitset over the option indices) and the pods confined to it.
type fitSet struct {
	bits    []uint64
	members []int // classes whose options all lie in the set
	weight  float64
}

func (f *fitSet) has(j int) bool { return f.bits[j/64]&(1<<(j%64)) != 0 }

func (f *fitSet) contains(o []uint64) bool {
	for i, w := range o {
		if w&^f.bits[i] != 0 {
			return false
		}
	}
	return true
}

// FitCut returns the fit-cut lower bound of the problem (USD per hour): the optimum of the LP
//
//	minimise   Σ_j p_j·x_j
//	subject to, for every fit set F (the options of one class, and the union of all classes'):
//	  Σ_{j∈F} a_{j,r}·x_j ≥ Σ_{k: F_k ⊆ F} n_k·req_{k,r}            (fit cuts, every resource r)
//	  Σ_{j∈F} min(⌊a_{j,r}/s⌋, a_{j,pods})·x_j ≥ #{pods of F, req_r ≥ s}  (count cuts)
//	  Σ_{j∈F} x_j ≥ max(max_r ⌈demand_r / max_{j∈F} a_{j,r}⌉, max_g #{pods of F in exclusive set g})
//	x ≥ 0
//
// Why it is a lower bound: in any plan, the pods of the classes whose options all lie in F sit
// on nodes of options in F, which hold at most their allocatable, at most ⌊a/s⌋ pods requesting
// ≥ s each, and at most one pod of an exclusive set each; node counts are whole, so a row's
// count can round up. The plan's node counts x satisfy every row, and each node costs at least
// its option's price, so the LP optimum is at most the plan's cost. Scheduling rules that are
// left out (spreads, pod affinity, NodePool limits) only remove plans, never the bound's
// validity. The value is certified by duality (see coverLP.certified).
//
// It returns the same errors as Compute: a price that is not finite and non-negative, or a
// class with no option that holds one of its pods.
func FitCut(p Problem) (*Bound, error) {
	if err := validate(p); err != nil {
		return nil, err
	}
	if len(p.Classes) == 0 {
		return &Bound{}, nil
	}
	p = clamped(p)
	opts := p.Options
	dims := dimensionsOf(p.Classes)
	sets := fitSets(p, dims)
	var rows []row
	for si, f := range sets {
		rows = append(rows, setRows(p, f, dims, si == 0)...)
	}
	agg := rows[:0:0]
	for _, r := range rows {
		if r.aggregate {
			agg = append(agg, r)
		}
	}
	aggBound, _ := solveRows(agg, opts, false)
	full, mix := solveRows(rows, opts, true)
	cuts := 0
	for _, r := range rows {
		if !r.aggregate {
			cuts++
		}
	}
	return &Bound{PricePerHour: math.Max(full, aggBound), Aggregate: aggBound, Mix: mix, Cuts: cuts}, nil
}

// clamped returns p with every option's allocatable clamped at zero (a copy of the options; the
// classes are shared).
func clamped(p Problem) Problem {
	opts := make([]Option, len(p.Options))
	for j, o := range p.Options {
		o.Allocatable = clamp(o.Allocatable)
		opts[j] = o
	}
	return Problem{Options: opts, Classes: p.Classes}
}

func validate(p Problem) error {
	for i, o := range p.Options {
		if o.PricePerHour < 0 || math.IsNaN(o.PricePerHour) || math.IsInf(o.PricePerHour, 0) {
			return fmt.Errorf("options[%d].pricePerHour: %v is not a finite, non-negative price", i, o.PricePerHour)
		}
	}
	al := make([]scheduling.Resources, len(p.Options))
	for j, o := range p.Options {
		al[j] = clamp(o.Allocatable)
	}
	// Classes of one signature share their options list: check each list's range once.
	type list struct {
		first *int
		n     int
	}
	inRange := map[list]bool{}
	for k, c := range p.Classes {
		if c.Count <= 0 {
			return fmt.Errorf("classes[%d].count: %d is not positive", k, c.Count)
		}
		if len(c.Options) > 0 && !inRange[list{&c.Options[0], len(c.Options)}] {
			for _, j := range c.Options {
				if j < 0 || j >= len(p.Options) {
					return fmt.Errorf("classes[%d].options: %d is out of range", k, j)
				}
			}
			inRange[list{&c.Options[0], len(c.Options)}] = true
		}
		ok := false
		for _, j := range c.Options {
			if al[j].Pods > 0 && c.Requests.Fits(al[j]) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("classes[%d]: %s fits none of its options on its own", k, c.Requests)
		}
	}
	return nil
}

// fitSets returns the union of every class's options first, then the distinct class option
// sets (the options that hold one pod of the class), heaviest first, at most MaxFitSets in all.
func fitSets(p Problem, dims []dim) []*fitSet {
	words := (len(p.Options) + 63) / 64
	classBits := classFitBits(p, dims, words)
	union := &fitSet{bits: make([]uint64, words)}
	seen := map[string]bool{}
	var sets []*fitSet
	// Classes share bitsets (classFitBits): one look per shared bitset spares a key per class.
	looked := map[*uint64]bool{}
	for k := range p.Classes {
		b := classBits[k]
		if len(b) > 0 {
			if looked[&b[0]] {
				continue
			}
			looked[&b[0]] = true
		}
		for i := range b {
			union.bits[i] |= b[i]
		}
		if key := bitsKey(b); !seen[key] {
			seen[key] = true
			sets = append(sets, &fitSet{bits: b})
		}
	}
	total := 0.0
	for _, c := range p.Classes {
		total += float64(c.Count) * float64(max(c.Requests.MilliCPU, 1))
	}
	for _, f := range append(sets, union) {
		for k, c := range p.Classes {
			if f.contains(classBits[k]) {
				f.members = append(f.members, k)
				f.weight += float64(c.Count) * float64(max(c.Requests.MilliCPU, 1))
			}
		}
		// Few options for much demand is what makes a set's rows bind.
		n := 0
		for _, w := range f.bits {
			n += bits.OnesCount64(w)
		}
		f.weight = f.weight / total / float64(max(n, 1))
	}
	sort.SliceStable(sets, func(i, j int) bool { return sets[i].weight > sets[j].weight })
	out := []*fitSet{union}
	ukey := bitsKey(union.bits)
	for _, f := range sets {
		if len(out) == MaxFitSets {
			break
		}
		if bitsKey(f.bits) != ukey {
			out = append(out, f)
		}
	}
	return out
}

// classFitBits returns, per class, the bitset of its options that hold one of its pods. Which
// options hold a request depends only on where each of its components ranks among the
// options' capacities, so classes with the same options list and the same ranks share one
// computation (10,000 distinct requests make a few dozen distinct rank vectors).
func classFitBits(p Problem, dims []dim, words int) [][]uint64 {
	caps := make([][]int64, len(dims))
	for di, d := range dims {
		for _, o := range p.Options {
			caps[di] = append(caps[di], d.get(o.Allocatable))
		}
		slices.Sort(caps[di])
		caps[di] = slices.Compact(caps[di])
	}
	type key struct {
		opts  *int
		n     int
		ranks string
	}
	memo := map[key][]uint64{}
	out := make([][]uint64, len(p.Classes))
	rk := make([]byte, 0, 4*len(dims))
	for k, c := range p.Classes {
		rk = rk[:0]
		for di, d := range dims {
			r, _ := slices.BinarySearch(caps[di], d.get(c.Requests))
			rk = append(rk, byte(r), byte(r>>8), byte(r>>16), byte(r>>24))
		}
		kk := key{n: len(c.Options), ranks: string(rk)}
		if len(c.Options) > 0 {
			kk.opts = &c.Options[0]
		}
		if b, ok := memo[kk]; ok {
			out[k] = b
			continue
		}
		b := make([]uint64, words)
		for _, j := range c.Options {
			if al := p.Options[j].Allocatable; al.Pods > 0 && c.Requests.Fits(al) {
				b[j/64] |= 1 << (j % 64)
			}
		}
		memo[kk] = b
		out[k] = b
	}
	return out
}

func bitsKey(b []uint64) string {
	out := make([]byte, 8*len(b))
	for i, w := range b {
		for k := range 8 {
			out[8*i+k] = byte(w >> (8 * k))
		}
	}
	return string(out)
}

// setRows builds the rows of one fit set: a resource row per resource the members request, the
// count cuts, and the node-count row. On the union (aggregate) the resource rows are marked as
// the aggregate LP's. Options' allocatable is already clamped (FitCut).
func setRows(p Problem, f *fitSet, dims []dim, union bool) []row {
	n := len(p.Options)
	var out []row
	var need float64
	sizes := make([]sizeCount, 0, len(f.members))
	for _, d := range dims {
		sizes = sizes[:0]
		var demand int64
		for _, k := range f.members {
			c := p.Classes[k]
			if v := d.get(c.Requests); v > 0 {
				demand += v * int64(c.Count)
				sizes = append(sizes, sizeCount{v, int64(c.Count)})
			}
		}
		if demand == 0 {
			continue
		}
		rw := row{name: d.name, rhs: float64(demand), coef: make([]float64, n), aggregate: union}
		var most float64
		for j, o := range p.Options {
			if !f.has(j) {
				continue
			}
			a := d.get(o.Allocatable)
			if a == 0 && d.unlimitedIfZero {
				a = demand
			}
			rw.coef[j] = float64(a)
			most = math.Max(most, float64(a))
		}
		out = append(out, rw)
		if most > 0 {
			need = math.Max(need, math.Ceil(float64(demand)/most-1e-9))
		}
		if !d.cuts {
			continue
		}
		limit := MaxCutsPerResource
		if !union {
			limit = 4
		}
		// Sizes ascending; atLeast[i] counts the pods of sizes[i:] (those requesting ≥ sizes[i]).
		slices.SortFunc(sizes, func(a, b sizeCount) int { return cmp.Compare(a.size, b.size) })
		atLeast := make([]int64, len(sizes)+1)
		for i := len(sizes) - 1; i >= 0; i-- {
			atLeast[i] = atLeast[i+1] + sizes[i].count
		}
		distinct := make([]int64, 0, len(sizes))
		for _, sc := range sizes {
			if len(distinct) == 0 || distinct[len(distinct)-1] != sc.size {
				distinct = append(distinct, sc.size)
			}
		}
		for _, s := range thresholdsN(distinct, limit) {
			i := sort.Search(len(sizes), func(i int) bool { return sizes[i].size >= s })
			c := row{name: d.name + ">=" + strconv.FormatInt(s, 10), rhs: float64(atLeast[i]), coef: make([]float64, n)}
			for j, o := range p.Options {
				if !f.has(j) {
					continue
				}
				a := d.get(o.Allocatable)
				if a == 0 && d.unlimitedIfZero {
					a = math.MaxInt64
				}
				c.coef[j] = float64(min(a/s, o.Allocatable.Pods))
			}
			out = append(out, c)
		}
	}
	excl := map[int]int{}
	for _, k := range f.members {
		if g := p.Classes[k].Exclusive; g != 0 {
			excl[g] += p.Classes[k].Count
		}
	}
	for _, cnt := range excl {
		need = math.Max(need, float64(cnt))
	}
	if need >= 1 {
		nr := row{name: "nodes", rhs: need, coef: make([]float64, n)}
		for j := range p.Options {
			if f.has(j) {
				nr.coef[j] = 1
			}
		}
		out = append(out, nr)
	}
	return out
}

// sizeCount is one class's request of a resource and its number of pods.
type sizeCount struct{ size, count int64 }

// solveRows solves min p·x over the rows with the covering Simplex and returns the certified
// bound and, when asked, the primal node mix.
func solveRows(rows []row, opts []Option, wantMix bool) (float64, []Use) {
	var kept []row
	for _, r := range rows {
		if r.rhs > 0 {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return 0, nil
	}
	m := len(kept)
	lp := newCoverLP(m)
	colOf := make([]int, 0, len(opts)) // LP column → option
	for j := range opts {
		col := make([]float64, m)
		nz := false
		for i, r := range kept {
			col[i] = r.coef[j] / r.rhs
			nz = nz || col[i] > 0
		}
		if nz && opts[j].Allocatable.Pods > 0 {
			lp.addColumn(col, opts[j].PricePerHour)
			colOf = append(colOf, j)
		}
	}
	lp.solve(maxPivots(m, len(colOf)))
	bound := lp.certified(nil, nil)
	if !wantMix {
		return bound, nil
	}
	x := lp.primal()
	var mix []Use
	for k, j := range colOf {
		if x[k] > 1e-9 {
			mix = append(mix, Use{Name: opts[j].Name, Nodes: x[k]})
		}
	}
	sort.SliceStable(mix, func(i, j int) bool { return mix[i].Nodes > mix[j].Nodes })
	return bound, mix
}

// maxPivots bounds the Simplex work of one solve (a deterministic budget; the certified bound
// stays valid if it is reached).
func maxPivots(rows, cols int) int { return 50 * (rows + cols) }

// thresholdsN picks up to limit of the distinct sizes (ascending), evenly spread over them and
// always including the largest.
func thresholdsN(u []int64, limit int) []int64 {
	if len(u) <= limit {
		return u
	}
	out := make([]int64, 0, limit)
	for i := range limit {
		out = append(out, u[(len(u)-1)-i*(len(u)-1)/(limit-1)])
	}
	return out
}
