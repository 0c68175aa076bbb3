// Package provision is the provision function: a pending-pods event (with its cluster
// snapshot) in, launched instances and CreateNodeClaim commands out. It keeps no state between
// messages; a redelivered message makes the same decision, and the fleet's idempotency token
// returns the instances already launched instead of launching new ones.
package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/absence"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/launch"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provreq"
	"github.com/dovetail-dev/dovetail/shared/quarantine"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/static"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Component is the function's name in event sources and consumer names.
const Component = "provision"

// DefaultOrphanGracePeriod is how long a tagged instance may exist without a NodeClaim before
// it is terminated as an orphan (long enough for a retried invocation to record it).
const DefaultOrphanGracePeriod = 10 * time.Minute

// Handler handles one message. Its fields are its dependencies; it holds no state.
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
	// OrphanGracePeriod overrides DefaultOrphanGracePeriod.
	OrphanGracePeriod time.Duration
	// Now is the function's clock (default time.Now): orphan collection trusts it, not the
	// snapshot's.
	Now func() time.Time

	// suspects are the orphans this process saw on an earlier snapshot (by provider ID, with its
	// revision): an instance is terminated only when its absence held on two complete snapshots.
	// A cold process only starts the count again.
	suspects absence.Sightings
	// OnDecision, when set, receives every decision (local dev prints them).
	OnDecision func(Decision)
	// Metrics receives the provisioner's metrics (nil: none).
	Metrics telemetry.Recorder
}

// Decision is what one invocation decided, for logs and audit.
type Decision struct {
	Revision      int64
	Launched      []Launched
	Existing      []*provisioning.NodePlacement
	Unschedulable []provisioning.Unschedulable
	Orphans       []string
	Failures      []string
	// Requests are the ProvisioningRequests this decision answered (serveProvisioningRequests).
	Requests []RequestAnswer
	// Held are the pending pods held back as consumers of a ProvisioningRequest
	// (provreq.HoldBack), each with its request's standing.
	Held []provreq.Hold
	// Quarantined are the sick workloads whose pending replicas were held (shared/quarantine).
	Quarantined []quarantine.Verdict
}

// Launched is one NodeClaim launched.
type Launched struct {
	NodeClaim *apisv1.NodeClaim
	Instance  *cloud.Instance
	Pods      []string
}

// Handle processes a pods-pending or snapshot event. It returns an error wrapping
// queue.ErrPoison for a malformed event (dead-lettered with the reason), another error for a
// transient failure (redelivered), nil when the decision's commands are published.
func (h *Handler) Handle(ctx context.Context, msg queue.Message) error {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return emit.Poison(err)
	}
	if err := emit.Accept(Component, env.Type, events.TypeSnapshot, events.TypePodsPending); err != nil {
		return err
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
	if h.OnDecision != nil {
		h.OnDecision(d)
	}
	return err
}

// Decide plans the snapshot's pending pods, launches the NodeClaims and publishes their
// commands (launch.Step). Launches that fail for capacity are re-planned (up to
// launch.MaxRounds) with the refused offerings marked unavailable; the marks are published so
// later decisions honour them.
func (h *Handler) Decide(ctx context.Context, snap *events.Snapshot) (Decision, error) {
	d := Decision{Revision: snap.Revision}
	statics, err := h.scaleStatic(ctx, snap, &d)
	if errors.Is(err, launch.ErrBehindCloud) {
		h.log().Info("provision decision skipped", "revision", snap.Revision, "reason", err.Error())
		return d, nil
	}
	if err != nil {
		return d, err
	}
	// ProvisioningRequests first: their bookings and atomic launches are the capacity the other
	// pending pods are planned around (base: consumers held back, booked pods bound, launched
	// NodeClaims in flight, refused offerings marked).
	base, err := h.serveProvisioningRequests(ctx, snap, statics, &d)
	if errors.Is(err, launch.ErrBehindCloud) {
		h.log().Info("provision decision skipped", "revision", snap.Revision, "reason", err.Error())
		return d, nil
	}
	if err != nil {
		return d, err
	}
	inFlight := statics
	if base != snap {
		inFlight = nil // base's NodeClaims hold them already
	}
	// Sick workloads' pending replicas beyond their allowance are left out of the plan (and of
	// its audit record); the static NodePools above are no workload's and see the whole snapshot.
	planned, held := h.quarantined(base)
	d.Quarantined = held.Verdicts
	step := launch.Step{
		Launcher:    &launch.Launcher{Cluster: h.Cluster, Provider: h.Provider, Catalog: h.Catalog},
		Decision:    launch.Decision{Revision: snap.Revision, Time: snap.Time.Time, ClusterFacts: snap.ClusterFacts},
		NodeClasses: snap.NodeClasses,
		Publish:     func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) },
		Reason:      func(nc *provisioning.NodeClaimPlan) string { return fmt.Sprintf("%d pending pods", len(nc.Pods)) },
		Recorded:    launch.RecordedIn(snap),
	}
	if rec := step.Recorded; rec != nil && len(statics) > 0 {
		// This decision's own static launches are not another decision's.
		mine := map[string]bool{}
		for _, nc := range statics {
			mine[nc.Name] = true
		}
		step.Recorded = func(providerID, nodeClaim string) bool { return mine[nodeClaim] || rec(providerID, nodeClaim) }
	}
	var holds []provisioning.PoolHold // the anomaly hold's verdicts on the last plan
	out, err := step.Run(ctx, func(marks []events.UnavailableOfferingMark, launched []apisv1.NodeClaim) (*provisioning.Plan, error) {
		work := *planned
		work.UnavailableOfferings = append(append([]events.UnavailableOfferingMark(nil), base.UnavailableOfferings...), marks...)
		work.NodeClaims = append(append(append([]apisv1.NodeClaim(nil), base.NodeClaims...), inFlight...), launched...)
		in := provisioning.InputFromSnapshot(&work, h.Catalog, h.NodeSettings)
		in.Policies = h.Policies
		// The cloud's count of each reservation's free instances, asked for every plan (a
		// re-plan sees what this decision's launches took).
		counts, err := launch.ReservationCounts(ctx, h.Provider, snap.NodeClasses)
		if err != nil {
			return nil, err
		}
		if counts != nil {
			in.ReservationCounts = counts
		}
		// Where this deployment resolves NodeClasses (the lifecycle function writes their status),
		// a class with no status yet launches nothing: its pods wait for the next snapshot rather
		// than a launch without an instance profile.
		_, in.RequireResolvedNodeClasses = cloud.As[cloud.NodeClassResolver](h.Provider)
		// Scale-up governance (shared/guardrails): the rate policies limit the solve, the anomaly
		// hold keeps back what the plan would add to a NodePool far above its trailing average.
		// Only here: replacements (interruption, drift, repair, consolidation) are never held.
		in.ScaleUpGuardrails = true
		plan, err := emit.Solve(h.Metrics, telemetry.ControllerProvisioner, in)
		if err != nil {
			return nil, err
		}
		holds = provisioning.HoldAnomalies(&in, plan)
		return plan, nil
	})
	emit.RecordPlan(h.Metrics, telemetry.ControllerProvisioner, len(snap.PendingPods), out.Plan)
	for _, l := range out.Launched {
		pods := make([]string, 0, len(l.Plan.Pods))
		for _, p := range l.Plan.Pods {
			pods = append(pods, p.Namespace+"/"+p.Name)
		}
		d.Launched = append(d.Launched, Launched{NodeClaim: l.NodeClaim, Instance: l.Instance, Pods: pods})
	}
	for _, e := range out.Refused {
		d.Failures = append(d.Failures, e.Error())
	}
	if errors.Is(err, launch.ErrBehindCloud) {
		// Another decision's launch is not recorded yet: deciding on this snapshot would launch
		// its pods' capacity twice. The snapshot that records it follows within a second.
		h.log().Info("provision decision skipped", "revision", snap.Revision, "reason", err.Error())
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.Existing, d.Unschedulable = out.Plan.ExistingNodes, out.Plan.Unschedulable
	if err := h.nominateOnLaunched(ctx, snap, out.Launched); err != nil {
		return d, err
	}
	if err := h.nominateOnPlannedNodes(ctx, snap, out.Plan.ExistingNodes); err != nil {
		return d, err
	}
	if err := h.publishHolds(ctx, snap, holds); err != nil {
		return d, err
	}
	if err := h.failedScheduling(ctx, snap, out.Plan.Unschedulable); err != nil {
		return d, err
	}
	if err := h.recordQuarantine(ctx, snap, held); err != nil {
		return d, err
	}
	audited := provisioning.InputFromSnapshot(planned, h.Catalog, h.NodeSettings)
	audited.Policies = h.Policies
	emit.AuditLaunch(h.log(), h.Metrics, Component, "provisioning: pending pods need new capacity", snap, h.Catalog, audited, out.Plan, out.Launched)
	orphans, err := h.collectOrphans(ctx, snap)
	d.Orphans = orphans
	if err != nil {
		return d, err
	}
	h.log().Info("provision decision", "revision", snap.Revision, "launched", len(d.Launched),
		"onExistingCapacity", len(d.Existing), "unschedulable", len(d.Unschedulable), "quarantineHeld", held.Held, "orphansTerminated", len(orphans))
	return d, nil
}

// scaleStatic launches what the static NodePools lack of their spec.replicas (static.Decide,
// provisioning.StaticPlans) through the one launch step, before the pending pods are planned:
// the pods then count the new NodeClaims as in flight (returned), as Karpenter's scheduler
// counts static NodeClaims. Only on a complete snapshot (Karpenter's static provisioning waits
// for its cluster state to sync, or it would launch what exists already). A pool that cannot
// launch (its NodeClass not ready, no instance type) is named in Decision.Failures; an offering
// the cloud refuses is marked, and the next snapshot launches the rest.
func (h *Handler) scaleStatic(ctx context.Context, snap *events.Snapshot, d *Decision) ([]apisv1.NodeClaim, error) {
	launches := static.Decide(snap).Launches()
	if !snap.Complete || len(launches) == 0 {
		return nil, nil
	}
	in := provisioning.InputFromSnapshot(snap, h.Catalog, h.NodeSettings)
	_, in.RequireResolvedNodeClasses = cloud.As[cloud.NodeClassResolver](h.Provider)
	plan := &provisioning.Plan{}
	for _, p := range launches {
		plans, err := provisioning.StaticPlans(in, p.NodePool, p.Launch)
		if err != nil {
			d.Failures = append(d.Failures, fmt.Sprintf("static NodePool %s (%d of spec.replicas %d): %v", p.NodePool.Name, p.Active, p.Replicas, err))
			continue
		}
		plan.NodeClaims = append(plan.NodeClaims, plans...)
	}
	step := launch.Step{
		Launcher:    &launch.Launcher{Cluster: h.Cluster, Provider: h.Provider, Catalog: h.Catalog},
		Decision:    launch.Decision{Revision: snap.Revision, Time: snap.Time.Time, ClusterFacts: snap.ClusterFacts},
		NodeClasses: snap.NodeClasses,
		Publish:     func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) },
		Rounds:      1,
		Reason: func(nc *provisioning.NodeClaimPlan) string {
			return fmt.Sprintf("static NodePool %s: spec.replicas %d", nc.NodePool.Name, *nc.NodePool.Spec.Replicas)
		},
		Recorded: launch.RecordedIn(snap),
	}
	out, err := step.Run(ctx, launch.Fixed(plan))
	var launched []apisv1.NodeClaim
	for _, l := range out.Launched {
		d.Launched = append(d.Launched, Launched{NodeClaim: l.NodeClaim, Instance: l.Instance})
		launched = append(launched, *l.NodeClaim)
	}
	for _, e := range out.Refused {
		d.Failures = append(d.Failures, e.Error())
	}
	return launched, err
}

// nominateOnLaunched gives the pending pods each launched NodeClaim was planned for the
// toleration of the planned taint its node will register with (one NominatePods command per
// NodeClaim, naming the NodeClaim: its node does not exist yet). Published after the
// NodeClaim's CreateNodeClaim, under the same ordering key, so the agent applies it once the
// NodeClaim exists. Given now, the pod update's extra kube-scheduler attempt (and its backoff)
// is over long before the node registers; the lifecycle function gives the toleration at
// registration only to the planned pods still without it.
func (h *Handler) nominateOnLaunched(ctx context.Context, snap *events.Snapshot, launched []launch.Launched) error {
	for _, l := range launched {
		if l.NodeClaim == nil || l.Plan == nil {
			continue
		}
		name := l.NodeClaim.Name
		refs, keys := untolerating(l.Plan.Pods, name, h.Cluster, "nominate-launched", name)
		if len(refs) == 0 {
			continue
		}
		tol := apisv1.PlannedToleration(name)
		if err := h.publish(ctx, snap, events.Command{ID: events.CommandID(keys...), Kind: events.CommandNominatePods, Cluster: h.Cluster,
			SnapshotRevision: snap.Revision, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}, Pods: refs, Toleration: &tol,
			Reason: fmt.Sprintf("planned onto NodeClaim %s by decision %d", name, snap.Revision)}); err != nil {
			return err
		}
	}
	return nil
}

// untolerating returns the pods that are unbound and lack claim's planned-taint toleration (one
// given by the lifecycle function or an earlier decision is not given again), and the command
// ID's keys: idKeys, then each such pod's namespace/name/uid.
func untolerating(pods []*corev1.Pod, claim string, idKeys ...string) ([]events.PodRef, []string) {
	var refs []events.PodRef
	for _, p := range pods {
		if p.Spec.NodeName != "" || apisv1.HasPlannedToleration(p, claim) {
			continue
		}
		refs = append(refs, events.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)})
		idKeys = append(idKeys, p.Namespace+"/"+p.Name+"/"+string(p.UID))
	}
	return refs, idKeys
}

// nominateOnPlannedNodes gives the pending pods the plan put on a registered node that still
// carries its dovetail.dev/planned taint the taint's toleration (one NominatePods command per
// node). The lifecycle function does this only for the pods a NodeClaim was launched for
// (apisv1.AnnotationPlannedPods); a pod that arrived later and that this plan counts on the
// node's spare room was kept off it by the taint, and once the taint went it raced every other
// pending pod for that room (kube-scheduler binds where a pod fits first). Tolerating, it fits
// the node while the taint still keeps the others off.
func (h *Handler) nominateOnPlannedNodes(ctx context.Context, snap *events.Snapshot, placed []*provisioning.NodePlacement) error {
	claimOf := map[string]string{} // node → the NodeClaim its planned taint names
	for i := range snap.Nodes {
		for _, t := range snap.Nodes[i].Spec.Taints {
			if t.Key == apisv1.TaintKeyPlanned && t.Value != "" {
				claimOf[snap.Nodes[i].Name] = t.Value
			}
		}
	}
	for _, e := range placed {
		claim := claimOf[e.Name]
		if e.InFlight || claim == "" {
			continue
		}
		refs, keys := untolerating(e.Pods, claim, h.Cluster, "nominate-planned", e.Name, claim)
		if len(refs) == 0 {
			continue
		}
		tol := apisv1.PlannedToleration(claim)
		if err := h.publish(ctx, snap, events.Command{ID: events.CommandID(keys...), Kind: events.CommandNominatePods, Cluster: h.Cluster,
			SnapshotRevision: snap.Revision, NodeName: e.Name, Pods: refs, Toleration: &tol,
			Reason: fmt.Sprintf("planned onto node %s (NodeClaim %s, its planned taint still on) by decision %d", e.Name, claim, snap.Revision)}); err != nil {
			return err
		}
	}
	return nil
}

// failedScheduling records Karpenter's FailedScheduling Warning on each pod the plan could not
// place, with the plan's reason ("Failed to schedule pod, <reason>").
func (h *Handler) failedScheduling(ctx context.Context, snap *events.Snapshot, pods []provisioning.Unschedulable) error {
	recs := make([]events.EventRecord, 0, len(pods))
	for _, u := range pods {
		if u.Pod != nil {
			recs = append(recs, kevents.FailedSchedulingEvent(kevents.PodRef(u.Pod), u.Reason))
		}
	}
	e := emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}
	return e.Events(ctx, snap.Time.Time, snap.Revision, recs, "failed-scheduling")
}

// collectOrphans terminates instances tagged for this cluster that no NodeClaim or Node names:
// launches whose function died before its command was applied and whose message was never
// retried; where the provider leaves resources besides instances (cloud.LeftoverCollector: Azure
// NICs), it deletes the unused ones no NodeClaim names the same way. Absence becomes action only
// when the snapshot is complete and its time within events.MaxClockSkew of the function's clock,
// the resource is older than the grace period by its cloud creation time and the function's
// clock, and it was already an orphan on an earlier snapshot seen by this process.
func (h *Handler) collectOrphans(ctx context.Context, snap *events.Snapshot) ([]string, error) {
	now := emit.Clock(h.Now)
	if !snap.Complete {
		return nil, nil
	}
	if err := snap.CheckClock(now); err != nil { // Decide may be called without Handle's check
		skew := snap.Time.Sub(now)
		h.log().Warn("snapshot time is skewed from this function's clock; no orphan collection on it",
			"revision", snap.Revision, "snapshotTime", snap.Time.Time, "now", now, "skew", skew)
		return nil, nil
	}
	insts, err := h.Provider.List(ctx, h.Cluster)
	if err != nil {
		return nil, fmt.Errorf("listing instances of cluster %s: %w", h.Cluster, err)
	}
	cands := make([]orphan, 0, len(insts))
	for _, inst := range insts {
		cands = append(cands, orphan{id: inst.ProviderID, nodeClaim: inst.Tags[apisv1.TagNodeClaim], created: inst.LaunchTime, remove: h.Provider.Delete})
	}
	if lc, ok := cloud.As[cloud.LeftoverCollector](h.Provider); ok {
		left, err := lc.Leftovers(ctx, h.Cluster)
		if err != nil {
			return nil, fmt.Errorf("listing leftovers of cluster %s: %w", h.Cluster, err)
		}
		for _, l := range left {
			cands = append(cands, orphan{id: l.ID, nodeClaim: l.Tags[apisv1.TagNodeClaim], created: l.Created, remove: lc.DeleteLeftover})
		}
	}
	return h.removeOrphans(ctx, snap, cands, now)
}

// orphan is a cloud resource tagged for the cluster: an instance or a launch's leftover.
type orphan struct {
	id, nodeClaim string
	created       time.Time
	remove        func(context.Context, string) error
}

// removeOrphans removes the candidates no NodeClaim or Node names, older than the grace period,
// on their second sighting.
func (h *Handler) removeOrphans(ctx context.Context, snap *events.Snapshot, cands []orphan, now time.Time) ([]string, error) {
	known := map[string]bool{}
	for _, nc := range snap.NodeClaims {
		known[nc.Name] = true
		if nc.Status.ProviderID != "" {
			known[nc.Status.ProviderID] = true
		}
	}
	for _, n := range snap.Nodes {
		if n.Spec.ProviderID != "" {
			known[n.Spec.ProviderID] = true
		}
	}
	grace := h.OrphanGracePeriod
	if grace == 0 {
		grace = DefaultOrphanGracePeriod
	}
	byID := map[string]orphan{}
	var ids []string
	for _, c := range cands {
		if known[c.id] || known[c.nodeClaim] || now.Sub(c.created) < grace {
			continue
		}
		byID[c.id] = c
		ids = append(ids, c.id)
	}
	var out []string
	for _, id := range h.suspects.Confirm(snap.Revision, snap.Time.Time, ids) {
		if err := byID[id].remove(ctx, id); err != nil {
			return out, fmt.Errorf("terminating orphan %s: %w", id, err)
		}
		out = append(out, id)
	}
	return out, nil
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
