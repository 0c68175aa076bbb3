package provisioning

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// solver is one Solve's state, which its stages share: what compile built (pools, bins, the
// topology groups), the claims place opens and later stages rework, and the caches and budgets
// of the solve.
type solver struct {
	in     *Input
	pools  []*pool
	compat []map[string]*podPool // per pool: signature → compatibility
	claims []*claim
	bins   []*bin
	topo   *topology
	// eligible caches spread domains per (pod signature, key, policies).
	eligible map[eligibleKey][]string
	// binDomains caches the bins grouped by their value of a topology key (binsByDomain).
	binDomains map[string][]domainBins
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
	// topoRefineLeft is what is left of topoRefineBudget, shared by refine and the re-packs
	// that refine their claims.
	topoRefineLeft int
}

// Solve places the pending pods: on existing nodes' free capacity first, then in-flight
// NodeClaims, then open NodeClaims, then new NodeClaims from the highest-weight NodePool that
// can take them. Pods are packed first-fit in decreasing order of CPU then memory (the order
// Karpenter uses), and each NodeClaim finally gets every offering that fits its pods, cheapest
// first. It returns an error only for an unusable input (no catalog).
//
// Solve is the list of its stages, each in its own file, each bounded by a deterministic budget
// (no clock in the core) and tested on its own:
//
//   - compile (compile.go): NodePools into pools (each with its limits, limits.go), nodes and
//     in-flight NodeClaims into bins, pods into their requirements and topology groups, in
//     first-fit-decreasing order. Linear in the input.
//   - place (place.go): first-fit; every claim a pod joins is checked against its pool's
//     limits (limits.go), and a pod no pool takes is recorded with its reason and the limits it
//     found spent. At most one pass per pod and relaxed preference.
//   - refine (refine.go): re-packs each claim under halving vCPU caps when cheaper
//     (topoRefineBudget); then lpRepack (lppack.go), the LP-guided re-pack of unconstrained pods.
//   - pattern-pack (patternpack.go) and improve (improve.go), skipped in simulation:
//     column-generation patterns (packBudget, diveBudget) and emptying claims (improveBudget).
//   - finalize (finalize.go): each claim's ranked offerings.
//   - bound (bound.go), skipped in simulation: the plan's lower bound (boundBudget).
//
// Refine, pattern-pack and improve run before finalize because they change the claims whose
// offerings finalize ranks; pools with limits are left as placed by every stage after place
// but refine, which keeps each replacement within the limit (see refineClaim).
func Solve(in Input) (*Plan, error) {
	if in.Catalog == nil {
		return nil, fmt.Errorf("input.catalog: required")
	}
	s, pods := compile(&in)
	plan := &Plan{}
	plan.Unschedulable = s.place(pods)
	s.refine()
	s.lpRepack()
	if !in.Simulation {
		s.patternPack()
		s.improve()
	}
	plan.ExistingNodes = s.placements()
	plan.NodeClaims = s.finalizeAll()
	below := s.priceCommitments(plan)
	if !in.Simulation {
		plan.LowerBoundPerHour = max(s.lowerBound()-below, 0)
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
