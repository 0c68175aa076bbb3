package provisioning

import (
	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/overlay"
)

// InputFromSnapshot builds the solver's input from an agent snapshot, with the NodeClasses'
// node settings computed by settings (the cloud provider's rule, supplied by the edge). Unavailable-offering
// marks that have not expired at the snapshot's time are honoured (the snapshot time is the
// clock, so the decision stays deterministic).
func InputFromSnapshot(s *events.Snapshot, cat *catalog.Catalog, settings NodeSettingsFunc) Input {
	in := Input{Catalog: cat, NodeSettings: settings}
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
	for i := range s.LimitRanges {
		in.LimitRanges = append(in.LimitRanges, &s.LimitRanges[i])
	}
	for i := range s.NodePools {
		in.NodePools = append(in.NodePools, &s.NodePools[i])
	}
	in.NodeClasses = s.NodeClasses
	for i := range s.PVCs {
		in.PVCs = append(in.PVCs, &s.PVCs[i])
	}
	for i := range s.PVs {
		in.PVs = append(in.PVs, &s.PVs[i])
	}
	for i := range s.StorageClasses {
		in.StorageClasses = append(in.StorageClasses, &s.StorageClasses[i])
	}
	in.Overlays = overlay.ResolveSnapshot(s, cat)
	in.Commitments = s.Commitments
	in.Unavailable = events.UnavailableAt(s.UnavailableOfferings, s.Time.Time)
	in.Time = s.Time.Time
	// The counts a NodeClass's annotation states (manifests); a deployed function replaces them
	// with the cloud's own (cloud.ReservationCounter). A malformed annotation counts nothing.
	in.ReservationCounts, _ = ReservationCountsFromAnnotations(s.NodeClasses)
	return in
}
