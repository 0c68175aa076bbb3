package consolidate

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// poolCosts is the decision's effect on each NodePool it touches, for the audit record and the
// cost ledger: the pool's nodes priced as the decision priced its candidates (disruption.Node's
// Price, the overlaid catalog price) before, and after with the candidates gone and the
// replacements at their cheapest offering (the decision's PriceAfter). Nodes an earlier decision
// is disrupting are left out: that decision's record already priced them gone. The movable pods of the
// candidates stay requested in their pool (they move to the replacements or the pool's other
// nodes); the replacements add their DaemonSet overhead. The static baseline is a static group
// of one instance type for the pods the pool holds after the decision (provisioning.StaticBaseline).
func poolCosts(st *disruption.State, d *disruption.Decision) []telemetry.PoolCost {
	gone := map[string]bool{}
	pools := map[string]*telemetry.PoolCost{}
	touch := func(name string) *telemetry.PoolCost {
		if pools[name] == nil {
			pools[name] = &telemetry.PoolCost{NodePool: name, PriceSource: telemetry.PriceSourceCatalog, Consolidation: true}
		}
		return pools[name]
	}
	for _, c := range d.Candidates {
		gone[c.Node] = true
		if c.NodePool != "" {
			touch(c.NodePool)
		}
	}
	for _, r := range d.Replacements {
		if r.NodePool != nil {
			touch(r.NodePool.Name)
		}
	}
	pods := map[string][]*corev1.Pod{}
	for _, n := range st.Nodes {
		if n.Pool == nil || pools[n.Pool.Name] == nil || n.Disrupting && !gone[n.Name()] {
			continue // an earlier decision already took a disrupting node off the pool's $/h
		}
		pc := pools[n.Pool.Name]
		if n.PriceKnown {
			pc.PriceBefore += n.Price
		}
		req := n.Requests
		if gone[n.Name()] {
			req = scheduling.Resources{}
			for _, p := range n.Movable {
				req = req.Add(scheduling.PodRequests(p))
			}
		} else {
			if n.PriceKnown {
				pc.PriceAfter += n.Price
			}
			addResources(&pc.AllocatableMilliCPU, &pc.AllocatableMiB, n.Allocatable)
		}
		addResources(&pc.RequestedMilliCPU, &pc.RequestedMiB, req)
		pods[n.Pool.Name] = append(pods[n.Pool.Name], n.Movable...)
	}
	for _, r := range d.Replacements {
		if r.NodePool == nil {
			continue
		}
		pc, o := pools[r.NodePool.Name], r.Cheapest()
		pc.PriceAfter += o.PricePerHour
		a := o.InstanceType.AllocatableFast()
		pc.AllocatableMilliCPU += a.MilliCPU
		pc.AllocatableMiB += a.MemoryBytes >> 20
		addResources(&pc.RequestedMilliCPU, &pc.RequestedMiB, o.DaemonOverhead)
	}
	out := make([]telemetry.PoolCost, 0, len(pools))
	for name, pc := range pools {
		if np := st.Pools[name]; np != nil && len(pods[name]) > 0 {
			in := provisioning.Input{Catalog: st.Catalog, NodeSettings: st.NodeSettings, NodePools: []*apisv1.NodePool{np}}
			for i := range st.Snapshot.DaemonSets {
				in.DaemonSets = append(in.DaemonSets, &st.Snapshot.DaemonSets[i])
			}
			for i := range st.Snapshot.LimitRanges {
				in.LimitRanges = append(in.LimitRanges, &st.Snapshot.LimitRanges[i])
			}
			if b, err := provisioning.StaticBaseline(in, emit.Unbound(pods[name]), st.Catalog); err == nil && b.Unplaceable == 0 {
				pc.StaticBaseline = b.PricePerHour
			}
		}
		out = append(out, *pc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodePool < out[j].NodePool })
	return out
}

// addResources adds r's CPU (millicores) and memory (MiB, rounded down) to cpu and mib.
func addResources(cpu, mib *int64, r scheduling.Resources) {
	*cpu += r.MilliCPU
	*mib += r.Memory >> 20
}
