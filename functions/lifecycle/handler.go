// Package lifecycle is the lifecycle function: on every snapshot (the agent publishes one soon
// after a Node or NodeClaim changes, and on its timer) it does what Karpenter's NodeClaim and
// Node controllers do after a launch, as decided by shared/lifecycle:
//   - registration: a Node whose providerID matches a NodeClaim gets the NodeClaim's labels,
//     taints and annotations, loses karpenter.sh/unregistered and gains the termination
//     finalizer; the NodeClaim gets status.nodeName and Registered=True;
//   - initialization: Initialized=True and Ready=True once the Node is Ready, its startup taints
//     are gone and its requested resources are allocatable;
//   - nomination: the pods planned onto the NodeClaim that are still pending are nominated to its
//     Node, so kube-scheduler binds them where they were planned;
//   - Consolidatable (Karpenter's) and DisruptionBlocked (Dovetail's: every standing reason,
//     from shared/disruption's rules, that keeps the node from being consolidated, each naming
//     its object; written only when it changes);
//   - liveness: a NodeClaim not registered within the registration TTL (15 minutes) is deleted
//     and its offering marked unavailable;
//   - NodeClass status: each EC2NodeClass's selectors are resolved through the provider
//     (cloud.NodeClassResolver) into status.subnets, securityGroups, amis, instanceProfile and
//     its conditions, when the status is missing or older than the spec and otherwise every
//     RefreshInterval; a class being deleted keeps its finalizer until no NodeClaim uses it and
//     its instance profile is deleted;
//   - NodePool status: nodes, resources and the conditions ValidationSucceeded,
//     NodeClassReady and Ready;
//   - termination: a NodeClaim or Node being deleted (kubectl, consolidation, drift, expiry,
//     interruption, liveness) is tainted and drained through the Eviction API, what is left at
//     the end of its terminationGracePeriod deleted, its instance terminated (only instances
//     tagged for the cluster can be), and once the cloud reports the instance shutting down or
//     gone, the finalizers are removed, the Node's first;
//   - node repair (on unless DisableRepair): a Node matching one of the provider's repair
//     policies past its toleration is replaced through disruption.Sequence (forced hand-off,
//     no drain wait), unless more than 20 % of its NodePool is unhealthy (shared/repair);
//   - garbage collection: a NodeClaim whose instance the cloud no longer lists, on two complete
//     snapshots, is deleted and its Node with it.
//
// It keeps no state: every step is re-derived from the next snapshot, so a function killed at
// any line, or a message delivered twice, leaves no stuck finalizer and no orphan.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/absence"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	core "github.com/dovetail-dev/dovetail/shared/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Component is the function's name in event sources and consumer names.
const Component = "lifecycle"

// Handler handles one event. Its exported fields are its dependencies; its only state is a
// hint (decided) that skips superseded events.
type Handler struct {
	Cluster   string
	Provider  cloud.Provider
	Publisher queue.Publisher
	Codec     events.Codec
	Log       *slog.Logger
	// Options tune the decisions (registration TTL).
	Options core.Options
	// OnDecision, when set, receives every decision that did something (local dev prints it).
	OnDecision func(Outcome)
	// RefreshInterval is how often a Ready NodeClass is resolved again (a new AMI behind an
	// alias, a subnet added); default DefaultRefreshInterval.
	RefreshInterval time.Duration
	// Now is the function's clock (default time.Now): the registration TTL, the registration
	// window and the termination grace period read it, and a snapshot dated more than
	// events.MaxClockSkew from it is refused.
	Now func() time.Time

	// resolved remembers when this process last resolved each NodeClass (by uid and
	// generation). It only spaces out the cloud calls: a cold process resolves every class once,
	// and every decision still comes from the snapshot.
	mu       sync.Mutex
	resolved map[string]time.Time
	// Metrics receives the function's metrics (nil: none).
	Metrics telemetry.Recorder
	// DisableRepair turns node repair off (--node-repair=false); by default a Node due for
	// repair under the provider's policies (cloud.Repairer) is replaced, as in Karpenter v1.
	DisableRepair bool
	// vanished are the NodeClaims this process saw without an instance on an earlier
	// snapshot (garbage collection acts on the second sighting).
	vanished absence.Sightings

	// decided is the newest snapshot revision decided on, a hint that lets events holding an
	// older snapshot be acknowledged unread (emit.Decided); losing it (a new process) costs
	// only a decode.
	decided emit.Decided
}

// ReasonGarbageCollected is the reason label of karpenter_nodeclaims_disrupted_total for a
// NodeClaim deleted because its instance is gone (Karpenter's garbage collection controller).
const ReasonGarbageCollected = "garbage_collected"

// DefaultRefreshInterval is how often a Ready NodeClass is resolved again: 1 minute, the
// requeue interval of Karpenter's subnet status controller (its AMI and security group ones
// use 5 minutes; one interval keeps drift detection prompt at a few Describe calls a minute).
const DefaultRefreshInterval = time.Minute

// Outcome is what one snapshot led to.
type Outcome struct {
	Revision int64
	core.Decision
	// Terminated are the provider IDs whose instance was terminated (or found gone) and whose
	// finalizers were released in this invocation.
	Terminated []string
	// Waiting are the provider IDs still running after the terminate call (finalizers kept).
	Waiting []string
	// NodeClassStatuses are the NodeClass status writes published, Released the NodeClasses
	// whose instance profiles were deleted and finalizers released.
	NodeClassStatuses []events.Command
	Released          []string
	// Repaired are the nodes repaired (their NodeClaim deleted), RepairBlocked those due for
	// repair that the breaker held, Collected the NodeClaims deleted because their instance is
	// gone from the cloud.
	Repaired, RepairBlocked, Collected []string
}

// Handle processes a snapshot or pods-pending event. A malformed event, or one of any other type
// (emit.Accept), wraps queue.ErrPoison (it is dead-lettered with the reason); a queue or cloud failure asks for redelivery; nil
// acknowledges.
func (h *Handler) Handle(ctx context.Context, msg queue.Message) error {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return emit.Poison(err)
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
	out, err := h.Decide(ctx, snap)
	if err == nil {
		h.decided.Record(snap.Revision)
	}
	if h.OnDecision != nil && (len(out.Commands) > 0 || len(out.Terminate) > 0 || len(out.NodeClassStatuses) > 0 || len(out.Released) > 0 ||
		len(out.Repaired) > 0 || len(out.RepairBlocked) > 0 || len(out.Collected) > 0) {
		h.OnDecision(out)
	}
	return err
}

// Decide publishes the snapshot's lifecycle commands, then terminates the instances of the
// NodeClaims and Nodes whose termination reached that step and releases their finalizers once
// the cloud reports each instance shutting down or gone.
func (h *Handler) Decide(ctx context.Context, snap *events.Snapshot) (Outcome, error) {
	opts := h.Options
	opts.RepairPolicies = h.repairPolicies()
	gone, vanished, failed := h.collectVanished(ctx, snap)
	opts.Vanished = gone
	out := Outcome{Revision: snap.Revision, Decision: core.Decide(snap, opts)}
	h.recordNodePools(snap)
	for _, c := range out.Commands {
		if err := h.publish(ctx, snap, c); err != nil {
			return out, err
		}
	}
	for _, nc := range vanished {
		if err := h.publish(ctx, snap, core.VanishedCommand(snap, nc)); err != nil {
			return out, err
		}
		emit.RecordDisrupted(h.Metrics, ReasonGarbageCollected, nc)
		out.Collected = append(out.Collected, nc.Name)
	}
	if err := h.repair(ctx, snap, opts.RepairPolicies, &out); err != nil {
		return out, errors.Join(failed, err)
	}
	for _, t := range out.Terminate {
		state, err := h.terminate(ctx, t.ProviderID)
		if err != nil {
			// One instance the cloud will not terminate must not hold back the others or the
			// NodeClass status; the error still asks for redelivery.
			failed = errors.Join(failed, err)
			continue
		}
		if state == "" {
			out.Waiting = append(out.Waiting, t.ProviderID)
			continue
		}
		for _, c := range t.Finish {
			// The agent has no cloud credentials: what this function read of the instance is
			// the evidence it releases the termination finalizers on.
			c.Instance = &events.InstanceEvidence{ProviderID: t.ProviderID, State: state}
			if err := h.publish(ctx, snap, c); err != nil {
				return out, err
			}
		}
		out.Terminated = append(out.Terminated, t.ProviderID)
	}
	if err := h.nodeClasses(ctx, snap, &out); err != nil {
		return out, errors.Join(failed, err)
	}
	if len(out.Commands) > 0 || len(out.Terminate) > 0 || len(out.NodeClassStatuses) > 0 || len(out.Released) > 0 {
		h.log().Info("lifecycle decision", "revision", snap.Revision, "commands", len(out.Commands),
			"terminated", len(out.Terminated), "waiting", len(out.Waiting))
	}
	return out, failed
}

// terminate asks the cloud to terminate the instance and returns the state it then reads:
// events.InstanceShuttingDown, events.InstanceTerminated or events.InstanceNotFound (also for
// an object that records no instance: nothing was launched), or "" while the instance still
// runs. An instance the provider refuses to terminate (not tagged for this cluster) keeps its
// finalizers, and the refusal is poison: no retry changes it, so the message goes to the
// dead-letter queue at once with the reason for a person to look, instead of being redelivered.
func (h *Handler) terminate(ctx context.Context, providerID string) (string, error) {
	if providerID == "" {
		return events.InstanceNotFound, nil // never launched, or launched without a recorded instance: nothing to stop
	}
	if err := h.Provider.Delete(ctx, providerID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
		if errors.Is(err, cloud.ErrNotOwned) {
			return "", fmt.Errorf("%w: terminating %s: %w", queue.ErrPoison, providerID, err)
		}
		return "", fmt.Errorf("terminating %s: %w", providerID, err)
	}
	inst, err := h.Provider.Get(ctx, providerID)
	switch {
	case errors.Is(err, cloud.ErrNotFound):
		return events.InstanceNotFound, nil
	case err != nil:
		return "", fmt.Errorf("reading %s after terminating it: %w", providerID, err)
	}
	switch inst.State {
	case cloud.StateShuttingDown:
		return events.InstanceShuttingDown, nil
	case cloud.StateTerminated:
		return events.InstanceTerminated, nil
	}
	return "", nil
}

// nodeClasses resolves the NodeClasses that are due and publishes their status where it
// changed, and releases the ones being deleted that no NodeClaim uses. A provider that resolves
// no NodeClasses (the in-memory fake) leaves their status as written.
func (h *Handler) nodeClasses(ctx context.Context, snap *events.Snapshot, out *Outcome) error {
	r, ok := cloud.As[cloud.NodeClassResolver](h.Provider)
	if !ok {
		return nil
	}
	for _, a := range out.NodeClasses {
		switch {
		case a.Release:
			if err := r.ReleaseNodeClass(ctx, a.NodeClass); err != nil {
				return fmt.Errorf("releasing %s %s: %w", a.NodeClass.Kind(), a.NodeClass.Name(), err)
			}
			for _, c := range a.Finish {
				if err := h.publish(ctx, snap, c); err != nil {
					return err
				}
			}
			out.Released = append(out.Released, a.NodeClass.Name())
		case a.Resolve && h.due(a.NodeClass, emit.Clock(h.Now)):
			resolved, err := r.ResolveNodeClass(cloud.WithClusterFacts(ctx, snap.ClusterFacts), a.NodeClass)
			if err != nil {
				return fmt.Errorf("resolving %s %s: %w", a.NodeClass.Kind(), a.NodeClass.Name(), err)
			}
			if c := core.StatusCommand(snap, a.NodeClass, resolved); c != nil {
				if err := h.publish(ctx, snap, *c); err != nil {
					return err
				}
				out.NodeClassStatuses = append(out.NodeClassStatuses, *c)
			}
			h.mark(a.NodeClass, emit.Clock(h.Now))
		}
	}
	return nil
}

func refreshKey(c apisv1.NodeClass) string {
	m := c.Meta()
	return string(m.UID) + "/" + m.Name + "/" + fmt.Sprint(m.Generation)
}

// due reports whether the class should be resolved now: its status is missing or behind its
// spec, or this process last resolved it RefreshInterval ago or more (or never).
func (h *Handler) due(c apisv1.NodeClass, now time.Time) bool {
	if core.NeedsResolve(c) {
		return true
	}
	every := h.RefreshInterval
	if every <= 0 {
		every = DefaultRefreshInterval
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	last, ok := h.resolved[refreshKey(c)]
	return !ok || now.Sub(last) >= every || now.Before(last)
}

func (h *Handler) mark(c apisv1.NodeClass, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.resolved == nil {
		h.resolved = map[string]time.Time{}
	}
	h.resolved[refreshKey(c)] = now
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

// recordNodePools sets karpenter_nodepools_usage and karpenter_nodepools_limit for each
// NodePool of the snapshot, by resource type: usage as its status reports it (the NodeClaims'
// capacity, and "nodes"), limits from spec.limits; CPU in cores, memory in bytes, counts as such.
func (h *Handler) recordNodePools(snap *events.Snapshot) {
	rec := telemetry.OrNop(h.Metrics)
	for i := range snap.NodePools {
		np := &snap.NodePools[i]
		usage, nodes := core.PoolUsage(snap, np.Name)
		rec.Record(telemetry.NodePoolUsage, float64(nodes), "nodes", np.Name)
		for _, k := range slices.Sorted(maps.Keys(usage)) {
			q := usage[k]
			rec.Record(telemetry.NodePoolUsage, q.AsApproximateFloat64(), string(k), np.Name)
		}
		for _, k := range slices.Sorted(maps.Keys(np.Spec.Limits)) {
			q := np.Spec.Limits[k]
			rec.Record(telemetry.NodePoolLimit, q.AsApproximateFloat64(), string(k), np.Name)
		}
	}
}
