package azure

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/repair"
)

// RepairPolicies are Azure/karpenter-provider-azure's (pkg/cloudprovider RepairPolicies): the
// kubelet's Ready False or Unknown for 10 minutes. Karpenter's Azure provider reads no VM health
// (instance view, Resource Health) for repair: a VM that stops shows as Ready turning Unknown.
func RepairPolicies() []repair.Policy {
	return []repair.Policy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 10 * time.Minute},
	}
}

// RepairPolicies implements cloud.Repairer.
func (p *Provider) RepairPolicies() []repair.Policy { return RepairPolicies() }
