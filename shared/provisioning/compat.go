package provisioning

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
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
	kind   RefusalKind
	// taintOnly: the pool's taints are the only obstacle (the alternatives are still valid).
	taintOnly bool
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
		pp.reason, pp.kind = pl.err.Error(), RefusalNodePool
		return pp
	}
	var reasons []string
	defer func() {
		// Taints are checked last so the alternatives exist for spread domains that ignore
		// taints (nodeTaintsPolicy Ignore).
		if t := p.untolerated(pl.taints); t != nil {
			pp.reason = fmt.Sprintf("nodepool %q: taint %s=%s:%s is not tolerated", pl.np.Name, t.Key, t.Value, t.Effect)
			pp.kind = RefusalTaint
			pp.taintOnly = true
		}
	}()
	for _, alt := range p.alts {
		// An AKS capacity alias is the capacity type it names, a zone-label requirement the zones it allows.
		alt = pl.withZones(withCapacityAliases(alt, pl.aliases))
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
		pp.reason, pp.kind = strings.Join(reasons, "; "), RefusalRequirement
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
		if offeringKeys[k] || isTypeKey(k) || pl.isZoneLabel(k) || pl.aliases[k] != nil {
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
