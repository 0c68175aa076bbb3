package provisioning

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// altCompat is one node-affinity alternative of a pod against one pool.
type altCompat struct {
	reqs   scheduling.Requirements // the pod's own requirements of this alternative
	types  []bool                  // per pool type: labels compatible and an offering remains
	zoneCT bool                    // the alternative constrains zone or capacity type
	any    bool
	all    bool // every pool type is compatible
}

// podPool is a pod signature's compatibility with one pool.
type podPool struct {
	alts   []altCompat
	reason string // why the pool cannot take the pod at all
	// taintOnly: the pool's taints are the only obstacle (the alternatives are still valid).
	taintOnly bool
}

// claim is a NodeClaim being packed.
type claim struct {
	pool     *pool
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

// bin is an existing node or in-flight NodeClaim with free capacity.
type bin struct {
	name     string
	inFlight bool
	labels   map[string]string
	taints   []corev1.Taint
	free     scheduling.Resources
	pods     []*corev1.Pod // placed by this plan
	// residents are the pods running on the node (seeded into the topology counts).
	residents []*corev1.Pod
	ports     []scheduling.HostPort
}

// domainOf is the bin's value for a topology key ("" when the node lacks the label).
func (b *bin) domainOf(key string) string { return b.labels[key] }

func (b *bin) addResident(p *corev1.Pod) { b.residents = append(b.residents, p) }

type solver struct {
	in     *Input
	pools  []*pool
	compat []map[string]*podPool // per pool: signature → compatibility
	claims []*claim
	bins   []*bin
	topo   *topology
	// eligible caches spread domains per (pod signature, key, policies).
	eligible map[eligibleKey][]string
	// scratch is tryAdd's buffer for the candidate types that remain.
	scratch []int
	// index finds open claims with room during first-fit.
	index claimIndex
	// offerCache holds ranked offering lists by offeringKey.
	offerCache map[string][]Offering
	// left counts each capacity reservation's free instances as claims take them.
	left map[string]int
	// unitRates caches splitFloor's lowest prices per millicore and per byte by (pool, cap).
	unitRates map[[2]int64][2]float64
	// topoRefineLeft is what is left of topoRefineBudget.
	topoRefineLeft int
}

// Solve places the pending pods: on existing nodes' free capacity first, then in-flight
// NodeClaims, then open NodeClaims, then new NodeClaims from the highest-weight NodePool that
// can take them. Pods are packed first-fit in decreasing order of CPU then memory (the order
// Karpenter uses), and each NodeClaim finally gets every offering that fits its pods, cheapest
// first. It returns an error only for an unusable input (no catalog).
func Solve(in Input) (*Plan, error) {
	if in.Catalog == nil {
		return nil, fmt.Errorf("input.catalog: required")
	}
	s := &solver{in: &in, topo: newTopology(), eligible: map[eligibleKey][]string{}, offerCache: map[string][]Offering{}}
	daemons := compileDaemons(in.DaemonSets, in.LimitRanges)
	s.bins = buildBins(&in, daemons)
	s.left = reservationsLeft(&in)
	s.pools = compilePools(&in, daemons, usedByPool(&in), s.left)
	s.compat = make([]map[string]*podPool, len(s.pools))
	for i := range s.compat {
		s.compat[i] = map[string]*podPool{}
	}
	vols := newVolumeIndex(&in)
	pods := make([]*podInfo, 0, len(in.Pods))
	infos := make([]podInfo, len(in.Pods)) // one allocation for all of them
	for i, pod := range in.Pods {
		pods = append(pods, compilePod(&infos[i], pod, s.topo, vols))
	}
	sortPods(pods)
	s.seedTopology()
	// Every topology group exists now. Find the groups counting each pod in input order, the
	// order the pods (and their labels) usually sit in memory: placement order would jump
	// between them and miss the cache on nearly every pod's labels.
	for i := range infos {
		s.groupsOf(&infos[i])
	}
	plan := &Plan{}
	// Pods an earlier decision placed on capacity that is still coming (or has just come) go
	// there first, so a re-plan keeps the plan instead of repacking around it and launching more.
	planned := plannedBins(&in, s.bins)
	rest := pods[:0:0]
	for _, p := range pods {
		if p.err != nil {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: p.pod, Reason: p.err.Error()})
			continue
		}
		if b := planned[p.key]; b != nil {
			s.prepare(p)
			if s.placeOn(p, b) {
				continue
			}
		}
		rest = append(rest, p)
	}
	for _, p := range rest {
		for {
			s.prepare(p)
			if s.placeOnBin(p) || s.placeOnClaim(p) {
				break
			}
			reason, awaiting := s.openClaim(p)
			if reason == "" {
				break
			}
			if !p.canRelax() {
				plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: p.pod, Reason: reason, AwaitingNodeClasses: awaiting})
				break
			}
			p.relax()
		}
	}
	s.topoRefineLeft = topoRefineBudget(len(in.Pods))
	s.refine()
	s.lpRepack()
	if !in.Simulation {
		s.patternPack()
		s.improve()
	}
	for _, b := range s.bins {
		if len(b.pods) > 0 {
			plan.ExistingNodes = append(plan.ExistingNodes, &NodePlacement{Name: b.name, InFlight: b.inFlight, Pods: b.pods})
		}
	}
	for _, c := range s.claims {
		plan.NodeClaims = append(plan.NodeClaims, s.finalize(c))
	}
	if !in.Simulation {
		plan.LowerBoundPerHour = s.lowerBound()
	}
	sort.SliceStable(plan.Unschedulable, func(i, j int) bool {
		return podKey(plan.Unschedulable[i].Pod) < podKey(plan.Unschedulable[j].Pod)
	})
	return plan, nil
}

func podKey(p *corev1.Pod) string {
	ns := p.Namespace
	if ns == "" {
		ns = corev1.NamespaceDefault
	}
	return ns + "/" + p.Name
}

// sortPods orders pods for first-fit-decreasing: CPU, then memory, descending; then name.
func sortPods(out []*podInfo) {
	order := func(x, y *podInfo) int {
		a, b := x.requests, y.requests
		if c := cmp.Compare(b.MilliCPU, a.MilliCPU); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Memory, a.Memory); c != 0 {
			return c
		}
		return strings.Compare(x.key, y.key)
	}
	// The unstable sort is several times faster, and its order is the stable one unless two pods
	// compare equal (the same pod key twice): then the stable sort decides, from the input order.
	in := slices.Clone(out)
	slices.SortFunc(out, order)
	for i := 1; i < len(out); i++ {
		if order(out[i-1], out[i]) == 0 {
			copy(out, in)
			slices.SortStableFunc(out, order)
			return
		}
	}
}

// placeOnBin puts the pod on the first existing node or in-flight NodeClaim that takes it.
func (s *solver) placeOnBin(p *podInfo) bool {
	for _, b := range s.bins {
		if s.placeOn(p, b) {
			return true
		}
	}
	return false
}

// placeOn puts the pod on bin b if b takes it: room, taints, host ports, topology and node
// affinity.
func (s *solver) placeOn(p *podInfo, b *bin) bool {
	if !p.requests.Fits(b.free) || p.untolerated(b.taints) != nil {
		return false
	}
	if len(p.ports) > 0 && scheduling.PortsConflict(p.ports, b.ports) {
		return false
	}
	if !s.topologyAllowsBin(p, b) {
		return false
	}
	for _, alt := range p.alts {
		if alt.MatchLabels(b.labels) == nil {
			b.free = b.free.Sub(p.requests)
			b.pods = append(b.pods, p.pod)
			b.ports = append(b.ports, p.ports...)
			s.topo.recordGroups(s.groupsOf(p), p.active, b, b.domainOf)
			return true
		}
	}
	return false
}

// plannedBins maps pending pods ("namespace/name") to the bin an earlier decision meant them
// for: the node named by the pod's status.nominatedNodeName, else the NodeClaim whose
// apisv1.AnnotationPlannedPods lists it (its Node once registered, else the in-flight claim).
func plannedBins(in *Input, bins []*bin) map[string]*bin {
	byName := make(map[string]*bin, len(bins))
	for _, b := range bins {
		byName[b.name] = b
	}
	nodeOf := map[string]string{} // provider ID → node name
	for _, n := range in.Nodes {
		if n.Spec.ProviderID != "" {
			nodeOf[n.Spec.ProviderID] = n.Name
		}
	}
	out := map[string]*bin{}
	for _, nc := range in.NodeClaims {
		list := nc.Annotations[apisv1.AnnotationPlannedPods]
		if list == "" || nc.DeletionTimestamp != nil {
			continue
		}
		b := byName[nc.Name]
		if n := nodeOf[nc.Status.ProviderID]; n != "" && nc.Status.ProviderID != "" {
			b = byName[n]
		}
		if b == nil {
			continue
		}
		for _, key := range strings.Split(list, ",") {
			out[key] = b
		}
	}
	for _, p := range in.Pods {
		if b := byName[p.Status.NominatedNodeName]; b != nil && p.Status.NominatedNodeName != "" {
			out[podKey(p)] = b
		}
	}
	return out
}

// compatibility returns (cached per signature) how the pod fits pool i.
func (s *solver) compatibility(i int, p *podInfo) *podPool {
	if i < len(p.compat) && p.compat[i] != nil {
		return p.compat[i]
	}
	if p.compat == nil {
		p.compat = make([]*podPool, len(s.pools))
	}
	if pp, ok := s.compat[i][p.sig]; ok {
		p.compat[i] = pp
		return pp
	}
	pl := s.pools[i]
	pp := &podPool{}
	s.compat[i][p.sig] = pp
	p.compat[i] = pp
	if pl.err != nil {
		pp.reason = pl.err.Error()
		return pp
	}
	var reasons []string
	defer func() {
		// Taints are checked last so the alternatives exist for spread domains that ignore
		// taints (nodeTaintsPolicy Ignore).
		if t := p.untolerated(pl.taints); t != nil {
			pp.reason = fmt.Sprintf("nodepool %q: taint %s=%s:%s is not tolerated", pl.np.Name, t.Key, t.Value, t.Effect)
			pp.taintOnly = true
		}
	}()
	for _, alt := range p.alts {
		ac := altCompat{reqs: alt, types: make([]bool, len(pl.types))}
		if reason := poolAccepts(pl, alt); reason != "" {
			reasons = append(reasons, reason)
			pp.alts = append(pp.alts, ac)
			continue
		}
		merged := pl.reqs.Intersect(alt)
		_, ac.zoneCT = alt[corev1.LabelTopologyZone]
		if _, ok := alt[apisv1.LabelCapacityType]; ok {
			ac.zoneCT = true
		}
		ac.all = true
		for ti, t := range pl.types {
			if typeMatches(alt, t.it) && (!ac.zoneCT || hasOffering(t, merged)) {
				ac.types[ti] = true
				ac.any = true
			} else {
				ac.all = false
			}
		}
		if !ac.any {
			reasons = append(reasons, fmt.Sprintf("nodepool %q: no instance type satisfies %s", pl.np.Name, merged))
		}
		pp.alts = append(pp.alts, ac)
	}
	anyAlt := false
	for _, a := range pp.alts {
		anyAlt = anyAlt || a.any
	}
	if !anyAlt {
		pp.reason = strings.Join(reasons, "; ")
	}
	return pp
}

// poolAccepts checks a pod alternative's keys the pool defines (labels or requirements) and
// keys nobody defines: a custom label the pool does not set can only be required absent.
func poolAccepts(pl *pool, alt scheduling.Requirements) string {
	for _, k := range alt.Keys() {
		r := alt[k]
		if pr, ok := pl.reqs[k]; ok {
			if pr.Intersect(r).Unsatisfiable() {
				return fmt.Sprintf("nodepool %q: requirement %s conflicts with the pod's %s", pl.np.Name, pr, r)
			}
			continue
		}
		if offeringKeys[k] || isTypeKey(k) {
			continue
		}
		if k == corev1.LabelHostname {
			if _, finite := r.Single(); finite || (r.IsEmpty() && !r.AbsentOK()) || len(r.Values()) > 0 {
				return fmt.Sprintf("nodepool %q: a new node's hostname cannot satisfy %s", pl.np.Name, r)
			}
			continue
		}
		if !r.AbsentOK() {
			return fmt.Sprintf("nodepool %q: label %q is not defined by the nodepool (requirement %s)", pl.np.Name, k, r)
		}
	}
	return ""
}

// hasOffering reports whether the type keeps an offering under the zone and capacity-type
// requirements.
func hasOffering(t *poolType, reqs scheduling.Requirements) bool {
	zr, cr := reqs[corev1.LabelTopologyZone], reqs[apisv1.LabelCapacityType]
	for _, o := range t.offerings {
		if (zr == nil || zr.Has(o.Zone)) && (cr == nil || cr.Has(o.CapacityType)) {
			return true
		}
	}
	return false
}

// placeOnClaim adds the pod to the first open NodeClaim that can still take it.
func (s *solver) placeOnClaim(p *podInfo) bool {
	return s.index.each(p.requests, s.index.bits.need(p), func(c *claim) bool { return s.tryAdd(c, p) })
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
		kept = s.withinLimits(c.pool, c, kept)
		if len(kept) == 0 || !meetsMinValues(c.pool, kept) {
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
// claim's, no host ports, a pool without limits or minValues. Candidate types only drop out because the pods no longer
// fit, and types are sorted by price, so it is enough to drop the types ahead of the first one
// that still fits (later ones that no longer fit stay in the list, and are skipped wherever
// the list is read). It reports false when the slow path must decide.
func (s *solver) fastAdd(c *claim, p *podInfo, pp *podPool, topoReqs scheduling.Requirements) bool {
	pl := c.pool
	if len(pp.alts) != 1 || !pp.alts[0].all || len(pp.alts[0].reqs) != 0 || len(topoReqs) != 0 ||
		len(p.ports) > 0 || pl.remaining != nil || len(pl.minValues) > 0 || len(c.types) == 0 || pl.reserved {
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

// openClaim starts a new NodeClaim for p on the first pool (by weight) that can take it, or
// returns why none can and, sorted, the unresolved NodeClasses of the pools that refused it for
// that reason alone (the pod may fit there once they resolve).
func (s *solver) openClaim(p *podInfo) (string, []string) {
	if len(s.pools) == 0 {
		return "no NodePool exists", nil
	}
	var reasons, awaiting []string
	for i, pl := range s.pools {
		pp := s.compatibility(i, p)
		if pp.reason != "" {
			if !pl.reserved {
				reasons = append(reasons, pp.reason)
				if pl.awaiting != "" && !slices.Contains(awaiting, pl.awaiting) {
					awaiting = append(awaiting, pl.awaiting)
				}
			}
			continue
		}
		var c *claim
		if pl.reserved {
			// A reserved claim's candidates are the reservations with instances left.
			c = &claim{pool: pl, reqs: pl.reqs}
			c.types = make([]int, 0, len(pl.types))
			for ti := range pl.types {
				if s.usable(c, ti) {
					c.types = append(c.types, ti)
				}
			}
		} else {
			c = s.newClaim(i)
		}
		if s.tryAdd(c, p) {
			s.claims = append(s.claims, c)
			s.index.add(c)
			return "", nil
		}
		if !pl.reserved { // the NodePool's own pool, next, says why
			reasons = append(reasons, s.whyNot(pl, pp, p))
		}
	}
	sort.Strings(awaiting)
	return strings.Join(reasons, "; "), awaiting
}

// whyNot explains why no instance type of the pool takes the pod alone.
func (s *solver) whyNot(pl *pool, pp *podPool, p *podInfo) string {
	var largest *poolType
	for ti, t := range pl.types {
		ok := false
		for _, a := range pp.alts {
			ok = ok || a.types[ti]
		}
		if ok && (largest == nil || t.avail.MilliCPU > largest.avail.MilliCPU) {
			largest = t
		}
	}
	if largest == nil {
		return fmt.Sprintf("nodepool %q: no compatible instance type", pl.np.Name)
	}
	if why := p.requests.Exceeding(largest.avail); why != "" {
		return fmt.Sprintf("nodepool %q: no instance type fits the pod's requests (%s; largest compatible type %s has %s after DaemonSet overhead)",
			pl.np.Name, p.requests, largest.it.Name, largest.avail)
	}
	if len(p.ports) > 0 {
		free := false
		for _, t := range pl.types {
			if !scheduling.PortsConflict(p.ports, t.daemonPorts) {
				free = true
				break
			}
		}
		if !free {
			return fmt.Sprintf("nodepool %q: a host port of the pod is taken by a DaemonSet on every instance type", pl.np.Name)
		}
	}
	if why := s.topologyWhyNot(p); why != "" {
		return fmt.Sprintf("nodepool %q: %s", pl.np.Name, why)
	}
	if pl.remaining != nil {
		return fmt.Sprintf("nodepool %q: limits exceeded (remaining %s)", pl.np.Name, pl.describeRemaining())
	}
	if len(pl.minValues) > 0 {
		return fmt.Sprintf("nodepool %q: minValues cannot be met by the instance types that fit the pod", pl.np.Name)
	}
	return fmt.Sprintf("nodepool %q: no instance type satisfies the pod's requirements together with its topology constraints", pl.np.Name)
}

// topologyWhyNot names the topology constraint that leaves a new node no domain, if any.
func (s *solver) topologyWhyNot(p *podInfo) string {
	names := map[constraintKind]string{kindSpread: "topology spread", kindAffinity: "pod affinity", kindAnti: "pod anti-affinity"}
	for _, v := range p.views {
		if v.vals != nil && len(v.vals) == 0 {
			return fmt.Sprintf("%s constraint on %s cannot be met: no eligible domain keeps it", names[v.c.kind], v.c.g.key)
		}
		if v.exclude != nil {
			// Anti-affinity excluding every eligible domain.
			elig := s.eligibleDomainsAny(p, v.c)
			left := 0
			for _, d := range elig {
				if !v.exclude[d] {
					left++
				}
			}
			if len(elig) > 0 && left == 0 {
				return fmt.Sprintf("pod anti-affinity on %s cannot be met: every domain (%d) already runs a matching pod", v.c.g.key, len(elig))
			}
		}
		if v.c.kind == kindSpread && v.vals != nil {
			return fmt.Sprintf("topology spread constraint on %s (maxSkew %d) cannot be met together with the pod's other requirements", v.c.g.key, v.c.maxSkew)
		}
	}
	for _, c := range p.active {
		if c.g.key == corev1.LabelHostname && c.kind == kindAffinity {
			return "pod affinity on kubernetes.io/hostname: no node runs a matching pod and a new node would not"
		}
	}
	return ""
}

// withinLimits drops candidate types whose capacity would take the pool past its limits,
// counting every other open NodeClaim of the pool at its cheapest type's capacity.
func (s *solver) withinLimits(pl *pool, c *claim, kept []int) []int {
	if pl.remaining == nil {
		return kept
	}
	others := *pl.committed
	if len(c.types) > 0 && len(c.pods) > 0 {
		others = others.Sub(pl.types[c.types[0]].capacity)
	}
	budget := pl.remaining.Sub(others)
	out := kept[:0:0]
	for _, ti := range kept {
		if pl.fitsLimits(pl.types[ti].capacity, budget) {
			out = append(out, ti)
		}
	}
	return out
}

// commit records the claim's new cheapest type against the pool's limits.
func (s *solver) commit(c *claim, kept []int) {
	pl := c.pool
	if pl.remaining != nil {
		if len(c.pods) > 0 {
			*pl.committed = pl.committed.Sub(pl.types[c.types[0]].capacity)
		}
		*pl.committed = pl.committed.Add(pl.types[kept[0]].capacity)
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
	for _, r := range pl.minValues {
		seen := map[string]bool{}
		for _, ti := range kept {
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
		if len(seen) < *r.MinValues {
			return false
		}
	}
	return true
}

// finalize ranks the claim's offerings: every offering of its candidate types that its zone and
// capacity-type requirements allow, cheapest first, capped at MaxInstanceTypes types. GPU,
// accelerator and bare-metal types are dropped when the pods need none of them and other
// types remain. Claims with the same candidate types and requirements share one offering list.
func (s *solver) finalize(c *claim) *NodeClaimPlan {
	pl := c.pool
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
// candidate type.
func (s *solver) finalizeMinValues(c *claim) *NodeClaimPlan {
	pl := c.pool
	types := make([]int, 0, len(c.types))
	for _, ti := range c.types {
		if c.fits(ti) { // the fast path may leave types that no longer fit
			types = append(types, ti)
		}
	}
	if !needsSpecial(c.requests) {
		plain := make([]int, 0, len(types))
		for _, ti := range types {
			if !pl.types[ti].special {
				plain = append(plain, ti)
			}
		}
		if len(plain) > 0 && meetsMinValues(pl, plain) {
			types = plain
		}
	}
	return s.claimPlan(c, s.rankedOfferings(pl, c.reqs, types))
}

// withinPriceCap keeps, for a pool with a price guardrail, only the offerings no dearer than what
// the claim counts against the cap (the dearest offering of its cheapest type), so whatever the
// fleet picks, the pool's price stays within the cap.
func withinPriceCap(pl *pool, c *claim, offs []Offering) []Offering {
	if !pl.priceCapped || len(c.types) == 0 {
		return offs
	}
	counted := float64(pl.types[c.types[0]].capacity.Scalar[ResourcePricePerHour]) / 1e6
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
		if v, ok := c.reqs[k].Single(); ok && !offeringKeys[k] && (isTypeKey(k) || pl.reqs[k] != nil) {
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

func needsSpecial(r scheduling.Resources) bool {
	for k, v := range r.Scalar {
		if v > 0 && acceleratorResources[k] {
			return true
		}
	}
	return false
}

// refine re-packs each NodeClaim's pods onto smaller instance types when that is cheaper.
// First-fit-decreasing fills a claim up to the largest type that fits, which costs nothing while
// prices are linear in size but leaves the last claim (and any claim cut short by a constraint)
// on a type far larger than its pods: 4.3 vCPU of pods on an 8-vCPU type instead of a 4-vCPU
// and a 1-vCPU one. For each claim, caps of 1/2, 1/4, ... of its type's vCPUs are tried (never
// below 1 vCPU), re-packing its pods first-fit under the cap, and the cheapest result is kept.
// Pools with limits are left as packed, so the limit accounting stays exact.
func (s *solver) refine() {
	out := make([]*claim, 0, len(s.claims))
	for _, c := range s.claims {
		out = append(out, s.refineClaim(c)...)
	}
	s.claims = out
}

// topoRefineBudget bounds, for n pending pods, the pod placements refine may spend re-packing
// claims that hold topology-counted pods (each try of a cap places every pod of the claim again),
// so large solves stay within their time target; claims beyond it stay as packed.
var topoRefineBudget = func(n int) int { return 500 + n/20 }

// topoRefineGain is the smallest saving (a fraction of the claim's price) that a re-packing of a
// claim holding topology-counted pods must be able to reach, by splitFloor, to be tried.
const topoRefineGain = 0.02

// refineClaim returns the cheapest re-packing of one claim under halving vCPU caps (the claim
// itself when nothing is cheaper). A claim holding pods that topology counts is re-packed onto
// claims pinned to its own domains (zone, capacity type, any key a group counts by), its pods
// taken out of the counts first and each placed again through tryAdd, so every rule is checked
// against the counts as they are; only hostname domains change, which tryAdd checks per node.
func (s *solver) refineClaim(c *claim) []*claim {
	if len(c.pods) < 2 || c.pinFailed || c.pool.reserved {
		return []*claim{c}
	}
	pl := c.pool
	own := pl.types[c.types[0]].capacity
	bestLimit, bestCost := int64(0), claimCost(c)
	// A claim whose pods topology counts is re-packed only for a saving of at least
	// topoRefineGain: taking its pods out of the counts and placing them again costs far more
	// than re-packing free pods.
	want := bestCost - 1e-9
	if c.topo {
		want = bestCost * (1 - topoRefineGain)
	}
	var limits []int64
	for limit := own.MilliCPU / 2; limit >= 1000; limit /= 2 {
		if s.splitFloor(pl, c.requests, limit) < want {
			limits = append(limits, limit)
		}
	}
	if len(limits) == 0 {
		return []*claim{c} // no re-packing under any cap can be cheaper
	}
	var pins [][2]string
	if c.topo {
		// Bounded work (deterministic, see topoRefineBudget): each try places every pod again.
		work := len(c.pods) * (len(limits) + 1)
		if work > s.topoRefineLeft {
			return []*claim{c}
		}
		s.topoRefineLeft -= work
		pins = s.domainPins(c)
		s.forget(c)
	}
	for _, limit := range limits {
		alt, ok := s.repack(c, limit, pins)
		cost := plansCost(alt)
		s.forget(alt...)
		if !ok {
			break // a pod no longer fits under the cap; smaller caps cannot help
		}
		if cost >= bestCost-1e-9 {
			continue
		}
		if pl.remaining != nil {
			// The replacement must fit the limit in place of the claim it replaces.
			var sum scheduling.Resources
			for _, a := range alt {
				sum = sum.Add(pl.types[a.types[0]].capacity)
			}
			if !pl.fitsLimits(sum, pl.remaining.Sub(*pl.committed).Add(own)) {
				continue
			}
		}
		bestLimit, bestCost = limit, cost
	}
	if bestLimit == 0 {
		s.remember(c)
		return []*claim{c}
	}
	best, _ := s.repack(c, bestLimit, pins) // the same placements again, now kept
	if pl.remaining != nil {
		*pl.committed = pl.committed.Sub(own)
		for _, a := range best {
			*pl.committed = pl.committed.Add(pl.types[a.types[0]].capacity)
		}
	}
	return best
}

// splitFloor is a lower bound (USD/h) on placing requests on nodes of pool types with at most
// maxMilliCPU of CPU capacity: the requested CPU and memory, each at the lowest price per unit
// of room any such type offers. Cached per pool and cap.
func (s *solver) splitFloor(pl *pool, r scheduling.Resources, maxMilliCPU int64) float64 {
	key := [2]int64{int64(pl.index), maxMilliCPU}
	rate, ok := s.unitRates[key]
	if !ok {
		rate = [2]float64{math.Inf(1), math.Inf(1)}
		for _, t := range pl.types {
			if t.capacity.MilliCPU > maxMilliCPU || t.avail.MilliCPU <= 0 || t.avail.Memory <= 0 {
				continue
			}
			rate[0] = min(rate[0], t.minPrice/float64(t.avail.MilliCPU))
			rate[1] = min(rate[1], t.minPrice/float64(t.avail.Memory))
		}
		if s.unitRates == nil {
			s.unitRates = map[[2]int64][2]float64{}
		}
		s.unitRates[key] = rate
	}
	return max(float64(r.MilliCPU)*rate[0], float64(r.Memory)*rate[1])
}

// repack places c's pods (in their packing order) on new claims of c's pool whose types have at
// most maxMilliCPU of CPU capacity, each pinned to the given (key, value) domains. It returns
// the claims built and whether every pod found one; the pods placed are in the topology counts
// either way.
func (s *solver) repack(c *claim, maxMilliCPU int64, pins [][2]string) ([]*claim, bool) {
	pl := c.pool
	var base []int
	for ti, t := range pl.types {
		if t.capacity.MilliCPU <= maxMilliCPU {
			base = append(base, ti)
		}
	}
	if len(base) == 0 {
		return nil, false
	}
	// Limits are checked by refine for the whole replacement; repacking must not move them.
	saved := pl.remaining
	pl.remaining = nil
	defer func() { pl.remaining = saved }()
	var out []*claim
	for _, p := range c.pods {
		if len(pins) > 0 || len(p.active) > 0 {
			s.prepare(p) // the counts moved since the pod was placed
		}
		placed := false
		for _, a := range out {
			if s.tryAdd(a, p) {
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		a := &claim{pool: pl, reqs: pl.reqs, types: append([]int(nil), base...)}
		for _, kv := range pins {
			s.pinTo(a, kv[0], kv[1])
		}
		if len(a.types) == 0 || !s.tryAdd(a, p) {
			return out, false
		}
		out = append(out, a)
	}
	return out, true
}

// claimCost is the price of the cheapest offering the claim's requirements allow among the
// types that hold its pods (USD/h), -1 when none does.
func claimCost(c *claim) float64 { return cheapestAllowed(c, false) }

func plansCost(cs []*claim) float64 {
	var t float64
	for _, c := range cs {
		t += claimCost(c)
	}
	return t
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
