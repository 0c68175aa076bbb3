package lifecycle

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	core "github.com/dovetail-dev/dovetail/shared/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/repair"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// ReasonNodeRepairBlocked is Karpenter's Warning event reason when the breaker holds a repair
// (pkg/events NodeRepairBlocked), on the Node, its NodeClaim and its NodePool.
const ReasonNodeRepairBlocked = "NodeRepairBlocked"

// repairPolicies are the provider's repair policies, none when repair is disabled or the
// provider has none.
func (h *Handler) repairPolicies() []repair.Policy {
	if h.DisableRepair {
		return nil
	}
	// cloud.As: the metrics decorator (cloudmetrics) wraps the provider; a plain type assertion
	// on it would find no policies and silently turn repair off.
	if r, ok := cloud.As[cloud.Repairer](h.Provider); ok {
		return r.RepairPolicies()
	}
	return nil
}

// repair publishes the snapshot's node repairs: each through disruption.Sequence (a forced
// hand-off: the NodeClaim is deleted, Karpenter's DisruptionTerminating events recorded) and
// counted in karpenter_nodeclaims_disrupted_total{reason="unhealthy"} and
// karpenter_nodeclaims_unhealthy_disrupted_total; each repair the breaker holds gets
// NodeRepairBlocked events.
func (h *Handler) repair(ctx context.Context, snap *events.Snapshot, policies []repair.Policy, out *Outcome) error {
	d := repair.Decide(snap, policies)
	rec := telemetry.OrNop(h.Metrics)
	for _, r := range d.Repairs {
		steps, err := disruption.Sequence(snap.Cluster, disruption.Repair(snap, r))
		if err != nil {
			return fmt.Errorf("repairing node %s: %w", r.Node.Name, err)
		}
		for _, s := range steps {
			for _, c := range s.Commands {
				if err := h.publish(ctx, snap, c); err != nil {
					return err
				}
			}
		}
		emit.RecordDisrupted(h.Metrics, disruption.ReasonUnhealthy, r.NodeClaim)
		rec.Record(telemetry.NodeClaimsUnhealthyDisrupted, 1, snakeCase(string(r.Match.Condition.Type)), r.NodePool,
			r.NodeClaim.Labels[apisv1.LabelCapacityType], r.NodeClaim.Status.ImageID)
		out.Repaired = append(out.Repaired, r.Node.Name)
		h.log().Info("repairing unhealthy node", "node", r.Node.Name, "nodeClaim", r.NodeClaim.Name,
			"condition", r.Match.Condition.Type, "status", r.Match.Condition.Status, "toleration", r.Match.Policy.TolerationDuration)
	}
	var recs []events.EventRecord
	for _, b := range d.Blocked {
		recs = append(recs, blockedEvents(snap, b)...)
		out.RepairBlocked = append(out.RepairBlocked, b.Node.Name)
	}
	if len(recs) == 0 {
		return nil
	}
	e := emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}
	return e.Events(ctx, snap.Time.Time, snap.Revision, recs, "repair-blocked")
}

// blockedEvents are Karpenter's NodeRepairBlocked events: Warning, on the Node, the NodeClaim
// and (with a pool) the NodePool, "more than 20% nodes are unhealthy in the nodepool" (Karpenter
// spells the percentage as intstr "20%"; for a NodeClaim without a pool, "... in the cluster").
func blockedEvents(snap *events.Snapshot, b repair.Blocked) []events.EventRecord {
	scope := "in the nodepool"
	refs := []corev1.ObjectReference{kevents.NodeRef(b.Node), kevents.NodeClaimRef(b.NodeClaim)}
	if b.NodePool == "" {
		scope = "in the cluster"
	} else {
		refs = append(refs, kevents.NamedNodePool(snap.NodePools, b.NodePool))
	}
	msg := fmt.Sprintf("more than %d%% nodes are unhealthy %s (%d of %d; at most %d may be)",
		repair.AllowedUnhealthyPercent, scope, b.Unhealthy, b.Total, b.Threshold)
	out := make([]events.EventRecord, 0, len(refs))
	for _, ref := range refs {
		out = append(out, events.EventRecord{Object: ref, Type: corev1.EventTypeWarning, Reason: ReasonNodeRepairBlocked, Message: msg,
			Key: string(b.Node.UID)})
	}
	return out
}

var wordStart = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// snakeCase spells a condition type as Karpenter's pretty.ToSnakeCase does for the metric's
// condition label: "AcceleratedHardwareReady" → "accelerated_hardware_ready".
func snakeCase(s string) string {
	return strings.ToLower(wordStart.ReplaceAllString(s, "${1}_${2}"))
}

// collectVanished deletes the NodeClaims whose instance the cloud no longer lists (Karpenter's
// NodeClaim garbage collection), returning the provider IDs confirmed gone for the termination
// path. Absence becomes action only on a complete snapshot dated within events.MaxClockSkew of
// the function's clock, for a NodeClaim core.Vanished selects on two complete snapshots seen by
// this process (absence.Sightings, the rule orphan collection uses). The cloud call lists the
// cluster's tagged instances (EC2 DescribeInstances by the cluster tag; Azure VMs by tag).
func (h *Handler) collectVanished(ctx context.Context, snap *events.Snapshot) (map[string]bool, []*apisv1.NodeClaim, error) {
	if !snap.Complete || snap.CheckClock(emit.Clock(h.Now)) != nil {
		return nil, nil, nil
	}
	insts, err := h.Provider.List(ctx, h.Cluster)
	if err != nil {
		return nil, nil, fmt.Errorf("listing instances of cluster %s: %w", h.Cluster, err)
	}
	listed := make(map[string]bool, len(insts))
	for _, inst := range insts {
		// A shutting-down instance is on its way out: Karpenter's AWS provider lists it as a
		// NodeClaim being deleted, which its garbage collection counts as gone.
		if inst.State != cloud.StateTerminated && inst.State != cloud.StateShuttingDown {
			listed[inst.ProviderID] = true
		}
	}
	suspects := core.Vanished(snap, listed)
	byID := map[string]*apisv1.NodeClaim{}
	ids := make([]string, 0, len(suspects))
	for _, nc := range suspects {
		byID[nc.Status.ProviderID] = nc
		ids = append(ids, nc.Status.ProviderID)
	}
	gone := map[string]bool{}
	var claims []*apisv1.NodeClaim
	for _, id := range h.vanished.Confirm(snap.Revision, snap.Time.Time, ids) {
		gone[id] = true
		claims = append(claims, byID[id])
	}
	// A NodeClaim already being deleted whose instance is gone is the termination path's: it
	// must not wait for the pods of a node no kubelet runs.
	for i := range snap.NodeClaims {
		if nc := &snap.NodeClaims[i]; nc.DeletionTimestamp != nil && nc.Status.ProviderID != "" && !listed[nc.Status.ProviderID] {
			gone[nc.Status.ProviderID] = true
		}
	}
	return gone, claims, nil
}
