// Package provision is the provision function: a pending-pods event (with its cluster
// snapshot) in, launched instances and CreateNodeClaim commands out. It keeps no state between
// messages; a redelivered message makes the same decision, and the fleet's idempotency token
// returns the instances already launched instead of launching new ones.
package provision

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/launch"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Component is the function's name in event sources and consumer names.
const Component = "provision"

// MaxRounds bounds how often one invocation re-plans after insufficient capacity: each round
// marks the refused offerings and places the pods of failed launches elsewhere.
const MaxRounds = 3

// DefaultOrphanGracePeriod is how long a tagged instance may exist without a NodeClaim before
// it is terminated as an orphan (long enough for a retried invocation to record it).
const DefaultOrphanGracePeriod = 10 * time.Minute

// Handler handles one message. Its fields are its dependencies; it holds no state.
type Handler struct {
	Cluster   string
	Catalog   *catalog.Catalog
	Provider  cloud.Provider
	Publisher queue.Publisher
	Codec     events.Codec
	Log       *slog.Logger
	// OrphanGracePeriod overrides DefaultOrphanGracePeriod.
	OrphanGracePeriod time.Duration
	// OnDecision, when set, receives every decision (local dev prints them).
	OnDecision func(Decision)
}

// Decision is what one invocation decided, for logs and audit.
type Decision struct {
	Revision      int64
	Launched      []Launched
	Existing      []*provisioning.NodePlacement
	Unschedulable []provisioning.Unschedulable
	Orphans       []string
	Failures      []string
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
	if env.Type != events.TypePodsPending && env.Type != events.TypeSnapshot {
		return fmt.Errorf("%w: type: %q is not handled by the provision function", queue.ErrPoison, env.Type)
	}
	snap, err := emit.SnapshotOf(ctx, h.Codec, h.Cluster, env)
	if err != nil {
		return err
	}
	d, err := h.Decide(ctx, snap)
	if h.OnDecision != nil {
		h.OnDecision(d)
	}
	return err
}

// Decide plans the snapshot's pending pods, launches the NodeClaims and publishes their
// commands. Launches that fail for capacity are re-planned (up to MaxRounds) with the refused
// offerings marked unavailable; the marks are published so later decisions honour them.
func (h *Handler) Decide(ctx context.Context, snap *events.Snapshot) (Decision, error) {
	d := Decision{Revision: snap.Revision}
	ld := launch.Decision{Revision: snap.Revision, Time: snap.Time.Time}
	l := &launch.Launcher{Cluster: h.Cluster, Provider: h.Provider, Catalog: h.Catalog}
	classes := map[string]*apisv1.EC2NodeClass{}
	for i := range snap.NodeClasses {
		classes[snap.NodeClasses[i].Name] = &snap.NodeClasses[i]
	}
	work := *snap
	var marks []events.UnavailableOfferingMark
	var plan *provisioning.Plan
	for round := 0; round < MaxRounds; round++ {
		var err error
		plan, err = provisioning.Solve(provisioning.InputFromSnapshot(&work, h.Catalog))
		if err != nil {
			return d, err
		}
		failed := false
		for _, nc := range plan.NodeClaims {
			var class *apisv1.EC2NodeClass
			if nc.NodeClassRef != nil {
				class = classes[nc.NodeClassRef.Name]
			}
			res := l.Launch(ctx, ld, nc, class)
			marks = append(marks, res.Unavailable...)
			work.UnavailableOfferings = append(work.UnavailableOfferings, res.Unavailable...)
			if res.Err != nil {
				if !cloud.IsInsufficientCapacity(res.Err) {
					return d, res.Err // transient: the message is redelivered and re-decided
				}
				d.Failures = append(d.Failures, res.Err.Error())
				failed = true
				continue
			}
			if err := h.publish(ctx, snap, events.Command{
				ID: events.CommandID(h.Cluster, "create", res.NodeClaim.Name), Kind: events.CommandCreateNodeClaim,
				Cluster: h.Cluster, SnapshotRevision: snap.Revision, NodeClaim: res.NodeClaim,
				Reason: fmt.Sprintf("%d pending pods", len(nc.Pods)),
			}); err != nil {
				return d, err
			}
			// The launched NodeClaim is in flight for the next round: it keeps its pods.
			work.NodeClaims = append(work.NodeClaims, *res.NodeClaim)
			pods := make([]string, 0, len(nc.Pods))
			for _, p := range nc.Pods {
				pods = append(pods, p.Namespace+"/"+p.Name)
			}
			d.Launched = append(d.Launched, Launched{NodeClaim: res.NodeClaim, Instance: res.Instance, Pods: pods})
		}
		if !failed {
			break
		}
	}
	d.Existing, d.Unschedulable = plan.ExistingNodes, plan.Unschedulable
	if len(marks) > 0 {
		sort.Slice(marks, func(i, j int) bool { return markKey(marks[i]) < markKey(marks[j]) })
		keys := make([]string, 0, len(marks))
		for _, m := range marks {
			keys = append(keys, markKey(m))
		}
		if err := h.publish(ctx, snap, events.Command{
			ID:   events.CommandID(append([]string{h.Cluster, "unavailable", fmt.Sprint(snap.Revision)}, keys...)...),
			Kind: events.CommandMarkUnavailable, Cluster: h.Cluster, SnapshotRevision: snap.Revision,
			Unavailable: marks, Reason: "insufficient capacity",
		}); err != nil {
			return d, err
		}
	}
	orphans, err := h.collectOrphans(ctx, snap)
	d.Orphans = orphans
	if err != nil {
		return d, err
	}
	h.log().Info("provision decision", "revision", snap.Revision, "launched", len(d.Launched),
		"onExistingCapacity", len(d.Existing), "unschedulable", len(d.Unschedulable), "orphansTerminated", len(orphans))
	return d, nil
}

// collectOrphans terminates instances tagged for this cluster that no NodeClaim records and
// that are older than the grace period (by the snapshot's clock): launches whose function died
// before its command was applied and whose message was never retried.
func (h *Handler) collectOrphans(ctx context.Context, snap *events.Snapshot) ([]string, error) {
	insts, err := h.Provider.List(ctx, h.Cluster)
	if err != nil {
		return nil, fmt.Errorf("listing instances of cluster %s: %w", h.Cluster, err)
	}
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
	var out []string
	for _, inst := range insts {
		if known[inst.ProviderID] || known[inst.Tags[apisv1.TagNodeClaim]] || snap.Time.Sub(inst.LaunchTime) < grace {
			continue
		}
		if err := h.Provider.Delete(ctx, inst.ProviderID); err != nil {
			return out, fmt.Errorf("terminating orphan %s: %w", inst.ProviderID, err)
		}
		out = append(out, inst.ProviderID)
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

func markKey(m events.UnavailableOfferingMark) string {
	return strings.Join([]string{m.InstanceType, m.Zone, m.CapacityType}, "/")
}
