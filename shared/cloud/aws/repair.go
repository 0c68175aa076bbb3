package aws

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/repair"
)

// RepairPolicies are aws/karpenter-provider-aws's (pkg/cloudprovider RepairPolicies): the
// kubelet's Ready False or Unknown for 30 minutes, and the conditions the EKS node monitoring
// agent writes False for their durations (AcceleratedHardwareReady 10 minutes; StorageReady,
// NetworkingReady, KernelReady, ContainerRuntimeReady 30 minutes). Karpenter's AWS provider reads
// no EC2 instance status check (DescribeInstanceStatus) for repair: a failed status check shows
// as the kubelet's Ready turning Unknown, and the node monitoring agent reports the rest.
func RepairPolicies() []repair.Policy {
	return []repair.Policy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * time.Minute},
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
		{ConditionType: "StorageReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "NetworkingReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "KernelReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "ContainerRuntimeReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	}
}

// RepairPolicies implements cloud.Repairer.
func (p *Provider) RepairPolicies() []repair.Policy { return RepairPolicies() }
