package provisioning

import (
	"fmt"
	"strconv"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// StaticPlans plans n NodeClaims of a static NodePool (spec.replicas; package shared/static
// decides n). Each carries no pods and only what the NodePool's template gives it
// (requirements, labels, taints), as Karpenter builds a static NodeClaim from
// NewNodeClaimTemplate alone and lets the cloud provider's Create pick the instance
// (kubernetes-sigs/karpenter pkg/controllers/static/provisioning; its ToNodeClaim adds no
// instance-type requirement for a static NodeClaim). The offerings are therefore every
// instance type the pool's requirements and NodeClass allow, cheapest first, capped at
// MaxInstanceTypes types; GPU, accelerator and bare-metal types only when no other type is
// allowed, as the AWS provider's filterExoticInstanceTypes keeps them out of a launch
// (aws/karpenter-provider-aws pkg/providers/instance). Slot "static-<i>" names each plan apart.
//
// in.Pods is ignored; the DaemonSets count on each type (Offering.DaemonOverhead), the
// NodeClass and its readiness rule the pool exactly as for pod-driven claims. The error names
// why the pool cannot launch (its NodeClass not ready, no instance type left, a bad setting).
func StaticPlans(in Input, np *apisv1.NodePool, n int) ([]*NodeClaimPlan, error) {
	if in.Catalog == nil {
		return nil, fmt.Errorf("input.catalog: required")
	}
	if np == nil || np.Spec.Replicas == nil {
		return nil, fmt.Errorf("spec.replicas: not a static NodePool")
	}
	if n <= 0 {
		return nil, nil
	}
	in.Pods = nil
	s := &solver{in: &in, offerCache: map[string][]Offering{}}
	pl := compilePool(&in, np, compileDaemons(in.DaemonSets, in.LimitRanges), usedByPool(&in)[np.Name])
	if pl.err != nil {
		return nil, pl.err
	}
	var plain, all []int
	for ti, t := range pl.types {
		all = append(all, ti)
		if !t.special {
			plain = append(plain, ti)
		}
	}
	types := plain
	if len(types) == 0 {
		types = all
	}
	c := &claim{pool: pl, reqs: pl.reqs, types: types}
	offs := s.rankedOfferings(pl, pl.reqs, types)
	out := make([]*NodeClaimPlan, 0, n)
	for i := range n {
		p := s.claimPlan(c, offs)
		p.Slot = "static-" + strconv.Itoa(i)
		out = append(out, p)
	}
	return out, nil
}
