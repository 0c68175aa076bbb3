package provisioning

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// finalizeAll is the finalize stage: every claim, in order, with its ranked offerings.
func (s *solver) finalizeAll() []*NodeClaimPlan {
	var out []*NodeClaimPlan
	for _, c := range s.claims {
		out = append(out, s.finalize(c))
	}
	return out
}

// finalize ranks the claim's offerings: every offering of its candidate types that its zone and
// capacity-type requirements allow, cheapest first, capped at MaxInstanceTypes types. GPU,
// accelerator and bare-metal types are dropped when the pods need none of them and other
// types remain. Claims with the same candidate types and requirements share one offering list.
func (s *solver) finalize(c *claim) *NodeClaimPlan {
	pl := c.pool
	if pl.committed {
		return s.committedPlan(c)
	}
	if pl.reserved {
		return s.reservedPlan(c)
	}
	if len(pl.minValues) > 0 {
		return s.finalizeMinValues(c)
	}
	plainOnly := !needsSpecial(c.requests)
	types := s.cheapestFitting(c, plainOnly)
	if len(types) == 0 && plainOnly {
		types = s.cheapestFitting(c, false)
	}
	return s.claimPlan(c, s.rankedOfferings(pl, c.reqs, types))
}

// cheapestFitting returns the (at most MaxInstanceTypes) candidate types that hold the claim's
// pods (only non-special ones when plainOnly) whose cheapest offering under the claim's zone and
// capacity-type requirements is cheapest (ties by name, as rankedOfferings ranks them). The
// candidates are sorted by their cheapest offering of all, which no allowed offering undercuts,
// so the scan stops once that price passes the MaxInstanceTypes-th best allowed price.
func (s *solver) cheapestFitting(c *claim, plainOnly bool) []int {
	pl := c.pool
	zr, cr := c.reqs[corev1.LabelTopologyZone], c.reqs[apisv1.LabelCapacityType]
	want, byMask := pl.offerMask(c.reqs)
	type ranked struct {
		ti    int
		price float64
	}
	less := func(a, b ranked) bool {
		if a.price != b.price {
			return a.price < b.price
		}
		return pl.types[a.ti].it.Name < pl.types[b.ti].it.Name
	}
	best := make([]ranked, 0, MaxInstanceTypes+1) // ascending by less
	for _, ti := range c.types {
		t := pl.types[ti]
		if len(best) == MaxInstanceTypes && best[len(best)-1].price < t.minPrice {
			break
		}
		if (plainOnly && t.special) || !c.fits(ti) {
			continue
		}
		r := ranked{ti: ti, price: -1}
		for i, o := range t.offerings { // sorted by price
			if byMask && t.offerBit[i] < 64 {
				if want&(1<<t.offerBit[i]) != 0 {
					r.price = o.PricePerHour
					break
				}
				continue
			}
			if (zr == nil || zr.Has(o.Zone)) && (cr == nil || cr.Has(o.CapacityType)) {
				r.price = o.PricePerHour
				break
			}
		}
		if r.price < 0 || (len(best) == MaxInstanceTypes && !less(r, best[len(best)-1])) {
			continue
		}
		if len(best) == 0 || less(best[len(best)-1], r) {
			best = append(best, r) // the common case: types arrive in price order
			continue
		}
		i := sort.Search(len(best), func(i int) bool { return less(r, best[i]) })
		best = append(best, ranked{})
		copy(best[i+1:], best[i:])
		best[i] = r
		if len(best) > MaxInstanceTypes {
			best = best[:MaxInstanceTypes]
		}
	}
	out := make([]int, len(best))
	for i, r := range best {
		out[i] = r.ti
	}
	return out
}

// finalizeMinValues is finalize for a pool with minValues, which are judged over every fitting
// candidate type. Under BestEffort, when the types ranked cannot keep some minValues, the plan
// records the lowered minValues (relaxedMinValues).
func (s *solver) finalizeMinValues(c *claim) *NodeClaimPlan {
	pl := c.pool
	types := make([]int, 0, len(c.types))
	for _, ti := range c.types {
		if c.fits(ti) { // the fast path may leave types that no longer fit
			types = append(types, ti)
		}
	}
	if s.plainForMinValues(c, types) {
		plain := make([]int, 0, len(types))
		for _, ti := range types {
			if !pl.types[ti].special {
				plain = append(plain, ti)
			}
		}
		types = plain
	}
	plan := s.claimPlan(c, s.rankedOfferings(pl, c.reqs, types))
	plan.Requirements, plan.MinValuesRelaxed = relaxedMinValues(pl, plan.Requirements, types)
	return plan
}

// plainForMinValues reports whether a minValues claim ranks only the non-special types among
// fitting: when its pods need no accelerator and those types keep minValues; or, under
// BestEffort, when neither they nor all fitting types keep it (minValues is relaxed either
// way, and the plain types are what the pods need).
func (s *solver) plainForMinValues(c *claim, fitting []int) bool {
	if needsSpecial(c.requests) {
		return false
	}
	plain := make([]int, 0, len(fitting))
	for _, ti := range fitting {
		if !c.pool.types[ti].special {
			plain = append(plain, ti)
		}
	}
	if len(plain) == 0 {
		return false
	}
	if meetsMinValues(c.pool, plain) {
		return true
	}
	return s.in.Policies.bestEffort() && !meetsMinValues(c.pool, fitting)
}

// relaxedMinValues returns reqs with each minValues requirement the types cannot keep lowered
// to the number of distinct values they have, and whether any was (Karpenter's scheduler writes
// the same count back as the requirement's minValues and marks the NodeClaim relaxed when one
// is lower than the NodePool's). Under Strict, placement never leaves such a claim, and reqs
// is returned as it is. The requirements are copied, never changed in place: the pool's are
// shared.
func relaxedMinValues(pl *pool, reqs scheduling.Requirements, types []int) (scheduling.Requirements, bool) {
	counts := minValuesCounts(pl, types)
	var out scheduling.Requirements
	for i, r := range pl.minValues {
		cur := reqs[r.Key]
		if cur == nil || cur.MinValues == nil || counts[i] >= *cur.MinValues {
			continue
		}
		if out == nil {
			out = make(scheduling.Requirements, len(reqs))
			for k, v := range reqs {
				out[k] = v
			}
		}
		lowered := *cur
		n := counts[i]
		lowered.MinValues = &n
		out[r.Key] = &lowered
	}
	if out == nil {
		return reqs, false
	}
	return out, true
}

// withinPriceCap keeps, for a pool with a price guardrail or a PricePerHour rate policy, only the
// offerings no dearer than what the claim counts against them (the dearest offering of its
// cheapest type), so whatever the fleet picks, the pool's price stays within them.
func withinPriceCap(pl *pool, c *claim, offs []Offering) []Offering {
	if (!pl.priceCapped && !pl.scaleUp.price) || len(c.types) == 0 {
		return offs
	}
	capacity := pl.types[c.types[0]].capacity
	counted := float64(max(capacity.Scalar[ResourcePricePerHour], capacity.Scalar[ResourceScaleUpPricePerHour])) / 1e6
	out := make([]Offering, 0, len(offs))
	for _, o := range offs {
		if o.PricePerHour <= counted {
			out = append(out, o)
		}
	}
	return out
}

// claimPlan renders a claim with its ranked offerings.
func (s *solver) claimPlan(c *claim, offs []Offering) *NodeClaimPlan {
	pl := c.pool
	labels := map[string]string{}
	for k, v := range pl.labels {
		labels[k] = v
	}
	for _, k := range c.reqs.Keys() {
		if v, ok := c.reqs[k].Single(); ok && !offeringKeys[k] && (isTypeKey(k) || pl.reqs[k] != nil || pl.aliases[k] != nil) {
			labels[k] = v
		}
	}
	pods := make([]*corev1.Pod, len(c.pods))
	for i, p := range c.pods {
		pods[i] = p.pod
	}
	offs = withinPriceCap(pl, c, offs)
	return &NodeClaimPlan{
		NodePool:      pl.np,
		NodeClassRef:  pl.np.Spec.Template.Spec.NodeClassRef,
		Requirements:  c.reqs,
		Labels:        labels,
		Taints:        pl.np.Spec.Template.Spec.Taints,
		StartupTaints: pl.np.Spec.Template.Spec.StartupTaints,
		Pods:          pods,
		Requests:      c.requests,
		Offerings:     offs,
	}
}

// offeringKey identifies a ranked offering list: the pool, the zone and capacity-type
// requirements and the candidate types.
func offeringKey(pl *pool, zr, cr *scheduling.Requirement, types []int) string {
	var b strings.Builder
	b.Grow(16 + 3*len(types))
	b.WriteString(strconv.Itoa(pl.index))
	b.WriteByte('|')
	writeReqKey(&b, zr)
	b.WriteByte('|')
	writeReqKey(&b, cr)
	b.WriteByte('|')
	for _, ti := range types {
		b.WriteByte(byte(ti))
		b.WriteByte(byte(ti >> 8))
		b.WriteByte(byte(ti >> 16))
	}
	return b.String()
}

// writeReqKey spells a zone or capacity-type requirement for offeringKey: "=value" when it allows
// one value (most claims are pinned to one; String formats and sorts), else its String, which
// starts with the key and so never with '='.
func writeReqKey(b *strings.Builder, r *scheduling.Requirement) {
	if r == nil {
		return
	}
	if v, ok := r.Single(); ok {
		b.WriteByte('=')
		b.WriteString(v)
		return
	}
	b.WriteString(r.String())
}

// rankedOfferings returns every offering of the candidate types that the zone and
// capacity-type requirements allow, cheapest first, keeping the MaxInstanceTypes types whose
// cheapest allowed offering is cheapest (ties by name). Results are cached per solve: claims
// with the same candidates share one list, which callers must not modify in place.
func (s *solver) rankedOfferings(pl *pool, reqs scheduling.Requirements, types []int) []Offering {
	zr, cr := reqs[corev1.LabelTopologyZone], reqs[apisv1.LabelCapacityType]
	key := offeringKey(pl, zr, cr, types)
	if offs, ok := s.offerCache[key]; ok {
		return offs
	}
	allowed := func(o catalog.Offering) bool {
		return (zr == nil || zr.Has(o.Zone)) && (cr == nil || cr.Has(o.CapacityType))
	}
	type ranked struct {
		ti    int
		price float64
	}
	rs := make([]ranked, 0, len(types))
	for _, ti := range types {
		for _, o := range pl.types[ti].offerings { // sorted by price
			if allowed(o) {
				rs = append(rs, ranked{ti, o.PricePerHour})
				break
			}
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].price != rs[j].price {
			return rs[i].price < rs[j].price
		}
		return pl.types[rs[i].ti].it.Name < pl.types[rs[j].ti].it.Name
	})
	if len(rs) > MaxInstanceTypes {
		rs = rs[:MaxInstanceTypes]
	}
	n := 0
	for _, r := range rs {
		n += len(pl.types[r.ti].offerings)
	}
	offs := make([]Offering, 0, n)
	for _, r := range rs {
		t := pl.types[r.ti]
		for _, o := range t.offerings {
			if allowed(o) {
				offs = append(offs, Offering{InstanceType: t.it, Offering: o, DaemonOverhead: t.daemon})
			}
		}
	}
	sort.SliceStable(offs, func(i, j int) bool {
		a, b := offs[i], offs[j]
		if a.PricePerHour != b.PricePerHour {
			return a.PricePerHour < b.PricePerHour
		}
		if a.InstanceType.Name != b.InstanceType.Name {
			return a.InstanceType.Name < b.InstanceType.Name
		}
		if a.CapacityType != b.CapacityType {
			return a.CapacityType == apisv1.CapacityTypeSpot
		}
		return a.Zone < b.Zone
	})
	s.offerCache[key] = offs
	return offs
}
