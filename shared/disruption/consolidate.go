package disruption

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// MinSpotToSpotTypes is how many spot instance types cheaper than a spot node must remain
// before single-node consolidation replaces it with another spot node, and how many of them the
// replacement may launch from (Karpenter's MinInstanceTypesForSpotToSpotConsolidation = 15,
// kubernetes-sigs/karpenter pkg/controllers/disruption/consolidation.go). Why: the cheapest spot
// pools are the ones most likely to be interrupted, and a node replaced by "anything cheaper"
// gets replaced again by the next cheaper type, walking down into the cheapest, most
// interruption-prone pools. Demanding a wide choice keeps the fleet's capacity-aware
// allocation meaningful, and launching only from the 15 cheapest types means the new node is
// not itself immediately replaceable by a cheaper one.
const MinSpotToSpotTypes = 15

// DefaultMaxCandidates caps how many candidates a multi-node search considers, as Karpenter
// caps its prefix search at 100 NodeClaims.
const DefaultMaxCandidates = 100

// DefaultMaxSimulations caps the scheduling simulations one decision may run (all strategies
// together), so a decision's time is bounded on any cluster. A count, not a clock, keeps the
// decision deterministic.
const DefaultMaxSimulations = 200

// savingsEpsilon: savings below this (USD per hour) are treated as none (float noise).
const savingsEpsilon = 1e-6

// Mode selects the underutilization strategies.
type Mode int

const (
	// ModeSearch runs Karpenter's multi-node prefix rule and single-node consolidation, then
	// Dovetail's greedy search, and keeps the decision that saves the most.
	ModeSearch Mode = iota
	// ModePrefix runs only Karpenter's rules: multi-node prefix, then single-node.
	ModePrefix
	// ModeSearchOnly runs only the greedy search (for measurements).
	ModeSearchOnly
)

// Options tune Consolidate. The zero value is the default.
type Options struct {
	Mode           Mode
	MaxCandidates  int // default DefaultMaxCandidates
	MaxSimulations int // default DefaultMaxSimulations
}

// Report says what Consolidate looked at, for logs and local dev.
type Report struct {
	Candidates int
	Skipped    []Skipped
	// Budgets are the disruptions allowed per pool and reason ("pool/reason" → count).
	Budgets map[string]int
	// BudgetErrors are budgets that could not be evaluated (they fail closed).
	BudgetErrors []string
	// Tried lists, per strategy, the best result or why it found nothing.
	Tried       []string
	Simulations int64
}

// Consolidate decides one consolidation on the state, or returns nil with the report saying
// why there is none. Empty candidates go first (all of them the Empty budgets allow, in one
// decision, no simulation needed); otherwise underutilized candidates (pools with
// WhenEmptyOrUnderutilized) are tried by the strategies of o.Mode within the Underutilized
// budgets. While pods are pending that a node or a new NodeClaim could hold, nothing is
// consolidated: they need the capacity first and the provision function is placing them.
func Consolidate(s *State, o Options) (*Decision, *Report) {
	if o.MaxCandidates <= 0 {
		o.MaxCandidates = DefaultMaxCandidates
	}
	if o.MaxSimulations <= 0 {
		o.MaxSimulations = DefaultMaxSimulations
	}
	start := s.Simulations()
	cands, skipped := s.Candidates()
	r := &Report{Candidates: len(cands), Skipped: skipped, Budgets: map[string]int{}}
	defer func() { r.Simulations = s.Simulations() - start }()
	if len(s.pending) > 0 {
		if n, err := s.placeablePending(); err != nil || n > 0 {
			r.Tried = append(r.Tried, fmt.Sprintf("%d pod(s) pending: consolidation waits until they are placed", len(s.pending)))
			return nil, r
		}
		r.Tried = append(r.Tried, fmt.Sprintf("%d pod(s) pending that no node or new NodeClaim can hold: consolidation goes on without them", len(s.pending)))
	}
	if d := s.emptiness(cands, r); d != nil {
		return d, r
	}
	var under []*Candidate
	for _, c := range cands {
		if !c.Empty && policy(c.Pool) == apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
			under = append(under, c)
		}
	}
	if len(under) == 0 {
		r.Tried = append(r.Tried, "no underutilized candidate")
		return nil, r
	}
	e := &engine{s: s, o: o, r: r, budget: s.budgets(apisv1.DisruptionReasonUnderutilized, r), limit: start + int64(o.MaxSimulations)}
	var best *Decision
	keep := func(d *Decision) {
		if d != nil && (best == nil || d.Savings > best.Savings+savingsEpsilon ||
			(math.Abs(d.Savings-best.Savings) <= savingsEpsilon && len(d.Placements) < len(best.Placements))) {
			best = d
		}
	}
	if o.Mode != ModeSearchOnly {
		keep(e.prefix(under))
		if best == nil {
			keep(e.single(under))
		}
	}
	if o.Mode != ModePrefix {
		keep(e.search(under))
	}
	if best != nil {
		r.Tried = append(r.Tried, "chose "+best.Strategy)
	}
	return best, r
}

// placeablePending counts the pending pods the bin-packing core places on the cluster as it is
// (on a node, or on a new NodeClaim the provision function would launch). Only those wait for
// consolidation: a pod that nothing can hold (too large for every type, a NodePool at its limit,
// no pool it tolerates) would otherwise stop consolidation for as long as it exists, and since it
// uses no capacity in any simulation, consolidating cannot take room from it. Karpenter likewise
// lets a pod that was pending before and stays pending not block consolidation.
func (s *State) placeablePending() (int, error) {
	plan, err := s.Simulate(nil, s.pending)
	if err != nil {
		return 0, err
	}
	return len(s.pending) - len(plan.Unschedulable), nil
}

// budgets computes, per pool, the disruptions allowed for reason now.
func (s *State) budgets(reason string, r *Report) map[string]int {
	out := map[string]int{}
	for _, name := range sortedPoolNames(s.Pools) {
		c := s.Counts[name]
		n, err := AllowedDisruptions(s.Pools[name], reason, c.Nodes, c.Disrupting, s.Now)
		if err != nil && r != nil {
			r.BudgetErrors = append(r.BudgetErrors, err.Error())
		}
		out[name] = n
		if r != nil {
			r.Budgets[name+"/"+reason] = n
		}
	}
	return out
}

func sortedPoolNames(m map[string]*apisv1.NodePool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// emptiness deletes every empty candidate the Empty budgets allow, most expensive first.
func (s *State) emptiness(cands []*Candidate, r *Report) *Decision {
	var empty []*Candidate
	for _, c := range cands {
		if c.Empty {
			empty = append(empty, c)
		}
	}
	if len(empty) == 0 {
		return nil
	}
	budget := s.budgets(apisv1.DisruptionReasonEmpty, r)
	sort.SliceStable(empty, func(i, j int) bool {
		if empty[i].Price != empty[j].Price {
			return empty[i].Price > empty[j].Price
		}
		return empty[i].Name() < empty[j].Name()
	})
	var set []*Candidate
	for _, c := range empty {
		if budget[c.Pool.Name] > 0 {
			budget[c.Pool.Name]--
			set = append(set, c)
		}
	}
	if len(set) == 0 {
		r.Tried = append(r.Tried, fmt.Sprintf("%s: %d empty node(s), no Empty budget left", StrategyEmptiness, len(empty)))
		return nil
	}
	d := s.decision(set, apisv1.DisruptionReasonEmpty, StrategyEmptiness, nil, nil)
	d.Why = fmt.Sprintf("%d empty node(s) cost %.4f $/h and hold no pod that must move", len(set), d.PriceBefore)
	r.Tried = append(r.Tried, fmt.Sprintf("%s: %s", StrategyEmptiness, d.Why))
	return d
}

// engine runs the underutilization strategies with a shared simulation budget.
type engine struct {
	s      *State
	o      Options
	r      *Report
	budget map[string]int
	limit  int64
}

func (e *engine) exhausted() bool { return e.s.Simulations() >= e.limit }

// withinBudget keeps candidates in order while their pools' Underutilized budgets last.
func (e *engine) withinBudget(cs []*Candidate) []*Candidate {
	left := map[string]int{}
	for k, v := range e.budget {
		left[k] = v
	}
	var out []*Candidate
	for _, c := range cs {
		if left[c.Pool.Name] > 0 {
			left[c.Pool.Name]--
			out = append(out, c)
		}
	}
	return out
}

// prefix is Karpenter's multi-node consolidation: candidates sorted by disruption cost, kept
// while budgets last, at most MaxCandidates; a binary search finds the longest prefix (of at
// least two) that can be deleted or replaced by one cheaper NodeClaim.
func (e *engine) prefix(under []*Candidate) *Decision {
	cs := append([]*Candidate(nil), under...)
	sortByCost(cs)
	cs = e.withinBudget(cs)
	if len(cs) > e.o.MaxCandidates {
		cs = cs[:e.o.MaxCandidates]
	}
	if len(cs) < 2 {
		e.r.Tried = append(e.r.Tried, StrategyPrefix+": fewer than 2 candidates within budget")
		return nil
	}
	lo, hi := 1, len(cs)-1
	var best *Decision
	var last string
	for lo <= hi && !e.exhausted() {
		mid := (lo + hi) / 2
		d, why := e.s.evaluate(cs[:mid+1], 1, StrategyPrefix)
		if d != nil {
			best, lo = d, mid+1
		} else {
			last, hi = why, mid-1
		}
	}
	e.note(StrategyPrefix, best, last)
	return best
}

// single is Karpenter's single-node consolidation: the first candidate, by disruption cost,
// that can be deleted or replaced by one cheaper NodeClaim.
func (e *engine) single(under []*Candidate) *Decision {
	cs := append([]*Candidate(nil), under...)
	sortByCost(cs)
	var last string
	for _, c := range cs {
		if e.exhausted() {
			break
		}
		if e.budget[c.Pool.Name] <= 0 {
			last = fmt.Sprintf("nodepool %q: no Underutilized budget left", c.Pool.Name)
			continue
		}
		if !e.s.canPassBalanced(c) {
			last = fmt.Sprintf("%s: even deleting it would not pass nodepool %q's Balanced score", c.Name(), c.Pool.Name)
			continue
		}
		d, why := e.s.evaluate([]*Candidate{c}, 1, StrategySingleNode)
		if d != nil {
			e.note(StrategySingleNode, d, "")
			return d
		}
		last = c.Name() + ": " + why
	}
	e.note(StrategySingleNode, nil, last)
	return nil
}

// search is Dovetail's multi-node search. Candidates are ranked by estimated saving per unit
// of disruption cost (price × unrequested share of the node, over 1 + disruption cost), the
// first MaxCandidates kept. A greedy pass adds candidates (one, or a galloping run of them) to the set when the set still
// consolidates (any number of cheaper replacements, PDBs and budgets holding) and saves more
// than before; a pruning pass then drops members whose removal saves more (a member that forced
// a costly replacement). Unlike the prefix rule, a candidate that cannot go does not stop the
// candidates after it, and several replacements are allowed.
func (e *engine) search(under []*Candidate) *Decision {
	type ranked struct {
		c     *Candidate
		score float64
	}
	rs := make([]ranked, 0, len(under))
	for _, c := range under {
		rs = append(rs, ranked{c, estimatedSaving(c.Node) / (1 + c.DisruptionCost)})
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].score != rs[j].score {
			return rs[i].score > rs[j].score
		}
		return rs[i].c.Name() < rs[j].c.Name()
	})
	if len(rs) > e.o.MaxCandidates {
		rs = rs[:e.o.MaxCandidates]
	}
	left := map[string]int{}
	for k, v := range e.budget {
		left[k] = v
	}
	// Galloping: after each accepted step the next step tries twice as many candidates at
	// once, after a refused step half as many; a single refused candidate is skipped. Long runs
	// of consolidatable nodes then cost O(log n) simulations instead of n.
	var set []*Candidate
	var best *Decision
	var last string
	for i, step := 0, 1; i < len(rs) && !e.exhausted(); {
		var add []*Candidate
		used := map[string]int{}
		j := i
		for ; j < len(rs) && len(add) < step; j++ {
			c := rs[j].c
			if left[c.Pool.Name]-used[c.Pool.Name] > 0 {
				add = append(add, c)
				used[c.Pool.Name]++
			}
		}
		if len(add) == 0 {
			break
		}
		try := append(append([]*Candidate(nil), set...), add...)
		d, why := e.s.evaluate(try, -1, StrategySearch)
		switch {
		case d != nil && (best == nil || d.Savings > best.Savings+savingsEpsilon):
			set, best = try, d
			for p, k := range used {
				left[p] -= k
			}
			i, step = j, step*2
		case step > 1:
			step /= 2
		default:
			if d == nil {
				last = why
			}
			i = j
		}
	}
	// Pruning looks at the last members added (the lowest-ranked), at most maxPrune of them:
	// each try re-simulates the whole set.
	const maxPrune = 4
	for i := len(set) - 1; i >= 0 && i >= len(set)-maxPrune && len(set) > 1 && !e.exhausted(); i-- {
		try := append(append([]*Candidate(nil), set[:i]...), set[i+1:]...)
		if d, _ := e.s.evaluate(try, -1, StrategySearch); d != nil && d.Savings > best.Savings+savingsEpsilon {
			set, best = try, d
		}
	}
	e.note(StrategySearch, best, last)
	return best
}

func (e *engine) note(strategy string, d *Decision, why string) {
	switch {
	case d != nil:
		e.r.Tried = append(e.r.Tried, fmt.Sprintf("%s: %d node(s), saves %.4f $/h", strategy, len(d.Candidates), d.Savings))
	case why != "":
		e.r.Tried = append(e.r.Tried, fmt.Sprintf("%s: nothing (last: %s)", strategy, why))
	default:
		e.r.Tried = append(e.r.Tried, strategy+": nothing")
	}
}

// estimatedSaving is the node's price times the share of it its movable pods do not request
// (the larger of CPU and memory shares counts as used).
func estimatedSaving(n *Node) float64 {
	used := 0.0
	if n.Allocatable.MilliCPU > 0 {
		used = float64(n.requested.MilliCPU) / float64(n.Allocatable.MilliCPU)
	}
	if n.Allocatable.Memory > 0 {
		used = math.Max(used, float64(n.requested.Memory)/float64(n.Allocatable.Memory))
	}
	return n.Price * math.Max(0, 1-used)
}

// evaluate checks whether the set can be consolidated together and builds the decision:
// every movable pod must be evictable (do-not-disrupt, controller owner, PDBs over the whole
// set) and placed by the bin-packing core on the remaining nodes or on at most maxRepl new
// NodeClaims (-1: any number), whose cheapest offerings must cost less than the set, and nodes
// under their pool's consolidateAfter receive none of them (simulateMove); a pool with the
// Balanced policy must approve the move's score (balancedGate). It returns why not otherwise.
func (s *State) evaluate(set []*Candidate, maxRepl int, strategy string) (*Decision, string) {
	var pods []*corev1.Pod
	remove := make(map[string]bool, len(set))
	for _, c := range set {
		pods = append(pods, c.Movable...)
		remove[c.Name()] = true
	}
	if why := PodsBlock(pods, s.Now); why != "" {
		return nil, why
	}
	if err := s.PDBs.Check(pods); err != nil {
		return nil, err.Error()
	}
	plan, err := s.simulateMove(remove, pods)
	if err != nil {
		return nil, err.Error()
	}
	d, b := s.judge(set, plan, maxRepl, strategy)
	if b != nil {
		return nil, b.Message
	}
	return d, ""
}

// judge is evaluate's verdict on a simulation of removing set: every pod placed, at most maxRepl
// new NodeClaims (-1: any number), the replacements cheaper (priceReplacements) and the Balanced
// gate passed. It returns the decision, or the blocker that refuses it (naming the pod with no
// place, the first candidate node, or the Balanced NodePool).
func (s *State) judge(set []*Candidate, plan *provisioning.Plan, maxRepl int, strategy string) (*Decision, *Blocker) {
	first := nodeRef(set[0].Node)
	if len(plan.Unschedulable) > 0 {
		u := plan.Unschedulable[0]
		return nil, &Blocker{BlockerNoPlace, podObject(u.Pod), fmt.Sprintf("pod %s would have no place: %s", podRef(u.Pod), u.Reason)}
	}
	if maxRepl >= 0 && len(plan.NodeClaims) > maxRepl {
		return nil, &Blocker{BlockerReplacementPolicy, first, fmt.Sprintf("needs %d new NodeClaims (at most %d)", len(plan.NodeClaims), maxRepl)}
	}
	repl, kind, why := s.priceReplacements(set, plan.NodeClaims)
	if why != "" {
		return nil, &Blocker{kind, first, why}
	}
	d := s.decision(set, apisv1.DisruptionReasonUnderutilized, strategy, plan, repl)
	if why := s.noCommitmentSaving(d); why != "" {
		return nil, &Blocker{BlockerNoCheaperReplace, first, why}
	}
	if why := s.balancedGate(set, d.Savings); why != "" {
		return nil, &Blocker{BlockerBalanced, poolRef(set[0].Pool.Name), why}
	}
	return d, nil
}

// priceReplacements applies the price rules to the replacement NodeClaims and returns them,
// or why the set cannot be replaced:
//   - when every candidate is spot and a replacement can be spot, it is restricted to spot
//     (its price was judged on spot; Karpenter does the same);
//   - the replacements' cheapest offerings must cost less than the candidates together;
//   - each replacement keeps only offerings priced below its cheapest plus its share of the
//     saving, so whichever offerings the fleet picks, $/h does not rise;
//   - single-node spot-to-spot needs MinSpotToSpotTypes cheaper spot types and launches from
//     the cheapest MinSpotToSpotTypes of them.
//
// The kind of a refusal is BlockerNoCheaperReplace when the replacements save nothing, else
// BlockerReplacementPolicy.
func (s *State) priceReplacements(set []*Candidate, repl []*provisioning.NodeClaimPlan) ([]*provisioning.NodeClaimPlan, BlockerKind, string) {
	var before float64
	allSpot := true
	for _, c := range set {
		before += c.Price
		allSpot = allSpot && c.CapacityType == apisv1.CapacityTypeSpot
	}
	if len(repl) == 0 {
		return nil, "", ""
	}
	out := make([]*provisioning.NodeClaimPlan, len(repl))
	var after float64
	for i, r := range repl {
		cp := *r
		if allSpot {
			if spot := filterOfferings(cp.Offerings, func(o provisioning.Offering) bool { return o.CapacityType == apisv1.CapacityTypeSpot }); len(spot) > 0 {
				cp.Offerings = spot
				cp.Requirements = cp.Requirements.Copy()
				cp.Requirements.Add(scheduling.MustRequirement(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeSpot))
			}
		}
		if len(cp.Offerings) == 0 {
			return nil, BlockerReplacementPolicy, "a replacement has no offering"
		}
		if cp.Committed && cp.Cheapest().Offering != r.Cheapest().Offering {
			// Restricted to spot, which no commitment covers: its price is the offering's.
			cp.Committed = false
		}
		after += cp.PricePerHour()
		out[i] = &cp
	}
	savings := before - after
	if savings <= savingsEpsilon {
		return nil, BlockerNoCheaperReplace, fmt.Sprintf("replacements cost %.4f $/h, the nodes %.4f $/h: no saving", after, before)
	}
	share := savings / float64(len(out))
	// A replacement of the same type as a candidate must be cheaper than that candidate, or
	// keeping the candidate and deleting the others would disrupt fewer pods for the same price
	// (Karpenter's filterOutSameType).
	sameType := map[string]float64{}
	if len(set) > 1 {
		for _, c := range set {
			if p, ok := sameType[c.InstanceType]; !ok || c.Price < p {
				sameType[c.InstanceType] = c.Price
			}
		}
	}
	for _, r := range out {
		limit := r.Cheapest().PricePerHour + share
		for _, o := range r.Offerings {
			if p, ok := sameType[o.InstanceType.Name]; ok && p < limit {
				limit = p
			}
		}
		r.Offerings = filterOfferings(r.Offerings, func(o provisioning.Offering) bool { return o.PricePerHour < limit-1e-9 })
		if len(r.Offerings) == 0 {
			return nil, BlockerReplacementPolicy, "every replacement offering costs as much as a candidate of the same type"
		}
	}
	if len(set) == 1 && allSpot && len(out) == 1 && out[0].Cheapest().CapacityType == apisv1.CapacityTypeSpot {
		types := out[0].InstanceTypeOptions()
		if len(types) < MinSpotToSpotTypes {
			return nil, BlockerReplacementPolicy, fmt.Sprintf("spot-to-spot consolidation needs %d spot instance types cheaper than the node, %d remain", MinSpotToSpotTypes, len(types))
		}
		keep := map[string]bool{}
		for _, t := range types[:MinSpotToSpotTypes] {
			keep[t] = true
		}
		out[0].Offerings = filterOfferings(out[0].Offerings, func(o provisioning.Offering) bool { return keep[o.InstanceType.Name] })
	}
	return out, "", ""
}

func filterOfferings(offs []provisioning.Offering, keep func(provisioning.Offering) bool) []provisioning.Offering {
	out := make([]provisioning.Offering, 0, len(offs))
	for _, o := range offs {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// decision assembles a Decision for the set.
func (s *State) decision(set []*Candidate, reason, strategy string, plan *provisioning.Plan, repl []*provisioning.NodeClaimPlan) *Decision {
	d := &Decision{Reason: reason, Strategy: strategy, Revision: s.Snapshot.Revision, Time: s.Now, Method: MethodDelete, Replacements: repl}
	sorted := append([]*Candidate(nil), set...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name() < sorted[j].Name() })
	for _, c := range sorted {
		ref := CandidateRef{Node: c.Name(), NodeClaim: c.Claim.Name, NodeClaimUID: string(c.Claim.UID), NodePool: c.Pool.Name,
			ProviderID: c.ProviderID(), InstanceType: c.InstanceType, Zone: c.Zone, CapacityType: c.CapacityType, Price: c.Price}
		for _, p := range c.Movable {
			ref.Pods = append(ref.Pods, podRef(p))
		}
		d.Candidates = append(d.Candidates, ref)
		d.PriceBefore += c.Price
		if _, ok := d.Budgets[c.Pool.Name]; !ok {
			if d.Budgets == nil {
				d.Budgets = map[string]*events.BudgetReservation{}
			}
			d.Budgets[c.Pool.Name] = s.Reservation(c.Pool.Name, reason)
		}
	}
	if len(repl) > 0 {
		d.Method = MethodReplace
	}
	for i, r := range repl {
		d.PriceAfter += r.PricePerHour()
		d.MaxPriceAfter += r.Offerings[len(r.Offerings)-1].PricePerHour
		for _, p := range r.Pods {
			d.Placements = append(d.Placements, Placement{Pod: podRef(p), Replacement: i})
		}
	}
	if plan != nil {
		for _, np := range plan.ExistingNodes {
			for _, p := range np.Pods {
				d.Placements = append(d.Placements, Placement{Pod: podRef(p), Node: np.Name, Replacement: -1})
			}
		}
	}
	sort.Slice(d.Placements, func(i, j int) bool { return d.Placements[i].Pod < d.Placements[j].Pod })
	d.Savings = d.PriceBefore - d.PriceAfter
	d.ID = decisionID(reason, d.Candidates)
	if d.Why == "" {
		where := "the other nodes"
		if len(repl) > 0 {
			where = fmt.Sprintf("the other nodes and %d cheaper NodeClaim(s)", len(repl))
		}
		d.Why = fmt.Sprintf("%d pod(s) of %d node(s) fit on %s", len(d.Placements), len(set), where)
	}
	return d
}

// podsOf joins pod names for messages.
func podsOf(ps []*corev1.Pod) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = podRef(p)
	}
	return strings.Join(names, ",")
}
