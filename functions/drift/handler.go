// Package drift is the drift function: on every snapshot (the agent's timer, or a pending-pods
// batch) it replaces nodes that drifted from their NodePool or NodeClass (disruption.PlanDrift),
// gracefully and within the NodePools' disruption budgets (reason Drifted; each taint reserves
// its unit with the agent), empty nodes first, then oldest first. Expired NodeClaims are handed
// to the termination path at once (StepExpire): expiry is forceful, as in Karpenter v1.
//
// Each node goes through three steps, one or more snapshots apart; the cluster holds the state
// between them (the karpenter.sh/disrupted=drifted taint and its timeAdded), so the function
// stays stateless:
//  1. Start (node selected within budget): plan its evacuable pods elsewhere with the node left
//     out, launch the replacement NodeClaims the plan needs, then taint the node. A node whose
//     pods would have no place is skipped (reported), never tainted.
//  2. Drain (every later snapshot while pods remain): when every pod has a place on ready
//     capacity (the replacements have registered), ask for the drain; the Eviction API keeps
//     PDBs. A replacement that vanished is launched again.
//  3. Delete (no evacuable pod left, or the NodeClaim's terminationGracePeriod has passed since
//     the taint while the drain is still blocked): terminate the instance, delete the Node and the
//     NodeClaim.
package drift

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/launch"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/static"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Component is the function's name in event sources and consumer names.
const Component = "drift"

// Steps a node can be at in a Decision.
const (
	StepStart       = "start"        // replacement launched (if needed) and node tainted
	StepWait        = "wait"         // replacement not ready yet
	StepDrain       = "drain"        // drain asked for
	StepDelete      = "delete"       // node empty: instance terminated, Node and NodeClaim deleted
	StepForceDelete = "force-delete" // terminationGracePeriod passed with the drain blocked
	StepSkip        = "skip"         // pods would have no place, or a launch failed
	StepExpire      = "expire"       // past expireAfter: handed to the termination path at once (forceful)
)

// Handler handles one event. Its exported fields are its dependencies; its only state is a
// hint (decided) that skips superseded events.
type Handler struct {
	Cluster string
	Catalog *catalog.Catalog
	// NodeSettings is the cloud provider's NodeClass → node settings rule (cloud.NodeSettingsFor).
	NodeSettings provisioning.NodeSettingsFunc
	// Policies are the operator's --min-values-policy and --preference-policy (zero: Strict,
	// Respect), which every plan of the function is made under.
	Policies  provisioning.Policies
	Provider  cloud.Provider
	Publisher queue.Publisher
	Codec     events.Codec
	Log       *slog.Logger
	// OnDecision, when set, receives every decision (local dev prints them).
	OnDecision func(Decision)
	// Now is the function's clock (default time.Now): expiry and the termination grace period
	// read it, and a snapshot dated more than events.MaxClockSkew from it is refused.
	Now func() time.Time
	// Metrics receives the function's metrics (nil: none).
	Metrics telemetry.Recorder

	// decided is the newest snapshot revision decided on, a hint that lets events holding an
	// older snapshot be acknowledged unread (emit.Decided); losing it (a new process) costs
	// only a decode.
	decided emit.Decided
	// started are the drifted nodes whose disruption was started here and that no snapshot
	// shows started yet (emit.Started): a later message does not start them again.
	started emit.Started
}

// Decision is what one snapshot led to.
type Decision struct {
	Revision   int64
	Steps      []Step
	Blocked    []disruption.DriftSkip
	OverBudget []disruption.DriftSkip
}

// Step is one node's progress in this decision.
type Step struct {
	Node     string
	Step     string
	Why      string // the drift or expiry reason
	Detail   string // what was done or why not
	Launched []string
}

// String renders the decision for people, one line per node.
func (d Decision) String() string {
	var b strings.Builder
	for _, l := range d.Lines() {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// Line is one node's line of a decision: the node, its state (the step, "over-budget" or
// "blocked"), and the text String prints for it. A printer that re-runs decisions uses Node and
// State to show a repeated state once.
type Line struct{ Node, State, Text string }

// Lines renders the decision one line per node: the steps, then the nodes over budget, then
// the blocked ones.
func (d Decision) Lines() []Line {
	var out []Line
	for _, s := range d.Steps {
		text := fmt.Sprintf("%-12s %s — %s; %s", s.Step, s.Node, s.Why, s.Detail)
		if len(s.Launched) > 0 {
			text += fmt.Sprintf(" (launched %s)", strings.Join(s.Launched, ", "))
		}
		out = append(out, Line{Node: s.Node, State: s.Step, Text: text})
	}
	for _, s := range d.OverBudget {
		out = append(out, Line{Node: s.Node, State: "over-budget", Text: fmt.Sprintf("%-12s %s — %s", "over-budget", s.Node, s.Reason)})
	}
	for _, s := range d.Blocked {
		out = append(out, Line{Node: s.Node, State: "blocked", Text: fmt.Sprintf("%-12s %s — %s", "blocked", s.Node, s.Reason)})
	}
	return out
}

// Handle processes a snapshot or pods-pending event. Malformed events and events of any other
// type (emit.Accept) wrap queue.ErrPoison; transport and cloud errors ask for redelivery; nil
// acknowledges.
func (h *Handler) Handle(ctx context.Context, msg queue.Message) error {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return fmt.Errorf("%w: %w", queue.ErrPoison, err)
	}
	if err := emit.Accept(Component, env.Type, events.TypeSnapshot, events.TypePodsPending); err != nil {
		return err
	}
	if h.decided.Superseded(env, msg.Attempt) {
		return nil // a newer snapshot was decided on already (emit.Decided)
	}
	snap, err := emit.Open(ctx, h.Codec, h.Cluster, env, msg.Attempt, h.Metrics, Component)
	if err != nil {
		return err
	}
	if snap, err = emit.Dated(snap, emit.Clock(h.Now)); err != nil {
		if errors.Is(err, emit.ErrStaleSnapshot) {
			h.log().Warn("stale snapshot skipped; a newer one follows", "err", err)
			return nil
		}
		return err
	}
	d, err := h.Decide(ctx, snap)
	if err == nil {
		h.decided.Record(snap.Revision)
	}
	if h.OnDecision != nil && (len(d.Steps) > 0 || len(d.Blocked) > 0 || len(d.OverBudget) > 0) {
		h.OnDecision(d)
	}
	return err
}

// Decide runs one drift decision on snap: each expired, in-progress and selected node becomes
// one disruption (disruption.Sequence) that is carried out in order (emit.RunSequence).
func (h *Handler) Decide(ctx context.Context, snap *events.Snapshot) (Decision, error) {
	plan := static.GateDrift(snap, disruption.PlanDrift(snap, cloud.RulesOf(h.Provider)))
	d := Decision{Revision: snap.Revision, Blocked: plan.Blocked, OverBudget: plan.OverBudget}
	telemetry.OrNop(h.Metrics).Record(telemetry.DisruptionEligibleNodes, float64(len(plan.Selected)+len(plan.OverBudget)), "drifted")
	steps, err := h.expire(ctx, snap, plan.Expired)
	d.Steps = append(d.Steps, steps...)
	if err != nil {
		return d, err
	}
	unseen := h.started.Unseen(snap, snap.Time.Time)
	for _, phase := range []struct {
		cands []disruption.DriftCandidate
		step  func(context.Context, *events.Snapshot, disruption.DriftCandidate, map[string]*events.BudgetReservation) (Step, error)
	}{{plan.InProgress, h.progress}, {plan.Selected, h.start}} {
		for _, c := range phase.cands {
			if _, ok := unseen[c.Name()]; ok {
				// Started by an earlier message; its taint has not reached this snapshot.
				d.Steps = append(d.Steps, Step{Node: c.Name(), Why: c.Why(), Step: StepSkip,
					Detail: "started by an earlier message; waiting for a snapshot that shows its taint"})
				continue
			}
			s, err := phase.step(ctx, snap, c, plan.Budgets)
			if err != nil {
				return d, err
			}
			d.Steps = append(d.Steps, s)
		}
	}
	if err := h.blocked(ctx, snap, plan); err != nil {
		return d, err
	}
	// The Drifted condition a Karpenter dashboard reads, for every judged NodeClaim.
	for _, c := range disruption.DriftConditions(snap, cloud.RulesOf(h.Provider)) {
		if err := h.publish(ctx, snap, c); err != nil {
			return d, err
		}
	}
	h.audit(snap, d)
	h.log().Info("drift decision", "revision", snap.Revision, "steps", len(d.Steps), "blocked", len(d.Blocked), "overBudget", len(d.OverBudget))
	return d, nil
}

// expire hands the round's expired nodes to the termination path at once, together: expiry is
// forceful in Karpenter v1 (no budget, no do-not-disrupt wait, no waiting for a replacement),
// and their evictable pods get capacity in the same decision, one plan for all of them
// (disruption.ExpiryInput: every expired node left out), launched first but not waited for, as
// Karpenter's provisioner schedules the pods of all nodes being deleted along with the pending
// ones (sigs.k8s.io/karpenter pkg/controllers/provisioning/provisioner.go, Schedule:
// nodes.Deleting() pods appended to the pending pods, nodes.Active() as capacity). So no pod is
// planned onto a node that expires in the same round. One Step per node; the launches are on
// the first one's. Pods with no place are named.
func (h *Handler) expire(ctx context.Context, snap *events.Snapshot, cs []disruption.DriftCandidate) ([]Step, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	steps := make([]Step, len(cs))
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name()
		steps[i] = Step{Node: c.Name(), Step: StepExpire, Why: c.Why(), Detail: "handed to the termination path"}
		if len(cs) > 1 {
			steps[i].Detail += fmt.Sprintf(" with the round's %d other expired node(s)", len(cs)-1)
		}
	}
	var plan *provisioning.Plan
	if in, ok := disruption.ExpiryInput(snap, h.Catalog, h.NodeSettings, cs); ok {
		in.Policies = h.Policies
		var err error
		if plan, err = emit.Solve(h.Metrics, telemetry.ControllerDisruption, in); err != nil {
			return nil, err
		}
		if len(plan.NodeClaims) > 0 {
			whose := "its pods"
			if len(cs) > 1 {
				whose = "the round's pods"
			}
			steps[0].Detail += fmt.Sprintf("; %d replacement NodeClaim(s) launched for %s, not waited for", len(plan.NodeClaims), whose)
		}
		if why := unplaced(plan); why != "" {
			steps[0].Detail += "; pods with no place go pending: " + why
		}
	}
	for i, dis := range disruption.ExpiryRound(cs, plan, snap.Revision, snap.Time.Time) {
		refused, err := h.run(ctx, snap, names, dis, &steps[i])
		if err != nil {
			return steps[:i+1], err
		}
		if refused != nil {
			steps[i].Detail += "; replacement launch failed: " + refused.Error()
		}
		emit.RecordDisrupted(h.Metrics, disruption.ReasonExpired, cs[i].NodeClaim)
	}
	return steps, nil
}

// progress carries a node an earlier decision tainted one step on: deleted once empty or once
// its terminationGracePeriod has passed since the taint; drained once every pod has a place on
// ready capacity (a replacement that vanished is launched again); else it waits.
func (h *Handler) progress(ctx context.Context, snap *events.Snapshot, c disruption.DriftCandidate, _ map[string]*events.BudgetReservation) (Step, error) {
	s := Step{Node: c.Name(), Why: c.Why()}
	dis := disruption.DriftOf(c, nil, snap.Revision, snap.Time.Time)
	if static.IsStatic(c.NodePool) && c.TaintValue == disruption.TaintValueDrifted {
		return h.progressStatic(ctx, snap, c, dis)
	}
	switch {
	case len(c.Pods) == 0:
		s.Step, s.Detail, dis.HandOff = StepDelete, "no pod left to move", true
	case c.Tainted != nil && disruption.GraceExceeded(c.NodeClaim, &c.Tainted.Time, snap.Time.Time):
		s.Step, dis.HandOff = StepForceDelete, true
		s.Detail = fmt.Sprintf("terminationGracePeriod %s since the taint at %s has passed with %d pods still on the node",
			c.NodeClaim.Spec.TerminationGracePeriod.Duration, c.Tainted.UTC().Format("15:04:05"), len(c.Pods))
	default:
		plan, err := h.plan(snap, c.Target)
		if err != nil {
			return s, err
		}
		if why := unplaced(plan); why != "" {
			s.Step, s.Detail = StepSkip, "pods would have no place: "+why
			return s, nil
		}
		dis.Replacements, dis.Drain = plan.NodeClaims, disruption.ReadyPlacement(plan)
		s.Step, s.Detail = StepWait, "replacement not ready yet"
		if dis.Drain {
			s.Step, s.Detail = StepDrain, fmt.Sprintf("all %d pods have a place on ready nodes", len(c.Pods))
		}
	}
	dis.Why = s.Detail
	if _, err := h.run(ctx, snap, []string{c.Name()}, dis, &s); err != nil {
		return s, err
	}
	if dis.HandOff {
		emit.RecordDisrupted(h.Metrics, apisv1.DisruptionReasonDrifted, c.NodeClaim)
	}
	return s, nil
}

// start begins a selected node's replacement: an empty node is tainted (so nothing lands while
// it goes) and handed off; another has its pods planned elsewhere with the node left out, the
// replacements the plan needs launched, then is tainted (reserving a unit of its pool's budget)
// and, when every pod already has a place on ready nodes, drained. A node whose pods would have
// no place, or whose replacement launch is refused, is skipped and tried again later.
func (h *Handler) start(ctx context.Context, snap *events.Snapshot, c disruption.DriftCandidate, budgets map[string]*events.BudgetReservation) (Step, error) {
	s := Step{Node: c.Name(), Why: c.Why(), Step: StepStart, Detail: "empty node"}
	var plan *provisioning.Plan
	if static.IsStatic(c.NodePool) {
		return h.startStatic(ctx, snap, c, budgets)
	}
	if len(c.Pods) > 0 {
		var err error
		if plan, err = h.plan(snap, c.Target); err != nil {
			return s, err
		}
		if why := unplaced(plan); why != "" {
			s.Step, s.Detail = StepSkip, "pods would have no place: "+why
			return s, nil
		}
		s.Detail = fmt.Sprintf("tainted; %d pods wait for the replacement before the drain", len(c.Pods))
	}
	dis := disruption.DriftStart(c, plan, budgets, snap.Revision, snap.Time.Time)
	switch {
	case dis.HandOff:
		s.Step = StepDelete
	case dis.Drain:
		s.Detail = fmt.Sprintf("tainted; all %d pods fit on ready nodes, draining", len(c.Pods))
	}
	refused, err := h.run(ctx, snap, []string{c.Name()}, dis, &s)
	if err != nil || refused != nil {
		return s, err
	}
	h.started.Record(c.Name(), []string{c.Name()}, snap.Time.Time)
	telemetry.OrNop(h.Metrics).Record(telemetry.DisruptionDecisions, 1, strings.ToLower(dis.Method), "drifted", "")
	if dis.HandOff {
		emit.RecordDisrupted(h.Metrics, apisv1.DisruptionReasonDrifted, c.NodeClaim)
	}
	return s, nil
}

// startStatic begins a static NodePool's drifted node's replacement, as Karpenter's StaticDrift
// does: one NodeClaim from the pool's template (provisioning.StaticPlans) launched first, then
// the node tainted (a unit of the Drifted budget); progressStatic deletes it once the
// replacement is initialized. Its pods are not planned: the replacement is the pool's, not
// theirs.
func (h *Handler) startStatic(ctx context.Context, snap *events.Snapshot, c disruption.DriftCandidate, budgets map[string]*events.BudgetReservation) (Step, error) {
	s := Step{Node: c.Name(), Why: c.Why(), Step: StepStart, Detail: "static NodePool: tainted; deleted once its replacement is initialized"}
	plan, err := h.staticReplacement(snap, c)
	if err != nil {
		s.Step, s.Detail = StepSkip, "static replacement: "+err.Error()
		return s, nil
	}
	dis := disruption.DriftOf(c, budgets, snap.Revision, snap.Time.Time)
	dis.Method, dis.Replacements = "Replace", plan.NodeClaims
	refused, err := h.run(ctx, snap, []string{c.Name()}, dis, &s)
	if err != nil || refused != nil {
		return s, err
	}
	h.started.Record(c.Name(), []string{c.Name()}, snap.Time.Time)
	telemetry.OrNop(h.Metrics).Record(telemetry.DisruptionDecisions, 1, strings.ToLower(dis.Method), "drifted", "")
	return s, nil
}

// progressStatic carries a static NodePool's drifted node on: handed to the termination path
// (which drains it through the Eviction API) once a replacement NodeClaim naming it
// (disruption.AnnotationReplaces) has an initialized node, as Karpenter's disruption queue
// deletes a candidate once its replacements are initialized; its replacement launched again
// when none is left; else it waits.
func (h *Handler) progressStatic(ctx context.Context, snap *events.Snapshot, c disruption.DriftCandidate, dis disruption.Disruption) (Step, error) {
	s := Step{Node: c.Name(), Why: c.Why(), Step: StepWait, Detail: "static NodePool: replacement not initialized yet"}
	found, ready := staticReplacementOf(snap, c.Name())
	switch {
	case ready:
		s.Step, s.Detail, dis.HandOff = StepDelete, "static NodePool: replacement initialized", true
	case !found:
		plan, err := h.staticReplacement(snap, c)
		if err != nil {
			s.Step, s.Detail = StepSkip, "static replacement: "+err.Error()
			return s, nil
		}
		dis.Method, dis.Replacements = "Replace", plan.NodeClaims
		s.Detail = "static NodePool: replacement launched again"
	}
	dis.Why = s.Detail
	if _, err := h.run(ctx, snap, []string{c.Name()}, dis, &s); err != nil {
		return s, err
	}
	if dis.HandOff {
		emit.RecordDisrupted(h.Metrics, apisv1.DisruptionReasonDrifted, c.NodeClaim)
	}
	return s, nil
}

// staticReplacement plans one NodeClaim of the candidate's static NodePool, its slot naming the
// node it replaces (so it never shares a name with a scale-up launch of the same snapshot).
func (h *Handler) staticReplacement(snap *events.Snapshot, c disruption.DriftCandidate) (*provisioning.Plan, error) {
	in := provisioning.InputFromSnapshot(snap, h.Catalog, h.NodeSettings)
	_, in.RequireResolvedNodeClasses = cloud.As[cloud.NodeClassResolver](h.Provider)
	plans, err := provisioning.StaticPlans(in, c.NodePool, 1)
	if err != nil {
		return nil, err
	}
	plans[0].Slot = "replaces/" + c.Name()
	return &provisioning.Plan{NodeClaims: plans}, nil
}

// staticReplacementOf reports whether a NodeClaim not being deleted names node as the one it
// replaces, and whether one such has an initialized node.
func staticReplacementOf(snap *events.Snapshot, node string) (found, ready bool) {
	byPID := map[string]*corev1.Node{}
	for i := range snap.Nodes {
		byPID[snap.Nodes[i].Spec.ProviderID] = &snap.Nodes[i]
	}
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if nc.DeletionTimestamp != nil || !slices.Contains(strings.Split(nc.Annotations[disruption.AnnotationReplaces], ","), node) {
			continue
		}
		found = true
		if n := byPID[nc.Status.ProviderID]; n != nil && nc.Status.ProviderID != "" && disruption.Initialized(n, nc) {
			ready = true
		}
	}
	return found, ready
}

// plan places the node's evictable pods elsewhere with the node left out (in-flight NodeClaims
// count as capacity, as in Karpenter's scheduling simulation).
func (h *Handler) plan(snap *events.Snapshot, t disruption.Target) (*provisioning.Plan, error) {
	in, _ := disruption.EvacuationInput(snap, h.Catalog, h.NodeSettings, []string{t.Name()}, nil)
	in.Policies = h.Policies
	return emit.Solve(h.Metrics, telemetry.ControllerDisruption, in)
}

// unplaced names the plan's pods without a place, sorted ("" when every pod has one).
func unplaced(plan *provisioning.Plan) string {
	reasons := make([]string, 0, len(plan.Unschedulable))
	for _, u := range plan.Unschedulable {
		reasons = append(reasons, u.Pod.Namespace+"/"+u.Pod.Name+": "+u.Reason)
	}
	sort.Strings(reasons)
	return strings.Join(reasons, "; ")
}

// run carries the disruption's sequence out: replacements through the one launch step (all or
// nothing for a voluntary disruption: a refused one leaves the node as it is, StepSkip), then
// the taint, drain and hand-off commands.
func (h *Handler) run(ctx context.Context, snap *events.Snapshot, replaces []string, dis disruption.Disruption, s *Step) (refused error, err error) {
	steps, err := disruption.Sequence(h.Cluster, dis)
	if err != nil {
		return nil, err
	}
	launchStep := func(ctx context.Context, seq disruption.SequenceStep) (error, error) {
		step := launch.Step{
			Launcher:     &launch.Launcher{Cluster: h.Cluster, Provider: h.Provider, Catalog: h.Catalog},
			Decision:     launch.Decision{Revision: snap.Revision, Time: snap.Time.Time, ClusterFacts: snap.ClusterFacts},
			NodeClasses:  snap.NodeClasses,
			Publish:      func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) },
			Rounds:       1,
			AllOrNothing: !dis.Forced,
			Reason: func(nc *provisioning.NodeClaimPlan) string {
				return fmt.Sprintf("replacement for %s node %s (%d pods)", strings.ToLower(dis.Reason), strings.Join(replaces, ","), len(nc.Pods))
			},
			Annotate: func(nc *apisv1.NodeClaim) {
				nc.Annotations[disruption.AnnotationReplaces] = strings.Join(replaces, ",")
			},
		}
		out, err := step.Run(ctx, launch.Fixed(&provisioning.Plan{NodeClaims: seq.Replacements}))
		if err != nil {
			return nil, err
		}
		for _, l := range out.Launched {
			s.Launched = append(s.Launched, l.NodeClaim.Name+" ("+l.Instance.InstanceType+"/"+l.Instance.Zone+"/"+l.Instance.CapacityType+")")
		}
		if len(out.Refused) > 0 {
			return out.Refused[0], nil
		}
		return nil, nil
	}
	_, refused, err = emit.RunSequence(ctx, steps, dis.Forced, launchStep, func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) })
	if refused != nil && !dis.Forced {
		s.Step, s.Detail = StepSkip, "replacement launch failed: "+refused.Error()
	}
	return refused, err
}

// claimRef references a NodeClaim that may be absent.
func claimRef(nc *apisv1.NodeClaim) corev1.ObjectReference {
	if nc == nil {
		return corev1.ObjectReference{}
	}
	return kevents.NodeClaimRef(nc)
}

// blocked records Karpenter's DisruptionBlocked events for the drifted nodes that wait: on the
// NodeClaim and Node of one a karpenter.sh/do-not-disrupt annotation holds, and on the NodePool
// whose Drifted budget allows nothing more now.
func (h *Handler) blocked(ctx context.Context, snap *events.Snapshot, plan disruption.DriftPlan) error {
	var recs []events.EventRecord
	for _, b := range plan.Blocked {
		if b.Blocker != "" {
			recs = append(recs, kevents.Blocked(claimRef(b.NodeClaim), kevents.NamedNode(b.Node, nodeUID(snap, b.Node)), b.Blocker)...)
		}
	}
	pools := map[string]bool{}
	for _, b := range plan.OverBudget {
		if b.NodePool != "" && !pools[b.NodePool] {
			pools[b.NodePool] = true
			recs = append(recs, kevents.BudgetBlocked(kevents.NamedNodePool(snap.NodePools, b.NodePool), apisv1.DisruptionReasonDrifted))
		}
	}
	e := emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}
	return e.Events(ctx, snap.Time.Time, snap.Revision, recs, "drift-blocked")
}

func nodeUID(snap *events.Snapshot, name string) types.UID {
	for i := range snap.Nodes {
		if snap.Nodes[i].Name == name {
			return snap.Nodes[i].UID
		}
	}
	return ""
}

func (h *Handler) publish(ctx context.Context, snap *events.Snapshot, c events.Command) error {
	return emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}.Command(ctx, snap.Time.Time, c)
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// audit logs one record per node the decision started, drained or removed: expiry and drift
// removals (delete), drift starts with replacements (replace), drains.
func (h *Handler) audit(snap *events.Snapshot, d Decision) {
	for _, s := range d.Steps {
		a := telemetry.Audit{Function: Component, Cluster: h.Cluster, Decision: fmt.Sprint("revision-", snap.Revision), Revision: snap.Revision,
			Rule: "drift: " + s.Why, Why: s.Detail, Nodes: []string{s.Node}, NodeClaims: s.Launched}
		switch s.Step {
		case StepExpire:
			a.Action, a.Rule = telemetry.ActionDelete, "expiry: "+s.Why
		case StepDelete, StepForceDelete:
			a.Action = telemetry.ActionDelete
		case StepStart:
			a.Action = telemetry.ActionReplace
		case StepDrain:
			a.Action = telemetry.ActionDrain
		default:
			continue
		}
		telemetry.LogAudit(h.log(), a)
	}
}
