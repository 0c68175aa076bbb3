// Package lowerbound computes lower bounds on the cost (USD per hour) of any plan that places a
// set of pods on new nodes drawn from an instance-type catalog. Plans carry the bound and their
// gap to it: a plan at 1.05× the bound costs at most 5 % more than the best possible plan
// (usually less: the bound itself is not always reachable).
//
// # The bounds
//
// The options are what a plan may launch (instance type × NodePool × group of offerings), each
// with its allocatable a_j (after the kubelet reservations and the DaemonSet pods that run on
// every node of it) and its price p_j (the cheapest offering in the group). Pods are grouped in
// classes of equal requests and equal options.
//
//   - FitCut: the LP over node counts x_j with resource rows, count cuts and node-count rows per
//     fit set — each class's pods may only use the options that hold one of them, so every set
//     of classes must fit in the options its members allow (see FitCut for the rows and the
//     proof). Compute is FitCut with every pod free to use every option that holds it.
//   - Patterns (column generation over node configurations, patterns.go): the LP over whole
//     node patterns — an option with a multiset of pods that fits it — whose optimum is at least
//     the fit-cut bound's; its bound is certified from the duals (Farley's bound) after any
//     number of iterations, and its patterns seed the solver's pattern packing.
//
// Anything that makes a_j larger or p_j smaller than reality, or drops a scheduling rule
// (spreads, pod affinity, NodePool limits, minValues), only enlarges the set of plans the LP
// admits, so every value stays a lower bound.
//
// Certified by duality: the LPs are solved with a small covering Simplex (simplex.go; gonum's
// Simplex is the oracle in the tests). A reported bound is b·y for a dual vector y that is
// checked (and if needed scaled) to satisfy every option's (or pattern's) constraint, so by weak
// duality it is ≤ the LP optimum even if the floating-point Simplex stops early.
package lowerbound

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// MaxCutsPerResource is how many count-cut thresholds each resource gets at most: the distinct
// request sizes, thinned evenly (always keeping the largest) when there are more.
const MaxCutsPerResource = 12

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
	// aggregate marks the resource rows over every option (the Aggregate bound's rows).
	aggregate bool
}

// Compute returns the lower bound on placing pods with the given effective requests
// (scheduling.PodRequests, Pods = 1 each) on new nodes of the given options, every pod free to
// use every option that holds it: FitCut over one class per distinct request. It returns an
// error when an option's price is negative or not finite (options[i].pricePerHour), or when a
// pod fits no option on its own (requests[i]). No pods give a zero bound.
func Compute(requests []scheduling.Resources, options []Option) (*Bound, error) {
	if len(requests) == 0 {
		return &Bound{}, nil
	}
	for i, o := range options {
		if o.PricePerHour < 0 || math.IsNaN(o.PricePerHour) || math.IsInf(o.PricePerHour, 0) {
			return nil, fmt.Errorf("options[%d].pricePerHour: %v is not a finite, non-negative price", i, o.PricePerHour)
		}
	}
	p := Problem{Options: options}
	index := map[string]int{}
	for i, r := range requests {
		key := r.String()
		if k, ok := index[key]; ok {
			p.Classes[k].Count++
			continue
		}
		var fits []int
		for j, o := range options {
			if al := clamp(o.Allocatable); al.Pods > 0 && r.Fits(al) {
				fits = append(fits, j)
			}
		}
		if len(fits) == 0 {
			return nil, fmt.Errorf("requests[%d]: %s fits no option on its own", i, r)
		}
		index[key] = len(p.Classes)
		p.Classes = append(p.Classes, Class{Requests: r, Count: 1, Options: fits})
	}
	return FitCut(p)
}

func clamp(r scheduling.Resources) scheduling.Resources {
	r.MilliCPU, r.Memory, r.EphemeralStorage, r.Pods = max(r.MilliCPU, 0), max(r.Memory, 0), max(r.EphemeralStorage, 0), max(r.Pods, 0)
	neg := false
	for _, v := range r.Scalar {
		neg = neg || v < 0
	}
	if neg { // copy only when something changes: clamp runs in hot loops
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

// dimensionsOf lists the resources the classes request, extended resources in name order.
func dimensionsOf(classes []Class) []dim {
	dims := []dim{
		{name: "cpu", get: func(r scheduling.Resources) int64 { return r.MilliCPU }, cuts: true},
		{name: "memory", get: func(r scheduling.Resources) int64 { return r.Memory }, cuts: true},
		{name: "pods", get: func(r scheduling.Resources) int64 { return r.Pods }},
		{name: "ephemeral-storage", get: func(r scheduling.Resources) int64 { return r.EphemeralStorage }, unlimitedIfZero: true},
	}
	names := map[corev1.ResourceName]bool{}
	for _, c := range classes {
		for k, v := range c.Requests.Scalar {
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
