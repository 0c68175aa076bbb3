package preview

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// placement is a pod and where a plan puts it: an existing node (node) or new NodeClaim claim.
type placement struct {
	pod   string
	node  string
	claim int // index into the plan's NodeClaims, -1 for an existing node
}

// apply carries a plan out in the world: its NodeClaims are launched and every placed pod is
// bound where the plan put it. Pods placed on an in-flight NodeClaim stay pending, nominated to
// it (its node has not registered, so nothing can bind there yet); Run reports them as
// Nominated, not unschedulable. Pod names are read before anything moves, as binding reorders
// the pod lists.
func (r *runner) apply(plan *provisioning.Plan) ([]PodMove, []Launch, error) {
	var ps []placement
	for _, e := range plan.ExistingNodes {
		if e.InFlight {
			for _, p := range e.Pods {
				if r.nominated == nil {
					r.nominated = map[string]string{}
				}
				r.nominated[podKey(p)] = e.Name
			}
			continue
		}
		for _, p := range e.Pods {
			ps = append(ps, placement{pod: podKey(p), node: e.Name, claim: -1})
		}
	}
	for i, nc := range plan.NodeClaims {
		for _, p := range nc.Pods {
			ps = append(ps, placement{pod: podKey(p), claim: i})
		}
	}
	for _, u := range plan.Unschedulable {
		if r.unplaced == nil {
			r.unplaced = map[string]string{}
		}
		r.unplaced[podKey(u.Pod)] = u.Reason
		delete(r.nominated, podKey(u.Pod)) // the latest plan decides
	}
	launches := make([]Launch, len(plan.NodeClaims))
	for i, nc := range plan.NodeClaims {
		l, err := r.launch(nc)
		if err != nil {
			return nil, nil, err
		}
		launches[i] = l
	}
	moves := make([]PodMove, 0, len(ps))
	for _, p := range ps {
		to := p.node
		if p.claim >= 0 {
			to = launches[p.claim].Name
		}
		moves = append(moves, PodMove{Pod: p.pod, To: to})
	}
	r.w.bindAll(moves)
	sort.Slice(moves, func(i, j int) bool { return moves[i].Pod < moves[j].Pod })
	return moves, launches, nil
}

// launch registers the NodeClaim's node in the world and describes it.
func (r *runner) launch(nc *provisioning.NodeClaimPlan) (Launch, error) {
	name, off, err := r.w.launch(nc)
	if err != nil {
		return Launch{}, err
	}
	l := Launch{Name: name, NodePool: nc.NodePool.Name, InstanceType: off.InstanceType.Name, Zone: off.Zone, CapacityType: off.CapacityType,
		PricePerHour: off.PricePerHour, PriceSource: string(off.PriceSource), InstanceTypeOptions: nc.InstanceTypeOptions()}
	for _, p := range nc.Pods {
		l.Pods = append(l.Pods, podKey(p))
	}
	sort.Strings(l.Pods)
	return l, nil
}

// placePending is the provision function's solve over the world's pending pods, applied.
func (r *runner) placePending() ([]PodMove, []Launch, error) {
	if len(r.w.snap.PendingPods) == 0 {
		return nil, nil, nil
	}
	in := provisioning.InputFromSnapshot(r.w.snap, r.o.Catalog, r.o.NodeSettings)
	in.Policies, in.Requests, in.Bins = r.o.Policies, r.reqs, r.bins
	plan, err := provisioning.Solve(in)
	if err != nil {
		return nil, nil, err
	}
	return r.apply(plan)
}

// provision places the pending pods, as the provision function does on a pods-pending event.
func (r *runner) provision() error {
	moves, launches, err := r.placePending()
	if err != nil || len(moves) == 0 {
		return err
	}
	d := Decision{Function: FunctionProvision, Action: ActionLaunch, Reason: ReasonPending, Moved: moves, Launched: launches,
		Why: fmt.Sprintf("%d pending pod(s) placed: %d on existing nodes, the others on %d new NodeClaim(s)", len(moves), onExisting(moves, launches), len(launches))}
	d.PricePerHourAfter = launchedPrice(launches)
	r.add(d)
	return nil
}

func onExisting(moves []PodMove, launches []Launch) int {
	fresh := map[string]bool{}
	for _, l := range launches {
		fresh[l.Name] = true
	}
	n := 0
	for _, m := range moves {
		if !fresh[m.To] {
			n++
		}
	}
	return n
}

func launchedPrice(ls []Launch) float64 {
	var s float64
	for _, l := range ls {
		s += l.PricePerHour
	}
	return s
}

// drainBlockers returns the nodes' evacuable pods a drain must wait for, and why, by node:
// those annotated karpenter.sh/do-not-disrupt (the termination path never evicts them) and
// those a PodDisruptionBudget allows no disruption of (the Eviction API refuses them). The
// budgets are evaluated once, on the cluster before any of these drains.
func (r *runner) drainBlockers(nodes ...string) (map[string]bool, map[string][]string) {
	var all []*corev1.Pod
	for i := range r.w.snap.Pods {
		all = append(all, &r.w.snap.Pods[i])
	}
	for i := range r.w.snap.PendingPods {
		all = append(all, &r.w.snap.PendingPods[i])
	}
	pdbs := disruption.NewPDBs(r.w.snap.PDBs, all)
	keep := map[string]bool{}
	waits := map[string][]string{}
	for _, p := range r.w.pods(nodes...) {
		if !disruption.Evacuable(p) {
			continue
		}
		node := p.Spec.NodeName
		if apisv1.PodDoNotDisrupt(p, r.w.now()) {
			keep[podKey(p)] = true
			waits[node] = append(waits[node], fmt.Sprintf("pod %s is annotated %s", podKey(p), apisv1.AnnotationDoNotDisrupt))
		} else if err := pdbs.Check([]*corev1.Pod{p}); err != nil {
			keep[podKey(p)] = true
			waits[node] = append(waits[node], err.Error())
		}
	}
	return keep, waits
}

// deadline is when a node being disrupted stops waiting for its drain: its NodeClaim's
// terminationGracePeriod after the NodeClaim's deletion (or after the disrupted taint).
func (r *runner) deadline(n *corev1.Node) (time.Time, bool) {
	nc := r.w.claimOf(n)
	if nc == nil || nc.Spec.TerminationGracePeriod == nil {
		return time.Time{}, false
	}
	if nc.DeletionTimestamp != nil {
		return nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration), true
	}
	for _, t := range n.Spec.Taints {
		if t.Key == apisv1.TaintKeyDisrupted && t.TimeAdded != nil {
			return t.TimeAdded.Add(nc.Spec.TerminationGracePeriod.Duration), true
		}
	}
	return time.Time{}, false
}

// waitUntil says how long a blocked drain waits.
func (r *runner) waitUntil(node string) string {
	if i := r.w.nodeIndex(node); i >= 0 {
		if at, ok := r.deadline(&r.w.snap.Nodes[i]); ok {
			return "the drain waits until the NodeClaim's terminationGracePeriod ends at " + at.UTC().Format(time.RFC3339) + ", then the pods left are deleted"
		}
	}
	return "the drain waits indefinitely: the NodeClaim has no terminationGracePeriod"
}

// drainAndPlace evicts what may leave the nodes now, places the evicted pods (one provision
// run for all of them), and marks each node to go at the end of the round when nothing on it
// waits.
func (r *runner) drainAndPlace(d *Decision, nodes ...string) error {
	keep, waits := r.drainBlockers(nodes...)
	r.w.evict(keep, nodes...)
	moves, launches, err := r.placePending()
	if err != nil {
		return err
	}
	d.Moved, d.Launched = append(d.Moved, moves...), append(d.Launched, launches...)
	for _, node := range nodes {
		if ws := waits[node]; len(ws) > 0 {
			d.Waits = append(append(d.Waits, ws...), r.waitUntil(node))
		} else {
			r.w.leaving[node] = true
		}
	}
	d.PricePerHourAfter = launchedPrice(d.Launched)
	return nil
}

// inProgress carries on the disruptions the cluster already has under way (nodes tainted
// karpenter.sh/disrupted or being deleted): each function continues its own, and the
// termination path drains what is deleted.
func (r *runner) inProgress() error {
	var names []string
	for i := range r.w.snap.Nodes {
		n := &r.w.snap.Nodes[i]
		nc := r.w.claimOf(n)
		if disruption.MarkedForDeletion(n, nc) {
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		n := &r.w.snap.Nodes[r.w.nodeIndex(name)]
		fn, why := FunctionLifecycle, "being deleted: the termination path drains it"
		for _, t := range n.Spec.Taints {
			switch {
			case t.Key != apisv1.TaintKeyDisrupted:
			case t.Value == disruption.TaintValueDrifted:
				fn, why = FunctionDrift, "tainted by an earlier drift decision: its replacement and drain go on"
			case strings.HasPrefix(t.Value, disruption.TaintValuePrefix):
				fn, why = FunctionConsolidation, "tainted by consolidation "+t.Value+": its drain goes on"
			case t.Value == disruption.TaintValueInterrupted:
				fn, why = "interruption", "interrupted: its drain goes on"
			}
		}
		d := Decision{Function: fn, Action: ActionContinue, Reason: ReasonInProgress, Why: why, Nodes: []NodeRef{r.w.ref(name)}}
		d.PricePerHourBefore = d.Nodes[0].PricePerHour
		if err := r.drainAndPlace(&d, name); err != nil {
			return err
		}
		r.add(d)
	}
	return nil
}

// terminateOverdue deletes the nodes whose drain waited out their terminationGracePeriod: the
// pods left are deleted and their controllers recreate them elsewhere.
func (r *runner) terminateOverdue() error {
	var names []string
	for i := range r.w.snap.Nodes {
		n := &r.w.snap.Nodes[i]
		if at, ok := r.deadline(n); ok && !r.w.leaving[n.Name] && !r.w.now().Before(at) && disruption.MarkedForDeletion(n, r.w.claimOf(n)) {
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		d := Decision{Function: FunctionLifecycle, Action: ActionDelete, Reason: ReasonGraceExpired, Nodes: []NodeRef{r.w.ref(name)},
			Why: "the NodeClaim's terminationGracePeriod has passed with its drain still blocked: the pods left are deleted"}
		d.PricePerHourBefore = d.Nodes[0].PricePerHour
		r.w.remove(name)
		moves, launches, err := r.placePending()
		if err != nil {
			return err
		}
		d.Moved, d.Launched, d.PricePerHourAfter = moves, launches, launchedPrice(launches)
		r.add(d)
	}
	return nil
}

// nextDeadline is the earliest future end of a blocked drain's grace period.
func (r *runner) nextDeadline() (time.Time, bool) {
	var best time.Time
	for i := range r.w.snap.Nodes {
		n := &r.w.snap.Nodes[i]
		if !disruption.MarkedForDeletion(n, r.w.claimOf(n)) {
			continue
		}
		if at, ok := r.deadline(n); ok && at.After(r.w.now()) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	return best, !best.IsZero()
}
