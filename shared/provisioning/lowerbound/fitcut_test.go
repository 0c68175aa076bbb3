package lowerbound

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
	"pgregory.net/rapid"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// The case, by hand. S = 4 CPU / 16 GiB at $0.9 (0.225 per CPU), L = 16 CPU / 64 GiB
// at $4 (0.25 per CPU). Pods: one of 5 CPU and two of 7 CPU (they fit only L), ten of 1 CPU.
// All resources over all types (Aggregate): 29 CPU on S alone, 29/4 × 0.9 = $6.525. The fit
// set {L} holds the big pods' 19 CPU: 16·x_L ≥ 19, so x_L ≥ ⌈19/16⌉ = 2 whole nodes: $8, and
// their 32 CPU also hold the ten small pods (node 1: 7 + 7 + 2 × 1; node 2: 5 + 8 × 1). So
// the bound is $8, which is also the optimum; without the fit set the count cuts give only
// x_L ≥ 1 and 4·x_S ≥ 13: $6.925.
func TestFitCutBigPodsNeedBigTypes(t *testing.T) {
	opts := []Option{{Name: "S", Allocatable: res(4000, 16, 110), PricePerHour: 0.9}, {Name: "L", Allocatable: res(16000, 64, 110), PricePerHour: 4}}
	var reqs []scheduling.Resources
	reqs = append(reqs, podsOf(1, 5000, 1)...)
	reqs = append(reqs, podsOf(2, 7000, 1)...)
	reqs = append(reqs, podsOf(10, 1000, 1)...)
	b := mustCompute(t, reqs, opts)
	if !near(b.PricePerHour, 8) || !near(b.Aggregate, 6.525) {
		t.Fatalf("bound = %v (aggregate %v), want 8 (aggregate 6.525)", b.PricePerHour, b.Aggregate)
	}
}

// Anti-affinity on the hostname forces one node per pod: three 1-CPU pods of an exclusive set
// on 4-CPU nodes at $1 need three nodes ($3); without the set, one node ($1).
func TestFitCutExclusive(t *testing.T) {
	opts := []Option{{Name: "S", Allocatable: res(4000, 16, 110), PricePerHour: 1}}
	p := Problem{Options: opts, Classes: []Class{{Requests: res(1000, 1, 1), Count: 3, Options: []int{0}}}}
	if b, err := FitCut(p); err != nil || !near(b.PricePerHour, 1) {
		t.Fatalf("free: %v %v, want 1", b, err)
	}
	p.Classes[0].Exclusive = 1
	if b, err := FitCut(p); err != nil || !near(b.PricePerHour, 3) {
		t.Fatalf("exclusive: %v %v, want 3", b, err)
	}
}

// A zone pin is an option of its own: the same type in the pinned zone costs more (here $2
// against $1 elsewhere), and the pinned class may use only that option. Two pinned 3-CPU pods
// (one per 4-CPU node) and two free ones: 2 × $2 + 2 × $1 = $6.
func TestFitCutZonePin(t *testing.T) {
	opts := []Option{{Name: "T/any", Allocatable: res(4000, 16, 110), PricePerHour: 1}, {Name: "T/zone-b", Allocatable: res(4000, 16, 110), PricePerHour: 2}}
	p := Problem{Options: opts, Classes: []Class{
		{Requests: res(3000, 1, 1), Count: 2, Options: []int{1}},
		{Requests: res(3000, 1, 1), Count: 2, Options: []int{0, 1}},
	}}
	b, err := FitCut(p)
	if err != nil || !near(b.PricePerHour, 6) {
		t.Fatalf("bound %v %v, want 6", b, err)
	}
}

// bruteForce is the exact optimum of a small problem: every partition of the pods into nodes,
// each node the cheapest option every pod on it allows, that holds them all and at most one pod
// of each exclusive set.
func bruteForce(p Problem) float64 {
	var pods []int // class of each pod
	for k, c := range p.Classes {
		for range c.Count {
			pods = append(pods, k)
		}
	}
	blockCost := func(b []int) float64 {
		var sum scheduling.Resources
		seen := map[int]bool{}
		for _, i := range b {
			c := p.Classes[pods[i]]
			sum = sum.Add(c.Requests)
			if c.Exclusive != 0 {
				if seen[c.Exclusive] {
					return math.Inf(1)
				}
				seen[c.Exclusive] = true
			}
		}
		best := math.Inf(1)
	next:
		for j, o := range p.Options {
			for _, i := range b {
				allowed := false
				for _, x := range p.Classes[pods[i]].Options {
					allowed = allowed || x == j
				}
				if !allowed {
					continue next
				}
			}
			if sum.Fits(o.Allocatable) {
				best = math.Min(best, o.PricePerHour)
			}
		}
		return best
	}
	best := math.Inf(1)
	var blocks [][]int
	var rec func(i int)
	rec = func(i int) {
		if i == len(pods) {
			var total float64
			for _, b := range blocks {
				total += blockCost(b)
			}
			best = math.Min(best, total)
			return
		}
		for k := range blocks {
			blocks[k] = append(blocks[k], i)
			rec(i + 1)
			blocks[k] = blocks[k][:len(blocks[k])-1]
		}
		blocks = append(blocks, []int{i})
		rec(i + 1)
		blocks = blocks[:len(blocks)-1]
	}
	rec(0)
	return best
}

// randomProblem draws a small problem: 1–3 options, 1–4 classes of 1–3 pods, each class
// allowed a random non-empty subset of the options that hold it, some classes exclusive.
func randomProblem(t *rapid.T) (Problem, bool) {
	var p Problem
	for k := range rapid.IntRange(1, 3).Draw(t, "options") {
		cpu := int64(1000 * rapid.IntRange(1, 8).Draw(t, "cpu"))
		p.Options = append(p.Options, Option{Name: string(rune('A' + k)),
			Allocatable:  res(cpu, int64(rapid.IntRange(1, 16).Draw(t, "mem")), int64(rapid.IntRange(2, 6).Draw(t, "pods"))),
			PricePerHour: float64(cpu)/1000*0.05 + rapid.Float64Range(0, 0.2).Draw(t, "extra")})
	}
	total := 0
	for range rapid.IntRange(1, 4).Draw(t, "classes") {
		r := scheduling.Resources{MilliCPU: int64(rapid.IntRange(100, 3000).Draw(t, "podcpu")), Memory: int64(rapid.IntRange(0, 8).Draw(t, "podmem")) * gib / 2, Pods: 1}
		var fits []int
		for j, o := range p.Options {
			if r.Fits(o.Allocatable) && rapid.Bool().Draw(t, "allow") {
				fits = append(fits, j)
			}
		}
		if len(fits) == 0 {
			continue
		}
		n := rapid.IntRange(1, 3).Draw(t, "count")
		total += n
		p.Classes = append(p.Classes, Class{Requests: r, Count: n, Options: fits, Exclusive: rapid.IntRange(0, 2).Draw(t, "excl")})
	}
	return p, len(p.Classes) > 0 && total <= 7
}

// The defining property: the fit-cut bound never exceeds the exact optimum.
func TestFitCutNeverExceedsOptimum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, ok := randomProblem(t)
		if !ok {
			t.Skip("too big for brute force")
		}
		opt := bruteForce(p)
		if math.IsInf(opt, 1) {
			t.Skip("infeasible")
		}
		b, err := FitCut(p)
		if err != nil {
			t.Fatal(err)
		}
		if b.PricePerHour > opt*(1+1e-9) || b.Aggregate > b.PricePerHour*(1+1e-9) {
			t.Fatalf("bound %v (aggregate %v) > optimum %v\n%+v", b.PricePerHour, b.Aggregate, opt, p)
		}
	})
}

// The covering Simplex agrees with gonum's on random covering LPs (gonum is the oracle).
func TestCoverLPMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 200 {
		m, n := 1+rng.IntN(8), 1+rng.IntN(12)
		a := make([][]float64, m)
		for i := range a {
			a[i] = make([]float64, n)
			for j := range a[i] {
				if rng.IntN(3) > 0 {
					a[i][j] = float64(rng.IntN(10))
				}
			}
			a[i][rng.IntN(n)] += 1 // every row coverable
		}
		for j := range n {
			a[rng.IntN(m)][j] += 1 // no empty column (gonum refuses them)
		}
		c := make([]float64, n)
		for j := range c {
			c[j] = 0.1 + rng.Float64()
		}
		mine := newCoverLP(m)
		for j := range n {
			col := make([]float64, m)
			for i := range m {
				col[i] = a[i][j] // right-hand sides are 1
			}
			mine.addColumn(col, c[j])
		}
		if !mine.solve(10000) {
			t.Fatalf("trial %d: no optimum", trial)
		}
		got := mine.certified(nil, nil)
		// gonum: min c·x s.t. A·x − s = 1, x, s ≥ 0.
		cc := append(append([]float64(nil), c...), make([]float64, m)...)
		A := mat.NewDense(m, n+m, nil)
		b := make([]float64, m)
		for i := range m {
			for j := range n {
				A.Set(i, j, a[i][j])
			}
			A.Set(i, n+i, -1)
			b[i] = 1
		}
		want, _, err := lp.Simplex(cc, A, b, 1e-10, nil)
		if err != nil {
			t.Fatalf("trial %d: gonum: %v", trial, err)
		}
		if math.Abs(got-want) > 1e-7*math.Max(1, want) {
			t.Fatalf("trial %d: covering simplex %v, gonum %v", trial, got, want)
		}
		var primal float64
		for j, x := range mine.primal() {
			primal += c[j] * x
		}
		if math.Abs(primal-want) > 1e-7*math.Max(1, want) {
			t.Fatalf("trial %d: primal %v, gonum %v", trial, primal, want)
		}
	}
}
