package provisioning

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// seedTopology registers running pods' required anti-affinity and counts every running pod in
// the groups that select it. Pending pods' groups exist already (compilePod creates them).
func (s *solver) seedTopology() {
	anti := make([][][]constraint, len(s.bins))
	for i, b := range s.bins {
		anti[i] = make([][]constraint, len(b.residents))
		for j, r := range b.residents {
			if r.Spec.Affinity == nil || r.Spec.Affinity.PodAntiAffinity == nil || len(r.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
				continue
			}
			only := r.DeepCopy()
			only.Spec.TopologySpreadConstraints = nil
			only.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: r.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
			cons, err := s.topo.compileConstraints(only, false)
			if err == nil {
				anti[i][j] = cons
			}
		}
	}
	for i, b := range s.bins {
		for j, r := range b.residents {
			s.topo.record(r, anti[i][j], b, b.domainOf)
		}
	}
}

// eligibleDomains are the values of the constraint's key a pod could land in: the labels of
// existing nodes (those matching the pod's node affinity when the spread honours it, and whose
// taints it tolerates when it honours those), and every value the NodePools that can take the
// pod could launch into for it — so empty domains count, as kube-scheduler counts empty zones
// that have nodes, and Karpenter counts zones it could create nodes in.
//
// The policies widen the existing nodes only. kube-scheduler knows nodes, not NodePools: a
// domain with no node is no domain to it until a node is there, and the plan opens a node for
// this pod only where the pod's own affinity and tolerations let it. Counting the zones of a
// pool whose taint the pod does not tolerate (nodeTaintsPolicy Ignore, the default) or that its
// node affinity excludes (nodeAffinityPolicy Ignore) held a minimum of 0 there that no node
// would ever raise, and left pods pending that kube-scheduler binds (seen with the real
// scheduler in e2e/scenarios_test.go; the public reports aws/karpenter-provider-aws#8637 and
// kubernetes-sigs/karpenter#2623 are this rule in Karpenter).
//
// With binsOnly, only the existing nodes' domains (and those of in-flight NodeClaims, nodes by
// the time a pod can land): what kube-scheduler counts when it places a pending pod on a node
// there is now. It binds such a pod at once, before any new node is up, so a placement on an
// existing node is judged by those domains alone.
func (s *solver) eligibleDomains(p *podInfo, c *constraint, binsOnly bool) []string {
	id := eligibleKey{sig: p.sig, key: c.g.key, honorAffinity: c.honorAffinity, honorTaints: c.honorTaints, binsOnly: binsOnly}
	if d, ok := s.eligible[id]; ok {
		return d
	}
	key := c.g.key
	set := map[string]bool{}
	for _, d := range s.binsByDomain(key) {
		for _, b := range d.bins { // a domain is eligible once one of its bins is
			if c.honorAffinity && !matchesAnyAlt(p.alts, b.labels) {
				continue
			}
			if c.honorTaints && p.untolerated(b.taints) != nil {
				continue
			}
			set[d.val] = true
			break
		}
	}
	for i, pl := range s.pools {
		if pl.err != nil || binsOnly {
			continue
		}
		pp := s.compatibility(i, p)
		if pp.reason != "" {
			continue // the pool opens no node for this pod: its domains stay empty
		}
		for _, ac := range pp.alts {
			if !ac.any {
				continue
			}
			r := pl.reqs.Intersect(ac.reqs)[key]
			switch {
			case pl.isZoneLabel(key) || offeringKeys[key]:
				pl.offerDomains(s, key, ac.types, r, set)
			case isTypeKey(key):
				for ti, t := range pl.types {
					if ac.types[ti] && t.it.Labels[key] != "" {
						set[t.it.Labels[key]] = true
					}
				}
			case r != nil:
				for _, v := range r.Values() {
					set[v] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	s.eligible[id] = out
	return out
}

// domainBins are the bins holding one value of a topology key.
type domainBins struct {
	val  string
	bins []*bin
}

// binsByDomain returns the solver's bins grouped by their value of key (bins without the label
// left out), in the bins' order within a value, computed once per key: eligibleDomains asks, for
// each pod signature, which values hold a bin the pod may use, and the first such bin of a value
// answers for it, where walking every bin looked up the label of each (a few hundred nodes for a
// zone key's few values, once per signature: make scale at 10,000 pods).
func (s *solver) binsByDomain(key string) []domainBins {
	if d, ok := s.binDomains[key]; ok {
		return d
	}
	var out []domainBins
	at := map[string]int{}
	for _, b := range s.bins {
		v := b.labels[key]
		if v == "" {
			continue
		}
		i, ok := at[v]
		if !ok {
			i = len(out)
			at[v] = i
			out = append(out, domainBins{val: v})
		}
		out[i].bins = append(out[i].bins, b)
	}
	if s.binDomains == nil {
		s.binDomains = map[string][]domainBins{}
	}
	s.binDomains[key] = out
	return out
}

// offerDomains adds to set the values of key (a zone label, or one of offeringKeys) that the
// offerings of the pool's types marked in types give and r allows (nil: any). Up to 64 (zone,
// capacity type) pairs in the pool it reads the union of the types' bits (poolType.offers), not
// each offering: a pool's types number in the hundreds with a dozen offerings each, but its pairs
// a few dozen, and make scale at 10,000 pods spent most of its solving time adding the same few
// zones to set once per offering (docs/scale.md, "Ninth pass"); past 64 it walks the offerings.
func (pl *pool) offerDomains(s *solver, key string, types []bool, r *scheduling.Requirement, set map[string]bool) {
	add := func(zone, capacityType string) {
		if v, ok := pl.offerDomain(s, key, zone, capacityType); ok && (r == nil || r.Has(v)) {
			set[v] = true
		}
	}
	if len(pl.offerKeys) > 64 {
		for ti, t := range pl.types {
			if types[ti] {
				for _, o := range t.offerings {
					add(o.Zone, o.CapacityType)
				}
			}
		}
		return
	}
	var m uint64
	for ti, t := range pl.types {
		if types[ti] {
			m |= t.offers
		}
	}
	for b, k := range pl.offerKeys {
		if m&(1<<b) != 0 {
			add(k[0], k[1])
		}
	}
}

// offerDomain is the value of key (a zone label, or one of offeringKeys) on a node of an
// offering in zone with capacityType; false for a zone label the zone has no value of.
func (pl *pool) offerDomain(s *solver, key, zone, capacityType string) (string, bool) {
	switch {
	case pl.isZoneLabel(key):
		v := pl.zoneLabelOf(key, zone)
		return v, v != ""
	case key == apisv1.LabelCapacityType:
		return capacityType, true
	case key == corev1.LabelTopologyRegion:
		return s.in.Catalog.Region, true
	}
	return zone, true
}

// eligibleKey identifies what eligibleDomains computes from (a struct, not a concatenated string:
// it is looked up once per spread constraint per placement attempt).
type eligibleKey struct {
	sig, key                             string
	honorAffinity, honorTaints, binsOnly bool
}

func matchesAnyAlt(alts []scheduling.Requirements, labels map[string]string) bool {
	for _, a := range alts {
		if a.MatchLabels(labels) == nil {
			return true
		}
	}
	return false
}

// prepare computes the pod's topology views for one placement attempt.
func (s *solver) prepare(p *podInfo) {
	p.views = p.views[:0]
	for i := range p.active {
		c := &p.active[i]
		if c.g.key == corev1.LabelHostname {
			continue
		}
		vals, exclude, all := c.allowedDomains(p.pod, s.eligibleFor(p, c, false))
		v := domainView{c: c, vals: vals, exclude: exclude, all: all, binVals: vals}
		if c.kind == kindSpread {
			v.binVals, _, _ = c.allowedDomains(p.pod, s.eligibleFor(p, c, true))
		}
		p.views = append(p.views, v)
	}
	p.inv = nil
	if s.topo.anyAnti {
		p.inv = s.topo.inverseAnti(s.groupsOf(p))
	}
	p.invHost = p.invHost[:0]
	for _, g := range s.groupsOf(p) {
		if g.hasAnti && g.key == corev1.LabelHostname {
			p.invHost = append(p.invHost, g)
		}
	}
}

// topologyAllowsBin checks the pod's topology constraints against an existing node's domains.
func (s *solver) topologyAllowsBin(p *podInfo, b *bin) bool {
	if len(p.active) == 0 && p.inv == nil && len(p.invHost) == 0 {
		return true
	}
	if !hostCheck(p.pod, p.active, p.invHost, b) {
		return false
	}
	for _, v := range p.views {
		d := b.labels[v.c.g.key]
		switch {
		case v.all:
		case v.binVals != nil:
			if d == "" || !v.binVals[d] {
				return false
			}
		case d != "" && v.exclude[d]:
			return false
		}
	}
	for key, ds := range p.inv {
		if d := b.labels[key]; d != "" && ds[d] {
			return false
		}
	}
	return true
}

// eligibleDomainsAny returns the eligible domains of any constraint's key (spread semantics:
// node affinity honoured), for explanations.
func (s *solver) eligibleDomainsAny(p *podInfo, c *constraint) []string {
	cc := *c
	cc.honorAffinity, cc.honorTaints = true, false
	return s.eligibleDomains(p, &cc, false)
}

// eligibleFor returns eligible domains for spread constraints (others do not need them).
func (s *solver) eligibleFor(p *podInfo, c *constraint, binsOnly bool) []string {
	if c.kind != kindSpread {
		return nil
	}
	return s.eligibleDomains(p, c, binsOnly)
}

// topologyRequirements turns the pod's non-hostname topology constraints into requirements on
// the claim: a spread picks the domains with the fewest matching pods among those the claim can
// still take; affinity keeps the domains holding matching pods; anti-affinity excludes them (and
// the domains of running pods whose anti-affinity selects this pod).
func (s *solver) topologyRequirements(p *podInfo, c *claim) (scheduling.Requirements, bool) {
	if decided, ok := pinnedVerdict(p, c); decided {
		return nil, ok
	}
	var out scheduling.Requirements
	add := func(r *scheduling.Requirement) {
		if out == nil {
			out = scheduling.Requirements{}
		}
		out.Add(r)
	}
	for _, v := range p.views {
		con, vals, exclude, all := v.c, v.vals, v.exclude, v.all
		key := con.g.key
		switch {
		case all:
		case con.kind == kindSpread:
			cur := c.reqs[key]
			best := -1
			var pick []string
			for d := range vals {
				if cur != nil && !cur.Has(d) {
					continue
				}
				n := con.g.domains[d]
				switch {
				case best < 0 || n < best:
					best, pick = n, []string{d}
				case n == best:
					pick = append(pick, d)
				}
			}
			if len(pick) == 0 {
				return nil, false
			}
			add(scheduling.MustRequirement(key, corev1.NodeSelectorOpIn, pick...))
		case vals != nil:
			if len(vals) == 0 {
				return nil, false
			}
			add(requirementFor(key, vals, nil))
		case len(exclude) > 0:
			add(requirementFor(key, nil, exclude))
		}
	}
	for key, ds := range p.inv {
		add(requirementFor(key, nil, ds))
	}
	return out, true
}

// pinnedVerdict decides the pod's topology on the claim from the domains the claim is pinned to
// (a single value) alone, when it can, so the requirements below need not be built:
//
//   - a restriction that refuses the value the claim is pinned to refuses the claim: a spread
//     finds no domain to pick, and any other requirement, intersected with the pinned value, is
//     unsatisfiable (a single value never allows absence), which tryAdd rejects;
//   - when the claim is pinned on every restricted key to a value each restriction allows, the
//     requirements would not narrow the claim's (tryAdd drops them).
//
// Most tries of topology-constrained pods meet such claims. decided false means "build them".
func pinnedVerdict(p *podInfo, c *claim) (decided, ok bool) {
	unpinned := false
	for i := range p.views {
		v := &p.views[i]
		if v.all {
			continue
		}
		d := c.domainOf(v.c.g.key)
		switch {
		case d == "":
			unpinned = true
		case v.c.kind == kindSpread || v.vals != nil:
			if !v.vals[d] {
				return true, false
			}
		case v.exclude[d]:
			return true, false
		}
	}
	for key, ds := range p.inv {
		switch d := c.domainOf(key); {
		case d == "":
			unpinned = true
		case ds[d]:
			return true, false
		}
	}
	return !unpinned, !unpinned
}

// pin fixes the claim's domain for each key, so the pods on it are counted in one domain: the
// zone and capacity type of its cheapest offering, or the first value a finite requirement allows.
func (s *solver) pin(c *claim, keys []string) {
	pl := c.pool
	for _, key := range keys {
		if c.domainOf(key) != "" {
			continue
		}
		var v string
		switch {
		case offeringKeys[key] || pl.isZoneLabel(key):
			zr, cr := c.reqs[corev1.LabelTopologyZone], c.reqs[apisv1.LabelCapacityType]
			want, byMask := pl.offerMask(c.reqs) // a bit test per offering instead of two lookups
			best := -1.0
			for _, ti := range c.types {
				if !s.usable(c, ti) {
					continue
				}
				t := pl.types[ti]
				for i, o := range t.offerings {
					var allowed bool
					if byMask && t.offerBit[i] < 64 {
						allowed = want&(1<<t.offerBit[i]) != 0
					} else {
						allowed = (zr == nil || zr.Has(o.Zone)) && (cr == nil || cr.Has(o.CapacityType))
					}
					if pl.isZoneLabel(key) && pl.zoneLabelOf(key, o.Zone) == "" {
						allowed = false // a zone without the label is no domain of it
					}
					if allowed && (best < 0 || o.PricePerHour < best) {
						best = o.PricePerHour
						switch key {
						case corev1.LabelTopologyZone:
							v = o.Zone
						case apisv1.LabelCapacityType:
							v = o.CapacityType
						case corev1.LabelTopologyRegion:
							v = s.in.Catalog.Region
						default:
							v = pl.zoneLabelOf(key, o.Zone)
						}
					}
				}
			}
		default:
			if r := c.reqs[key]; r != nil {
				if vals := r.Values(); len(vals) > 0 {
					v = vals[0]
				}
			}
		}
		if v == "" {
			// A complement requirement cannot be pinned; the key stays uncounted. Should a later
			// pod fix it, the counts of the pods before would not match the claim's domain, so
			// the claim is never re-packed (which takes its pods out of the counts).
			c.pinFailed = true
			continue
		}
		s.pinTo(c, key, v)
	}
}

// pinTo restricts the claim to value v of key, dropping the candidate types that no longer
// qualify.
func (s *solver) pinTo(c *claim, key, v string) {
	pl := c.pool
	c.reqs = pl.withZones(c.reqs.Intersect(scheduling.Requirements{key: scheduling.MustRequirement(key, corev1.NodeSelectorOpIn, v)}))
	offering := offeringKeys[key] || pl.isZoneLabel(key)
	if !offering && !isTypeKey(key) {
		return
	}
	want, byMask := pl.offerMask(c.reqs) // hasOffering as one bit test per type
	kept := make([]int, 0, len(c.types))
	for _, ti := range c.types {
		t := pl.types[ti]
		if !s.usable(c, ti) {
			continue
		}
		switch {
		case offering && byMask:
			if t.offers&want == 0 {
				continue
			}
		case offering:
			if !hasOffering(t, c.reqs) {
				continue
			}
		case !typeMatches(c.reqs, t.it):
			continue
		}
		kept = append(kept, ti)
	}
	if c.limits != nil && len(kept) > 0 && len(c.types) > 0 && kept[0] != c.types[0] {
		c.limits.committed = c.limits.committed.Sub(pl.types[c.types[0]].capacity).Add(pl.types[kept[0]].capacity)
	}
	c.types, c.sharedTypes = kept, false
	c.maxOK = false
	s.hold(c)
}

// domainPins returns the claim's value for every non-hostname key a topology group counts by
// (the domains a re-packing of its pods must keep, so every count stays where it was).
func (s *solver) domainPins(c *claim) [][2]string {
	var out [][2]string
	seen := map[string]bool{}
	for _, g := range s.topo.list {
		if g.key == corev1.LabelHostname || seen[g.key] {
			continue
		}
		seen[g.key] = true
		if v := c.domainOf(g.key); v != "" {
			out = append(out, [2]string{g.key, v})
		}
	}
	return out
}

// forget takes the pods placed on the claims out of the topology counts (the inverse of
// placed's recording).
func (s *solver) forget(cs ...*claim) {
	for _, c := range cs {
		for _, p := range c.pods {
			s.topo.unrecordGroups(s.groupsOf(p), p.active, c, c.domainOf)
		}
	}
}

// remember puts the claims' pods back into the topology counts.
func (s *solver) remember(cs ...*claim) {
	for _, c := range cs {
		for _, p := range c.pods {
			s.topo.recordGroups(s.groupsOf(p), p.active, c, c.domainOf)
		}
	}
}
