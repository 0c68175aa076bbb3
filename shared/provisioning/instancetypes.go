package provisioning

// Instance types as a NodePool sees them: which types its requirements and node image allow,
// which are special (accelerators, bare metal), how their offerings are ordered.

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// withDefaultCapacityType gives a NodePool that says nothing about karpenter.sh/capacity-type
// Karpenter's default, on-demand: silence never buys spot.
func withDefaultCapacityType(reqs scheduling.Requirements) scheduling.Requirements {
	if _, ok := reqs[apisv1.LabelCapacityType]; ok {
		return reqs
	}
	return reqs.Intersect(scheduling.Requirements{apisv1.LabelCapacityType: scheduling.MustRequirement(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeOnDemand)})
}

// typeMatches checks the requirements whose keys are instance-type labels. Offering keys are
// checked per offering; keys the type does not carry must allow absence.
func typeMatches(reqs scheduling.Requirements, it *catalog.InstanceType) bool {
	for k, r := range reqs {
		if offeringKeys[k] || !isTypeKey(k) {
			continue
		}
		v, ok := it.Labels[k]
		if !ok {
			if !r.AbsentOK() {
				return false
			}
			continue
		}
		if !r.Has(v) {
			return false
		}
	}
	return true
}

// isTypeKey reports whether a label key is set from the instance type (well-known labels): the
// upstream ones, karpenter.k8s.aws/* (but the NodeClass name), karpenter.azure.com/* and AKS's
// kubernetes.azure.com/sku-cpu and sku-memory.
func isTypeKey(k string) bool {
	switch k {
	case corev1.LabelArchStable, corev1.LabelOSStable, corev1.LabelInstanceTypeStable, corev1.LabelWindowsBuild,
		apisv1.AKSLabelCPU, apisv1.AKSLabelMemory:
		return true
	}
	return (strings.HasPrefix(k, apisv1.AWSGroup+"/") && k != apisv1.LabelEC2NodeClass) || strings.HasPrefix(k, apisv1.AzureGroup+"/")
}

// acceleratorResources are the extended resources that make an instance type special: GPUs and
// AWS ML accelerators. Network extras (pod ENIs, EFA) do not.
var acceleratorResources = map[corev1.ResourceName]bool{
	"nvidia.com/gpu": true, "amd.com/gpu": true, "aws.amazon.com/neuron": true,
	"aws.amazon.com/neuroncore": true, "aws.amazon.com/neurondevice": true, "habana.ai/gaudi": true,
}

// sortOfferings orders by price, then capacity type (spot first at equal price), then zone.
func sortOfferings(os []catalog.Offering) {
	sort.SliceStable(os, func(i, j int) bool {
		a, b := os[i], os[j]
		if a.PricePerHour != b.PricePerHour {
			return a.PricePerHour < b.PricePerHour
		}
		if a.CapacityType != b.CapacityType {
			return a.CapacityType == apisv1.CapacityTypeSpot
		}
		return a.Zone < b.Zone
	})
}

// attachLimit is the default EBS attach limit for a node with these labels (see
// AttachLimitNitro); Xen is recognised by the instance-hypervisor label.
func attachLimit(labels map[string]string) int64 {
	if labels[apisv1.LabelInstanceHypervisor] == "xen" {
		return AttachLimitXen
	}
	return AttachLimitNitro
}

// bootable returns whether a type can boot under the node settings, as the cloud provider filters
// its instance types by NodeClass before scheduling: the image family must support the type (an
// AKS GPU size needs a driver for the family's OS) and, where the NodeClass resolved its images,
// one image's requirements must hold for the type (Karpenter's image compatibility). Error: an
// image requirement that does not parse.
func bootable(s catalog.NodeSettings) (func(*catalog.InstanceType) bool, error) {
	images := make([]scheduling.Requirements, 0, len(s.Images))
	for i, img := range s.Images {
		r, err := scheduling.NewRequirements(img...)
		if err != nil {
			return nil, fmt.Errorf("status.images[%d].requirements: %w", i, err)
		}
		images = append(images, r)
	}
	return func(it *catalog.InstanceType) bool {
		if !it.BootsWith(s.AMIFamily) {
			return false
		}
		if s.Images == nil {
			return true
		}
		labels := it.ImageLabels()
		for _, r := range images {
			if r.MatchLabels(labels) == nil {
				return true
			}
		}
		return false
	}, nil
}

// isSpecial reports whether a type is an accelerator or bare-metal type (see acceleratorResources).
func isSpecial(it *catalog.InstanceType) bool {
	for name, q := range it.Capacity {
		if acceleratorResources[name] && !q.IsZero() {
			return true
		}
	}
	if it.Labels[apisv1.LabelInstanceSize] == "metal" || it.Labels["karpenter.k8s.aws/instance-gpu-name"] != "" ||
		it.Labels["karpenter.k8s.aws/instance-accelerator-name"] != "" {
		return true
	}
	return false
}
