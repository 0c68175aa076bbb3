package provisioning

import (
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// claim is a NodeClaim being packed.
type claim struct {
	pool *pool
	// limits are what the claim counts against: its pool's for a claim placement opens, nil for
	// refine's trial claims (see limits).
	limits   *limits
	reqs     scheduling.Requirements
	pods     []*podInfo
	requests scheduling.Resources
	types    []int // candidate indices into pool.types, cheapest first
	// head is the most room any candidate type has left (per component), so pods that cannot
	// fit are rejected without touching the candidate list.
	head scheduling.Resources
	// topo is set once a pod that topology counts is on the claim: refine must not move it.
	topo  bool
	ports []scheduling.HostPort
	// slot is the claim's position + 1 in the solver's claimIndex (0: not indexed).
	slot int
	// held is the capacity reservation a claim of a reserved pool holds an instance of (that of
	// its cheapest type), else "".
	held string
	// maxAvail is the most room (CPU, memory, pods) of the candidate types when maxOK.
	maxAvail scheduling.Resources
	maxOK    bool
	// sharedTypes: types is (a suffix of) the pool's list of every type, which nobody may
	// write; commit copies it first.
	sharedTypes bool
	// pinFailed: a key some group counts pods by could not be pinned when a pod landed (see pin).
	pinFailed bool
}

// fits reports whether candidate type ti holds the claim's pods. The candidate list may keep
// types that no longer do (see tryAdd's fast path); its first type always does.
func (c *claim) fits(ti int) bool { return c.requests.Fits(c.pool.types[ti].avail) }

// domainOf is the claim's value for a topology key: its requirement's single value, or "".
func (c *claim) domainOf(key string) string {
	if r := c.reqs[key]; r != nil {
		if v, ok := r.Single(); ok {
			return v
		}
	}
	return ""
}

// updateHead recomputes the claim's headroom over its candidate types. The most room any
// candidate offers (maxAvail) is recomputed only after the list was replaced (maxOK false);
// the fast path of tryAdd only drops types, so a kept maximum can only overestimate, which
// the head allows (it is a filter; tryAdd decides).
func (c *claim) updateHead() {
	if !c.maxOK {
		var h scheduling.Resources
		for i, ti := range c.types {
			a := c.pool.types[ti].avail
			if i == 0 || a.MilliCPU > h.MilliCPU {
				h.MilliCPU = a.MilliCPU
			}
			if i == 0 || a.Memory > h.Memory {
				h.Memory = a.Memory
			}
			if i == 0 || a.Pods > h.Pods {
				h.Pods = a.Pods
			}
		}
		c.maxAvail, c.maxOK = h, true
	}
	h := c.maxAvail
	h.MilliCPU -= c.requests.MilliCPU
	h.Memory -= c.requests.Memory
	h.Pods -= c.requests.Pods
	c.head = h
}

// tryAdd adds p to c when some candidate instance type still fits all of c's pods and p, and
// the pod's topology constraints allow one of the claim's domains.
func (s *solver) tryAdd(c *claim, p *podInfo) bool {
	if len(c.pods) > 0 && (p.requests.MilliCPU > c.head.MilliCPU || p.requests.Memory > c.head.Memory || p.requests.Pods > c.head.Pods) {
		return false
	}
	// A new node opened for accelerator pods takes no pod that needs none: GPU and ML types are
	// chosen only for pods that need them, and a passenger would pin the accelerator pods to
	// one large node instead of the cheaper split the refine step finds.
	if len(c.pods) > 0 && needsSpecial(c.requests) && !needsSpecial(p.requests) {
		return false
	}
	// A reserved claim often keeps types whose reservation other claims have taken up: a pod
	// only they could hold is refused here, before its topology requirements are built (the
	// type loop below would keep none of them).
	if c.pool.reserved && !s.reservedRoom(c, p) {
		return false
	}
	pp := s.compatibility(c.pool.index, p)
	if pp.reason != "" {
		return false
	}
	if len(p.ports) > 0 && scheduling.PortsConflict(p.ports, c.ports) {
		return false
	}
	if !hostCheck(p.pod, p.active, p.invHost, c) {
		return false
	}
	topoReqs, ok := s.topologyRequirements(p, c)
	if !ok {
		return false
	}
	if len(topoReqs) > 0 && !narrows(c.reqs, topoReqs) {
		topoReqs = nil // the claim is already pinned to a domain the pod's topology allows
	}
	topoReqs = c.pool.withZones(topoReqs) // a domain of a zone label is the zones that have it
	if len(c.pods) > 0 && !p.requests.FitsAfter(c.requests, c.pool.types[c.types[0]].avail) && len(c.types) == 1 {
		return false
	}
	if s.fastAdd(c, p, pp, topoReqs) {
		return true
	}
	for _, ac := range pp.alts {
		if !ac.any {
			continue
		}
		merged := c.reqs
		if len(ac.reqs) > 0 {
			merged = c.reqs.Intersect(ac.reqs)
			if merged.Unsatisfiable() != nil {
				continue
			}
		}
		zoneCT := ac.zoneCT
		checkTypes := false
		if len(topoReqs) > 0 {
			merged = merged.Intersect(topoReqs)
			if merged.Unsatisfiable() != nil {
				continue
			}
			for k := range topoReqs {
				if offeringKeys[k] {
					zoneCT = true
				} else if isTypeKey(k) {
					checkTypes = true
				}
			}
		}
		kept := s.scratch[:0]
		want, byMask := c.pool.offerMask(merged)
		for _, ti := range c.types {
			t := c.pool.types[ti]
			if !ac.types[ti] || !p.requests.FitsAfter(c.requests, t.avail) {
				continue
			}
			if zoneCT && ((byMask && t.offers&want == 0) || (!byMask && !hasOffering(t, merged))) {
				continue
			}
			if checkTypes && !typeMatches(topoReqs, t.it) {
				continue
			}
			if len(p.ports) > 0 && scheduling.PortsConflict(p.ports, t.daemonPorts) {
				continue // a DaemonSet running on this type binds the same host port
			}
			if !s.usable(c, ti) {
				continue // another claim holds the reservation's last free instance
			}
			kept = append(kept, ti)
		}
		s.scratch = kept
		kept = c.limits.within(c, kept)
		// Under BestEffort a claim whose types no longer keep minValues is made all the same;
		// finalize lowers the minValues it records (Karpenter's relaxMinValues in CanAdd).
		if len(kept) == 0 || (!s.in.Policies.bestEffort() && !meetsMinValues(c.pool, kept)) {
			continue
		}
		s.commit(c, kept)
		c.reqs = merged
		c.ports = append(c.ports, p.ports...)
		s.placed(c, p)
		return true
	}
	return false
}

// placed records p on c once its candidate types and requirements are settled: requests,
// topology (pinning the claim's domains when a group counts the pod), head and index.
func (s *solver) placed(c *claim, p *podInfo) {
	c.requests = c.requests.Add(p.requests)
	c.pods = append(c.pods, p)
	if len(p.active) > 0 || s.counted(p) {
		c.topo = true
		if !p.keysSet {
			p.keys, p.keysSet = s.topo.countedKeys(s.groupsOf(p), p.active), true
		}
		s.pin(c, p.keys)
	}
	s.topo.recordGroups(s.groupsOf(p), p.active, c, c.domainOf)
	c.updateHead()
	s.index.update(c)
}

// narrows reports whether adding reqs to the requirements cur would change them: some key of
// reqs is not already fixed in cur to one value that reqs allows.
func narrows(cur, reqs scheduling.Requirements) bool {
	for k, r := range reqs {
		c := cur[k]
		if c == nil {
			return true
		}
		if v, ok := c.Single(); !ok || !r.Has(v) {
			return true
		}
	}
	return false
}

// fastAdd is tryAdd for the common case where the pod narrows nothing: one alternative that
// allows every pool type and adds no requirement, no topology requirement that changes the
// claim's, no host ports, a claim that counts against no limits, a pool without minValues.
// Candidate types only drop out because the pods no longer fit, and types are sorted by price,
// so it is enough to drop the types ahead of the first one that still fits (later ones that no
// longer fit stay in the list, and are skipped wherever the list is read). It reports false
// when the slow path must decide.
func (s *solver) fastAdd(c *claim, p *podInfo, pp *podPool, topoReqs scheduling.Requirements) bool {
	pl := c.pool
	if len(pp.alts) != 1 || !pp.alts[0].all || len(pp.alts[0].reqs) != 0 || len(topoReqs) != 0 ||
		len(p.ports) > 0 || c.limits != nil || len(pl.minValues) > 0 || len(c.types) == 0 || pl.reserved {
		return false
	}
	i := 0
	for i < len(c.types) && !p.requests.FitsAfter(c.requests, pl.types[c.types[i]].avail) {
		i++
	}
	if i == len(c.types) {
		return false
	}
	c.types = c.types[i:]
	s.placed(c, p)
	return true
}

// counted reports whether some topology group counts the pod.
func (s *solver) counted(p *podInfo) bool { return len(s.groupsOf(p)) > 0 }

// groupsOf returns (once per pod: groups are all made before placement starts) the topology
// groups that count the pod.
func (s *solver) groupsOf(p *podInfo) []*group {
	if !p.groupsSet {
		p.groups, p.groupsSet = s.topo.matching(p.pod), true
	}
	return p.groups
}

// commit records the claim's new cheapest type against the limits it counts against.
func (s *solver) commit(c *claim, kept []int) {
	if c.limits != nil {
		c.limits.recount(c, kept[0])
	}
	// kept is a subsequence of c.types in the solver's scratch buffer; c.types owns its array
	// unless it is still the pool's shared list.
	if c.sharedTypes {
		c.types, c.sharedTypes = append(make([]int, 0, len(kept)), kept...), false
	} else {
		c.types = append(c.types[:0], kept...)
	}
	c.maxOK = false
	s.hold(c)
}

// meetsMinValues checks the pool's minValues over the candidate types' label values.
func meetsMinValues(pl *pool, kept []int) bool {
	for i, n := range minValuesCounts(pl, kept) {
		if n < *pl.minValues[i].MinValues {
			return false
		}
	}
	return true
}

// minValuesCounts returns, per requirement of pl.minValues, how many distinct values of its key
// the types have: a type label's values, or for zone and capacity type those of the types'
// offerings (Karpenter's InstanceTypes.SatisfiesMinValues counts the same).
func minValuesCounts(pl *pool, types []int) []int {
	out := make([]int, len(pl.minValues))
	for i, r := range pl.minValues {
		seen := map[string]bool{}
		for _, ti := range types {
			if v, ok := pl.types[ti].it.Labels[r.Key]; ok {
				seen[v] = true
			} else if r.Key == apisv1.LabelCapacityType || r.Key == corev1.LabelTopologyZone {
				for _, o := range pl.types[ti].offerings {
					if r.Key == apisv1.LabelCapacityType {
						seen[o.CapacityType] = true
					} else {
						seen[o.Zone] = true
					}
				}
			}
		}
		out[i] = len(seen)
	}
	return out
}

func needsSpecial(r scheduling.Resources) bool {
	for k, v := range r.Scalar {
		if v > 0 && acceleratorResources[k] {
			return true
		}
	}
	return false
}
