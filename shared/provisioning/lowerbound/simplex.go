package lowerbound

import "math"

// coverLP is a covering linear program
//
//	minimise c·x  subject to  A·x ≥ b,  x ≥ 0      (A ≥ 0, b > 0, c > 0)
//
// solved by the revised primal Simplex with an explicit basis inverse. It is small and
// dense on purpose: the programs here have tens to a few hundred rows (pod classes, cuts) and
// up to a few thousand columns (instance types, node patterns), and column generation adds
// columns one at a time and re-solves from the last basis. Unlike gonum's Simplex it returns
// the dual prices, which column generation needs.
//
// Start: every row i gets an artificial column e_i priced at u_i, slightly more per unit of
// row i than the cheapest real column covers it for, so the artificial basis x_a = b is
// feasible and an optimum never keeps an artificial at a positive level (swapping it for that
// real column is strictly cheaper). Rows are scaled to right-hand side 1.
//
// Nothing here needs to be exact: callers certify bounds from the duals (scaled until every
// real column's dual constraint holds), and primal solutions are always feasible coverings.
type coverLP struct {
	m     int
	cols  [][]float64 // real columns, scaled rows
	cost  []float64
	art   []float64 // artificial price per row
	basis []int     // variable per row: ≥ 0 real column, −1−i surplus i, −1−m−i artificial i
	binv  []float64 // m×m basis inverse, row-major
	xb    []float64
	y     []float64 // duals of the last solve (scaled rows)
	since int       // pivots since the last refactorisation
	// Pivots counts the Simplex pivots made, for work budgets.
	Pivots int
}

const (
	lpTol          = 1e-9
	refactorPivots = 64
)

// newCoverLP makes an LP with m rows (right-hand sides scaled to 1) and no columns yet.
func newCoverLP(m int) *coverLP {
	lp := &coverLP{m: m, art: make([]float64, m), basis: make([]int, m), binv: make([]float64, m*m), xb: make([]float64, m), y: make([]float64, m)}
	for i := range m {
		lp.basis[i] = -1 - m - i
		lp.binv[i*m+i] = 1
		lp.xb[i] = 1
		lp.art[i] = math.Inf(1)
	}
	return lp
}

// addColumn adds a real column (already scaled) with its cost and returns its index. Artificial
// prices follow: u_i ≥ 1.001 × the cheapest cost per unit of row i over every real column.
func (lp *coverLP) addColumn(col []float64, cost float64) int {
	lp.cols = append(lp.cols, col)
	lp.cost = append(lp.cost, cost)
	for i, a := range col {
		if a > lpTol {
			lp.art[i] = math.Min(lp.art[i], cost/a*1.001+1e-12)
		}
	}
	return len(lp.cols) - 1
}

func (lp *coverLP) varCost(v int) float64 {
	switch {
	case v >= 0:
		return lp.cost[v]
	case v >= -lp.m:
		return 0
	default:
		return lp.art[-1-lp.m-v]
	}
}

// column writes variable v's column into dst.
func (lp *coverLP) column(v int, dst []float64) {
	switch {
	case v >= 0:
		copy(dst, lp.cols[v])
	default:
		clear(dst)
		if v >= -lp.m {
			dst[-1-v] = -1
		} else {
			dst[-1-lp.m-v] = 1
		}
	}
}

// solve runs Simplex pivots from the current basis until no column prices out or maxPivots
// is reached, and reports whether it stopped at an optimum. Rows without any real column keep
// their artificial (the caller must not ask for them).
func (lp *coverLP) solve(maxPivots int) bool {
	m := lp.m
	w := make([]float64, m)
	col := make([]float64, m)
	for i, a := range lp.art {
		if math.IsInf(a, 1) {
			lp.art[i] = 1e12 // a row no real column covers: the caller's error, kept finite
		}
	}
	// basic[j+2m] marks basic variables: real j ≥ 0, surplus and artificials below.
	basic := make([]bool, len(lp.cols)+2*m)
	for _, v := range lp.basis {
		basic[v+2*m] = true
	}
	for it := 0; ; it++ {
		lp.duals()
		// Dantzig pricing over real columns, surplus and artificials.
		enter, best := 0, -lpTol
		found := false
		for j, c := range lp.cols {
			if basic[j+2*m] {
				continue
			}
			d := lp.cost[j]
			for i, a := range c {
				if a != 0 {
					d -= lp.y[i] * a
				}
			}
			if d < best*math.Max(1, lp.cost[j]) {
				enter, best, found = j, d/math.Max(1, lp.cost[j]), true
			}
		}
		for i := range m {
			if v := -1 - i; !basic[v+2*m] && lp.y[i] < best { // surplus: reduced cost 0 − y·(−e_i) = y_i
				enter, best, found = v, lp.y[i], true
			}
		}
		if !found {
			return true
		}
		if it >= maxPivots {
			return false
		}
		lp.column(enter, col)
		for i := range m {
			var s float64
			row := lp.binv[i*m : (i+1)*m]
			for k, a := range col {
				if a != 0 {
					s += row[k] * a
				}
			}
			w[i] = s
		}
		leave := -1
		ratio := math.Inf(1)
		for i := range m {
			if w[i] > lpTol {
				r := lp.xb[i] / w[i]
				if r < ratio-1e-12 || (r < ratio+1e-12 && leave >= 0 && lp.basis[i] < lp.basis[leave]) {
					leave, ratio = i, r
				}
			}
		}
		if leave < 0 {
			return false // unbounded: cannot happen with c > 0; give up safely
		}
		lp.pivot(leave, enter, w)
		basic[lp.basis[leave]+2*m] = false
		lp.basis[leave] = enter
		basic[enter+2*m] = true
		lp.Pivots++
		lp.since++
		if lp.since >= refactorPivots {
			lp.refactor()
		}
	}
}

// pivot updates the basis inverse and the basic values for column w entering at row r.
func (lp *coverLP) pivot(r, _ int, w []float64) {
	m := lp.m
	pr := lp.binv[r*m : (r+1)*m]
	inv := 1 / w[r]
	for k := range pr {
		pr[k] *= inv
	}
	lp.xb[r] *= inv
	for i := range m {
		if i == r || w[i] == 0 {
			continue
		}
		f := w[i]
		row := lp.binv[i*m : (i+1)*m]
		for k, v := range pr {
			if v != 0 {
				row[k] -= f * v
			}
		}
		lp.xb[i] -= f * lp.xb[r]
		if lp.xb[i] < 0 && lp.xb[i] > -1e-9 {
			lp.xb[i] = 0
		}
	}
}

// refactor recomputes the basis inverse (Gauss–Jordan with partial pivoting) and the basic
// values from scratch, which keeps rounding errors from piling up over many pivots.
func (lp *coverLP) refactor() {
	m := lp.m
	lp.since = 0
	bm := make([]float64, m*m) // basis matrix, row-major
	col := make([]float64, m)
	for k, v := range lp.basis {
		lp.column(v, col)
		for i := range m {
			bm[i*m+k] = col[i]
		}
	}
	inv := make([]float64, m*m)
	for i := range m {
		inv[i*m+i] = 1
	}
	for c := range m {
		p := c
		for i := c + 1; i < m; i++ {
			if math.Abs(bm[i*m+c]) > math.Abs(bm[p*m+c]) {
				p = i
			}
		}
		if math.Abs(bm[p*m+c]) < 1e-13 {
			return // singular (should not happen): keep the updated inverse
		}
		if p != c {
			for k := range m {
				bm[p*m+k], bm[c*m+k] = bm[c*m+k], bm[p*m+k]
				inv[p*m+k], inv[c*m+k] = inv[c*m+k], inv[p*m+k]
			}
		}
		d := 1 / bm[c*m+c]
		for k := range m {
			bm[c*m+k] *= d
			inv[c*m+k] *= d
		}
		for i := range m {
			if i == c || bm[i*m+c] == 0 {
				continue
			}
			f := bm[i*m+c]
			for k := range m {
				bm[i*m+k] -= f * bm[c*m+k]
				inv[i*m+k] -= f * inv[c*m+k]
			}
		}
	}
	lp.binv = inv
	for i := range m {
		var s float64
		for k := range m {
			s += inv[i*m+k] // b = 1 in every scaled row
		}
		lp.xb[i] = max(s, 0)
	}
}

// duals computes y = c_B·B⁻¹.
func (lp *coverLP) duals() {
	m := lp.m
	clear(lp.y)
	for i, v := range lp.basis {
		c := lp.varCost(v)
		if c == 0 {
			continue
		}
		row := lp.binv[i*m : (i+1)*m]
		for k, b := range row {
			lp.y[k] += c * b
		}
	}
}

// primal returns the value of every real column (zero when non-basic).
func (lp *coverLP) primal() []float64 {
	x := make([]float64, len(lp.cols))
	for i, v := range lp.basis {
		if v >= 0 {
			x[v] = max(lp.xb[i], 0)
		}
	}
	return x
}

// certified returns Σ_i ŷ_i (the scaled right-hand sides are 1), where ŷ = max(y, 0) is
// scaled down until ŷ·A_j ≤ c_j holds for every real column, and extra columns given in
// scaled form: by weak duality a lower bound on the LP optimum over all those columns,
// whatever state the Simplex stopped in.
func (lp *coverLP) certified(extra [][]float64, extraCost []float64) float64 {
	yy := make([]float64, lp.m)
	for i, v := range lp.y {
		yy[i] = max(v, 0)
	}
	scale := 1.0
	check := func(col []float64, c float64) {
		var s float64
		for i, a := range col {
			s += a * yy[i]
		}
		if s > c {
			scale = math.Min(scale, c/s)
		}
	}
	for j, col := range lp.cols {
		check(col, lp.cost[j])
	}
	for j, col := range extra {
		check(col, extraCost[j])
	}
	var sum float64
	for _, v := range yy {
		sum += v
	}
	// A hair below, so rounding in the sums above can never lift it over the true optimum.
	return sum * scale * (1 - 1e-12)
}
