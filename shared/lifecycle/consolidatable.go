package lifecycle

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// ConditionConsolidatable is the NodeClaim condition Karpenter v1.14 sets True once its
// NodePool's consolidateAfter has passed since the last pod event (pkg/apis/v1
// ConditionTypeConsolidatable), and removes otherwise.
const ConditionConsolidatable = "Consolidatable"

// consolidatable keeps the NodeClaim's Consolidatable condition as Karpenter's nodeclaim
// disruption controller does (pkg/controllers/nodeclaim/disruption/consolidation.go): removed
// when the NodePool's consolidateAfter is Never or the NodeClaim is not initialized, or while
// consolidateAfter has not passed since the last pod event (status.lastPodEventTime, else the
// time the NodeClaim turned Initialized); True once it has. A NodeClaim of no known NodePool is
// left alone.
func (d *decider) consolidatable(nc *apisv1.NodeClaim) {
	pool := d.pool(nc.Labels[apisv1.LabelNodePool])
	if pool == nil {
		return
	}
	has := condition(nc, ConditionConsolidatable) != nil
	after, why := consolidateAfter(pool), ""
	init := condition(nc, apisv1.ConditionInitialized)
	switch {
	case after == nil:
		why = "consolidateAfter is Never"
	case init == nil || init.Status != metav1.ConditionTrue:
		why = "not initialized"
	default:
		since := init.LastTransitionTime.Time
		if nc.Status.LastPodEventTime != nil && !nc.Status.LastPodEventTime.IsZero() {
			since = nc.Status.LastPodEventTime.Time
		}
		if d.now.Sub(since) < *after {
			why = fmt.Sprintf("consolidatable at %s", since.Add(*after).UTC().Format(time.RFC3339))
		}
	}
	switch {
	case why != "" && has:
		d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "status", nc.Name, string(nc.UID), "not-consolidatable", fmt.Sprint(d.snap.Revision)),
			Kind: events.CommandSetNodeClaimStatus, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}},
			ClearConditions: []string{ConditionConsolidatable}, Reason: why})
	case why == "" && !isTrue(nc, ConditionConsolidatable):
		d.setStatus(nc, "consolidatable-"+fmt.Sprint(d.snap.Revision), "", []metav1.Condition{
			d.cond(nc, ConditionConsolidatable, metav1.ConditionTrue, ConditionConsolidatable, "")})
	}
}

// consolidateAfter is the NodePool's consolidateAfter, nil for Never. An unset field counts
// as 0s, Karpenter's default.
func consolidateAfter(np *apisv1.NodePool) *time.Duration {
	c := np.Spec.Disruption.ConsolidateAfter
	if c == nil {
		zero := time.Duration(0)
		return &zero
	}
	return c.Duration
}

func (d *decider) pool(name string) *apisv1.NodePool {
	for i := range d.snap.NodePools {
		if d.snap.NodePools[i].Name == name {
			return &d.snap.NodePools[i]
		}
	}
	return nil
}
