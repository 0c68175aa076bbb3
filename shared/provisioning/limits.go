package provisioning

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// limits is a NodePool's spec.limits, with its dovetail.dev/max-price-per-hour guardrail as the
// resource ResourcePricePerHour, as one solve spends them. It is a value the claims carry, not
// a switch on the pool: a claim is made with the limits it counts against (claim.limits), which
// are its pool's for every claim placement opens and none for the trial claims refine builds,
// because refineClaim checks each replacement as a whole in place of the claim it replaces. A
// NodePool's reserved pool shares its limits: one limit for the NodePool.
type limits struct {
	// keys are the limited resources, sorted: spec.limits' names, and ResourcePricePerHour.
	keys []corev1.ResourceName
	// remaining is the limit less what the NodePool's nodes and in-flight NodeClaims use.
	remaining scheduling.Resources
	// committed is the capacity of the NodePool's open claims, each at its cheapest type's.
	committed scheduling.Resources
	// scaleUpWhy names the rate policies behind ResourceScaleUpNodes and
	// ResourceScaleUpPricePerHour (scaleup.go), for a pod's reason.
	scaleUpWhy string
}

// newLimits compiles a NodePool's limits: spec (spec.limits), used (what its nodes and in-flight
// NodeClaims count, see usedByPool) and, when priceCapped, the price cap in USD per hour. It
// returns nil when the NodePool has neither limits nor a price cap.
func newLimits(spec corev1.ResourceList, used scheduling.Resources, maxPrice float64, priceCapped bool) *limits {
	if len(spec) == 0 && !priceCapped {
		return nil
	}
	l := &limits{}
	limit := scheduling.FromList(spec)
	for k := range spec {
		l.keys = append(l.keys, k)
	}
	if priceCapped {
		limit = limit.Add(scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourcePricePerHour: microUSD(maxPrice)}})
		l.keys = append(l.keys, ResourcePricePerHour)
	}
	l.remaining = limit.Sub(used)
	sort.Slice(l.keys, func(i, j int) bool { return l.keys[i] < l.keys[j] })
	return l
}

// dropUnreachableLimits removes the spec.limits of one NodePool's pools (the pool and its
// reserved and committed pools, which share them) for this solve when no plan for pods pending
// pods can reach them: every NodeClaim holds at least one pod, so a plan opens at most pods
// claims, each counting at most the largest capacity among the pools' types; when pods times
// that stays within what the limits leave in every limited resource, the limits can refuse
// nothing. They matter beyond refusals: placement, the LP and pattern re-packs and the
// improvement leave a limited pool's claims as placed (their accounting is per claim), so a
// NodePool with a far-off limit (issue 28's `cpu: 200000`) was planned without them (18
// NodeClaims at 2.76 USD/h for 200 pods whose plan without limits takes fewer). Limits with a
// price cap or scale-up rate policies are kept: those count prices and nodes per decision,
// where a far-off bound is rarer, and withinPriceCap reads them.
func dropUnreachableLimits(pools []*pool, pods int) {
	var l *limits
	for _, pl := range pools {
		if pl.limits != nil {
			l = pl.limits
		}
	}
	if l == nil || pods <= 0 {
		return
	}
	for _, k := range l.keys {
		if k == ResourcePricePerHour || k == ResourceScaleUpNodes || k == ResourceScaleUpPricePerHour {
			return
		}
	}
	for _, k := range l.keys {
		var largest int64
		for _, pl := range pools {
			if pl.limits != l {
				return // not one shared limit: leave them
			}
			for _, t := range pl.types {
				largest = max(largest, limitValue(t.capacity, k))
			}
		}
		left := limitValue(l.remaining, k)
		if largest > 0 && (left < 0 || largest > left/int64(pods)) {
			return // reachable (or the division says it might be: no overflow to trust)
		}
	}
	for _, pl := range pools {
		pl.limits = nil
	}
}

// within drops the candidate types kept for claim c whose capacity would take the limits past
// their remainder, counting every other open claim at its cheapest type's capacity. Nil limits
// keep every type.
func (l *limits) within(c *claim, kept []int) []int {
	if l == nil {
		return kept
	}
	pl := c.pool
	others := l.committed
	if len(c.types) > 0 && len(c.pods) > 0 {
		others = others.Sub(pl.types[c.types[0]].capacity)
	}
	budget := l.remaining.Sub(others)
	out := kept[:0:0]
	for _, ti := range kept {
		if l.fits(pl.types[ti].capacity, budget) {
			out = append(out, ti)
		}
	}
	return out
}

// recount moves claim c's count from its cheapest type (when it already holds pods) to type
// ti of its pool, the cheapest it will hold after the change.
func (l *limits) recount(c *claim, ti int) {
	pl := c.pool
	if len(c.pods) > 0 {
		l.committed = l.committed.Sub(pl.types[c.types[0]].capacity)
	}
	l.committed = l.committed.Add(pl.types[ti].capacity)
}

// fits compares only the resources the limits name: capacity must not exceed budget in any.
func (l *limits) fits(capacity, budget scheduling.Resources) bool {
	for _, k := range l.keys {
		c, b := limitValue(capacity, k), limitValue(budget, k)
		if c > b {
			return false
		}
	}
	return true
}

// left is what the limits leave for new claims: the remainder less the open claims' capacity.
func (l *limits) left() scheduling.Resources { return l.remaining.Sub(l.committed) }

// exceeded names the limited resources that turn the candidate types (indices into the pool's
// types: those that would otherwise take a pod) away from a new claim, sorted: each resource
// in which every candidate's capacity exceeds what is left; when no one resource does (each
// candidate exceeds a different one), every resource some candidate exceeds. Empty when the
// limits turn no candidate away.
func (l *limits) exceeded(pl *pool, types []int) []corev1.ResourceName {
	left := l.left()
	var every, some []corev1.ResourceName
	for _, k := range l.keys {
		budget, over := limitValue(left, k), 0
		for _, ti := range types {
			if limitValue(pl.types[ti].capacity, k) > budget {
				over++
			}
		}
		switch {
		case over == 0:
		case over == len(types):
			every = append(every, k)
		default:
			some = append(some, k)
		}
	}
	if len(every) > 0 {
		return every
	}
	return some
}

// limitValue reads resource k of r in its base unit (millicores, bytes, count, micro-USD).
func limitValue(r scheduling.Resources, k corev1.ResourceName) int64 {
	switch k {
	case corev1.ResourceCPU:
		return r.MilliCPU
	case corev1.ResourceMemory:
		return r.Memory
	case corev1.ResourcePods:
		return r.Pods
	case corev1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	}
	return r.Scalar[k]
}

// describe renders what is left of each limited resource, for a pod's reason.
func (l *limits) describe() string {
	rem := l.left()
	parts := make([]string, 0, len(l.keys))
	for _, k := range l.keys {
		switch k {
		case corev1.ResourceCPU:
			parts = append(parts, fmt.Sprintf("cpu=%dm", rem.MilliCPU))
		case corev1.ResourceMemory:
			parts = append(parts, fmt.Sprintf("memory=%dMi", rem.Memory>>20))
		case corev1.ResourcePods:
			parts = append(parts, fmt.Sprintf("pods=%d", rem.Pods))
		case corev1.ResourceEphemeralStorage:
			parts = append(parts, fmt.Sprintf("ephemeral-storage=%dMi", rem.EphemeralStorage>>20))
		case ResourcePricePerHour:
			parts = append(parts, fmt.Sprintf("price=%.4f USD/h of %s", float64(rem.Scalar[k])/1e6, apisv1.AnnotationMaxPricePerHour))
		case ResourceScaleUpNodes, ResourceScaleUpPricePerHour:
			parts = append(parts, l.describeScaleUp(k, rem))
		default:
			parts = append(parts, fmt.Sprintf("%s=%d", k, rem.Scalar[k]))
		}
	}
	return strings.Join(parts, " ")
}
