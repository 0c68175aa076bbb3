package lowerbound

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"
)

var testBudget = PatternBudget{Rounds: 50, KnapsackNodes: 200000}

// Where the fit-cut LP is fractional the pattern LP is not: five 1000m pods on m5.large-like
// (1930m, $0.096, one pod each) and m5.xlarge-like (3920m, $0.192, three each) nodes. Fit cuts:
// L + 3X ≥ 5 and L + X ≥ 2 give $0.336 (X = 1.5, L = 0.5). Patterns: a node holds 1 or 3 pods,
// so the LP buys 5/3 of the three-pod node, $0.32, and the node-count is not in it; the bound
// reported by callers is the larger of the two (0.336). Here we check the pattern LP's value.
func TestPatternsSmall(t *testing.T) {
	opts := []Option{{Name: "L", Allocatable: res(1930, 8, 29), PricePerHour: 0.096}, {Name: "X", Allocatable: res(3920, 16, 58), PricePerHour: 0.192}}
	p := Problem{Options: opts, Classes: []Class{{Requests: res(1000, 0, 1), Count: 5, Options: []int{0, 1}}}}
	r, err := Patterns(p, testBudget)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Optimal || !near(r.PricePerHour*(1+1e-9), 0.32) {
		t.Fatalf("bound %v optimal %v, want 0.32", r.PricePerHour, r.Optimal)
	}
}

// The mix from TestFitCutBigPodsNeedBigTypes. Patterns know the 5- and 7-CPU pods fit
// two to an L node at most, but the LP may use half a node: {5, 7, 4×1} once ($4), {7, 7, 1, 1}
// half ($2) and 1.25 S nodes of four 1-CPU pods ($1.125) cover everything for $7.125, below the
// fit-cut bound's $8 (whose node-count row rounds up) — the two bounds complement each other,
// and callers report the larger. The optimum is $8.
func TestPatternsBigPods(t *testing.T) {
	p := bigPodsProblem()
	r, err := Patterns(p, testBudget)
	if err != nil {
		t.Fatal(err)
	}
	if r.PricePerHour > 7.125+1e-9 || r.PricePerHour < 7 {
		t.Fatalf("bound %v, want at most 7.125 (a feasible LP solution) and near it", r.PricePerHour)
	}
	var cover [3]float64
	for i, pt := range r.Patterns {
		for k, c := range pt.Counts {
			cover[k] += r.Use[i] * float64(c)
		}
	}
	for k, c := range p.Classes {
		if cover[k] < float64(c.Count)-1e-6 {
			t.Fatalf("class %d covered %v < %d", k, cover[k], c.Count)
		}
	}
}

// bigPodsProblem: S (4 CPU, $0.9) and L (16 CPU, $4) nodes for one 5-CPU pod, two 7-CPU pods and
// ten 1-CPU pods.
func bigPodsProblem() Problem {
	opts := []Option{{Name: "S", Allocatable: res(4000, 16, 110), PricePerHour: 0.9}, {Name: "L", Allocatable: res(16000, 64, 110), PricePerHour: 4}}
	return Problem{Options: opts, Classes: []Class{
		{Requests: res(5000, 1, 1), Count: 1, Options: []int{0, 1}},
		{Requests: res(7000, 1, 1), Count: 2, Options: []int{0, 1}},
		{Requests: res(1000, 1, 1), Count: 10, Options: []int{0, 1}},
	}}
}

// A run that gives up under a floor also stops before its first round's knapsacks when that
// round cannot show a quarter of the floor. Four 1000m pods on one 4-CPU option at $1/h: the
// one-class pattern holds all four, so the first master LP costs $1/h (dual objective 1), no
// option prices out (θ = 1), and the round can show $1/h at most. Under a floor of $4.40/h
// (1 < 4.40/4) it gives up with no bound; under $3.60/h (1 ≥ 0.90), or without GiveUpNodes,
// it runs and proves $1/h optimal.
func TestPatternsHopelessFirstRound(t *testing.T) {
	p := Problem{
		Options: []Option{{Name: "S", Allocatable: res(4000, 16, 110), PricePerHour: 1}},
		Classes: []Class{{Requests: res(1000, 1, 1), Count: 4, Options: []int{0}}},
	}
	for _, tc := range []struct {
		floor       float64
		giveUpNodes int
		want        float64
		optimal     bool
	}{
		{floor: 4.4, giveUpNodes: 1, want: 0, optimal: false},
		{floor: 3.6, giveUpNodes: 1, want: 1, optimal: true},
		{floor: 4.4, giveUpNodes: 0, want: 1, optimal: true},
	} {
		b := testBudget
		b.Floor, b.GiveUpNodes = tc.floor, tc.giveUpNodes
		r, err := Patterns(p, b)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.PricePerHour-tc.want) > 1e-6 || r.Optimal != tc.optimal {
			t.Errorf("floor %v, give-up nodes %d: bound %v optimal %v, want %v optimal %v", tc.floor, tc.giveUpNodes, r.PricePerHour, r.Optimal, tc.want, tc.optimal)
		}
	}
}

// The first round's projection holds only once one of the candidates it searches adds a column.
// Ten classes of one exclusive set (one pod per node), ten pods each, on 30 options ($1–1.29/h):
// the one-class patterns are optimal ($100/h), but an option's relaxation bound counts one pod
// of every class (ratio ~10), so the round projects 100/(10/1.24) ≈ 12.4, under a quarter of a
// $60/h or $100/h floor. No knapsack finds a column, the round goes on down the list, and its
// knapsacks prove $100/h optimal: giving up before them threw that away.
func TestPatternsHopelessOnlyOnceAColumnIsAdded(t *testing.T) {
	var p Problem
	var all []int
	for j := range 30 {
		p.Options = append(p.Options, Option{Name: fmt.Sprint(j), Allocatable: res(4000+int64(j)*100, 32-int64(j)/2, 110), PricePerHour: 1 + 0.01*float64(j)})
		all = append(all, j)
	}
	for range 10 {
		p.Classes = append(p.Classes, Class{Requests: res(100, 1, 1), Count: 10, Options: all, Exclusive: 1})
	}
	for _, floor := range []float64{0, 60, 100} {
		b := testBudget
		b.Floor, b.GiveUpNodes = floor, 1
		r, err := Patterns(p, b)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.PricePerHour-100) > 1e-6 || !r.Optimal {
			t.Errorf("floor %v: bound %v optimal %v, want 100 optimal", floor, r.PricePerHour, r.Optimal)
		}
	}
}

// The pattern bound never exceeds the exact optimum, with any budget, even a starved one.
func TestPatternsNeverExceedOptimum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, ok := randomProblem(t)
		if !ok {
			t.Skip("too big for brute force")
		}
		opt := bruteForce(p)
		if math.IsInf(opt, 1) {
			t.Skip("infeasible")
		}
		budget := PatternBudget{Rounds: rapid.IntRange(1, 30).Draw(t, "rounds"), KnapsackNodes: rapid.IntRange(1, 5000).Draw(t, "nodes")}
		r, err := Patterns(p, budget)
		if err != nil {
			t.Fatal(err)
		}
		if r.PricePerHour > opt*(1+1e-9) {
			t.Fatalf("pattern bound %v > optimum %v (budget %+v)\n%+v", r.PricePerHour, opt, budget, p)
		}
	})
}

// The knapsack's bound weighs CPU and memory together. On a 4-CPU, 16 GiB node, pod A (2 CPU,
// 1 GiB) and pod B (500m, 8 GiB) are worth 1 each; the best pattern is worth 2 (A+A, A+B or
// B+B). One resource at a time the bound is 8 (CPU alone: eight B pods) — so loose that the
// branch and bound rarely finished on real mixes and stopped column generation short of the
// LP optimum. With CPU and memory at equal weight, A takes 2/4·½ + 1/16·½ = 9/32 of the node
// and B 1/8·½ + 8/16·½ = 10/32: at most 32/9 A pods fit, so no pattern is worth more than 32/9.
func TestKnapsackBoundWeighsResourcesTogether(t *testing.T) {
	p := Problem{Options: []Option{{Name: "n", Allocatable: res(4000, 16, 110), PricePerHour: 1}},
		Classes: []Class{{Requests: res(2000, 1, 1), Count: 10, Options: []int{0}}, {Requests: res(500, 8, 1), Count: 10, Options: []int{0}}}}
	g := newPatternGen(p)
	pi := []float64{1, 1}
	if _, _, ub, _ := g.knapsack(0, pi, 1); !near(ub, 32.0/9) {
		t.Errorf("root bound %v, want 32/9 = %v", ub, 32.0/9)
	}
	pt, v, ub, _ := g.knapsack(0, pi, 10_000)
	if v != 2 || ub != 2 || pt.Counts[0]+pt.Counts[1] != 2 {
		t.Errorf("finished search: value %v bound %v pattern %v, want 2, 2 and two pods", v, ub, pt.Counts)
	}
}

// A run whose bound stays under half the caller's floor once GiveUpNodes are spent stops after
// that round (the floor is already the better bound); without a floor it runs on. Same problem
// as TestPatternsBigPods, whose first round's bound is far below a floor of $1,000.
func TestPatternsGiveUpUnderFloor(t *testing.T) {
	p := bigPodsProblem()
	full, err := Patterns(p, testBudget)
	if err != nil {
		t.Fatal(err)
	}
	giveUp := testBudget
	giveUp.Floor, giveUp.GiveUpNodes = 1000, 1
	short, err := Patterns(p, giveUp)
	if err != nil {
		t.Fatal(err)
	}
	if short.Optimal || short.Work >= full.Work || short.PricePerHour > full.PricePerHour {
		t.Fatalf("with the floor: optimal %v, work %d (full run %d), bound %v (full %v); want a shorter, non-optimal run", short.Optimal, short.Work, full.Work, short.PricePerHour, full.PricePerHour)
	}
}
