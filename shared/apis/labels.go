package apis

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Label rules of Karpenter (kubernetes-sigs/karpenter pkg/apis/v1/labels.go and the v1 NodePool
// CRD's CEL rules; aws/karpenter-provider-aws pkg/apis/v1/labels.go adds karpenter.k8s.aws).

// RestrictedLabelDomains may not be used in NodePool labels or requirements except for the
// well-known labels: they are kubelet-owned or reserved by Karpenter.
var RestrictedLabelDomains = []string{"kubernetes.io", "k8s.io", v1.Group, v1.AWSGroup, v1.AzureGroup}

// LabelDomainExceptions are sub-domains of restricted domains that users may set.
var LabelDomainExceptions = []string{"kops.k8s.io", corev1.LabelNamespaceSuffixNode, corev1.LabelNamespaceNodeRestriction}

// RestrictedLabels can never be set or required: Dovetail assigns them per node.
var RestrictedLabels = []string{corev1.LabelHostname, v1.LabelNodePool}

// WellKnownLabels are restricted-domain labels a NodePool may require or set; the solver knows
// their values per offering.
var WellKnownLabels = map[string]bool{
	corev1.LabelTopologyZone: true, corev1.LabelTopologyRegion: true, corev1.LabelInstanceTypeStable: true,
	corev1.LabelArchStable: true, corev1.LabelOSStable: true, corev1.LabelWindowsBuild: true,
	v1.LabelCapacityType:     true,
	v1.LabelInstanceCategory: true, v1.LabelInstanceFamily: true, v1.LabelInstanceGeneration: true,
	v1.LabelInstanceSize: true, v1.LabelInstanceCPU: true, v1.LabelInstanceMemory: true,
	v1.LabelInstanceGPUCount: true, v1.LabelInstanceGPUName: true, v1.LabelInstanceHypervisor: true,
	"karpenter.k8s.aws/instance-cpu-manufacturer":                true,
	"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz":   true,
	"karpenter.k8s.aws/instance-local-nvme":                      true,
	"karpenter.k8s.aws/instance-ebs-bandwidth":                   true,
	"karpenter.k8s.aws/instance-network-bandwidth":               true,
	"karpenter.k8s.aws/instance-gpu-manufacturer":                true,
	"karpenter.k8s.aws/instance-gpu-memory":                      true,
	"karpenter.k8s.aws/instance-accelerator-name":                true,
	"karpenter.k8s.aws/instance-accelerator-manufacturer":        true,
	"karpenter.k8s.aws/instance-accelerator-count":               true,
	"karpenter.k8s.aws/instance-encryption-in-transit-supported": true,
	"karpenter.k8s.aws/capacity-reservation-id":                  true,
	"karpenter.k8s.aws/capacity-reservation-type":                true,
	"topology.k8s.aws/zone-id":                                   true,
}

func init() {
	// The Azure provider's well-known labels (karpenter.azure.com/sku-*, placement-scope and the
	// kubernetes.azure.com labels it offers as requirements).
	for _, k := range v1.AzureWellKnownLabels {
		WellKnownLabels[k] = true
	}
}

// NormalizedLabels are the aliases Karpenter reads as another label (deprecated beta keys, the
// CSI drivers' zone keys): scheduling.NormalizedLabels, the one table.
var NormalizedLabels = scheduling.NormalizedLabels

// RestrictedLabelReason returns why key may not be used as a NodePool label or requirement key,
// or "" when it may. Aliases are normalized first (beta.kubernetes.io/arch is kubernetes.io/arch).
func RestrictedLabelReason(key string) string {
	if n, ok := NormalizedLabels[key]; ok {
		key = n
	}
	for _, r := range RestrictedLabels {
		if key == r {
			return fmt.Sprintf("label %q is restricted: Dovetail sets it on every node", key)
		}
	}
	if WellKnownLabels[key] {
		return ""
	}
	domain, _, hasDomain := strings.Cut(key, "/")
	if !hasDomain {
		return ""
	}
	for _, e := range LabelDomainExceptions {
		if strings.HasSuffix(domain, e) {
			return ""
		}
	}
	for _, r := range RestrictedLabelDomains {
		if strings.HasSuffix(domain, r) {
			return fmt.Sprintf("label domain %q is restricted; use a well-known label or a custom domain", r)
		}
	}
	return ""
}
