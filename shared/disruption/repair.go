package disruption

import (
	"fmt"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/repair"
)

// ReasonUnhealthy is a repair's disruption reason (Karpenter's metrics.UnhealthyReason is its
// lower-case form, "unhealthy", the reason label of karpenter_nodeclaims_disrupted_total).
const ReasonUnhealthy = "Unhealthy"

// SourceRepair names node repair as the deciding function in command IDs.
const SourceRepair = "repair"

// Repair is a node repair's disruption: forced (no disruption budget; Karpenter's health
// controller deletes the NodeClaim whatever the budgets) and handed off at once to the termination
// path, without replacements launched first (the pods it held go pending and the provision
// function places them, as after Karpenter's repair). The termination path then does not wait for
// the pods (shared/lifecycle: a node due for repair has its terminationGracePeriod end at its
// deletion, Karpenter's karpenter.sh/nodeclaim-termination-timestamp set to the repair time).
// ID is the NodeClaim's name.
func Repair(snap *events.Snapshot, r repair.Repair) Disruption {
	t := TargetFor(snap, r.Node)
	t.NodeClaim = r.NodeClaim
	c := r.Match.Condition
	why := fmt.Sprintf("node condition %s has been %s since %s, past its toleration of %s", c.Type, c.Status,
		c.LastTransitionTime.UTC().Format(time.RFC3339), r.Match.Policy.TolerationDuration)
	return Disruption{Source: SourceRepair, ID: r.NodeClaim.Name, Reason: ReasonUnhealthy, Why: why,
		Candidates: []Target{t}, Forced: true, HandOff: true, Revision: snap.Revision, Time: snap.Time.Time}
}
