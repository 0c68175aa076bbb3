package catalog

import (
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// ForAMIFamily is the type as a NodeClass of that AMI family offers it. For a Windows family
// (Windows2019, Windows2022, Windows2025) the offering is a Windows node: kubernetes.io/os is
// windows and node.kubernetes.io/windows-build the family's build; an arm64 type is not offered
// at all (nil), as the EKS-optimized Windows images are x86_64 only. Karpenter's
// pkg/providers/instancetype/types.go decides the same: getOS gives "windows" for amd64 types
// and no value for others under a Windows family, and computeRequirements inserts the family's
// build into LabelWindowsBuild. Any other family gets the type unchanged (the catalog's
// kubernetes.io/os=linux), and so does an Azure size (AKS image families are not EC2
// AMI families). The type is copied, never changed in place.
func (it *InstanceType) ForAMIFamily(family string) *InstanceType {
	rel, ok := apisv1.WindowsReleaseOf(family)
	if !ok || it == nil || it.Azure != nil {
		return it
	}
	if it.Labels[corev1.LabelArchStable] != "amd64" {
		return nil
	}
	out := *it
	out.Labels = make(map[string]string, len(it.Labels)+1)
	for k, v := range it.Labels {
		out.Labels[k] = v
	}
	out.Labels[corev1.LabelOSStable] = string(corev1.Windows)
	out.Labels[corev1.LabelWindowsBuild] = rel.Build
	return &out
}
