package emit

import (
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/launch"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// ClaimsPrice sums the price (USD per hour) of the snapshot's NodeClaims by their offering
// labels (catalog.DearestPrice): what the cluster's Dovetail capacity costs before a decision.
func ClaimsPrice(snap *events.Snapshot, cat *catalog.Catalog) float64 {
	total := 0.0
	for i := range snap.NodeClaims {
		l := snap.NodeClaims[i].Labels
		total += cat.DearestPrice(l[corev1.LabelInstanceTypeStable], l[corev1.LabelTopologyZone], l[apisv1.LabelCapacityType])
	}
	return total
}

// AuditLaunch logs the audit record of a provisioning decision that launched NodeClaims: the
// pending pods that triggered it, the NodeClaims, the capacity's price before and after, the
// plan's lower bound and the static-node-group baseline for the same pods.
func AuditLaunch(log *slog.Logger, function, rule string, snap *events.Snapshot, cat *catalog.Catalog, in provisioning.Input,
	plan *provisioning.Plan, launched []launch.Launched) {
	if len(launched) == 0 {
		return
	}
	a := telemetry.Audit{Action: telemetry.ActionLaunch, Function: function, Cluster: snap.Cluster,
		Decision: fmt.Sprint("revision-", snap.Revision), Revision: snap.Revision, Rule: rule}
	before := ClaimsPrice(snap, cat)
	a.PriceBefore, a.PriceAfter = before, before
	var pods []*corev1.Pod
	for _, l := range launched {
		a.NodeClaims = append(a.NodeClaims, fmt.Sprintf("%s (%s/%s/%s)", l.NodeClaim.Name, l.Instance.InstanceType, l.Instance.Zone, l.Instance.CapacityType))
		a.PriceAfter += cat.DearestPrice(l.Instance.InstanceType, l.Instance.Zone, l.Instance.CapacityType)
		for _, p := range l.Plan.Pods {
			a.Inputs = append(a.Inputs, "pending pod "+p.Namespace+"/"+p.Name)
			pods = append(pods, p)
		}
	}
	a.Why = fmt.Sprintf("%d pending pods fit no existing node or in-flight NodeClaim", len(pods))
	if plan != nil {
		a.LowerBound = plan.LowerBoundPerHour
	}
	if b, err := provisioning.StaticBaseline(in, pods, cat); err == nil {
		a.StaticBaseline = &telemetry.StaticBaseline{InstanceType: b.InstanceType, Nodes: b.Nodes, PricePerHour: b.PricePerHour, Unplaceable: b.Unplaceable}
	}
	telemetry.LogAudit(log, a)
}
