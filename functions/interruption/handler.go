// Package interruption is the interruption function: cloud notices (EC2 spot interruption,
// rebalance recommendation, state change, capacity-reservation interruption, AWS Health
// scheduled change; Azure Scheduled Events and Event Grid HealthResources) in; replacement
// capacity, offering marks and taint/drain/delete commands out.
//
// For a notice that takes a node away (spot or capacity-reservation interruption, scheduled
// change, Azure Preempt/Terminate/Reboot/Redeploy), one invocation, on the latest snapshot:
//  1. marks the interrupted offering unavailable (spot, capacity reservation, preemption), so
//     neither this replacement nor the next decisions pick it;
//  2. plans the node's evacuable pods as pending with the node left out (shared/provisioning.Solve
//     through disruption.EvacuationInput) and launches the NodeClaims the plan needs at once
//     (shared/launch), before the reclaim, instead of waiting for the pods to go pending;
//  3. taints the node karpenter.sh/disrupted=interrupted:NoSchedule;
//  4. drains it when every pod has a place on ready capacity, or at the latest drain start of
//     disruption.PlanDrain (deadline − margin − longest pod grace), whichever comes first. Until
//     then it returns ErrAwaitingReplacement: the notice stays in the queue and is redelivered,
//     and each delivery re-decides on the newest snapshot (idempotent: same command IDs, launches
//     already in flight absorb the pods, nothing launches twice).
//
// The function keeps no state; see SnapshotSource for where the snapshot comes from.
package interruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/launch"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Component is the function's name in event sources and consumer names.
const Component = "interruption"

// NoticesSubject is the subject cloud notices are delivered on for a cluster: an alias of
// queue.NoticesSubject, where the transports find it.
func NoticesSubject(cluster string) string { return queue.NoticesSubject(cluster) }

// RebalancePolicy says what a rebalance recommendation does.
type RebalancePolicy string

const (
	// RebalanceRecord only records the recommendation (the default: the instance may run for
	// hours, and replacing every recommended node doubles spot churn).
	RebalanceRecord RebalancePolicy = "Record"
	// RebalanceReplace replaces the node proactively: replacement first, drain when it is ready,
	// no deadline, the offering not marked (it is not reclaimed).
	RebalanceReplace RebalancePolicy = "Replace"
)

// RedriveInterval is how soon a notice waiting for a snapshot or a replacement comes back (or
// sooner, at its drain start): every transport honours it (queue.RetryAfter), on Lambda too,
// where the notice queue's visibility timeout (120 s) would bring it back at the reclaim.
const RedriveInterval = 5 * time.Second

// MaxDeliveries is the delivery limit of the notices a function waits on: re-driven every
// RedriveInterval, a spot notice's 2 minutes take 24 deliveries; 40 leaves room for a rebalance
// replacement (no deadline) that boots slowly, after which the handler drains anyway (see
// Handler.MaxAttempts). The NATS consumer and the notice queue's redrive policy use it.
const MaxDeliveries = 40

// MaxNoticesInFlight is how many notices a NATS worker holds at once: a notice waiting for its
// replacement holds its slot until it comes back, and an interruption of many spot nodes at
// once must not wait its turn behind them (each notice is about its own instances).
const MaxNoticesInFlight = 1000

// ErrAwaitingSnapshot, ErrAwaitingReplacement and ErrAwaitingDrain are retryable: the notice is
// redelivered within RedriveInterval.
var (
	ErrAwaitingSnapshot    = errors.New("awaiting a snapshot that shows the instance")
	ErrAwaitingReplacement = errors.New("awaiting replacement capacity before draining")
	ErrAwaitingDrain       = errors.New("awaiting the drain: pods a PodDisruptionBudget holds are evicted later")
)

// Handler handles one notice message. Its fields are its dependencies; it holds no state.
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
	Snapshots SnapshotSource
	Log       *slog.Logger
	// Rebalance is the rebalance-recommendation policy (default RebalanceRecord).
	Rebalance RebalancePolicy
	// DrainMargin overrides disruption.DefaultDrainMargin.
	DrainMargin time.Duration
	// Now is the function's clock (default time.Now): drain timing is about the real deadline,
	// not the snapshot's age.
	Now func() time.Time
	// MaxAttempts is the transport's delivery limit: on that attempt the handler drains rather
	// than wait, so a notice is never dead-lettered for waiting (0: never force).
	MaxAttempts int
	// OnDecision, when set, receives every decision (local dev prints them).
	OnDecision func(Decision)
	// Metrics receives the function's metrics (nil: none).
	Metrics telemetry.Recorder
}

// Decision is what one notice led to, for logs, audit and local dev.
type Decision struct {
	Notice   notices.Notice
	Revision int64
	// Action is "replace", "cleanup", "record", "wait" or "ignore" (an Azure notice without resource IDs).
	Action    string
	Nodes     []string
	Launched  []*apisv1.NodeClaim
	OnNodes   map[string]string // pod → existing node or in-flight NodeClaim
	OnClaims  map[string]string // pod → NodeClaim launched now
	Unplaced  []string          // pods with no place (reason)
	Marked    []events.UnavailableOfferingMark
	Drain     disruption.DrainSchedule
	Drained   bool
	Why       string
	Terminate []string // provider IDs of stopped instances: terminated here when no NodeClaim owns them, else by the termination path their NodeClaim is handed to
}

// Handle decodes the notices of a message and acts on each. A malformed or unknown notice wraps
// queue.ErrPoison (dead-lettered with its reason); ErrAwaitingSnapshot / ErrAwaitingReplacement
// and transport or cloud errors ask for redelivery; nil acknowledges.
func (h *Handler) Handle(ctx context.Context, msg queue.Message) error {
	ns, err := notices.Decode(msg.Data)
	if err != nil {
		return fmt.Errorf("%w: %w", queue.ErrPoison, err)
	}
	var retry error
	redrive := RedriveInterval
	for _, n := range ns {
		if msg.Attempt <= 1 { // a notice re-driven while it waits is one message received
			telemetry.OrNop(h.Metrics).Record(telemetry.InterruptionReceived, 1, MessageType(n.Kind))
		}
		d, err := h.Decide(ctx, n, msg.Attempt)
		if h.OnDecision != nil {
			h.OnDecision(d)
		}
		if len(d.Nodes) > 0 && (d.Action == "replace" || d.Action == "cleanup") {
			audit := telemetry.Audit{Action: telemetry.ActionDrain, Function: Component, Cluster: h.Cluster, Decision: n.ID, Revision: d.Revision,
				Rule: "interruption: " + string(n.Kind), Why: d.Why, Nodes: d.Nodes, Inputs: []string{"notice " + n.ID + " (" + string(n.Kind) + ")"}}
			for _, nc := range d.Launched {
				audit.NodeClaims = append(audit.NodeClaims, nc.Name)
			}
			telemetry.LogAudit(h.log(), audit)
		}
		h.log().Info("interruption decision", "notice", n.ID, "kind", n.Kind, "action", d.Action, "nodes", d.Nodes,
			"launched", len(d.Launched), "drained", d.Drained, "why", d.Why, "err", err)
		if err != nil && retry == nil {
			retry = err
		}
		// Come back by the drain start at the latest, so the drain is never late for a delivery.
		if until := d.Drain.Start.Sub(h.now()); !d.Drain.Start.IsZero() && until < redrive {
			redrive = max(until, time.Second)
		}
	}
	if errors.Is(retry, ErrAwaitingSnapshot) || errors.Is(retry, ErrAwaitingReplacement) || errors.Is(retry, ErrAwaitingDrain) {
		return queue.RetryAfter(retry, redrive)
	}
	return retry
}

// Decide acts on one notice (attempt is the delivery count, 1 first).
func (h *Handler) Decide(ctx context.Context, n notices.Notice, attempt int) (Decision, error) {
	d := Decision{Notice: n}
	if n.Cloud == notices.CloudAzure && len(n.ResourceIDs) == 0 {
		// A VM name is unique only within its resource group: a notice that names VMs only (a
		// Scheduled Events document not wrapped by Dovetail's publisher, or a scale set name
		// outside the reading VM's scale set) could be about any same-named VM, so it is
		// acknowledged and acts on no node (notices.Notice.MatchesProviderID).
		d.Action, d.Why = "ignore", fmt.Sprintf("names Azure VMs %v without their resource IDs; Dovetail matches Azure notices by resource ID only", n.InstanceIDs)
		return d, nil
	}
	switch n.Kind {
	case notices.KindSpotInterruption, notices.KindCapacityReservationInterruption, notices.KindPreemption, notices.KindTermination:
		return h.replace(ctx, d, n.Deadline, true, attempt)
	case notices.KindScheduledChange:
		if n.Action == notices.ScheduledEventFreeze {
			d.Action, d.Why = "record", "a Freeze pauses the VM for seconds; nothing to move"
			return d, nil
		}
		return h.replace(ctx, d, n.Deadline, false, attempt)
	case notices.KindRebalance:
		if h.Rebalance != RebalanceReplace {
			d.Action, d.Why = "record", "rebalance recommendation recorded (policy Record)"
			return d, nil
		}
		return h.replace(ctx, d, time.Time{}, false, attempt)
	case notices.KindStateChange:
		switch n.State {
		case "stopping", "stopped", "shutting-down", "terminated", notices.StateDeallocating:
			return h.cleanup(ctx, d)
		}
		d.Action, d.Why = "record", "instance is "+n.State
		return d, nil
	case notices.KindAvailabilityChange:
		d.Action, d.Why = "record", string(n.Kind)+" is informational"
		return d, nil
	default:
		// The decoders make only the kinds above; any other is dead-lettered with its reason, the
		// rule every function applies to what it does not handle (emit.Accept).
		return d, fmt.Errorf("%w: kind: %q is not handled by the %s function", queue.ErrPoison, n.Kind, Component)
	}
}

func (h *Handler) latest(ctx context.Context, n notices.Notice) (*events.Snapshot, []disruption.Target, error) {
	snap, err := h.Snapshots.Latest(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the latest snapshot: %w", err)
	}
	if snap == nil {
		return nil, nil, ErrAwaitingSnapshot
	}
	// A snapshot dated far from this function's clock is stale, or its agent's clock is wrong:
	// "newer than the notice" cannot be trusted on it (a snapshot dated ahead that does not list
	// the instance would drop the notice), so wait for one that is on time.
	if err := snap.CheckClock(h.now()); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrAwaitingSnapshot, err)
	}
	targets := disruption.FindTargets(snap, n.MatchesProviderID)
	if len(targets) == 0 && snap.Time.Time.Before(n.Time) && (n.Deadline.IsZero() || h.now().Before(n.Deadline)) {
		// The instance may have been launched after this snapshot: wait for the next one.
		return snap, nil, ErrAwaitingSnapshot
	}
	return snap, targets, nil
}

func (h *Handler) replace(ctx context.Context, d Decision, deadline time.Time, mark bool, attempt int) (Decision, error) {
	n := d.Notice
	snap, targets, err := h.latest(ctx, n)
	if err != nil {
		d.Action, d.Why = "wait", err.Error()
		return d, err
	}
	d.Revision = snap.Revision
	if len(targets) == 0 {
		d.Action, d.Why = "record", "no node or NodeClaim of this cluster has the instance"
		return d, nil
	}
	now := h.now()
	// Marks expire events.UnavailableOfferingTTL after the notice (not after this delivery), so every
	// redelivery publishes the same command, which the queue's deduplication drops.
	markFrom := n.Time
	if markFrom.IsZero() {
		markFrom = now
	}
	d.Action = "replace"
	var leaving []string
	var pods []*corev1.Pod
	for _, t := range targets {
		d.Nodes = append(d.Nodes, t.Name())
		if t.Node != nil {
			leaving = append(leaving, t.Node.Name)
			pods = append(pods, t.Pods...)
		}
		if mark && t.Offering.InstanceType != "" && t.Offering.Zone != "" && t.Offering.CapacityType != "" {
			d.Marked = append(d.Marked, events.MarkUnavailable(t.Offering, string(n.Kind), markFrom))
		}
	}
	// 1. Mark the interrupted offering first: even if the rest fails, later decisions avoid it.
	if err := h.mark(ctx, snap, n, d.Marked); err != nil {
		return d, err
	}
	// 2. Replacement capacity for the pods, at once.
	plan, err := h.launchReplacements(ctx, snap, leaving, d.Marked, &d)
	if err != nil {
		return d, err
	}
	// 3. Decide the drain: when every pod has a ready place, or when the deadline rule says so.
	waiting := h.drainRule(&d, plan, pods, leaving, deadline, now, attempt)
	// 4. Taint, so nothing new lands on the node, and drain when decided (disruption.Sequence).
	// The taint is not on the node in this snapshot yet: the agent may refuse the command as
	// stale (a pod bound after the snapshot), so the notice waits for a snapshot that shows it.
	// A node another function (or nobody) holds with karpenter.sh/disrupted is taken over: the
	// agent replaces that taint with this one (disruption.ApplyTaint).
	dis := disruption.Disruption{Source: Component, ID: n.ID, Reason: "Interrupted", Why: fmt.Sprintf("%s %s: %s", n.Kind, n.ID, d.Why),
		Candidates: targets, TaintValue: disruption.TaintValueInterrupted, Forced: true, Deadline: deadline,
		Drain: waiting == nil && len(leaving) > 0, Revision: snap.Revision, Time: now}
	steps, err := disruption.Sequence(h.Cluster, dis)
	if err != nil {
		return d, err
	}
	untainted := false
	for _, st := range steps {
		untainted = untainted || st.Kind == disruption.SeqTaint
		for _, c := range st.Commands {
			if err := h.publish(ctx, snap, c); err != nil {
				return d, err
			}
		}
	}
	if waiting != nil || len(leaving) == 0 {
		return d, waiting
	}
	d.Drained = true
	if untainted {
		return d, ErrAwaitingReplacement
	}
	// A drain the PodDisruptionBudgets hold evicts some pods now and the rest later: the notice
	// stays until no evacuable pod is left or the instance is reclaimed, and each delivery asks
	// for the drain again on its newer snapshot.
	if len(pods) > 0 && (deadline.IsZero() || now.Before(deadline)) {
		d.Why += fmt.Sprintf("; %d pods still to evict", len(pods))
		return d, ErrAwaitingDrain
	}
	return d, nil
}

// mark publishes the interrupted offerings' unavailable marks (none: nothing).
func (h *Handler) mark(ctx context.Context, snap *events.Snapshot, n notices.Notice, marks []events.UnavailableOfferingMark) error {
	if len(marks) == 0 {
		return nil
	}
	keys := []string{h.Cluster, "unavailable", n.ID}
	for _, m := range marks {
		keys = append(keys, m.String())
	}
	return h.publish(ctx, snap, events.Command{ID: events.CommandID(keys...), Kind: events.CommandMarkUnavailable,
		Cluster: h.Cluster, SnapshotRevision: snap.Revision, Unavailable: marks, Reason: string(n.Kind) + " " + n.ID})
}

// drainRule decides whether the leaving nodes are drained now: when every pod has a place on
// ready capacity, when the drain must start for the deadline (disruption.PlanDrain), or on the
// last delivery. It sets d.Drain and d.Why and returns ErrAwaitingReplacement when the drain
// waits (nil otherwise).
func (h *Handler) drainRule(d *Decision, plan *provisioning.Plan, pods []*corev1.Pod, leaving []string, deadline, now time.Time, attempt int) error {
	margin := h.DrainMargin
	if margin == 0 {
		margin = disruption.DefaultDrainMargin
	}
	d.Drain = disruption.PlanDrain(pods, deadline, now, margin)
	switch forced := h.MaxAttempts > 0 && attempt >= h.MaxAttempts; {
	case len(leaving) == 0:
		d.Why = "the instance has not registered a node: nothing to drain"
	case disruption.ReadyPlacement(plan):
		d.Why = "every pod has a place on ready capacity"
	case d.Drain.MustDrainBy(now):
		d.Why = fmt.Sprintf("drain must start by %s (deadline %s − margin %s − longest grace %s)",
			d.Drain.Start.UTC().Format(time.RFC3339), deadline.UTC().Format(time.RFC3339), margin, d.Drain.LongestGrace)
	case forced:
		d.Why = fmt.Sprintf("delivery %d is the last: draining rather than waiting", attempt)
	default:
		d.Why = fmt.Sprintf("replacement not ready; waiting until %s at the latest", d.Drain.Start.UTC().Format(time.RFC3339))
		if d.Drain.Deadline.IsZero() {
			d.Why = "replacement not ready; no deadline, waiting for it"
		}
		return ErrAwaitingReplacement
	}
	return nil
}

// launchReplacements plans the leaving nodes' pods elsewhere and launches what the plan needs
// (launch.Step: refused offerings are marked and the pods of failed launches re-planned, as the
// provision function does).
func (h *Handler) launchReplacements(ctx context.Context, snap *events.Snapshot, leaving []string, marks []events.UnavailableOfferingMark, d *Decision) (*provisioning.Plan, error) {
	d.OnNodes, d.OnClaims = map[string]string{}, map[string]string{}
	if len(leaving) == 0 {
		return &provisioning.Plan{}, nil
	}
	// Every node an earlier notice is evacuating leaves too, and is planned with this one: its
	// pods are still on it, so a replacement launched for them looks free, and planning only
	// this node's pods would send two notices' pods to the one replacement.
	evacuating := append([]string(nil), leaving...)
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if slices.Contains(evacuating, n.Name) {
			continue
		}
		for _, t := range n.Spec.Taints {
			if t.Key == apisv1.TaintKeyDisrupted && t.Value == disruption.TaintValueInterrupted {
				evacuating = append(evacuating, n.Name)
				break
			}
		}
	}
	step := launch.Step{
		Launcher:    &launch.Launcher{Cluster: h.Cluster, Provider: h.Provider, Catalog: h.Catalog},
		Decision:    launch.Decision{Revision: snap.Revision, Time: h.now(), ClusterFacts: snap.ClusterFacts},
		Recorded:    launch.RecordedIn(snap),
		NodeClasses: snap.NodeClasses,
		Publish:     func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) },
		Reason: func(nc *provisioning.NodeClaimPlan) string {
			return fmt.Sprintf("replacement for %s (%d pods)", strings.Join(leaving, ","), len(nc.Pods))
		},
	}
	out, err := step.Run(ctx, func(refused []events.UnavailableOfferingMark, launched []apisv1.NodeClaim) (*provisioning.Plan, error) {
		work := *snap
		work.UnavailableOfferings = append(append(append([]events.UnavailableOfferingMark(nil), snap.UnavailableOfferings...), marks...), refused...)
		work.NodeClaims = append(append([]apisv1.NodeClaim(nil), snap.NodeClaims...), launched...)
		in, _ := disruption.EvacuationInput(&work, h.Catalog, h.NodeSettings, evacuating, nil)
		in.Policies = h.Policies
		return provisioning.Solve(in)
	})
	if errors.Is(err, launch.ErrBehindCloud) {
		return nil, fmt.Errorf("%w: %w", ErrAwaitingSnapshot, err)
	}
	if err != nil {
		return nil, err
	}
	plan := out.Plan
	for _, l := range out.Launched {
		d.Launched = append(d.Launched, l.NodeClaim)
		for _, p := range l.Plan.Pods {
			d.OnClaims[p.Namespace+"/"+p.Name] = l.NodeClaim.Name
		}
	}
	for _, e := range plan.ExistingNodes {
		for _, p := range e.Pods {
			if _, ok := d.OnClaims[p.Namespace+"/"+p.Name]; !ok {
				d.OnNodes[p.Namespace+"/"+p.Name] = e.Name
			}
		}
	}
	for _, u := range plan.Unschedulable {
		d.Unplaced = append(d.Unplaced, u.Pod.Namespace+"/"+u.Pod.Name+": "+u.Reason)
	}
	sort.Strings(d.Unplaced)
	d.Marked = append(d.Marked, out.Marks...)
	return plan, nil
}

// cleanup hands the Node and NodeClaim of an instance that stopped or terminated to the
// termination path (disruption.HandOff), which terminates a stopped instance and removes the
// finalizers; a stopped instance without a NodeClaim is terminated here.
func (h *Handler) cleanup(ctx context.Context, d Decision) (Decision, error) {
	n := d.Notice
	snap, targets, err := h.latest(ctx, n)
	if err != nil {
		d.Action, d.Why = "wait", err.Error()
		return d, err
	}
	d.Revision = snap.Revision
	if len(targets) == 0 {
		d.Action, d.Why = "record", "no node or NodeClaim of this cluster has the instance"
		return d, nil
	}
	d.Action, d.Why = "cleanup", "instance is "+n.State
	for _, t := range targets {
		d.Nodes = append(d.Nodes, t.Name())
		stopped := n.State == "stopping" || n.State == "stopped" || n.State == notices.StateDeallocating
		// A NodeClaim's instance is terminated by the termination path it is handed to; an
		// instance no NodeClaim owns has nothing else to end it.
		if stopped && t.NodeClaim == nil && t.ProviderID != "" {
			if err := h.Provider.Delete(ctx, t.ProviderID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
				if errors.Is(err, cloud.ErrNotOwned) { // no retry changes a refusal: dead-letter it with the reason
					return d, fmt.Errorf("%w: terminating stopped instance %s: %w", queue.ErrPoison, t.ProviderID, err)
				}
				return d, fmt.Errorf("terminating stopped instance %s: %w", t.ProviderID, err)
			}
		}
		if stopped {
			d.Terminate = append(d.Terminate, t.ProviderID)
		}
		if err := h.publish(ctx, snap, disruption.HandOff(h.Cluster, snap.Revision, t.Name(), t.NodeClaim, d.Why, "interruption", n.ID)); err != nil {
			return d, err
		}
		emit.RecordDisrupted(h.Metrics, "interrupted", t.NodeClaim)
	}
	return d, nil
}

func (h *Handler) publish(ctx context.Context, snap *events.Snapshot, c events.Command) error {
	return emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}.Command(ctx, h.now(), c)
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// MessageType is a notice's message_type label in karpenter_interruption_received_messages_total:
// the AWS provider's spelling for the kinds it has (spot_interrupted, rebalance_recommendation,
// scheduled_change, state_change), snake case of the kind for the others.
func MessageType(k notices.Kind) string {
	switch k {
	case notices.KindSpotInterruption:
		return "spot_interrupted"
	case notices.KindRebalance:
		return "rebalance_recommendation"
	case notices.KindCapacityReservationInterruption:
		return "capacity_reservation_interrupted"
	}
	var b strings.Builder
	for i, r := range string(k) {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
