package events

import (
	"slices"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// DeepCopy returns a copy of s that shares no memory with it (nil for nil), so two holders may
// change theirs independently. TestSnapshotDeepCopySharesNothing checks every field, so a field
// added to Snapshot without a line here fails it.
func (s *Snapshot) DeepCopy() *Snapshot {
	if s == nil {
		return nil
	}
	out := *s // and the scalars, strings and Time (a value) with it
	out.PendingPods = copyEach(s.PendingPods)
	out.Nodes = copyEach(s.Nodes)
	out.Pods = copyEach(s.Pods)
	out.DaemonSets = copyEach(s.DaemonSets)
	out.LimitRanges = copyEach(s.LimitRanges)
	out.PDBs = copyEach(s.PDBs)
	out.NodePools = copyEach(s.NodePools)
	if s.NodeClasses != nil {
		out.NodeClasses = make([]apisv1.NodeClass, len(s.NodeClasses))
		for i := range s.NodeClasses {
			out.NodeClasses[i] = s.NodeClasses[i].DeepCopy()
		}
	}
	out.NodeClaims = copyEach(s.NodeClaims)
	out.PVCs = copyEach(s.PVCs)
	out.PVs = copyEach(s.PVs)
	out.StorageClasses = copyEach(s.StorageClasses)
	out.VolumeAttachments = copyEach(s.VolumeAttachments)
	out.UnavailableOfferings = slices.Clone(s.UnavailableOfferings) // strings and a time: values
	out.NodeOverlays = copyEach(s.NodeOverlays)
	out.ProvisioningRequests = copyEach(s.ProvisioningRequests)
	out.PodTemplates = copyEach(s.PodTemplates)
	out.Commitments = s.Commitments.DeepCopy()
	if s.ClusterFacts != nil {
		f := *s.ClusterFacts // strings only
		out.ClusterFacts = &f
	}
	return &out
}

// copyEach deep-copies a slice of API objects with their generated DeepCopyInto; nil stays nil.
func copyEach[T any, P interface {
	*T
	DeepCopyInto(*T)
}](in []T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		P(&in[i]).DeepCopyInto(&out[i])
	}
	return out
}
