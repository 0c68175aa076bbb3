package emit

import (
	"fmt"
	"log/slog"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/launch"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
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

// AuditLaunch logs the audit record of a provisioning decision that launched NodeClaims, and
// records its NodePools' costs on rec (telemetry.RecordPoolCosts): the
// pending pods that triggered it, the NodeClaims, the capacity's price before and after, the
// plan's lower bound and the static-node-group baseline for the same pods.
func AuditLaunch(log *slog.Logger, rec telemetry.Recorder, function, rule string, snap *events.Snapshot, cat *catalog.Catalog, in provisioning.Input,
	plan *provisioning.Plan, launched []launch.Launched) {
	if len(launched) == 0 {
		return
	}
	a := telemetry.Audit{Action: telemetry.ActionLaunch, Function: function, Cluster: snap.Cluster, Time: snap.Time.Time,
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
		a.Commitments = plan.Commitments
	}
	if b, err := provisioning.StaticBaseline(in, pods, cat); err == nil {
		a.StaticBaseline = &telemetry.StaticBaseline{InstanceType: b.InstanceType, Nodes: b.Nodes, PricePerHour: b.PricePerHour, Unplaceable: b.Unplaceable}
	}
	a.NodePools = launchPoolCosts(snap, cat, in, launched)
	if len(a.NodePools) == 1 && plan != nil {
		a.NodePools[0].LowerBound = plan.LowerBoundPerHour // the plan's bound is the pool's when it opened claims in one
	}
	telemetry.LogAudit(log, a)
	telemetry.RecordPoolCosts(rec, a.NodePools)
}

// launchPoolCosts is a launch's effect on each NodePool it launched into: the pool's NodeClaims
// priced as ClaimsPrice prices them before, with the launched instances after; its nodes'
// allocatable and their pods' requests, with the launched types' allocatable (default node
// settings) and their planned pods; and the static baseline for all those pods.
func launchPoolCosts(snap *events.Snapshot, cat *catalog.Catalog, in provisioning.Input, launched []launch.Launched) []telemetry.PoolCost {
	pools := map[string]*telemetry.PoolCost{}
	pods := map[string][]*corev1.Pod{}
	for _, l := range launched {
		name := l.NodeClaim.Labels[apisv1.LabelNodePool]
		if pools[name] == nil {
			pools[name] = &telemetry.PoolCost{NodePool: name, PriceSource: telemetry.PriceSourceCatalog}
		}
		pc := pools[name]
		pc.PriceAfter += cat.DearestPrice(l.Instance.InstanceType, l.Instance.Zone, l.Instance.CapacityType)
		if it := cat.Get(l.Instance.InstanceType); it != nil {
			a := it.AllocatableFast()
			pc.AllocatableMilliCPU += a.MilliCPU
			pc.AllocatableMiB += a.MemoryBytes >> 20
		}
		pc.RequestedMilliCPU += l.Plan.Requests.MilliCPU
		pc.RequestedMiB += l.Plan.Requests.Memory >> 20
		pods[name] = append(pods[name], l.Plan.Pods...)
	}
	for i := range snap.NodeClaims {
		l := snap.NodeClaims[i].Labels
		if pc := pools[l[apisv1.LabelNodePool]]; pc != nil {
			p := cat.DearestPrice(l[corev1.LabelInstanceTypeStable], l[corev1.LabelTopologyZone], l[apisv1.LabelCapacityType])
			pc.PriceBefore += p
			pc.PriceAfter += p
		}
	}
	nodePool := map[string]string{}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if pc := pools[n.Labels[apisv1.LabelNodePool]]; pc != nil {
			nodePool[n.Name] = n.Labels[apisv1.LabelNodePool]
			pc.AllocatableMilliCPU += n.Status.Allocatable.Cpu().MilliValue()
			pc.AllocatableMiB += n.Status.Allocatable.Memory().Value() >> 20
		}
	}
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if name, ok := nodePool[p.Spec.NodeName]; ok {
			r := scheduling.PodRequests(p)
			pools[name].RequestedMilliCPU += r.MilliCPU
			pools[name].RequestedMiB += r.Memory >> 20
			pods[name] = append(pods[name], p)
		}
	}
	out := make([]telemetry.PoolCost, 0, len(pools))
	for name, pc := range pools {
		var np *apisv1.NodePool
		for _, p := range in.NodePools {
			if p.Name == name {
				np = p
			}
		}
		if np != nil {
			static := provisioning.Input{Catalog: cat, NodeSettings: in.NodeSettings, DaemonSets: in.DaemonSets, LimitRanges: in.LimitRanges,
				NodePools: []*apisv1.NodePool{np}}
			if b, err := provisioning.StaticBaseline(static, Unbound(pods[name]), cat); err == nil && b.Unplaceable == 0 {
				pc.StaticBaseline = b.PricePerHour
			}
		}
		out = append(out, *pc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodePool < out[j].NodePool })
	return out
}

// Unbound copies pods as pending ones (no node name), for a static baseline's packing of its own.
func Unbound(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		c := *p
		c.Spec.NodeName = ""
		out[i] = &c
	}
	return out
}
