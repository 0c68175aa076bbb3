package provisioning

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// place is the first-fit stage: pods an earlier decision placed on capacity that is still
// coming (or has just come) go there first, so a re-plan keeps the plan instead of repacking
// around it and launching more; then each pod, in compile's order, goes to the first existing
// node or in-flight NodeClaim that takes it, else the first open NodeClaim, else a new
// NodeClaim of the first pool (by weight) that takes it, relaxing its preferences one at a time
// while none does. It returns the pods no pool takes, with the reason and the limits found spent.
func (s *solver) place(pods []*podInfo) []Unschedulable {
	var out []Unschedulable
	planned := plannedBins(s.in, s.bins)
	var waiting []*podInfo
	for _, p := range pods {
		if p.err != nil {
			out = append(out, Unschedulable{Pod: p.pod, Reason: p.err.Error(), Refusals: []Refusal{{Kind: RefusalPod, Message: p.err.Error()}}})
		} else if len(planned[p.key]) > 0 {
			waiting = append(waiting, p)
		}
	}
	// Planned pods go to their homes in sweeps while a sweep places any (at most
	// maxPlannedSweeps, so the stage stays linear): a pod refused only because its spread
	// group's other planned pods were not placed yet (a zone over maxSkew until they are) fits
	// in a later sweep, instead of being repacked with the new pods.
	for placed, sweep := true, 0; placed && len(waiting) > 0 && sweep < maxPlannedSweeps; sweep++ {
		placed = false
		left := waiting[:0]
		for _, p := range waiting {
			if s.placePlanned(p, planned[p.key]) {
				placed = true
			} else {
				left = append(left, p)
			}
		}
		waiting = left
	}
	// The others in compile's order, as if no plan had been made; then the planned pods still
	// without their home, which try it once more first: the pods placed meanwhile may be the
	// spread group's others that it waited for (a drain's simulation places the candidates' pods
	// the decision moved to existing nodes only here, and those it sized replacements for on
	// their replacements, which a zone spread refuses until the others are counted).
	rest := make([]*podInfo, 0, len(pods))
	for _, p := range pods {
		if p.err == nil && len(planned[p.key]) == 0 {
			rest = append(rest, p)
		}
	}
	rest = append(rest, waiting...)
	for _, p := range rest {
		if len(planned[p.key]) > 0 && s.placePlanned(p, planned[p.key]) {
			continue
		}
		for {
			s.prepare(p)
			if s.placeOnBin(p) || s.placeOnClaim(p) {
				break
			}
			u := s.openClaim(p)
			if u.Reason == "" {
				break
			}
			if !p.canRelax() {
				u.Pod = p.pod
				out = append(out, u)
				break
			}
			p.relax()
		}
	}
	return out
}

// placements lists the pods placed on existing nodes and in-flight NodeClaims, in bin order.
func (s *solver) placements() []*NodePlacement {
	var out []*NodePlacement
	for _, b := range s.bins {
		if len(b.pods) > 0 {
			out = append(out, &NodePlacement{Name: b.name, InFlight: b.inFlight, Pods: b.pods})
		}
	}
	return out
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

// maxPlannedSweeps bounds place's sweeps over the planned pods. Each sweep after the first
// only helps pods whose spread constraints counted planned pods not placed yet; two more sweeps
// settle the chains seen in practice (one zone waiting for another).
const maxPlannedSweeps = 3

// placePlanned puts the pod on the first of its planned homes that takes it.
func (s *solver) placePlanned(p *podInfo, homes []*bin) bool {
	s.prepare(p)
	for _, b := range homes {
		if s.placeOn(p, b) {
			return true
		}
	}
	return false
}

// plannedBins maps pending pods ("namespace/name") to the bins earlier decisions meant them
// for, the current plan first: the NodeClaims whose apisv1.AnnotationPlannedPods lists the pod
// (its Node once registered, else the in-flight claim), newest first, since a later decision
// that planned the pod again did so because the earlier home no longer held it; and the node
// named by the pod's status.nominatedNodeName where it is none of those (a nomination of
// kube-scheduler's own, for a preemption), ahead of them. make scale (N = 1,000) showed why
// the order matters: with the nomination (set when the first, older home registered) taken
// before the newer in-flight NodeClaim, the pod missed its new home, another pod took that
// room in first-fit, and one pod had four NodeClaims launched for it within a minute.
func plannedBins(in *Input, bins []*bin) map[string][]*bin {
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
	type home struct {
		b    *bin
		nc   *apisv1.NodeClaim
		name string
	}
	homes := map[string][]home{}
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
			homes[key] = append(homes[key], home{b, nc, nc.Name})
		}
	}
	out := make(map[string][]*bin, len(homes))
	for key, hs := range homes {
		sort.Slice(hs, func(i, j int) bool {
			ti, tj := hs[i].nc.CreationTimestamp.Time, hs[j].nc.CreationTimestamp.Time
			if !ti.Equal(tj) {
				return ti.After(tj)
			}
			return hs[i].name > hs[j].name
		})
		bs := make([]*bin, len(hs))
		for i, h := range hs {
			bs[i] = h.b
		}
		out[key] = bs
	}
	for _, p := range in.Pods {
		b := byName[p.Status.NominatedNodeName]
		if b == nil || p.Status.NominatedNodeName == "" {
			continue
		}
		if key := podKey(p); !slices.Contains(out[key], b) {
			out[key] = append([]*bin{b}, out[key]...)
		}
	}
	return out
}

// placeOnClaim adds the pod to the first open NodeClaim that can still take it.
func (s *solver) placeOnClaim(p *podInfo) bool {
	return s.index.each(p.requests, s.index.bits.need(p), func(c *claim) bool { return s.tryAdd(c, p) })
}

// openClaim starts a new NodeClaim for p on the first pool (by weight) that can take it, or
// returns why none can (Pod unset): the reason, sorted, the unresolved NodeClasses of the pools
// that refused it for that reason alone (the pod may fit there once they resolve), and the
// limits of the pools whose limits refused it. Reason is "" when a claim took the pod.
func (s *solver) openClaim(p *podInfo) Unschedulable {
	if len(s.pools) == 0 {
		return Unschedulable{Reason: "no NodePool exists", Refusals: []Refusal{{Kind: RefusalNoNodePool, Message: "no NodePool exists"}}}
	}
	var reasons, awaiting []string
	var refusals []Refusal
	var hits []LimitHit
	for i, pl := range s.pools {
		pp := s.compatibility(i, p)
		if pp.reason != "" {
			if !pl.reserved {
				reasons = append(reasons, pp.reason)
				refusals = append(refusals, Refusal{NodePool: pl.np.Name, Kind: pp.kind, Message: pp.reason})
				if pl.awaiting != "" && !slices.Contains(awaiting, pl.awaiting) {
					awaiting = append(awaiting, pl.awaiting)
				}
			}
			continue
		}
		var c *claim
		if pl.reserved {
			// A reserved claim's candidates are the reservations with instances left.
			c = &claim{pool: pl, limits: pl.limits, reqs: pl.reqs}
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
			return Unschedulable{}
		}
		if !pl.reserved { // the NodePool's own pool, next, says why
			kind, reason, exceeded := s.whyNot(pl, pp, p)
			reasons = append(reasons, reason)
			refusals = append(refusals, Refusal{NodePool: pl.np.Name, Kind: kind, Message: reason})
			for _, k := range exceeded {
				hits = append(hits, LimitHit{NodePool: pl.np.Name, Resource: k})
			}
		}
	}
	sort.Strings(awaiting)
	return Unschedulable{Reason: strings.Join(reasons, "; "), Refusals: refusals, AwaitingNodeClasses: awaiting, LimitsExceeded: hits}
}

// whyNot explains why no instance type of the pool takes the pod alone (the kind of check that
// refused and the message) and, when that is the pool's limits, names the limits that turn away
// the types the pod fits (limits.exceeded).
func (s *solver) whyNot(pl *pool, pp *podPool, p *podInfo) (RefusalKind, string, []corev1.ResourceName) {
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
		return RefusalRequirement, fmt.Sprintf("nodepool %q: no compatible instance type", pl.np.Name), nil
	}
	if why := p.requests.Exceeding(largest.avail); why != "" {
		return RefusalCapacity, fmt.Sprintf("nodepool %q: no instance type fits the pod's requests (%s; largest compatible type %s has %s after DaemonSet overhead)",
			pl.np.Name, p.requests, largest.it.Name, largest.avail), nil
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
			return RefusalHostPort, fmt.Sprintf("nodepool %q: a host port of the pod is taken by a DaemonSet on every instance type", pl.np.Name), nil
		}
	}
	if why := s.topologyWhyNot(p); why != "" {
		return RefusalTopology, fmt.Sprintf("nodepool %q: %s", pl.np.Name, why), nil
	}
	if pl.limits != nil {
		var fitting []int // the types the pod's requirements allow and its requests fit
		for ti, t := range pl.types {
			for _, a := range pp.alts {
				if a.types[ti] && p.requests.Fits(t.avail) {
					fitting = append(fitting, ti)
					break
				}
			}
		}
		exceeded := pl.limits.exceeded(pl, fitting)
		return limitKind(exceeded), fmt.Sprintf("nodepool %q: limits exceeded (remaining %s)", pl.np.Name, pl.limits.describe()), exceeded
	}
	if len(pl.minValues) > 0 {
		return RefusalMinValues, fmt.Sprintf("nodepool %q: minValues cannot be met by the instance types that fit the pod", pl.np.Name), nil
	}
	return RefusalOther, fmt.Sprintf("nodepool %q: no instance type satisfies the pod's requirements together with its topology constraints", pl.np.Name), nil
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
