package azure

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// The AKS node images' public community galleries and image definitions (provider imagefamily
// consts.go, ubuntu_2204.go, ubuntu_2404.go, azlinux3.go at commit 00ae112…).
const (
	AKSUbuntuGallery     = "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2"
	AKSAzureLinuxGallery = "AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b"
)

// imageDefinition is one node image definition of a family with the sizes it serves.
type imageDefinition struct {
	Gallery, Definition string
	Arch, Generation    string // kubernetes.io/arch, karpenter.azure.com/sku-hyperv-generation
}

// imageDefinitions are each Linux family's images in the provider's order of preference (its
// DefaultImages: first match wins): Gen2 amd64, Gen1 amd64, Gen2 arm64 (no Gen1 arm64 exists).
// "Ubuntu" is Ubuntu 22.04, the release the provider picks for Kubernetes before 1.35.
var imageDefinitions = map[string][]imageDefinition{
	apisv1.ImageFamilyUbuntu2204: {{AKSUbuntuGallery, "2204gen2containerd", "amd64", "2"}, {AKSUbuntuGallery, "2204containerd", "amd64", "1"}, {AKSUbuntuGallery, "2204gen2arm64containerd", "arm64", "2"}},
	apisv1.ImageFamilyUbuntu2404: {{AKSUbuntuGallery, "2404gen2containerd", "amd64", "2"}, {AKSUbuntuGallery, "2404containerd", "amd64", "1"}, {AKSUbuntuGallery, "2404gen2arm64containerd", "arm64", "2"}},
	apisv1.ImageFamilyAzureLinux: {{AKSAzureLinuxGallery, "V3gen2", "amd64", "2"}, {AKSAzureLinuxGallery, "V3", "amd64", "1"}, {AKSAzureLinuxGallery, "V3gen2arm64", "arm64", "2"}},
}

// definitionsOf returns a family's image definitions (nil for Windows or an unknown family).
func definitionsOf(family string) []imageDefinition {
	if family == apisv1.ImageFamilyUbuntu || family == "" {
		family = apisv1.ImageFamilyUbuntu2204
	}
	return imageDefinitions[family]
}

// requirements are the sizes an image serves, sorted as the provider writes them into
// status.images (shorter keys first).
func (d imageDefinition) requirements() []corev1.NodeSelectorRequirement {
	return []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{d.Arch}},
		{Key: apisv1.LabelSKUHyperVGeneration, Operator: corev1.NodeSelectorOpIn, Values: []string{d.Generation}},
	}
}

// communityImageID is a community gallery image version's id.
func communityImageID(gallery, definition, version string) string {
	return "/CommunityGalleries/" + gallery + "/images/" + definition + "/versions/" + version
}

// imageFor is the image a size boots with under the AKSNodeClass, "" when there is none (another
// architecture, a GPU size without a driver for the family, Windows). A resolved class launches
// the first of status.images whose requirements the size meets (the provider's resolveNodeImage);
// a class without status (a manifest planned offline) the family's definition at "latest".
func imageFor(nc *apisv1.AKSNodeClass, it *catalog.InstanceType) string {
	if !it.BootsWith(nc.ImageFamily()) {
		return ""
	}
	labels := it.ImageLabels()
	if len(nc.Status.Images) > 0 {
		for _, img := range nc.Status.Images {
			if reqs, err := scheduling.NewRequirements(img.Requirements...); err == nil && reqs.MatchLabels(labels) == nil {
				return img.ID
			}
		}
		return ""
	}
	i := slices.IndexFunc(definitionsOf(nc.ImageFamily()), func(d imageDefinition) bool {
		return d.Arch == labels[corev1.LabelArchStable] && d.Generation == labels[apisv1.LabelSKUHyperVGeneration]
	})
	if i < 0 {
		return ""
	}
	d := definitionsOf(nc.ImageFamily())[i]
	return communityImageID(d.Gallery, d.Definition, "latest")
}
