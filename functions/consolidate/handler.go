// Package consolidate is the consolidation function: a cluster snapshot in; replacement
// instances launched and taint, drain and delete commands out, so the cluster keeps its pods on
// fewer or cheaper nodes. It keeps no state between messages beyond hints that only make it
// skip or wait (emit.Decided, emit.Started): a consolidation in progress is recorded in the
// cluster (the karpenter.sh/disrupted taint value on its candidates and an annotation on its
// replacement NodeClaims), and every snapshot moves it one step on (see shared/disruption).
package consolidate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

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
const Component = "consolidate"

// Handler handles one message. Its exported fields are its dependencies; the state it keeps
// (decided, started) is hints that only make it skip or wait, never act.
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
	Options   disruption.Options
	// Latest, when set, returns the freshest snapshot available (local dev: the agent's
	// snapshot builder; a deployment: the last snapshot event on the stream). A new decision
	// made on the message's snapshot is re-validated against it (disruption.Validate) before
	// anything is launched, and its commands carry its revision. Nil: the decision is made and
	// validated on the message's snapshot, and the irreversible steps (drain, hand-off) are
	// validated again on later snapshots in any case.
	Latest func(ctx context.Context) (*events.Snapshot, error)
	// OnOutcome, when set, receives what every message led to (local dev prints it).
	OnOutcome func(Outcome)
	// Now is the function's clock (default time.Now): consolidateAfter, expireAfter and the
	// consolidation timeout read it, and a snapshot dated more than events.MaxClockSkew from it
	// is refused.
	Now func() time.Time
	// Metrics receives the function's metrics (nil: none).
	Metrics telemetry.Recorder

	// decided is the newest snapshot revision decided on, a hint that lets events holding an
	// older snapshot be acknowledged unread (emit.Decided); losing it (a new process) costs
	// only a decode.
	decided emit.Decided
	// started are the consolidations started here that no snapshot shows yet (emit.Started).
	started emit.Started
}

// Outcome is what one message led to, for logs, audit and local dev.
type Outcome struct {
	Revision int64
	// Decision is a new consolidation started by this message (nil when none).
	Decision *disruption.Decision
	Report   *disruption.Report
	// Launched are the replacement NodeClaims launched for Decision.
	Launched []*apisv1.NodeClaim
	// Progress are the consolidations in flight found on the snapshot and what was done.
	Progress []*disruption.Progress
	// Finished are the drained candidates (node names) handed to the termination path: their
	// NodeClaim is deleted, and the lifecycle function terminates the instance and releases it.
	Finished []string
	// Abandoned says why a decision was not carried out ("" otherwise).
	Abandoned string
	// Strays are karpenter.sh/disrupted taints no Dovetail function owns, stamped or removed.
	Strays []disruption.Stray
}

// Handle processes a snapshot event. It returns an error wrapping queue.ErrPoison for a
// malformed event or another cluster's (dead-lettered with the reason), another error for a
// transient failure (redelivered: every effect is idempotent), nil otherwise. Pods-pending
// events are acknowledged and ignored: while pods are pending, capacity is being added, not
// consolidated.
func (h *Handler) Handle(ctx context.Context, msg queue.Message) error {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return emit.Poison(err)
	}
	if err := emit.Accept(Component, env.Type, events.TypeSnapshot, events.TypePodsPending); err != nil {
		return err
	}
	if env.Type == events.TypePodsPending {
		return nil
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
	out, err := h.Process(ctx, snap)
	if err == nil {
		h.decided.Record(snap.Revision)
	}
	if h.OnOutcome != nil {
		h.OnOutcome(out)
	}
	return err
}

// Process moves consolidations in flight one step on, or, when none is in flight, decides a
// new one, launches its replacements and taints its candidates.
func (h *Handler) Process(ctx context.Context, snap *events.Snapshot) (Outcome, error) {
	out := Outcome{Revision: snap.Revision}
	st, err := disruption.NewState(snap, h.Catalog, h.NodeSettings)
	if err != nil {
		return out, fmt.Errorf("%w: %w", queue.ErrPoison, err)
	}
	st.Policies = h.Policies
	// Taints no Dovetail function owns (Karpenter's, left in a migration) would hold their nodes'
	// budget for ever: dated first, removed once old (disruption.StrayTaints).
	if out.Strays = disruption.StrayTaints(st, snap.Time.Time); len(out.Strays) > 0 {
		for _, c := range disruption.StrayCommands(h.Cluster, snap.Revision, out.Strays) {
			if err := h.publish(ctx, snap, c); err != nil {
				return out, err
			}
			h.log().Info("stray disrupted taint", "node", c.NodeName, "command", c.Kind, "reason", c.Reason)
		}
	}
	// Read before the consolidations in flight, so one that shows is forgotten now: after its
	// rollback its candidates are untainted again, which must not read as "not shown yet".
	unseen := h.started.Unseen(snap, st.Now)
	if out.Progress = disruption.InFlight(st); len(out.Progress) > 0 {
		return out, h.advance(ctx, snap, &out)
	}
	if len(unseen) > 0 {
		out.Abandoned = waitingFor(unseen, snap.Revision)
		h.log().Info("consolidation waits", "revision", snap.Revision, "reason", out.Abandoned)
		return out, nil
	}
	d, rep := disruption.Consolidate(st, h.Options)
	out.Decision, out.Report = d, rep
	telemetry.OrNop(h.Metrics).Record(telemetry.DisruptionEligibleNodes, float64(rep.Candidates), "underutilized")
	if err := h.blocked(ctx, snap, st, rep); err != nil {
		return out, err
	}
	if d == nil {
		h.log().Info("consolidation: nothing to do", "revision", snap.Revision, "candidates", rep.Candidates, "tried", strings.Join(rep.Tried, "; "))
		return out, nil
	}
	rev, on := snap.Revision, snap
	if h.Latest != nil {
		fresh, err := h.Latest(ctx)
		if err != nil {
			return out, fmt.Errorf("fetching a fresh snapshot to validate consolidation %s: %w", d.ID, err)
		}
		if fresh != nil && fresh.Revision != snap.Revision {
			if fresh, err = emit.Dated(fresh, snap.Time.Time); err != nil {
				out.Abandoned = fmt.Sprintf("the fresh snapshot is not usable: %v", err)
				return out, nil
			}
			fs, err := disruption.NewState(fresh, h.Catalog, h.NodeSettings)
			if err != nil {
				return out, err
			}
			fs.Policies = h.Policies
			if p := disruption.InFlight(fs); len(p) > 0 {
				out.Abandoned = "another consolidation is in flight on the fresh snapshot"
				return out, nil
			}
			nd, err := disruption.Validate(d, fs)
			if err != nil {
				out.Abandoned = fmt.Sprintf("not valid on revision %d: %v", fresh.Revision, err)
				h.log().Info("consolidation abandoned", "decision", d.ID, "reason", out.Abandoned)
				return out, nil
			}
			d, rev, out.Decision, st, on = nd, fresh.Revision, nd, fs, fresh
		}
	}
	return out, h.execute(ctx, snap, on, st, d, rev, &out)
}

// blocked records Karpenter's DisruptionBlocked events: on the NodeClaim and Node of each node a
// PodDisruptionBudget or a karpenter.sh/do-not-disrupt annotation keeps from consolidation, and
// on each NodePool whose budget for a reason allows nothing now.
func (h *Handler) blocked(ctx context.Context, snap *events.Snapshot, st *disruption.State, rep *disruption.Report) error {
	var recs []events.EventRecord
	for _, sk := range rep.Skipped {
		n := st.Node(sk.Node)
		if sk.Blocker == "" || n == nil {
			continue
		}
		claim := corev1.ObjectReference{}
		if n.Claim != nil {
			claim = kevents.NodeClaimRef(n.Claim)
		}
		recs = append(recs, kevents.Blocked(claim, kevents.NodeRef(n.Node), sk.Blocker)...)
	}
	keys := make([]string, 0, len(rep.Budgets))
	for k, allowed := range rep.Budgets {
		if pool, _, _ := strings.Cut(k, "/"); allowed == 0 && st.Counts[pool].Nodes > 0 {
			keys = append(keys, k) // a pool without nodes has nothing to disrupt
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		pool, reason, _ := strings.Cut(k, "/")
		recs = append(recs, kevents.BudgetBlocked(kevents.NamedNodePool(snap.NodePools, pool), reason))
	}
	e := emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}
	return e.Events(ctx, snap.Time.Time, snap.Revision, recs, "consolidate-blocked")
}

// execute carries the decision's first step out (disruption.Decision.Start): the replacements
// launched first (nothing is disrupted until they exist), then the candidates tainted. on is
// the snapshot the decision was last validated on (the message's, or a fresher one).
func (h *Handler) execute(ctx context.Context, snap, on *events.Snapshot, st *disruption.State, d *disruption.Decision, rev int64, out *Outcome) error {
	steps, err := disruption.Sequence(h.Cluster, d.Start(st, rev))
	if err != nil {
		return err
	}
	_, refused, err := emit.RunSequence(ctx, steps, false, h.launcher(snap, on, d, rev, out), func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) })
	if err != nil {
		return err
	}
	if refused != nil {
		// Nothing is tainted yet: the candidates keep running; replacements already
		// launched are ordinary capacity once the lock (disruption.ReplacementLock) ends.
		out.Launched = nil
		out.Abandoned = refused.Error()
		h.log().Info("consolidation abandoned", "decision", d.ID, "reason", out.Abandoned)
		return nil
	}
	h.started.Record(d.ID, d.NodeNames(), st.Now)
	h.recordDecision(d)
	audit := telemetry.Audit{Action: d.Method, Function: Component, Cluster: h.Cluster, Decision: d.ID, Revision: rev,
		Rule: "consolidation/" + d.Strategy + " (" + d.Reason + ")", Why: d.Why, Nodes: d.NodeNames(),
		PriceBefore: d.PriceBefore, PriceAfter: d.PriceAfter, Time: st.Now, NodePools: poolCosts(st, d)}
	for _, c := range d.Candidates {
		audit.Inputs = append(audit.Inputs, fmt.Sprintf("candidate %s (%s/%s/%s, %.4f USD/h, %d pods)", c.Node, c.InstanceType, c.Zone, c.CapacityType, c.Price, len(c.Pods)))
	}
	for _, nc := range out.Launched {
		audit.NodeClaims = append(audit.NodeClaims, nc.Name)
	}
	telemetry.LogAudit(h.log(), audit)
	telemetry.RecordPoolCosts(h.Metrics, audit.NodePools)
	h.log().Info("consolidation decided", "decision", d.ID, "revision", rev, "summary", d.String(), "why", d.Why)
	return nil
}

// launcher launches a decision's replacements through the one launch step, all or nothing,
// annotated with the decision and the nodes they replace; launched ones are added to out.
//
// The step first checks that the snapshot the decision was validated on records every recent
// launch in the cloud (launch.Step.Recorded). A consolidation decided a second or two after
// another, on a snapshot that shows neither the other's replacement NodeClaims nor its taints
// (the agent had not applied them yet), sees the other's candidates as free and picks them
// again: make scale (N = 1,000, docs/scale.md) launched two replacements for the same eight
// nodes that way, more than 1 s apart, and every such surplus node was consolidated again
// later. An unrecorded launch refuses the launch (launch.ErrBehindCloud): nothing is tainted,
// and the next snapshot, which records it, shows that consolidation in flight.
func (h *Handler) launcher(snap, on *events.Snapshot, d *disruption.Decision, rev int64, out *Outcome) emit.Launch {
	return func(ctx context.Context, seq disruption.SequenceStep) (error, error) {
		step := launch.Step{
			Launcher:     &launch.Launcher{Cluster: h.Cluster, Provider: h.Provider, Catalog: h.Catalog},
			Decision:     launch.Decision{Revision: rev, Time: snap.Time.Time, ClusterFacts: snap.ClusterFacts},
			NodeClasses:  snap.NodeClasses,
			Publish:      func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) },
			Rounds:       1,
			AllOrNothing: true,
			Recorded:     launch.RecordedIn(on),
			Reason: func(*provisioning.NodeClaimPlan) string {
				return fmt.Sprintf("consolidation %s replaces %s", d.ID, strings.Join(d.NodeNames(), ","))
			},
			Annotate: func(nc *apisv1.NodeClaim) {
				nc.Annotations[disruption.AnnotationDecision] = d.ID
				nc.Annotations[disruption.AnnotationReplaces] = strings.Join(d.NodeNames(), ",")
			},
		}
		res, err := step.Run(ctx, launch.Fixed(&provisioning.Plan{NodeClaims: seq.Replacements}))
		if errors.Is(err, launch.ErrBehindCloud) {
			return err, nil // refused: decided again on a snapshot that records the launch
		}
		if err != nil {
			return nil, err
		}
		for _, l := range res.Launched {
			out.Launched = append(out.Launched, l.NodeClaim)
		}
		if len(res.Refused) > 0 {
			return res.Refused[0], nil
		}
		return nil, nil
	}
}

// advance carries each consolidation in flight one step on: drained candidates have their
// NodeClaim deleted, which runs the one termination path (the lifecycle function terminates the
// instance and removes the finalizers); candidates whose drain is validated are drained.
func (h *Handler) advance(ctx context.Context, snap *events.Snapshot, out *Outcome) error {
	for _, p := range out.Progress {
		if p.Rollback != "" {
			// Given up: untaint the candidates so the abandoned decision holds no capacity.
			out.Abandoned = fmt.Sprintf("consolidation %s rolled back: %s", p.ID, p.Rollback)
			h.log().Info("consolidation rolled back", "decision", p.ID, "reason", p.Rollback)
			for _, n := range p.Candidates {
				t := corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}
				c := events.Command{ID: events.CommandID(h.Cluster, "consolidation-rollback", p.ID, n.Name()), Kind: events.CommandUntaintNode,
					Cluster: h.Cluster, SnapshotRevision: snap.Revision, NodeName: n.Name(), Taint: &t, Reason: out.Abandoned}
				if err := h.publish(ctx, snap, c); err != nil {
					return err
				}
			}
			continue
		}
		if fin, ok := p.Finished(snap.Revision, snap.Time.Time); ok {
			if err := h.sequence(ctx, snap, fin); err != nil {
				return err
			}
			for _, c := range fin.Candidates {
				out.Finished = append(out.Finished, c.Name())
			}
		}
		if drain, ok := p.Drained(snap.Revision, snap.Time.Time); ok {
			if err := h.sequence(ctx, snap, drain); err != nil {
				return err
			}
		}
		h.log().Info("consolidation in flight", "decision", p.ID, "candidates", len(p.Candidates), "drain", len(p.Drain),
			"finished", len(p.Finish), "waiting", p.Waiting)
	}
	return nil
}

// sequence publishes a later step of a consolidation in flight (no launch in it).
func (h *Handler) sequence(ctx context.Context, snap *events.Snapshot, d disruption.Disruption) error {
	steps, err := disruption.Sequence(h.Cluster, d)
	if err != nil {
		return err
	}
	noLaunch := func(context.Context, disruption.SequenceStep) (error, error) {
		return nil, fmt.Errorf("consolidation %s: a later step launches nothing", d.ID)
	}
	_, _, err = emit.RunSequence(ctx, steps, false, noLaunch, func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) })
	return err
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

// recordDecision counts a consolidation whose candidates were tainted: one
// karpenter_voluntary_disruption_decisions_total (decision delete or replace, reason empty or
// underutilized, consolidation_type Karpenter's empty/single/multi) and one
// karpenter_nodeclaims_disrupted_total per candidate.
func (h *Handler) recordDecision(d *disruption.Decision) {
	rec := telemetry.OrNop(h.Metrics)
	reason := strings.ToLower(d.Reason)
	typ := "multi"
	switch d.Strategy {
	case disruption.StrategyEmptiness:
		typ = "empty"
	case disruption.StrategySingleNode:
		typ = "single"
	}
	rec.Record(telemetry.DisruptionDecisions, 1, d.Method, reason, typ)
	for _, c := range d.Candidates {
		rec.Record(telemetry.NodeClaimsDisrupted, 1, reason, c.NodePool, c.CapacityType)
	}
}

// waitingFor says which started consolidation a new decision waits for (unseen from
// emit.Started.Unseen, non-empty).
func waitingFor(unseen map[string]string, rev int64) string {
	ids := map[string]bool{}
	for _, id := range unseen {
		ids[id] = true
	}
	names := make([]string, 0, len(ids))
	for id := range ids {
		names = append(names, id)
	}
	sort.Strings(names)
	return fmt.Sprintf("consolidation %s does not show in revision %d yet (none of its candidates is tainted)", strings.Join(names, ","), rev)
}
