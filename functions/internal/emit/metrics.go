package emit

import (
	"slices"
	"strings"
	"time"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Solve runs provisioning.Solve and records karpenter_scheduler_scheduling_duration_seconds for
// controller (provisioner, disruption, interruption).
func Solve(rec telemetry.Recorder, controller string, in provisioning.Input) (*provisioning.Plan, error) {
	start := time.Now()
	plan, err := provisioning.Solve(in)
	telemetry.OrNop(rec).Record(telemetry.SchedulingDuration, time.Since(start).Seconds(), controller)
	return plan, err
}

// RecordPlan records what a plan decided for pending pods: the queue depth it solved
// (karpenter_scheduler_queue_depth, scheduling_id left empty: a function has no long-lived
// scheduling loop to name), the pods it could not place, and for plans that open NodeClaims
// their price, lower bound and gap.
func RecordPlan(rec telemetry.Recorder, controller string, pending int, plan *provisioning.Plan) {
	rec = telemetry.OrNop(rec)
	rec.Record(telemetry.QueueDepth, float64(pending), controller, "")
	if plan == nil {
		return
	}
	rec.Record(telemetry.UnschedulablePods, float64(len(plan.Unschedulable)), controller)
	for _, h := range LimitHits(plan) {
		rec.Record(telemetry.GuardrailHits, 1, h[0], h[1])
	}
	if len(plan.NodeClaims) == 0 {
		return
	}
	rec.Record(telemetry.PlanPrice, plan.TotalPricePerHour(), controller)
	rec.Record(telemetry.PlanLowerBound, plan.LowerBoundPerHour, controller)
	if plan.LowerBoundPerHour > 0 {
		rec.Record(telemetry.PlanGap, plan.Gap(), controller)
	}
}

// RecordDisrupted counts one NodeClaim handed to termination by a disruption
// (karpenter_nodeclaims_disrupted_total), reason in Karpenter's spelling: lower case
// ("underutilized", "empty", "drifted", "expired", "interrupted").
func RecordDisrupted(rec telemetry.Recorder, reason string, claim *apisv1.NodeClaim) {
	if claim == nil {
		return
	}
	telemetry.OrNop(rec).Record(telemetry.NodeClaimsDisrupted, 1, strings.ToLower(reason),
		claim.Labels[apisv1.LabelNodePool], claim.Labels[apisv1.LabelCapacityType])
}

// LimitHits lists the (NodePool, limit) pairs whose exhaustion left a pod of the plan
// unschedulable, once each, sorted: the limit is a spec.limits resource name (nvidia.com/gpu,
// cpu, nodes, ...), "price" for the dovetail.dev/max-price-per-hour guardrail, or "scale-up-nodes" /
// "scale-up-price" for the dovetail.dev/scale-up-policies rate policies. It reads the
// solver's typed result (provisioning.Unschedulable.LimitsExceeded).
func LimitHits(plan *provisioning.Plan) [][2]string {
	seen := map[[2]string]bool{}
	for _, u := range plan.Unschedulable {
		for _, h := range u.LimitsExceeded {
			limit := string(h.Resource)
			switch h.Resource {
			case provisioning.ResourcePricePerHour:
				limit = "price"
			case provisioning.ResourceScaleUpNodes:
				limit = "scale-up-nodes"
			case provisioning.ResourceScaleUpPricePerHour:
				limit = "scale-up-price"
			}
			seen[[2]string{h.NodePool, limit}] = true
		}
	}
	out := make([][2]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	return out
}
