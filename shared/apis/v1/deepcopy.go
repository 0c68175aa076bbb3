package v1

// Hand-written deep copies (no code generator is available offline). DeepCopyObject makes the
// top-level kinds runtime.Objects so they work with client-go machinery.

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneSlice[T any](s []T, f func(*T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i := range s {
		if f == nil {
			out[i] = s[i]
		} else {
			out[i] = f(&s[i])
		}
	}
	return out
}

func cloneTaint(t *corev1.Taint) corev1.Taint { return *t.DeepCopy() }

func cloneCondition(c *metav1.Condition) metav1.Condition { return *c.DeepCopy() }

func cloneNSR(r *corev1.NodeSelectorRequirement) corev1.NodeSelectorRequirement { return *r.DeepCopy() }

func cloneQuantity(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	c := q.DeepCopy()
	return &c
}

// DeepCopy copies a NillableDuration.
func (n NillableDuration) DeepCopy() NillableDuration {
	return NillableDuration{Duration: clonePtr(n.Duration), Raw: n.Raw}
}

// DeepCopy copies a NodePool.
func (in *NodePool) DeepCopy() *NodePool {
	if in == nil {
		return nil
	}
	out := &NodePool{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec.DeepCopy()
	out.Status = NodePoolStatus{
		Resources:                   in.Status.Resources.DeepCopy(),
		Conditions:                  cloneSlice(in.Status.Conditions, cloneCondition),
		Nodes:                       clonePtr(in.Status.Nodes),
		NodeClassObservedGeneration: in.Status.NodeClassObservedGeneration,
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *NodePool) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy copies a NodePoolSpec.
func (in NodePoolSpec) DeepCopy() NodePoolSpec {
	return NodePoolSpec{
		Template: NodeClaimTemplate{
			ObjectMeta: ObjectMeta{Labels: cloneMap(in.Template.ObjectMeta.Labels), Annotations: cloneMap(in.Template.ObjectMeta.Annotations)},
			Spec:       in.Template.Spec.DeepCopy(),
		},
		Disruption: in.Disruption.DeepCopy(),
		Limits:     in.Limits.DeepCopy(),
		Weight:     clonePtr(in.Weight),
		Replicas:   clonePtr(in.Replicas),
	}
}

// DeepCopy copies a Disruption.
func (in Disruption) DeepCopy() Disruption {
	out := in
	if in.ConsolidateAfter != nil {
		c := in.ConsolidateAfter.DeepCopy()
		out.ConsolidateAfter = &c
	}
	out.Budgets = cloneSlice(in.Budgets, func(b *Budget) Budget {
		return Budget{Reasons: cloneSlice(b.Reasons, nil), Nodes: b.Nodes, Schedule: clonePtr(b.Schedule), Duration: clonePtr(b.Duration)}
	})
	out.DecisionRatioThreshold = clonePtr(in.DecisionRatioThreshold)
	return out
}

// DeepCopy copies a NodeClaimSpec.
func (in NodeClaimSpec) DeepCopy() NodeClaimSpec {
	return NodeClaimSpec{
		Taints:        cloneSlice(in.Taints, cloneTaint),
		StartupTaints: cloneSlice(in.StartupTaints, cloneTaint),
		Requirements: cloneSlice(in.Requirements, func(r *NodeSelectorRequirementWithMinValues) NodeSelectorRequirementWithMinValues {
			return NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: cloneNSR(&r.NodeSelectorRequirement), MinValues: clonePtr(r.MinValues)}
		}),
		Resources:              ResourceRequirements{Requests: in.Resources.Requests.DeepCopy()},
		NodeClassRef:           clonePtr(in.NodeClassRef),
		ExpireAfter:            in.ExpireAfter.DeepCopy(),
		TerminationGracePeriod: clonePtr(in.TerminationGracePeriod),
	}
}

// DeepCopy copies a NodeClaim.
func (in *NodeClaim) DeepCopy() *NodeClaim {
	if in == nil {
		return nil
	}
	out := &NodeClaim{TypeMeta: in.TypeMeta, Spec: in.Spec.DeepCopy()}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status = NodeClaimStatus{
		NodeName:    in.Status.NodeName,
		ProviderID:  in.Status.ProviderID,
		ImageID:     in.Status.ImageID,
		Capacity:    in.Status.Capacity.DeepCopy(),
		Allocatable: in.Status.Allocatable.DeepCopy(),
		Conditions:  cloneSlice(in.Status.Conditions, cloneCondition),
	}
	in.Status.LastPodEventTime.DeepCopyInto(&out.Status.LastPodEventTime)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *NodeClaim) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy copies an EC2NodeClass.
func (in *EC2NodeClass) DeepCopy() *EC2NodeClass {
	if in == nil {
		return nil
	}
	out := &EC2NodeClass{TypeMeta: in.TypeMeta, Spec: in.Spec.DeepCopy()}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s := in.Status
	out.Status = EC2NodeClassStatus{
		Subnets:         cloneSlice(s.Subnets, nil),
		SecurityGroups:  cloneSlice(s.SecurityGroups, nil),
		AMIs:            cloneSlice(s.AMIs, func(a *AMI) AMI { c := *a; c.Requirements = cloneSlice(a.Requirements, cloneNSR); return c }),
		InstanceProfile: s.InstanceProfile,
		Conditions:      cloneSlice(s.Conditions, cloneCondition),
		CapacityReservations: cloneSlice(s.CapacityReservations, func(c *CapacityReservation) CapacityReservation {
			o := *c
			o.EndTime = c.EndTime.DeepCopy()
			return o
		}),
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *EC2NodeClass) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy copies an EC2NodeClassSpec.
func (in EC2NodeClassSpec) DeepCopy() EC2NodeClassSpec {
	out := EC2NodeClassSpec{
		SubnetSelectorTerms: cloneSlice(in.SubnetSelectorTerms, func(t *SubnetSelectorTerm) SubnetSelectorTerm {
			c := *t
			c.Tags = cloneMap(t.Tags)
			return c
		}),
		SecurityGroupSelectorTerms: cloneSlice(in.SecurityGroupSelectorTerms, func(t *SecurityGroupSelectorTerm) SecurityGroupSelectorTerm {
			c := *t
			c.Tags = cloneMap(t.Tags)
			return c
		}),
		CapacityReservationSelectorTerms: cloneSlice(in.CapacityReservationSelectorTerms, func(t *CapacityReservationSelectorTerm) CapacityReservationSelectorTerm {
			c := *t
			c.Tags = cloneMap(t.Tags)
			return c
		}),
		AssociatePublicIPAddress: clonePtr(in.AssociatePublicIPAddress),
		IPPrefixCount:            clonePtr(in.IPPrefixCount),
		AMISelectorTerms: cloneSlice(in.AMISelectorTerms, func(t *AMISelectorTerm) AMISelectorTerm {
			c := *t
			c.Tags = cloneMap(t.Tags)
			return c
		}),
		AMIFamily:       clonePtr(in.AMIFamily),
		UserData:        clonePtr(in.UserData),
		Role:            in.Role,
		InstanceProfile: clonePtr(in.InstanceProfile),
		Tags:            cloneMap(in.Tags),
		Kubelet:         in.Kubelet.DeepCopy(),
		BlockDeviceMappings: cloneSlice(in.BlockDeviceMappings, func(b *BlockDeviceMapping) BlockDeviceMapping {
			return b.DeepCopy()
		}),
		InstanceStorePolicy: clonePtr(in.InstanceStorePolicy),
		DetailedMonitoring:  clonePtr(in.DetailedMonitoring),
		Context:             clonePtr(in.Context),
	}
	if in.MetadataOptions != nil {
		m := in.MetadataOptions
		out.MetadataOptions = &MetadataOptions{
			HTTPEndpoint: clonePtr(m.HTTPEndpoint), HTTPProtocolIPv6: clonePtr(m.HTTPProtocolIPv6),
			HTTPPutResponseHopLimit: clonePtr(m.HTTPPutResponseHopLimit), HTTPTokens: clonePtr(m.HTTPTokens),
		}
	}
	if in.EnclaveOptions != nil {
		out.EnclaveOptions = &EnclaveOptions{Enabled: clonePtr(in.EnclaveOptions.Enabled)}
	}
	return out
}

// DeepCopy copies a BlockDeviceMapping.
func (in BlockDeviceMapping) DeepCopy() BlockDeviceMapping {
	out := BlockDeviceMapping{DeviceName: clonePtr(in.DeviceName), RootVolume: in.RootVolume}
	if e := in.EBS; e != nil {
		out.EBS = &BlockDevice{
			DeleteOnTermination: clonePtr(e.DeleteOnTermination), Encrypted: clonePtr(e.Encrypted),
			IOPS: clonePtr(e.IOPS), KMSKeyID: clonePtr(e.KMSKeyID), SnapshotID: clonePtr(e.SnapshotID),
			Throughput: clonePtr(e.Throughput), VolumeInitializationRate: clonePtr(e.VolumeInitializationRate),
			VolumeSize: cloneQuantity(e.VolumeSize), VolumeType: clonePtr(e.VolumeType),
		}
	}
	return out
}

// DeepCopy copies a KubeletConfiguration.
func (in *KubeletConfiguration) DeepCopy() *KubeletConfiguration {
	if in == nil {
		return nil
	}
	return &KubeletConfiguration{
		ClusterDNS:                  cloneSlice(in.ClusterDNS, nil),
		MaxPods:                     clonePtr(in.MaxPods),
		PodsPerCore:                 clonePtr(in.PodsPerCore),
		SystemReserved:              cloneMap(in.SystemReserved),
		KubeReserved:                cloneMap(in.KubeReserved),
		EvictionHard:                cloneMap(in.EvictionHard),
		EvictionSoft:                cloneMap(in.EvictionSoft),
		EvictionSoftGracePeriod:     cloneMap(in.EvictionSoftGracePeriod),
		EvictionMaxPodGracePeriod:   clonePtr(in.EvictionMaxPodGracePeriod),
		ImageGCHighThresholdPercent: clonePtr(in.ImageGCHighThresholdPercent),
		ImageGCLowThresholdPercent:  clonePtr(in.ImageGCLowThresholdPercent),
		CPUCFSQuota:                 clonePtr(in.CPUCFSQuota),
	}
}

// DeepCopyObject implements runtime.Object.
func (in *NodePoolList) DeepCopyObject() runtime.Object {
	out := &NodePoolList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = cloneSlice(in.Items, func(n *NodePool) NodePool { return *n.DeepCopy() })
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *NodeClaimList) DeepCopyObject() runtime.Object {
	out := &NodeClaimList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = cloneSlice(in.Items, func(n *NodeClaim) NodeClaim { return *n.DeepCopy() })
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *EC2NodeClassList) DeepCopyObject() runtime.Object {
	out := &EC2NodeClassList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = cloneSlice(in.Items, func(n *EC2NodeClass) EC2NodeClass { return *n.DeepCopy() })
	return out
}
