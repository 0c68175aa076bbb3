package provision

import (
	"context"
	"sort"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/quarantine"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// quarantined applies the quarantine of sick workloads (shared/quarantine) to the snapshot: it
// returns the snapshot the solver plans (the same, less the pending pods held) and the rule's
// result. Malformed NodePool settings are logged (their defaults apply; the lifecycle function's
// WorkloadsQuarantined condition names them on the NodePool).
func (h *Handler) quarantined(snap *events.Snapshot) (*events.Snapshot, quarantine.Result) {
	res := quarantine.Evaluate(snap)
	for _, e := range res.SettingsErrors {
		h.log().Warn("malformed quarantine settings; their defaults apply", "err", e)
	}
	if res.Held == 0 {
		return snap, res
	}
	work := *snap
	work.PendingPods = res.Pending
	return &work, res
}

// recordQuarantine records what the quarantine held: Karpenter's FailedScheduling Warning on each
// held pod, naming its controller and the evidence (the agent aggregates the repeats of later
// decisions into one Event whose count grows), the dovetail_quarantine_held_pods gauge for every
// NodePool of the snapshot and for "" (no NodePool), and a log line per controller.
func (h *Handler) recordQuarantine(ctx context.Context, snap *events.Snapshot, res quarantine.Result) error {
	held := map[string]int{"": 0}
	for i := range snap.NodePools {
		held[snap.NodePools[i].Name] = 0
	}
	var recs []events.EventRecord
	for i := range res.Verdicts {
		v := &res.Verdicts[i]
		held[v.NodePool] += len(v.Held)
		msg := v.Message()
		h.log().Info("workload quarantined", "controller", v.Controller.String(), "nodePool", v.NodePool, "held", len(v.Held), "admitted", len(v.Admitted), "evidence", v.Evidence.Example)
		for _, p := range v.Held {
			recs = append(recs, kevents.FailedSchedulingEvent(kevents.PodRef(p), msg))
		}
	}
	pools := make([]string, 0, len(held))
	for p := range held {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	rec := telemetry.OrNop(h.Metrics)
	for _, p := range pools {
		rec.Record(telemetry.QuarantineHeldPods, float64(held[p]), p)
	}
	if len(recs) == 0 {
		return nil
	}
	e := emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}
	return e.Events(ctx, snap.Time.Time, snap.Revision, recs, "quarantine")
}
