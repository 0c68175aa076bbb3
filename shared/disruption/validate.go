package disruption

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// Validate re-checks a decision against a fresh state (a later snapshot) before anything
// irreversible is done, and returns the decision re-made on the fresh state for the same
// candidates: every candidate still exists with the same NodeClaim and is still a candidate
// (initialized, not disrupting, no do-not-disrupt, consolidateAfter passed, pods movable and
// PDBs allowing), the candidates' pools still have budget for them, and the set still
// consolidates with a saving on the fresh state (its pods all placed, replacements cheaper). It
// returns an error naming the first rule that no longer holds.
func Validate(d *Decision, fresh *State) (*Decision, error) {
	if d == nil || len(d.Candidates) == 0 {
		return nil, fmt.Errorf("decision: no candidates")
	}
	if len(fresh.pending) > 0 {
		return nil, fmt.Errorf("%d pod(s) are pending", len(fresh.pending))
	}
	set := make([]*Candidate, 0, len(d.Candidates))
	perPool := map[string]int{}
	for _, ref := range d.Candidates {
		n := fresh.Node(ref.Node)
		switch {
		case n == nil:
			return nil, fmt.Errorf("node %s is gone", ref.Node)
		case n.Claim == nil || n.Claim.Name != ref.NodeClaim || string(n.Claim.UID) != ref.NodeClaimUID:
			return nil, fmt.Errorf("node %s is no longer recorded by NodeClaim %s", ref.Node, ref.NodeClaim)
		}
		if why := fresh.whyNot(n); why != "" {
			return nil, fmt.Errorf("node %s: %s", ref.Node, why)
		}
		c := &Candidate{Node: n, Empty: len(n.Movable) == 0, DisruptionCost: fresh.DisruptionCost(n)}
		if d.Reason == apisv1.DisruptionReasonEmpty && !c.Empty {
			return nil, fmt.Errorf("node %s is no longer empty: %s", ref.Node, podsOf(n.Movable))
		}
		if d.Reason == apisv1.DisruptionReasonUnderutilized && policy(n.Pool) != apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
			return nil, fmt.Errorf("nodepool %q no longer consolidates underutilized nodes", n.Pool.Name)
		}
		set = append(set, c)
		perPool[n.Pool.Name]++
	}
	budget := fresh.budgets(d.Reason, nil)
	for _, pool := range sortedKeysInt(perPool) {
		if perPool[pool] > budget[pool] {
			return nil, fmt.Errorf("nodepool %q: budget for %s allows %d disruption(s) now, the decision needs %d", pool, d.Reason, budget[pool], perPool[pool])
		}
	}
	if d.Reason == apisv1.DisruptionReasonEmpty {
		nd := fresh.decision(set, d.Reason, d.Strategy, nil, nil)
		nd.Why = d.Why
		return nd, nil
	}
	nd, why := fresh.evaluate(set, -1, d.Strategy)
	if nd == nil {
		return nil, fmt.Errorf("no longer consolidates: %s", why)
	}
	return nd, nil
}

func sortedKeysInt(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

// ReplacementLock is how long a replacement NodeClaim launched by a decision whose candidates
// are not (yet) tainted holds back new decisions: the taint commands were published with the
// launch and normally land within seconds; past this, the decision is taken as abandoned (its
// taints refused as stale) and the replacement is ordinary capacity.
const ReplacementLock = 2 * time.Minute

// Progress is one consolidation in flight, found from the cluster: nodes tainted
// karpenter.sh/disrupted with a consolidation taint value, and the replacement NodeClaims
// annotated with the decision's ID.
type Progress struct {
	ID string
	// Expected is how many replacements the decision launched (from the taint value).
	Expected     int
	Candidates   []*Node
	Replacements []*apisv1.NodeClaim
	// Drain are candidates whose pods may be evicted now: replacements initialized and every pod
	// of the candidates placed on the other nodes in a fresh simulation.
	Drain []*Node
	// Finish are candidates with no movable pod left, to be handed to the termination path
	// (FinishCommands), which terminates the instance and deletes the Node and the NodeClaim.
	Finish []*Node
	// Waiting says why the rest waits ("" when nothing waits).
	Waiting string
	// Rollback says why the decision is given up ("" when it is not): it waited
	// ConsolidationTimeout since its candidates were tainted without any candidate finishing, or
	// DrainDeficitTimeout with its replacements ready and no room for the candidates' pods (or a
	// pod bound to a candidate after the decision forbidding the drain). Its
	// candidates are untainted and serve pods again.
	Rollback string
}

// ConsolidationTimeout is how long a consolidation may wait (replacements that never become
// ready, a drain a PodDisruptionBudget keeps blocked) before its taints are removed: 10 minutes,
// as long as Karpenter's disruption queue retries a command before rolling it back.
const ConsolidationTimeout = 10 * time.Minute

// DrainDeficitTimeout is how long a consolidation whose replacements are all initialized may wait
// for a drain that lacks room (ErrDrainWaits: the candidates' pods would need more NodeClaims, or
// a pod would have no place) before it is rolled back: 1 minute from the later of the taint and
// the last replacement's initialization. Such a deficit comes from pods the kube-scheduler placed
// on the replacements after the decision, or pods pending beside it; the first kind never clears,
// and waiting the full ConsolidationTimeout would hold the pool's disruption budget (and stall
// drift) for 10 minutes. Pending pods that the provisioner is placing clear within seconds. The
// rolled-back candidates serve pods again and the next round decides on the cluster as it is.
const DrainDeficitTimeout = time.Minute

// ErrDrainBlockedByPod marks a drain a pod on a candidate forbids: one annotated do-not-disrupt
// or without a controller, bound there after the decision (the decision itself never picks such
// a node). Karpenter re-validates its candidates before committing a command and abandons it
// when one became invalid (pkg/controllers/disruption validation); here the decision is rolled
// back after DrainDeficitTimeout rather than holding the pool's budget for ConsolidationTimeout.
var ErrDrainBlockedByPod = errors.New("drain blocked")

// ErrDrainWaits marks a drain that waits for room for the candidates' pods (ValidateDrain), as
// opposed to one a PodDisruptionBudget or a do-not-disrupt annotation blocks.
var ErrDrainWaits = errors.New("drain waits")

// taintedAt is when the node got its karpenter.sh/disrupted taint (its timeAdded; zero when
// the taint carries none).
func taintedAt(n *Node) time.Time {
	for _, t := range n.Node.Spec.Taints {
		if t.Key == apisv1.TaintKeyDisrupted && t.TimeAdded != nil {
			return t.TimeAdded.Time
		}
	}
	return time.Time{}
}

// InFlight returns the consolidations in progress, by ID, with what to do next for each.
func InFlight(s *State) []*Progress {
	byID := map[string]*Progress{}
	var ids []string
	for _, n := range s.Nodes {
		id, k, ok := ParseTaintValue(n.TaintValue)
		if !ok || n.Node.DeletionTimestamp != nil {
			continue
		}
		p := byID[id]
		if p == nil {
			p = &Progress{ID: id, Expected: k}
			byID[id] = p
			ids = append(ids, id)
		}
		p.Candidates = append(p.Candidates, n)
	}
	for _, nc := range s.claims {
		if p := byID[nc.Annotations[AnnotationDecision]]; p != nil {
			p.Replacements = append(p.Replacements, nc)
		}
	}
	sortStrings(ids)
	out := make([]*Progress, 0, len(ids)+1)
	for _, id := range ids {
		p := byID[id]
		var busy []*Node
		for _, n := range p.Candidates {
			if len(n.Movable) == 0 {
				p.Finish = append(p.Finish, n)
			} else {
				busy = append(busy, n)
			}
		}
		deficit := false
		if len(busy) > 0 {
			if why := s.replacementsReady(p); why != "" {
				p.Waiting = why
			} else if err := s.validateDrain(busy, p.Replacements); err != nil {
				p.Waiting, deficit = err.Error(), errors.Is(err, ErrDrainWaits) || errors.Is(err, ErrDrainBlockedByPod)
			} else {
				p.Drain = busy
			}
		}
		if p.Waiting != "" && len(p.Finish) == 0 {
			var first, last time.Time
			for _, n := range p.Candidates {
				if t := taintedAt(n); !t.IsZero() {
					if first.IsZero() || t.Before(first) {
						first = t
					}
					if t.After(last) {
						last = t
					}
				}
			}
			switch {
			case !first.IsZero() && s.Now.Sub(first) >= ConsolidationTimeout:
				p.Rollback = fmt.Sprintf("waited %s since the taint (%s); the candidates serve pods again", s.Now.Sub(first).Round(time.Second), p.Waiting)
			case deficit && !last.IsZero():
				since := last
				for _, nc := range p.Replacements {
					if t := s.initializedAt(nc); t.After(since) {
						since = t
					}
				}
				if s.Now.Sub(since) >= DrainDeficitTimeout {
					p.Rollback = fmt.Sprintf("the replacements are ready but the candidates' pods still cannot move %s later (%s); the candidates serve pods again",
						s.Now.Sub(since).Round(time.Second), p.Waiting)
				}
			}
		}
		out = append(out, p)
	}
	if lock := s.launchLock(byID); lock != nil {
		out = append(out, lock)
	}
	return out
}

// replacementsReady returns why the decision's replacements are not all initialized yet.
func (s *State) replacementsReady(p *Progress) string {
	if len(p.Replacements) < p.Expected {
		return fmt.Sprintf("%d of %d replacement NodeClaim(s) recorded", len(p.Replacements), p.Expected)
	}
	for _, nc := range p.Replacements {
		node := s.nodeOf(nc)
		if node == nil {
			return fmt.Sprintf("replacement %s has not registered a node yet", nc.Name)
		}
		if !node.Initialized {
			return fmt.Sprintf("replacement %s (node %s) is not initialized yet", nc.Name, node.Name())
		}
	}
	return ""
}

// nodeOf is the node a NodeClaim registered: by status.nodeName, else by provider ID (nil when
// none is in the snapshot).
func (s *State) nodeOf(nc *apisv1.NodeClaim) *Node {
	if nc.Status.NodeName != "" {
		if n := s.Node(nc.Status.NodeName); n != nil {
			return n
		}
	}
	if nc.Status.ProviderID == "" {
		return nil
	}
	for _, n := range s.Nodes {
		if n.Node.Spec.ProviderID == nc.Status.ProviderID {
			return n
		}
	}
	return nil
}

// initializedAt is when the replacement became initialized: its NodeClaim's Initialized
// condition, else its node's Ready condition, else its node's creation (zero when unknown).
func (s *State) initializedAt(nc *apisv1.NodeClaim) time.Time {
	for _, c := range nc.Status.Conditions {
		if c.Type == apisv1.ConditionInitialized && c.Status == "True" && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	var node *Node
	if nc.Status.NodeName != "" {
		node = s.Node(nc.Status.NodeName)
	}
	if node == nil {
		return time.Time{}
	}
	for _, c := range node.Node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return node.Node.CreationTimestamp.Time
}

// launchLock reports a decision whose replacements were launched but whose candidates carry no
// taint yet (the taint commands have not landed): no new decision may start meanwhile, or it
// could pick the same nodes and launch twice. Nil when there is none. A replacement whose node
// has joined holds no lock: the taints were published with its launch, before it booted, so
// untainted candidates by then mean the decision was rolled back (or its taints refused), and
// its replacements are ordinary capacity. (make scale, N = 1,000: a rolled-back decision's seven
// replacements held every new consolidation for the rest of ReplacementLock.)
func (s *State) launchLock(tainted map[string]*Progress) *Progress {
	for _, nc := range s.claims {
		id := nc.Annotations[AnnotationDecision]
		if id == "" || tainted[id] != nil || s.Now.Sub(nc.CreationTimestamp.Time) >= ReplacementLock || s.nodeOf(nc) != nil {
			continue
		}
		for _, name := range strings.Split(nc.Annotations[AnnotationReplaces], ",") {
			if n := s.Node(name); n != nil && n.TaintValue == "" {
				return &Progress{ID: id, Replacements: []*apisv1.NodeClaim{nc},
					Waiting: fmt.Sprintf("replacement %s was launched at %s; waiting for its candidates' taints", nc.Name, nc.CreationTimestamp.UTC().Format(time.RFC3339))}
			}
		}
	}
	return nil
}

// ValidateDrain checks, on a fresh state, that the nodes may be drained now: no pod on them is
// annotated do-not-disrupt or lacks a controller, their PDBs allow evicting all of them, and
// the bin-packing core places every one of their pods on the other nodes (with the snapshot's
// pending pods placed too) without any new NodeClaim. This is the "every evicted pod has a
// place before its node is drained" rule.
func ValidateDrain(s *State, nodes []*Node) error { return s.validateDrain(nodes, nil) }

// validateDrain is ValidateDrain for a consolidation in flight whose replacements (initialized)
// are given: when the fresh simulation over every other node still needs new NodeClaims, the
// drain may go on if the replacements hold what the decision launched them for
// (replacementsHold). A fresh simulation packs the candidates' pods onto the replacements as
// onto any existing node, by its first-fit rules, and cannot always find the packing the
// decision chose when it sized the replacements for those pods (new NodeClaims are packed with
// the solver's refinements, existing nodes are not), so without this a multi-node
// consolidation whose replacements are nearly full by design waits for NodeClaims nobody
// launches and is rolled back after DrainDeficitTimeout, leaving the cluster dearer than before
// (make scale, N = 200, docs/scale.md).
func (s *State) validateDrain(nodes []*Node, replacements []*apisv1.NodeClaim) error {
	var pods []*corev1.Pod
	remove := map[string]bool{}
	for _, n := range nodes {
		pods = append(pods, n.Movable...)
		remove[n.Name()] = true
	}
	if why := PodsBlock(pods, s.Now); why != "" {
		return fmt.Errorf("%w: %s", ErrDrainBlockedByPod, why)
	}
	if err := s.PDBs.Check(pods); err != nil {
		return fmt.Errorf("drain blocked: %w", err)
	}
	own := map[*corev1.Pod]bool{}
	for _, p := range pods {
		own[p] = true
	}
	plan, err := s.Simulate(remove, append(append([]*corev1.Pod(nil), pods...), s.pending...))
	if err != nil {
		return err
	}
	for _, u := range plan.Unschedulable {
		if own[u.Pod] {
			return fmt.Errorf("%w: pod %s would have no place: %s", ErrDrainWaits, podRef(u.Pod), u.Reason)
		}
	}
	if len(plan.NodeClaims) > 0 {
		if ok, err := s.replacementsHold(remove, pods, own, replacements); err != nil || ok {
			return err
		}
		return fmt.Errorf("%w: the pods need %d more NodeClaim(s) than exist%s", ErrDrainWaits, len(plan.NodeClaims), firstNeeding(plan, own))
	}
	return nil
}

// firstNeeding names the first pod the plan puts on a new NodeClaim, and whether it is one of
// the candidates' (own) or a pending pod, so a drain that waits says what it waits for.
func firstNeeding(plan *provisioning.Plan, own map[*corev1.Pod]bool) string {
	for _, c := range plan.NodeClaims {
		if len(c.Pods) == 0 {
			continue
		}
		whose := "pending"
		if own[c.Pods[0]] {
			whose = "a candidate's"
		}
		return fmt.Sprintf(" (first: %s, %s)", podRef(c.Pods[0]), whose)
	}
	return ""
}

// replacementsHold reports whether the candidates' pods (own; with the snapshot's pending pods)
// fit on the other nodes and the decision's replacements when the replacements are taken as
// what the decision saw them as: new NodeClaims. It runs the decision's kind of simulation (the
// removed nodes and the replacements' nodes left out, the pods placed on the rest and on new
// NodeClaims) and matches each new NodeClaim of the result to a distinct replacement node that
// it could have been launched as: of its NodePool, its instance type, zone and capacity type
// one of the NodeClaim's offerings (which carry its requirements, the pods' included, as
// Karpenter's validation compares a replacement's instance types), and the node's free
// allocatable (after the pods already on it: DaemonSet pods) at least the NodeClaim's requests.
// Then every pod has a place: those the simulation put on existing nodes there, the others on
// the matched replacement. Only replacements with no movable pod qualify: a pod the
// kube-scheduler bound to one after the decision takes room this check could not account for
// without moving it, so then the drain waits (the DrainDeficitTimeout case).
func (s *State) replacementsHold(remove map[string]bool, pods []*corev1.Pod, own map[*corev1.Pod]bool, replacements []*apisv1.NodeClaim) (bool, error) {
	if len(replacements) == 0 {
		return false, nil
	}
	nodes := make([]*Node, 0, len(replacements))
	without := make(map[string]bool, len(remove)+len(replacements))
	for k := range remove {
		without[k] = true
	}
	for _, nc := range replacements {
		n := s.nodeOf(nc)
		if n == nil || !n.binnable || len(n.Movable) > 0 || remove[n.Name()] || without[n.Name()] {
			return false, nil
		}
		nodes = append(nodes, n)
		without[n.Name()] = true
	}
	plan, err := s.Simulate(without, append(append([]*corev1.Pod(nil), pods...), s.pending...))
	if err != nil {
		return false, err
	}
	for _, u := range plan.Unschedulable {
		if own[u.Pod] {
			return false, nil
		}
	}
	if len(plan.NodeClaims) > len(nodes) {
		return false, nil
	}
	return matchClaims(plan.NodeClaims, nodes, launchableAs), nil
}

// launchableAs reports whether node could be the planned NodeClaim: the same NodePool, its
// offering among the NodeClaim's, room for the NodeClaim's pods.
func launchableAs(c *provisioning.NodeClaimPlan, n *Node) bool {
	if c.NodePool == nil || n.Pool == nil || c.NodePool.Name != n.Pool.Name || !c.Requests.Fits(n.free) {
		return false
	}
	for _, o := range c.Offerings {
		if o.InstanceType != nil && o.InstanceType.Name == n.InstanceType && o.Zone == n.Zone && o.CapacityType == n.CapacityType {
			return true
		}
	}
	return false
}

// matchClaims reports whether every planned NodeClaim can be given a distinct node it fits
// (a bipartite matching by augmenting paths; both sides are a decision's few replacements).
func matchClaims(claims []*provisioning.NodeClaimPlan, nodes []*Node, fits func(*provisioning.NodeClaimPlan, *Node) bool) bool {
	owner := make([]int, len(nodes)) // node → claim index, -1 when free
	for i := range owner {
		owner[i] = -1
	}
	var try func(c int, seen []bool) bool
	try = func(c int, seen []bool) bool {
		for j, n := range nodes {
			if seen[j] || !fits(claims[c], n) {
				continue
			}
			seen[j] = true
			if owner[j] < 0 || try(owner[j], seen) {
				owner[j] = c
				return true
			}
		}
		return false
	}
	for c := range claims {
		if !try(c, make([]bool, len(nodes))) {
			return false
		}
	}
	return true
}
