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
	rest := pods[:0:0]
	for _, p := range pods {
		if p.err != nil {
			out = append(out, Unschedulable{Pod: p.pod, Reason: p.err.Error(), Refusals: []Refusal{{Kind: RefusalPod, Message: p.err.Error()}}})
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
