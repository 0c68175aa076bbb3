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
//   - liveness: a NodeClaim not registered within the registration TTL (15 minutes) is deleted
//     and its offering marked unavailable;
//   - termination: a NodeClaim or Node being deleted (kubectl, consolidation, drift, expiry,
//     interruption, liveness) is tainted and drained through the Eviction API, what is left at
//     the end of its terminationGracePeriod deleted, its instance terminated (only instances
//     tagged for the cluster can be), and once the cloud reports the instance shutting down or
//     gone, the finalizers are removed, the Node's first.
//
// It keeps no state: every step is re-derived from the next snapshot, so a function killed at
// any line, or a message delivered twice, leaves no stuck finalizer and no orphan.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	core "github.com/dovetail-dev/dovetail/shared/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Component is the function's name in event sources and consumer names.
const Component = "lifecycle"

// Handler handles one event. Its fields are its dependencies; it holds no state.
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
}

// Outcome is what one snapshot led to.
type Outcome struct {
	Revision int64
	core.Decision
	// Terminated are the provider IDs whose instance was terminated (or found gone) and whose
	// finalizers were released in this invocation.
	Terminated []string
	// Waiting are the provider IDs still running after the terminate call (finalizers kept).
	Waiting []string
}

// Handle processes a snapshot or pods-pending event. A malformed event wraps queue.ErrPoison (it
// is dead-lettered with the reason); a queue or cloud failure asks for redelivery; nil
// acknowledges.
func (h *Handler) Handle(ctx context.Context, msg queue.Message) error {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return emit.Poison(err)
	}
	if env.Type != events.TypeSnapshot && env.Type != events.TypePodsPending {
		return nil // commands and other events are not for this function
	}
	snap, err := emit.SnapshotOf(ctx, h.Codec, h.Cluster, env)
	if err != nil {
		return err
	}
	out, err := h.Decide(ctx, snap)
	if h.OnDecision != nil && (len(out.Commands) > 0 || len(out.Terminate) > 0) {
		h.OnDecision(out)
	}
	return err
}

// Decide publishes the snapshot's lifecycle commands, then terminates the instances of the
// NodeClaims and Nodes whose termination reached that step and releases their finalizers once
// the cloud reports each instance shutting down or gone.
func (h *Handler) Decide(ctx context.Context, snap *events.Snapshot) (Outcome, error) {
	out := Outcome{Revision: snap.Revision, Decision: core.Decide(snap, h.Options)}
	for _, c := range out.Commands {
		if err := h.publish(ctx, snap, c); err != nil {
			return out, err
		}
	}
	for _, t := range out.Terminate {
		gone, err := h.terminate(ctx, t.ProviderID)
		if err != nil {
			return out, err
		}
		if !gone {
			out.Waiting = append(out.Waiting, t.ProviderID)
			continue
		}
		for _, c := range t.Finish {
			if err := h.publish(ctx, snap, c); err != nil {
				return out, err
			}
		}
		out.Terminated = append(out.Terminated, t.ProviderID)
	}
	if len(out.Commands) > 0 || len(out.Terminate) > 0 {
		h.log().Info("lifecycle decision", "revision", snap.Revision, "commands", len(out.Commands),
			"terminated", len(out.Terminated), "waiting", len(out.Waiting))
	}
	return out, nil
}

// terminate asks the cloud to terminate the instance and reports whether it is shutting down or
// gone. An instance the provider refuses to terminate (not tagged for this cluster) is an error:
// its finalizers stay, and the refusal is logged on every snapshot until a person looks.
func (h *Handler) terminate(ctx context.Context, providerID string) (bool, error) {
	if providerID == "" {
		return true, nil // never launched, or launched without a recorded instance: nothing to stop
	}
	if err := h.Provider.Delete(ctx, providerID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
		return false, fmt.Errorf("terminating %s: %w", providerID, err)
	}
	inst, err := h.Provider.Get(ctx, providerID)
	switch {
	case errors.Is(err, cloud.ErrNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading %s after terminating it: %w", providerID, err)
	}
	return inst.State == cloud.StateShuttingDown || inst.State == cloud.StateTerminated, nil
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
