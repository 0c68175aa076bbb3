package v1

// Hand-written deep copies of the AKSNodeClass types, in the manner of deepcopy.go.

import "k8s.io/apimachinery/pkg/runtime"

var (
	_ runtime.Object = (*AKSNodeClass)(nil)
	_ runtime.Object = (*AKSNodeClassList)(nil)
)

// DeepCopy copies an AKSNodeClass.
func (in *AKSNodeClass) DeepCopy() *AKSNodeClass {
	if in == nil {
		return nil
	}
	out := &AKSNodeClass{TypeMeta: in.TypeMeta, Spec: in.Spec.DeepCopy(), Status: in.Status.DeepCopy()}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// DeepCopyInto copies an AKSNodeClass into out.
func (in *AKSNodeClass) DeepCopyInto(out *AKSNodeClass) { *out = *in.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (in *AKSNodeClass) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy copies an AKSNodeClassSpec.
func (in AKSNodeClassSpec) DeepCopy() AKSNodeClassSpec {
	out := AKSNodeClassSpec{
		VNETSubnetID: clonePtr(in.VNETSubnetID),
		OSDiskSizeGB: clonePtr(in.OSDiskSizeGB),
		ImageFamily:  clonePtr(in.ImageFamily),
		FIPSMode:     clonePtr(in.FIPSMode),
		Tags:         cloneMap(in.Tags),
		Kubelet:      in.Kubelet.DeepCopy(),
		MaxPods:      clonePtr(in.MaxPods),
		LocalDNS:     in.LocalDNS.DeepCopy(),
	}
	if s := in.Security; s != nil {
		out.Security = &AKSSecurity{EncryptionAtHost: clonePtr(s.EncryptionAtHost)}
	}
	if a := in.ArtifactStreaming; a != nil {
		out.ArtifactStreaming = &AKSArtifactStreaming{Enabled: clonePtr(a.Enabled)}
	}
	if l := in.LinuxOSConfig; l != nil {
		out.LinuxOSConfig = &AKSLinuxOSConfig{
			SwapFileSize:               clonePtr(l.SwapFileSize),
			Sysctls:                    l.Sysctls.DeepCopy(),
			TransparentHugePageDefrag:  clonePtr(l.TransparentHugePageDefrag),
			TransparentHugePageEnabled: clonePtr(l.TransparentHugePageEnabled),
		}
	}
	if g := in.GPU; g != nil {
		out.GPU = &AKSGPU{Mode: clonePtr(g.Mode)}
	}
	return out
}

// DeepCopyInto copies an AKSNodeClassSpec into out.
func (in *AKSNodeClassSpec) DeepCopyInto(out *AKSNodeClassSpec) { *out = in.DeepCopy() }

// DeepCopy copies an AKSKubeletConfiguration.
func (in *AKSKubeletConfiguration) DeepCopy() *AKSKubeletConfiguration {
	if in == nil {
		return nil
	}
	return &AKSKubeletConfiguration{
		CPUManagerPolicy:            clonePtr(in.CPUManagerPolicy),
		CPUCFSQuota:                 clonePtr(in.CPUCFSQuota),
		CPUCFSQuotaPeriod:           clonePtr(in.CPUCFSQuotaPeriod),
		ImageGCHighThresholdPercent: clonePtr(in.ImageGCHighThresholdPercent),
		ImageGCLowThresholdPercent:  clonePtr(in.ImageGCLowThresholdPercent),
		TopologyManagerPolicy:       clonePtr(in.TopologyManagerPolicy),
		AllowedUnsafeSysctls:        cloneSlice(in.AllowedUnsafeSysctls, nil),
		ContainerLogMaxSize:         clonePtr(in.ContainerLogMaxSize),
		ContainerLogMaxFiles:        clonePtr(in.ContainerLogMaxFiles),
		PodPidsLimit:                clonePtr(in.PodPidsLimit),
		FailSwapOn:                  clonePtr(in.FailSwapOn),
	}
}

// DeepCopy copies an AKSLocalDNS.
func (in *AKSLocalDNS) DeepCopy() *AKSLocalDNS {
	if in == nil {
		return nil
	}
	zone := func(z *AKSLocalDNSZoneOverride) AKSLocalDNSZoneOverride {
		c := *z
		c.MaxConcurrent = clonePtr(z.MaxConcurrent)
		return c
	}
	return &AKSLocalDNS{
		Mode:             in.Mode,
		VnetDNSOverrides: cloneSlice(in.VnetDNSOverrides, zone),
		KubeDNSOverrides: cloneSlice(in.KubeDNSOverrides, zone),
	}
}

// DeepCopy copies an AKSSysctls.
func (in *AKSSysctls) DeepCopy() *AKSSysctls {
	if in == nil {
		return nil
	}
	return &AKSSysctls{
		FsAioMaxNr:                     clonePtr(in.FsAioMaxNr),
		FsFileMax:                      clonePtr(in.FsFileMax),
		FsInotifyMaxUserWatches:        clonePtr(in.FsInotifyMaxUserWatches),
		FsNrOpen:                       clonePtr(in.FsNrOpen),
		KernelThreadsMax:               clonePtr(in.KernelThreadsMax),
		NetCoreNetdevMaxBacklog:        clonePtr(in.NetCoreNetdevMaxBacklog),
		NetCoreOptmemMax:               clonePtr(in.NetCoreOptmemMax),
		NetCoreRmemDefault:             clonePtr(in.NetCoreRmemDefault),
		NetCoreRmemMax:                 clonePtr(in.NetCoreRmemMax),
		NetCoreSomaxconn:               clonePtr(in.NetCoreSomaxconn),
		NetCoreWmemDefault:             clonePtr(in.NetCoreWmemDefault),
		NetCoreWmemMax:                 clonePtr(in.NetCoreWmemMax),
		NetIPv4IPLocalPortRange:        clonePtr(in.NetIPv4IPLocalPortRange),
		NetIPv4NeighDefaultGcThresh1:   clonePtr(in.NetIPv4NeighDefaultGcThresh1),
		NetIPv4NeighDefaultGcThresh2:   clonePtr(in.NetIPv4NeighDefaultGcThresh2),
		NetIPv4NeighDefaultGcThresh3:   clonePtr(in.NetIPv4NeighDefaultGcThresh3),
		NetIPv4TCPFinTimeout:           clonePtr(in.NetIPv4TCPFinTimeout),
		NetIPv4TCPKeepaliveIntvl:       clonePtr(in.NetIPv4TCPKeepaliveIntvl),
		NetIPv4TCPKeepaliveProbes:      clonePtr(in.NetIPv4TCPKeepaliveProbes),
		NetIPv4TCPKeepaliveTime:        clonePtr(in.NetIPv4TCPKeepaliveTime),
		NetIPv4TCPMaxSynBacklog:        clonePtr(in.NetIPv4TCPMaxSynBacklog),
		NetIPv4TCPMaxTwBuckets:         clonePtr(in.NetIPv4TCPMaxTwBuckets),
		NetIPv4TCPTwReuse:              clonePtr(in.NetIPv4TCPTwReuse),
		NetNetfilterNfConntrackBuckets: clonePtr(in.NetNetfilterNfConntrackBuckets),
		NetNetfilterNfConntrackMax:     clonePtr(in.NetNetfilterNfConntrackMax),
		VMMaxMapCount:                  clonePtr(in.VMMaxMapCount),
		VMSwappiness:                   clonePtr(in.VMSwappiness),
		VMVfsCachePressure:             clonePtr(in.VMVfsCachePressure),
	}
}

// DeepCopy copies an AKSNodeClassStatus.
func (in AKSNodeClassStatus) DeepCopy() AKSNodeClassStatus {
	return AKSNodeClassStatus{
		Images: cloneSlice(in.Images, func(i *AKSNodeImage) AKSNodeImage {
			return AKSNodeImage{ID: i.ID, Requirements: cloneSlice(i.Requirements, cloneNSR)}
		}),
		KubernetesVersion: in.KubernetesVersion,
		Conditions:        cloneSlice(in.Conditions, cloneCondition),
		LocalDNSState:     in.LocalDNSState,
	}
}

// DeepCopy copies an AKSNodeClassList.
func (in *AKSNodeClassList) DeepCopy() *AKSNodeClassList {
	if in == nil {
		return nil
	}
	out := &AKSNodeClassList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = cloneSlice(in.Items, func(n *AKSNodeClass) AKSNodeClass { return *n.DeepCopy() })
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *AKSNodeClassList) DeepCopyObject() runtime.Object { return in.DeepCopy() }
