package azure

import (
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// The AKS node images' public community galleries and image definitions (provider imagefamily
// consts.go, ubuntu_2204.go, ubuntu_2404.go, azlinux3.go at commit 00ae112…).
const (
	AKSUbuntuGallery     = "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2"
	AKSAzureLinuxGallery = "AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b"
)

// imageDefinitions gives, per image family and architecture, the gallery and the Gen2 image
// definition (every size of the embedded catalog runs Gen2; Gen1-only sizes carry
// sku-hyperv-generation=1 and get the Gen1 definition where the family has one).
var imageDefinitions = map[string]map[string][3]string{ // family → arch → {gallery, gen2, gen1}
	apisv1.ImageFamilyUbuntu2204: {"amd64": {AKSUbuntuGallery, "2204gen2containerd", "2204containerd"}, "arm64": {AKSUbuntuGallery, "2204gen2arm64containerd", ""}},
	apisv1.ImageFamilyUbuntu2404: {"amd64": {AKSUbuntuGallery, "2404gen2containerd", "2404containerd"}, "arm64": {AKSUbuntuGallery, "2404gen2arm64containerd", ""}},
	apisv1.ImageFamilyAzureLinux: {"amd64": {AKSAzureLinuxGallery, "V3gen2", "V3"}, "arm64": {AKSAzureLinuxGallery, "V3gen2arm64", ""}},
}

// imageFor is the community gallery image id (latest version) a size boots with under an image
// family, "" when the family has none for it (another architecture, Gen1 only on arm64, Windows).
// "Ubuntu" is Ubuntu 22.04, the release the provider picks for Kubernetes before 1.35.
func imageFor(family string, it *catalog.InstanceType) string {
	if family == apisv1.ImageFamilyUbuntu || family == "" {
		family = apisv1.ImageFamilyUbuntu2204
	}
	def, ok := imageDefinitions[family][it.Labels["kubernetes.io/arch"]]
	if !ok {
		return ""
	}
	image := def[1]
	if it.Labels[apisv1.LabelSKUHyperVGeneration] == apisv1.HyperVGenerationV1 {
		image = def[2]
	}
	if image == "" {
		return ""
	}
	return "/CommunityGalleries/" + def[0] + "/images/" + image + "/versions/latest"
}
