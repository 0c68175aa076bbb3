package provisioning

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning/lowerbound"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// boundProblem turns the pods the plan put on new NodeClaims into a lowerbound.Problem over
// every pool's instance types, with the rules the plan honours for each pod: its requirements
// and the preferences the plan kept (a preference the plan had to drop does not restrict the
// bound either). So the bound answers "how much cheaper could a plan honouring the same rules
// be", which is the packing's own gap:
//
//   - options are (NodePool, instance type, offering group): a type's available offerings are
//     grouped by which pods may use them (their zone and capacity-type requirements), each
//     group priced at its cheapest offering; allocatable is after DaemonSet overhead;
//   - a class is a set of pods with the same requests, the same scheduling signature and the
//     same exclusive set; its options are those its node affinity and tolerations allow;
//   - pods that repel each other by required anti-affinity on kubernetes.io/hostname (a term
//     whose selector matches the pod itself) form an exclusive set: one per node.
//
// NodePool limits, minValues, spreads and pod affinity are left out (the bound stays valid).
func (s *solver) boundProblem(pods []*podInfo) lowerbound.Problem {
	groups := map[string]int{}
	var reps []*podInfo
	podGroup := make([]int, len(pods))
	for i, p := range pods {
		g, ok := groups[p.sig]
		if !ok {
			g = len(reps)
			groups[p.sig] = g
			reps = append(reps, p)
		}
		podGroup[i] = g
	}
	var prob lowerbound.Problem
	groupOpts := make([][]int, len(reps))
	for pi, pl := range s.pools {
		if pl.err != nil || pl.reserved {
			continue
		}
		compat := make([]*podPool, len(reps))
		for g, rep := range reps {
			if pp := s.compatibility(pi, rep); pp.reason == "" {
				compat[g] = pp
			}
		}
		for ti, t := range pl.types {
			s.typeOptions(&prob, groupOpts, compat, pl, ti, t)
		}
	}
	type classKey struct {
		cpu, mem, eph int64
		scalars       string
		group, excl   int
	}
	// Up to one class per pod (Karpenter's benchmark shape has nearly that many): sized once
	// instead of grown.
	index := make(map[classKey]int, len(pods))
	prob.Classes = make([]lowerbound.Class, 0, len(pods))
	for i, p := range pods {
		r := p.requests
		k := classKey{cpu: r.MilliCPU, mem: r.Memory, eph: r.EphemeralStorage, group: podGroup[i], excl: s.exclusiveSet(p)}
		if len(r.Scalar) > 0 {
			k.scalars = r.String()
		}
		if c, ok := index[k]; ok {
			prob.Classes[c].Count++
			continue
		}
		index[k] = len(prob.Classes)
		prob.Classes = append(prob.Classes, lowerbound.Class{Requests: r, Count: 1, Options: groupOpts[podGroup[i]], Exclusive: k.excl})
	}
	return prob
}

// typeOptions adds the options of one pool type: its offerings grouped by the set of signature
// groups that may use them, each group an option priced at its cheapest offering.
func (s *solver) typeOptions(prob *lowerbound.Problem, groupOpts [][]int, compat []*podPool, pl *pool, ti int, t *poolType) {
	byUsers := map[string]int{} // users bitset → option index
	users := make([]byte, (len(compat)+7)/8)
	for _, o := range t.offerings {
		clear(users)
		any := false
		for g, pp := range compat {
			if pp == nil {
				continue
			}
			for _, ac := range pp.alts {
				if !ac.any || !ac.types[ti] {
					continue
				}
				zr, cr := ac.reqs[corev1.LabelTopologyZone], ac.reqs[apisv1.LabelCapacityType]
				if (zr == nil || zr.Has(o.Zone)) && (cr == nil || cr.Has(o.CapacityType)) {
					users[g/8] |= 1 << (g % 8)
					any = true
					break
				}
			}
		}
		if !any {
			continue
		}
		key := string(users)
		if j, ok := byUsers[key]; ok {
			prob.Options[j].PricePerHour = min(prob.Options[j].PricePerHour, o.PricePerHour)
			continue
		}
		j := len(prob.Options)
		byUsers[key] = j
		prob.Options = append(prob.Options, lowerbound.Option{Name: t.it.Name, Allocatable: clampRes(t.avail), PricePerHour: o.PricePerHour})
		for g := range compat {
			if users[g/8]&(1<<(g%8)) != 0 {
				groupOpts[g] = append(groupOpts[g], j)
			}
		}
	}
}

func clampRes(r scheduling.Resources) scheduling.Resources {
	r.MilliCPU, r.Memory, r.Pods = max(r.MilliCPU, 0), max(r.Memory, 0), max(r.Pods, 0)
	return r
}

// exclusiveSet returns a non-zero id when the pod has an anti-affinity term on
// kubernetes.io/hostname the plan honours whose group also selects the pod itself: every pod of
// that group with the same term repels every other, so at most one of them runs per node.
func (s *solver) exclusiveSet(p *podInfo) int {
	for _, c := range p.active {
		if c.kind == kindAnti && c.g.key == corev1.LabelHostname && slices.Contains(s.groupsOf(p), c.g) {
			return c.g.idx + 1
		}
	}
	return 0
}

// lowerBound computes the plan's lower bound (USD per hour) over the pods it put on new
// NodeClaims bought at spot or on-demand prices; 0 when there are none or the bound cannot be
// computed. Pods on reserved NodeClaims are left out with the reservations, as pods on existing
// nodes are: the capacity is already paid for.
func (s *solver) lowerBound() float64 {
	var pods []*podInfo
	for _, c := range s.claims {
		if !c.pool.reserved {
			pods = append(pods, c.pods...)
		}
	}
	if len(pods) == 0 {
		return 0
	}
	prob := s.boundProblem(pods)
	b, err := lowerbound.FitCut(prob)
	if err != nil {
		return 0
	}
	bound := b.PricePerHour
	var cost float64
	for _, c := range s.claims {
		if !c.pool.reserved {
			cost += claimCost(c)
		}
	}
	// The pattern LP's bound is often tighter (it knows how whole pods fill a node); its work is
	// budgeted, and its bound is valid whenever it stops. Not run when the plan is within
	// closeEnough of the fit-cut bound already.
	if len(prob.Classes) <= maxPatternClasses && cost > bound*(1+closeEnough) {
		budget := boundBudget
		budget.Floor, budget.GiveUpNodes = bound, boundGiveUpNodes
		budget.KnapsackNodes = min(budget.KnapsackNodes, boundNodesPerPod*len(pods))
		if r, err := lowerbound.Patterns(prob, budget); err == nil {
			bound = max(bound, r.PricePerHour)
		}
	}
	return bound
}
