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
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Handler handles one event. Its fields are its dependencies; it holds no state.
type Handler struct {
	Cluster string
	Catalog *catalog.Catalog
	// NodeSettings is the cloud provider's NodeClass → node settings rule (cloud.NodeSettingsFor).
	NodeSettings provisioning.NodeSettingsFunc
	Provider     cloud.Provider
	Publisher    queue.Publisher
	Codec        events.Codec
	Log          *slog.Logger
	// OnDecision, when set, receives every decision (local dev prints them).
	OnDecision func(Decision)
	// Now is the function's clock (default time.Now): expiry and the termination grace period
	// read it, and a snapshot dated more than events.MaxClockSkew from it is refused.
	Now func() time.Time
	// Metrics receives the function's metrics (nil: none).
	Metrics telemetry.Recorder
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
	snap, err := emit.SnapshotOf(ctx, h.Codec, h.Cluster, env)
	if err != nil {
		return err
	}
	if snap, err = emit.Freshest(ctx, h.Codec.Blobs, snap, msg.Attempt); err != nil {
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
	if h.OnDecision != nil && (len(d.Steps) > 0 || len(d.Blocked) > 0 || len(d.OverBudget) > 0) {
		h.OnDecision(d)
	}
	return err
}

// Decide runs one drift decision on snap.
func (h *Handler) Decide(ctx context.Context, snap *events.Snapshot) (Decision, error) {
	plan := disruption.PlanDrift(snap)
	d := Decision{Revision: snap.Revision, Blocked: plan.Blocked, OverBudget: plan.OverBudget}
	rec := telemetry.OrNop(h.Metrics)
	rec.Record(telemetry.DisruptionEligibleNodes, float64(len(plan.Selected)+len(plan.OverBudget)), "drifted")
	now := snap.Time.Time
	// Expiry is forceful (Karpenter v1): no budget, no replacement first, no do-not-disrupt
	// wait; the termination path drains within the NodeClaim's terminationGracePeriod.
	for _, c := range plan.Expired {
		s := Step{Node: c.Name(), Step: StepExpire, Why: c.Why(), Detail: "handed to the termination path"}
		hand := disruption.HandOff(h.Cluster, snap.Revision, c.Name(), c.NodeClaim, c.Reason+": "+c.Why(), "expire", c.NodeClaim.Name)
		hand.Events = kevents.Disrupting(claimRef(c.NodeClaim), nodeRefOf(c.Node), c.Reason+"/Delete")
		if err := h.publish(ctx, snap, hand); err != nil {
			return d, err
		}
		emit.RecordDisrupted(h.Metrics, disruption.ReasonExpired, c.NodeClaim)
		d.Steps = append(d.Steps, s)
	}
	for _, c := range plan.InProgress {
		s := Step{Node: c.Name(), Why: c.Why()}
		var tainted *metav1.Time = c.Tainted
		switch {
		case len(c.Pods) == 0:
			s.Step, s.Detail = StepDelete, "no pod left to move"
		case tainted != nil && disruption.GraceExceeded(c.NodeClaim, &tainted.Time, now):
			s.Step = StepForceDelete
			s.Detail = fmt.Sprintf("terminationGracePeriod %s since the taint at %s has passed with %d pods still on the node",
				c.NodeClaim.Spec.TerminationGracePeriod.Duration, tainted.UTC().Format("15:04:05"), len(c.Pods))
		}
		if s.Step == StepDelete || s.Step == StepForceDelete {
			if err := h.remove(ctx, snap, c.Target, s.Detail); err != nil {
				return d, err
			}
			d.Steps = append(d.Steps, s)
			continue
		}
		evac, err := h.evacuate(ctx, snap, c.Target, &s)
		if err != nil {
			return d, err
		}
		switch {
		case evac == nil:
		case disruption.ReadyPlacement(evac):
			s.Step, s.Detail = StepDrain, fmt.Sprintf("all %d pods have a place on ready nodes", len(c.Pods))
			if err := h.publish(ctx, snap, events.Command{ID: events.CommandID(h.Cluster, "drift-drain", c.Name(), fmt.Sprint(snap.Revision)),
				Kind: events.CommandDrainNode, Cluster: h.Cluster, SnapshotRevision: snap.Revision, NodeName: c.Name(),
				Reason: apisv1.DisruptionReasonDrifted + ": " + c.Why()}); err != nil {
				return d, err
			}
		default:
			s.Step = StepWait
			s.Detail = "replacement not ready yet"
		}
		d.Steps = append(d.Steps, s)
	}
	for _, c := range plan.Selected {
		s := Step{Node: c.Name(), Why: c.Why()}
		if len(c.Pods) == 0 {
			// An empty node needs no replacement: taint (so nothing lands while it goes) and delete.
			s.Step, s.Detail = StepDelete, "empty node"
			if err := h.taint(ctx, snap, c.Target, plan.Budgets[c.NodePool.Name], "Delete"); err != nil {
				return d, err
			}
			rec.Record(telemetry.DisruptionDecisions, 1, disruption.MethodDelete, "drifted", "")
			if err := h.remove(ctx, snap, c.Target, s.Detail); err != nil {
				return d, err
			}
			d.Steps = append(d.Steps, s)
			continue
		}
		evac, err := h.evacuate(ctx, snap, c.Target, &s)
		if err != nil {
			return d, err
		}
		if evac == nil {
			d.Steps = append(d.Steps, s)
			continue
		}
		if err := h.taint(ctx, snap, c.Target, plan.Budgets[c.NodePool.Name], "Replace"); err != nil {
			return d, err
		}
		rec.Record(telemetry.DisruptionDecisions, 1, disruption.MethodReplace, "drifted", "")
		s.Step = StepStart
		if disruption.ReadyPlacement(evac) {
			s.Detail = fmt.Sprintf("tainted; all %d pods fit on ready nodes, draining", len(c.Pods))
			if err := h.publish(ctx, snap, events.Command{ID: events.CommandID(h.Cluster, "drift-drain", c.Name(), fmt.Sprint(snap.Revision)),
				Kind: events.CommandDrainNode, Cluster: h.Cluster, SnapshotRevision: snap.Revision, NodeName: c.Name(),
				Reason: apisv1.DisruptionReasonDrifted + ": " + c.Why()}); err != nil {
				return d, err
			}
		} else {
			s.Detail = fmt.Sprintf("tainted; %d pods wait for the replacement before the drain", len(c.Pods))
		}
		d.Steps = append(d.Steps, s)
	}
	if err := h.blocked(ctx, snap, plan); err != nil {
		return d, err
	}
	h.audit(snap, d)
	h.log().Info("drift decision", "revision", snap.Revision, "steps", len(d.Steps), "blocked", len(d.Blocked), "overBudget", len(d.OverBudget))
	return d, nil
}

// evacuate plans the node's pods elsewhere and launches the NodeClaims the plan needs. It
// returns nil (with s set to StepSkip) when some pod would have no place or a launch failed
// for capacity: the node is then left as it is and retried on a later snapshot.
func (h *Handler) evacuate(ctx context.Context, snap *events.Snapshot, t disruption.Target, s *Step) (*provisioning.Plan, error) {
	in, _ := disruption.EvacuationInput(snap, h.Catalog, h.NodeSettings, []string{t.Name()}, nil)
	plan, err := emit.Solve(h.Metrics, telemetry.ControllerDisruption, in)
	if err != nil {
		return nil, err
	}
	if len(plan.Unschedulable) > 0 {
		reasons := make([]string, 0, len(plan.Unschedulable))
		for _, u := range plan.Unschedulable {
			reasons = append(reasons, u.Pod.Namespace+"/"+u.Pod.Name+": "+u.Reason)
		}
		sort.Strings(reasons)
		s.Step, s.Detail = StepSkip, "pods would have no place: "+strings.Join(reasons, "; ")
		return nil, nil
	}
	step := launch.Step{
		Launcher:     &launch.Launcher{Cluster: h.Cluster, Provider: h.Provider, Catalog: h.Catalog},
		Decision:     launch.Decision{Revision: snap.Revision, Time: snap.Time.Time},
		NodeClasses:  snap.NodeClasses,
		Publish:      func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) },
		Rounds:       1,
		AllOrNothing: true,
		Reason: func(nc *provisioning.NodeClaimPlan) string {
			return fmt.Sprintf("replacement for drifted node %s (%d pods)", t.Name(), len(nc.Pods))
		},
		Annotate: func(nc *apisv1.NodeClaim) { nc.Annotations[disruption.AnnotationReplaces] = t.Name() },
	}
	out, err := step.Run(ctx, launch.Fixed(plan))
	if err != nil {
		return nil, err
	}
	if len(out.Refused) > 0 {
		s.Step, s.Detail = StepSkip, "replacement launch failed: "+out.Refused[0].Error()
		return nil, nil
	}
	for _, l := range out.Launched {
		s.Launched = append(s.Launched, l.NodeClaim.Name+" ("+l.Instance.InstanceType+"/"+l.Instance.Zone+"/"+l.Instance.CapacityType+")")
	}
	return plan, nil
}

// taint starts the node's disruption: the karpenter.sh/disrupted taint, reserving a unit of the
// pool's budget (the agent refuses it when another decision spent the unit first; the revision
// in the ID lets a later decision ask again).
// decision (Delete or Replace) names it in Karpenter's DisruptionTerminating events, recorded
// once the agent grants the taint.
func (h *Handler) taint(ctx context.Context, snap *events.Snapshot, t disruption.Target, budget *events.BudgetReservation, decision string) error {
	if t.Node == nil {
		return nil
	}
	at := metav1.NewTime(snap.Time.Time)
	return h.publish(ctx, snap, events.Command{ID: events.CommandID(h.Cluster, "drift-taint", t.Node.Name, string(t.Node.UID), fmt.Sprint(snap.Revision)),
		Kind: events.CommandTaintNode, Cluster: h.Cluster, SnapshotRevision: snap.Revision, NodeName: t.Node.Name, Budget: budget,
		Taint:  &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: disruption.TaintValueDrifted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at},
		Reason: apisv1.DisruptionReasonDrifted,
		Events: kevents.Disrupting(claimRef(t.NodeClaim), kevents.NodeRef(t.Node), apisv1.DisruptionReasonDrifted+"/"+decision)})
}

// nodeRefOf references a Node that may be absent.
func nodeRefOf(n *corev1.Node) corev1.ObjectReference {
	if n == nil {
		return corev1.ObjectReference{}
	}
	return kevents.NodeRef(n)
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

// remove hands the node to the one termination path (disruption.HandOff): its NodeClaim is
// deleted, and the lifecycle function drains what is left, terminates the instance (only this
// cluster's: the provider refuses others) and removes the finalizers.
func (h *Handler) remove(ctx context.Context, snap *events.Snapshot, t disruption.Target, why string) error {
	uid := ""
	if t.Node != nil {
		uid = string(t.Node.UID)
	}
	if err := h.publish(ctx, snap, disruption.HandOff(h.Cluster, snap.Revision, t.Name(), t.NodeClaim, apisv1.DisruptionReasonDrifted+": "+why, "drift", uid)); err != nil {
		return err
	}
	emit.RecordDisrupted(h.Metrics, apisv1.DisruptionReasonDrifted, t.NodeClaim)
	return nil
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
