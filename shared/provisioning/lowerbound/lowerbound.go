// Package lowerbound computes a lower bound on the cost (USD per hour) of any plan that places a
// set of pods on new nodes drawn from an instance-type catalog. Benchmarks divide a plan's cost
// by it: a ratio of 1.00 means no plan can be cheaper; 1.05 means the plan costs at most 5 % more
// than the best possible one (usually less: the bound itself is not always reachable).
//
// # The bound
//
// Let the options be the instance types a plan may launch, each with its allocatable a_t (after
// the kubelet reservations and the DaemonSet pods that run on every node of the type) and its
// price p_t (the cheapest offering the plan may buy). The bound is the optimum of the linear
// program
//
//	minimise   Σ_t p_t·x_t
//	subject to Σ_t a_{t,r}·x_t ≥ Σ_pods request_r          for every resource r (cpu, memory,
//	                                                       pods, ephemeral-storage, extended)
//	           Σ_t k_t(r,s)·x_t ≥ n(r,s)                   for a few thresholds s per resource r
//	           Σ_t x_t ≥ N                                 (the node-count row)
//	           x ≥ 0
//
// where n(r,s) is the number of pods requesting at least s of r, k_t(r,s) = min(⌊a_{t,r}/s⌋,
// a_{t,pods}) is the most such pods one node of type t can hold (the "count cuts"), and N is the
// largest ⌈right-hand side / largest coefficient⌉ over the other rows.
//
// Why it is a lower bound: take any feasible plan, with x_t the number of its new nodes of type
// t. On each node the pods' requests fit the allocatable, Σ_{p on n} request_{p,r} ≤ a_{t(n),r};
// summing over the nodes gives the resource rows, because every pod is on some node. A node of
// type t holds at most k_t(r,s) pods that each request at least s of r (together they request
// at least their count times s, and each takes a pod slot); summing over the nodes gives the
// count cuts. No node offers more than a row's largest coefficient, so the plan has at least N
// nodes (N rounds up because node counts are whole). So the plan's x satisfies every
// constraint, and the LP minimum is at most Σ p_t·x_t, which is at most the plan's cost (each node pays at least its type's cheapest offering). The
// LP drops integrality, the placement of single pods and all scheduling constraints; that only
// enlarges the feasible set, so the bound stays below the cost of every plan, including the
// optimal one. Anything that makes a_t larger or p_t smaller than reality (ignoring a DaemonSet
// that may or may not run, ignoring NodePool limits or minValues) keeps it a lower bound.
//
// Certified by duality: the LP is solved with gonum's Simplex twice, in primal form (for the
// fractional node mix, Bound.Mix) and in dual form (maximise Σ_r b_r·y_r s.t. Σ_r a_{t,r}·y_r ≤
// p_t, y ≥ 0). The reported bound is b·y for a dual vector y that is checked (and if needed
// scaled) to satisfy every option's constraint, so by weak duality it is ≤ the LP optimum even
// if the floating-point Simplex stops early.
package lowerbound

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// MaxCutsPerResource is how many count-cut thresholds each resource gets at most: the distinct
// request sizes, thinned evenly (always keeping the largest) when there are more.
const MaxCutsPerResource = 12

// simplexTol is the reduced-cost tolerance of the Simplex. With 0, rounding noise (a reduced
// cost of −1e−17) keeps gonum's loop pivoting forever on degenerate problems; the certification
// step makes the reported bound valid whatever the tolerance.
const simplexTol = 1e-9

// Option is one instance type a plan may launch.
type Option struct {
	// Name is the instance type's name (for Bound.Mix).
	Name string
	// Allocatable is what one node of the type offers the pods: allocatable minus the
	// DaemonSet pods' requests (millicores, bytes, pod slots, devices).
	Allocatable scheduling.Resources
	// PricePerHour is the cheapest offering the plan may buy (USD per hour).
	PricePerHour float64
}

// Use is a (fractional) number of nodes of one type in the LP's optimal mix.
type Use struct {
	Name  string
	Nodes float64
}

// Bound is the result of Compute.
type Bound struct {
	// PricePerHour is the lower bound with the count cuts (USD per hour).
	PricePerHour float64
	// Aggregate is the bound from the resource rows alone (USD per hour), ≤ PricePerHour; the
	// difference is what the count cuts add.
	Aggregate float64
	// Mix is the primal LP solution with cuts, largest first (empty if the primal solve failed;
	// the bound does not depend on it).
	Mix []Use
	// Cuts is the number of count-cut rows used (the node-count row included).
	Cuts int
}

// dim reads one resource from a Resources value.
type dim struct {
	name string
	get  func(scheduling.Resources) int64
	// unlimitedIfZero: an option that states 0 does not limit the resource (ephemeral storage is
	// only checked by kube-scheduler when the node reports it).
	unlimitedIfZero bool
	cuts            bool
}

// row is one constraint Σ_t coef[t]·x_t ≥ rhs.
type row struct {
	name string
	coef []float64
	rhs  float64
}

// Compute returns the lower bound on placing pods with the given effective requests
// (scheduling.PodRequests, Pods = 1 each) on new nodes of the given options. It returns an error
// when an option's price is negative or not finite (options[i].pricePerHour), when a pod fits
// no option on its own (requests[i]: the names of the resources that do not fit), or when the
// LP solver fails. No pods give a zero bound.
func Compute(requests []scheduling.Resources, options []Option) (*Bound, error) {
	if len(requests) == 0 {
		return &Bound{}, nil
	}
	for i, o := range options {
		if o.PricePerHour < 0 || math.IsNaN(o.PricePerHour) || math.IsInf(o.PricePerHour, 0) {
			return nil, fmt.Errorf("options[%d].pricePerHour: %v is not a finite, non-negative price", i, o.PricePerHour)
		}
	}
	opts := make([]Option, 0, len(options))
	for _, o := range options {
		o.Allocatable = clamp(o.Allocatable)
		if o.Allocatable.Pods > 0 {
			opts = append(opts, o)
		}
	}
	for i, r := range requests {
		if !fitsSomeOption(r, opts) {
			return nil, fmt.Errorf("requests[%d]: %s fits no option on its own", i, r)
		}
	}
	dims := dimensions(requests)
	resRows, cutRows := buildRows(requests, opts, dims)

	agg, _, err := solve(resRows, opts, false)
	if err != nil {
		return nil, fmt.Errorf("aggregate LP: %w", err)
	}
	all := append(append([]row(nil), resRows...), cutRows...)
	if nr, ok := nodeCountRow(all, len(opts)); ok {
		all = append(all, nr)
	}
	full, mix, err := solve(all, opts, true)
	if err != nil {
		return nil, fmt.Errorf("LP with count cuts: %w", err)
	}
	// Both values are certified lower bounds; the cuts can only raise the optimum, so keep the
	// larger one should floating point say otherwise.
	return &Bound{PricePerHour: math.Max(full, agg), Aggregate: agg, Mix: mix, Cuts: len(all) - len(resRows)}, nil
}

func clamp(r scheduling.Resources) scheduling.Resources {
	r.MilliCPU, r.Memory, r.EphemeralStorage, r.Pods = max(r.MilliCPU, 0), max(r.Memory, 0), max(r.EphemeralStorage, 0), max(r.Pods, 0)
	if len(r.Scalar) > 0 {
		s := make(map[corev1.ResourceName]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			s[k] = max(v, 0)
		}
		r.Scalar = s
	}
	return r
}

func fitsSomeOption(r scheduling.Resources, opts []Option) bool {
	for _, o := range opts {
		if r.Fits(o.Allocatable) {
			return true
		}
	}
	return false
}

// dimensions lists the resources the pods request, extended resources in name order.
func dimensions(requests []scheduling.Resources) []dim {
	dims := []dim{
		{name: "cpu", get: func(r scheduling.Resources) int64 { return r.MilliCPU }, cuts: true},
		{name: "memory", get: func(r scheduling.Resources) int64 { return r.Memory }, cuts: true},
		{name: "pods", get: func(r scheduling.Resources) int64 { return r.Pods }},
		{name: "ephemeral-storage", get: func(r scheduling.Resources) int64 { return r.EphemeralStorage }, unlimitedIfZero: true},
	}
	names := map[corev1.ResourceName]bool{}
	for _, r := range requests {
		for k, v := range r.Scalar {
			if v > 0 {
				names[k] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, string(k))
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		name := corev1.ResourceName(k)
		dims = append(dims, dim{name: k, get: func(r scheduling.Resources) int64 { return r.Scalar[name] }, cuts: true})
	}
	return dims
}

// buildRows makes one resource row per requested resource and the count cuts.
func buildRows(requests []scheduling.Resources, opts []Option, dims []dim) (res, cuts []row) {
	for _, d := range dims {
		var demand int64
		var sizes []int64
		for _, r := range requests {
			v := d.get(r)
			demand += v
			if v > 0 {
				sizes = append(sizes, v)
			}
		}
		if demand == 0 {
			continue
		}
		rw := row{name: d.name, rhs: float64(demand), coef: make([]float64, len(opts))}
		for j, o := range opts {
			a := d.get(o.Allocatable)
			if a == 0 && d.unlimitedIfZero {
				a = demand // one node covers all: an overestimate keeps the bound valid
			}
			rw.coef[j] = float64(a)
		}
		res = append(res, rw)
		if !d.cuts {
			continue
		}
		for _, s := range thresholds(sizes) {
			var n int64
			for _, v := range sizes {
				if v >= s {
					n++
				}
			}
			c := row{name: fmt.Sprintf("%s>=%d", d.name, s), rhs: float64(n), coef: make([]float64, len(opts))}
			for j, o := range opts {
				a := d.get(o.Allocatable)
				if a == 0 && d.unlimitedIfZero {
					a = math.MaxInt64
				}
				c.coef[j] = float64(min(a/s, o.Allocatable.Pods))
			}
			cuts = append(cuts, c)
		}
	}
	return res, cuts
}

// nodeCountRow is Σ_t x_t ≥ N, where N is the most, over the rows, of ⌈rhs / largest
// coefficient⌉: no node offers more than the largest coefficient of a row, so a plan needs at
// least that many nodes (x counts nodes, so the rounding up is valid). It matters for small
// batches, where the LP would otherwise buy a sliver of a large node.
func nodeCountRow(rows []row, n int) (row, bool) {
	var need float64
	for _, r := range rows {
		var most float64
		for _, c := range r.coef {
			most = math.Max(most, c)
		}
		if most > 0 {
			// The 1e-9 keeps an exact quotient (3.0000000001 from rounding) from rounding up.
			need = math.Max(need, math.Ceil(r.rhs/most-1e-9))
		}
	}
	if need < 1 {
		return row{}, false
	}
	coef := make([]float64, n)
	for j := range coef {
		coef[j] = 1
	}
	return row{name: "nodes", coef: coef, rhs: need}, true
}

// thresholds picks up to MaxCutsPerResource of the distinct sizes, evenly spread over the
// sorted distinct values and always including the largest.
func thresholds(sizes []int64) []int64 {
	distinct := append([]int64(nil), sizes...)
	sort.Slice(distinct, func(i, j int) bool { return distinct[i] < distinct[j] })
	u := distinct[:0]
	for i, v := range distinct {
		if i == 0 || v != distinct[i-1] {
			u = append(u, v)
		}
	}
	if len(u) <= MaxCutsPerResource {
		return u
	}
	out := make([]int64, 0, MaxCutsPerResource)
	for i := range MaxCutsPerResource {
		out = append(out, u[i*(len(u)-1)/(MaxCutsPerResource-1)])
	}
	return out
}

// solve returns a certified lower bound on min p·x s.t. rows, x ≥ 0, and (when mix is asked for)
// the primal solution.
func solve(rows []row, opts []Option, wantMix bool) (float64, []Use, error) {
	if len(rows) == 0 {
		return 0, nil, nil
	}
	m := len(rows)
	// Normalise each row to right-hand side 1 so cpu (millicores) and memory (bytes) have the
	// same scale in the Simplex.
	scaled := make([][]float64, m)
	for i, r := range rows {
		scaled[i] = make([]float64, len(opts))
		for j, c := range r.coef {
			scaled[i][j] = c / r.rhs
		}
	}
	cols := undominated(scaled, opts)
	for i, r := range rows {
		ok := false
		for _, j := range cols {
			ok = ok || scaled[i][j] > 0
		}
		if !ok {
			return 0, nil, fmt.Errorf("row %s: no option offers it", r.name)
		}
	}

	// Dual: maximise Σ y_i s.t. Σ_i scaled[i][j]·y_i ≤ p_j for the kept columns, y ≥ 0. In
	// gonum's standard form (min c·z, A z = b, z ≥ 0) with z = (y, s): c = (−1…, 0…),
	// A = [scaledᵀ | I], b = p. The slack basis (y = 0, s = p) is feasible because p ≥ 0.
	n := len(cols)
	c := make([]float64, m+n)
	for i := range m {
		c[i] = -1
	}
	a := mat.NewDense(n, m+n, nil)
	b := make([]float64, n)
	basic := make([]int, n)
	for k, j := range cols {
		for i := range m {
			a.Set(k, i, scaled[i][j])
		}
		a.Set(k, m+k, 1)
		b[k] = opts[j].PricePerHour
		basic[k] = m + k
	}
	_, z, err := lp.Simplex(c, a, b, simplexTol, basic)
	if err != nil {
		return 0, nil, fmt.Errorf("dual simplex: %w", err)
	}
	y := z[:m]
	// Certify: scale y so that every option's dual constraint holds exactly (all options, also
	// the dominated ones left out of the Simplex).
	scale := 1.0
	for j, o := range opts {
		var lhs float64
		for i := range m {
			lhs += scaled[i][j] * max(y[i], 0)
		}
		if lhs > o.PricePerHour {
			scale = math.Min(scale, o.PricePerHour/lhs)
		}
	}
	var bound float64
	for i := range m {
		bound += max(y[i], 0) * scale
	}
	if !wantMix {
		return bound, nil, nil
	}
	return bound, primalMix(scaled, cols, opts), nil
}

// primalMix solves min p·x s.t. scaled·x − s = 1, x, s ≥ 0, and returns the positive x, largest
// first. It returns nil when the Simplex fails (the mix is diagnostic only).
func primalMix(scaled [][]float64, cols []int, opts []Option) []Use {
	m, n := len(scaled), len(cols)
	c := make([]float64, n+m)
	a := mat.NewDense(m, n+m, nil)
	b := make([]float64, m)
	for k, j := range cols {
		c[k] = opts[j].PricePerHour
		for i := range m {
			a.Set(i, k, scaled[i][j])
		}
	}
	for i := range m {
		a.Set(i, n+i, -1)
		b[i] = 1
	}
	_, x, err := lp.Simplex(c, a, b, simplexTol, nil)
	if err != nil {
		return nil
	}
	var mix []Use
	for k, j := range cols {
		if x[k] > 1e-9 {
			mix = append(mix, Use{Name: opts[j].Name, Nodes: x[k]})
		}
	}
	sort.SliceStable(mix, func(i, j int) bool { return mix[i].Nodes > mix[j].Nodes })
	return mix
}

// undominated returns the options no other option beats: an option is dropped when another one
// offers at least as much in every row for no more money (ties keep the first). Dropping it does
// not change the LP optimum: its nodes can be swapped for the other's.
func undominated(scaled [][]float64, opts []Option) []int {
	var keep []int
	for j := range opts {
		dominated := false
		for k := range opts {
			if k == j || opts[k].PricePerHour > opts[j].PricePerHour {
				continue
			}
			ge, strict := true, opts[k].PricePerHour < opts[j].PricePerHour || k < j
			for i := range scaled {
				if scaled[i][k] < scaled[i][j] {
					ge = false
					break
				}
				if scaled[i][k] > scaled[i][j] {
					strict = true
				}
			}
			if ge && strict {
				dominated = true
				break
			}
		}
		if !dominated {
			keep = append(keep, j)
		}
	}
	return keep
}
