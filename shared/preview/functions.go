package preview

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/static"
)

// drift is the drift function on the world: disruption.PlanDrift finds the expired and drifted
// nodes. Expired nodes are handed to the termination path at once, all in one decision (their
// deletion then counts against the budgets, as the agent's ledger counts it), so the drifted
// nodes are chosen on a second PlanDrift that sees them being deleted; each chosen node is
// evacuated as the function does (disruption.EvacuationInput, provisioning.Solve), its
// replacements launched, the node tainted and drained.
func (r *runner) drift() error {
	if err := r.expire(disruption.PlanDrift(r.w.snap, r.o.NodeClassRules).Expired); err != nil {
		return err
	}
	plan := static.GateDrift(r.w.snap, disruption.PlanDrift(r.w.snap, r.o.NodeClassRules))
	for _, s := range plan.Blocked {
		r.block(Blocker{Node: s.Node, Function: FunctionDrift, Kind: s.Kind, Reason: "drifted but not replaced: " + s.Reason})
	}
	for _, s := range plan.OverBudget {
		r.block(Blocker{Node: s.Node, Function: FunctionDrift, Kind: disruption.BlockerBudget, Reason: "drifted but not replaced now: " + s.Reason})
	}
	for _, c := range plan.Selected {
		if err := r.replaceDrifted(c, plan.Budgets); err != nil {
			return err
		}
	}
	return nil
}

// expire hands the round's expired nodes to the termination path together, as the drift
// function does (disruption.ExpiryInput, ExpiryRound, Sequence), which follows Karpenter: its
// expiration controller deletes each expired NodeClaim with no simulation and no budget
// (sigs.k8s.io/karpenter pkg/controllers/nodeclaim/expiration), and its provisioner places the
// pods of every node being deleted, with the pending ones, over the nodes not being deleted
// (pkg/controllers/provisioning/provisioner.go, Schedule: nodes.Deleting() pods appended to the
// pending pods, nodes.Active() as the existing nodes). One plan places the evictable pods of
// all of them; its NodeClaims are launched (the function's launches) and its placements made,
// except for the pods a drain waits for (do-not-disrupt, a PodDisruptionBudget), which stay;
// pods with no place go pending. One decision carries the round's expired nodes.
func (r *runner) expire(cs []disruption.DriftCandidate) error {
	if len(cs) == 0 {
		return nil
	}
	const forceful = "handed to the termination path at once (expiry is forceful: no budget, no waiting for a replacement)"
	d := Decision{Function: FunctionDrift, Action: ActionDelete, Reason: disruption.ReasonExpired}
	names := make([]string, len(cs))
	whys := make([]string, len(cs))
	for i := range cs {
		names[i] = cs[i].Name()
		whys[i] = names[i] + " " + cs[i].Why()
		ref := r.w.ref(names[i])
		d.Nodes = append(d.Nodes, ref)
		d.PricePerHourBefore += ref.PricePerHour
	}
	if len(cs) == 1 {
		d.Why = cs[0].Why() + "; " + forceful
	} else {
		d.Why = fmt.Sprintf("%d nodes: %s; all %s; their pods are placed together, on the nodes not being deleted", len(cs), strings.Join(whys, ", "), forceful)
	}
	var plan *provisioning.Plan
	if in, ok := disruption.ExpiryInput(r.w.snap, r.o.Catalog, r.o.NodeSettings, cs); ok {
		in.Policies, in.Requests, in.Bins = r.o.Policies, r.reqs, r.bins
		var err error
		if plan, err = provisioning.Solve(in); err != nil {
			return err
		}
	}
	for _, dis := range disruption.ExpiryRound(cs, plan, r.w.snap.Revision, r.w.now()) {
		if err := r.sequence(&d, dis); err != nil {
			return err
		}
	}
	for _, name := range names {
		r.w.taint(name, "", true)
	}
	keep, waits := r.drainBlockers(names...)
	if plan != nil {
		var err error
		if d.Moved, d.Launched, err = r.apply(withoutPods(plan, keep)); err != nil {
			return err
		}
	}
	r.w.evict(keep, names...) // what the plan found no place for goes pending
	for _, name := range names {
		if ws := waits[name]; len(ws) > 0 {
			d.Waits = append(append(d.Waits, ws...), r.waitUntil(name))
		} else {
			r.w.leaving[name] = true
		}
	}
	d.PricePerHourAfter = launchedPrice(d.Launched)
	if len(d.Launched) > 0 {
		d.Action = ActionReplace
	}
	r.add(d)
	return nil
}

// replaceDrifted evacuates a drifted node as the drift function does: the plan for its pods
// with the node left out; the NodeClaims it needs are launched before the node is tainted and
// drained. A node whose pods would have no place is left alone.
func (r *runner) replaceDrifted(c disruption.DriftCandidate, budgets map[string]*events.BudgetReservation) error {
	name := c.Name()
	d := Decision{Function: FunctionDrift, Action: ActionDelete, Reason: apisv1.DisruptionReasonDrifted, Why: c.Why(),
		DriftedField: c.Drift.Field, Nodes: []NodeRef{r.w.ref(name)}}
	d.PricePerHourBefore = d.Nodes[0].PricePerHour
	var plan *provisioning.Plan
	if len(c.Pods) > 0 {
		var err error
		if plan, err = r.evacuation(name); err != nil {
			return err
		}
		if len(plan.Unschedulable) > 0 {
			u := plan.Unschedulable[0]
			r.block(Blocker{Node: name, Function: FunctionDrift, Kind: disruption.BlockerNoPlace,
				Reason: fmt.Sprintf("drifted but not replaced: pod %s would have no place: %s", podKey(u.Pod), u.Reason)})
			return nil
		}
		if err := r.sequence(&d, disruption.DriftStart(c, plan, budgets, r.w.snap.Revision, r.w.now())); err != nil {
			return err
		}
		keep, waits := r.drainBlockers(name)
		if d.Moved, d.Launched, err = r.apply(withoutPods(plan, keep)); err != nil {
			return err
		}
		if ws := waits[name]; len(ws) > 0 {
			d.Waits = append(ws, r.waitUntil(name))
		}
	}
	if plan == nil {
		if err := r.sequence(&d, disruption.DriftStart(c, nil, budgets, r.w.snap.Revision, r.w.now())); err != nil {
			return err
		}
	}
	if len(d.Launched) > 0 {
		d.Action = ActionReplace
	}
	d.PricePerHourAfter = launchedPrice(d.Launched)
	r.w.taint(name, disruption.TaintValueDrifted, false)
	if len(d.Waits) == 0 {
		r.w.leaving[name] = true
	}
	r.add(d)
	return nil
}

// evacuation is the plan for the node's evictable pods with the node left out, as the drift
// function makes it (disruption.EvacuationInput, provisioning.Solve).
func (r *runner) evacuation(node string) (*provisioning.Plan, error) {
	in, _ := disruption.EvacuationInput(r.w.snap, r.o.Catalog, r.o.NodeSettings, []string{node}, nil)
	in.Policies, in.Requests, in.Bins = r.o.Policies, r.reqs, r.bins
	return provisioning.Solve(in)
}

// sequence records on d the commands the deciding function publishes for dis: the one
// disruption.Sequence every function runs.
func (r *runner) sequence(d *Decision, dis disruption.Disruption) error {
	steps, err := disruption.Sequence(r.w.snap.Cluster, dis)
	if err != nil {
		return err
	}
	d.Commands = append(d.Commands, disruption.CommandLines(steps)...)
	return nil
}

// withoutPods drops from the plan's placements the pods that stay where they are (a drain
// waits for them); the NodeClaims launched for them are still launched, as the function does.
func withoutPods(plan *provisioning.Plan, keep map[string]bool) *provisioning.Plan {
	if len(keep) == 0 {
		return plan
	}
	moving := func(ps []*corev1.Pod) []*corev1.Pod {
		var out []*corev1.Pod
		for _, p := range ps {
			if !keep[podKey(p)] {
				out = append(out, p)
			}
		}
		return out
	}
	out := &provisioning.Plan{Unschedulable: plan.Unschedulable}
	for _, e := range plan.ExistingNodes {
		c := *e
		c.Pods = moving(e.Pods)
		out.ExistingNodes = append(out.ExistingNodes, &c)
	}
	for _, nc := range plan.NodeClaims {
		c := *nc
		c.Pods = moving(nc.Pods)
		out.NodeClaims = append(out.NodeClaims, &c)
	}
	return out
}

// consolidate is the consolidate function on the world: disruption.NewState and
// disruption.Consolidate decide one consolidation (none while another is in flight), which is
// carried out: replacements launched, pods moved where the decision placed them, candidates
// tainted and gone at the end of the round. Every node of a NodePool that is not a candidate is
// reported with why, and candidates a disruption budget holds back as blocked by it.
func (r *runner) consolidate() error {
	st, err := disruption.NewState(r.w.snap, r.o.Catalog, r.o.NodeSettings)
	if err != nil {
		return err
	}
	st.Policies, st.Requests, st.Bins = r.o.Policies, r.reqs, r.bins
	if p := disruption.InFlight(st); len(p) > 0 {
		r.cur.Notes = append(r.cur.Notes, fmt.Sprintf("consolidation %s is in flight: no new decision until it is done", p[0].ID))
		return nil
	}
	d, rep := disruption.Consolidate(st, r.o.Consolidation)
	r.cur.Notes = append(r.cur.Notes, rep.Tried...)
	r.cur.Notes = append(r.cur.Notes, rep.BudgetErrors...)
	for _, s := range rep.Skipped {
		if r.w.leaving[s.Node] || strings.HasPrefix(s.Reason, "already being disrupted") {
			continue // another decision of this round (or one under way) has the node
		}
		r.block(Blocker{Node: s.Node, Function: FunctionConsolidation, Kind: s.First.Kind, Reason: s.Reason})
	}
	r.budgetBlocked(st, d, rep)
	if d == nil {
		return nil
	}
	out := Decision{Function: FunctionConsolidation, Action: ActionDelete, Reason: d.Reason, Why: d.Why + " (" + d.Strategy + ")",
		PricePerHourBefore: d.PriceBefore, PricePerHourAfter: d.PriceAfter}
	if d.Method == disruption.MethodReplace {
		out.Action = ActionReplace
	}
	for _, c := range d.Candidates {
		out.Nodes = append(out.Nodes, r.w.ref(c.Node))
	}
	if err := r.sequence(&out, d.Start(st, r.w.snap.Revision)); err != nil {
		return err
	}
	for _, repl := range d.Replacements {
		l, err := r.launch(repl)
		if err != nil {
			return err
		}
		out.Launched = append(out.Launched, l)
	}
	for _, p := range d.Placements {
		to := p.Node
		if p.Replacement >= 0 {
			to = out.Launched[p.Replacement].Name
		}
		out.Moved = append(out.Moved, PodMove{Pod: p.Pod, To: to})
	}
	r.w.bindAll(out.Moved)
	for _, c := range d.Candidates {
		r.w.taint(c.Node, d.TaintValue(), false)
		r.w.leaving[c.Node] = true
	}
	r.add(out)
	return nil
}

// budgetBlocked reports the candidates a disruption budget holds back: those of a pool whose
// budget for their reason (Empty or Underutilized) the decision, if any, has used up.
func (r *runner) budgetBlocked(st *disruption.State, d *disruption.Decision, rep *disruption.Report) {
	cands, _ := st.Candidates()
	in := map[string]bool{}
	used := map[string]int{}
	if d != nil {
		for _, c := range d.Candidates {
			in[c.Node] = true
			used[c.NodePool+"/"+d.Reason]++
		}
	}
	for _, c := range cands {
		reason := apisv1.DisruptionReasonUnderutilized
		if c.Empty {
			reason = apisv1.DisruptionReasonEmpty
		}
		key := c.Pool.Name + "/" + reason
		allowed, ok := rep.Budgets[key]
		if in[c.Name()] || !ok || allowed-used[key] > 0 {
			continue
		}
		cnt := st.Counts[c.Pool.Name]
		why := fmt.Sprintf("NodePool %s: disruption budget for %s allows %d node(s) now (%d of %d nodes already disrupting)",
			c.Pool.Name, reason, allowed, cnt.Disrupting, cnt.Nodes)
		if used[key] > 0 {
			why = fmt.Sprintf("NodePool %s: disruption budget for %s allows %d node(s) now, all taken by this round's consolidation (%d of %d nodes already disrupting)",
				c.Pool.Name, reason, allowed, cnt.Disrupting, cnt.Nodes)
		}
		r.block(Blocker{Node: c.Name(), Function: FunctionConsolidation, Kind: disruption.BlockerBudget, Reason: why})
	}
}

// sortBlockers orders a round's blockers by node, then function.
func sortBlockers(bs []Blocker) {
	sort.SliceStable(bs, func(i, j int) bool {
		if bs[i].Node != bs[j].Node {
			return bs[i].Node < bs[j].Node
		}
		return bs[i].Function < bs[j].Function
	})
}
