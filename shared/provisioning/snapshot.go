package provisioning

import (
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// InputFromSnapshot builds the solver's input from an agent snapshot. Unavailable-offering
// marks that have not expired at the snapshot's time are honoured (the snapshot time is the
// clock, so the decision stays deterministic).
func InputFromSnapshot(s *events.Snapshot, cat *catalog.Catalog) Input {
	in := Input{Catalog: cat}
	for i := range s.PendingPods {
		in.Pods = append(in.Pods, &s.PendingPods[i])
	}
	for i := range s.Nodes {
		in.Nodes = append(in.Nodes, &s.Nodes[i])
	}
	for i := range s.Pods {
		in.BoundPods = append(in.BoundPods, &s.Pods[i])
	}
	for i := range s.NodeClaims {
		in.NodeClaims = append(in.NodeClaims, &s.NodeClaims[i])
	}
	for i := range s.DaemonSets {
		in.DaemonSets = append(in.DaemonSets, &s.DaemonSets[i])
	}
	for i := range s.NodePools {
		in.NodePools = append(in.NodePools, &s.NodePools[i])
	}
	for i := range s.NodeClasses {
		in.NodeClasses = append(in.NodeClasses, &s.NodeClasses[i])
	}
	for i := range s.PVCs {
		in.PVCs = append(in.PVCs, &s.PVCs[i])
	}
	for i := range s.PVs {
		in.PVs = append(in.PVs, &s.PVs[i])
	}
	for i := range s.StorageClasses {
		in.StorageClasses = append(in.StorageClasses, &s.StorageClasses[i])
	}
	if len(s.UnavailableOfferings) > 0 {
		now := s.Time.Time
		marks := map[[3]string]time.Time{}
		for _, m := range s.UnavailableOfferings {
			marks[[3]string{m.InstanceType, m.Zone, m.CapacityType}] = m.Expires.Time
		}
		in.Unavailable = func(it, zone, ct string) bool {
			exp, ok := marks[[3]string{it, zone, ct}]
			return ok && now.Before(exp)
		}
	}
	return in
}
