package emit

import (
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
