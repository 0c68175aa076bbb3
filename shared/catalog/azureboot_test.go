package catalog

import (
	"testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// TestAKSImageFacts: the image generation comes from the SKU's HyperVGenerations capability
// (southcentralus recorded SKUs: Standard_D2_v2 lists V1 only, Standard_D2s_v3 V1,V2) and is no
// node label; GPU sizes boot only the families supported-gpus gives a driver for.
func TestAKSImageFacts(t *testing.T) {
	scus, err := AzureRegionCatalog("southcentralus")
	if err != nil {
		t.Fatal(err)
	}
	for name, gen := range map[string]string{"Standard_D2_v2": "1", "Standard_D2s_v3": "2", "Standard_NC24ads_A100_v4": "2"} {
		it := scus.Get(name)
		if it == nil {
			t.Fatalf("%s missing from the southcentralus catalog", name)
		}
		if it.Azure.HyperVGeneration != gen || it.ImageLabels()[apisv1.LabelSKUHyperVGeneration] != gen {
			t.Errorf("%s: generation %q, want %q", name, it.Azure.HyperVGeneration, gen)
		}
		if _, ok := it.Labels[apisv1.LabelSKUHyperVGeneration]; ok {
			t.Errorf("%s carries %s as a node label; the provider never puts it on nodes", name, apisv1.LabelSKUHyperVGeneration)
		}
	}
	eus, err := AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		size            string
		ubuntu, azlinux bool
	}{
		{"Standard_D2s_v5", true, true},          // no GPU
		{"Standard_NC6s_v3", true, true},         // ubuntu;windows;azurelinux;azurelinux3
		{"Standard_NC24ads_A100_v4", true, true}, // ubuntu;windows;azurelinux3
		{"Standard_NV12s_v3", true, false},       // ubuntu;windows
	} {
		it := eus.Get(c.size)
		if it == nil {
			t.Fatalf("%s missing from the eastus catalog", c.size)
		}
		if got := it.BootsWith(apisv1.ImageFamilyUbuntu2204); got != c.ubuntu {
			t.Errorf("%s on Ubuntu2204: %v, want %v", c.size, got, c.ubuntu)
		}
		if got := it.BootsWith(apisv1.ImageFamilyAzureLinux); got != c.azlinux {
			t.Errorf("%s on AzureLinux: %v, want %v", c.size, got, c.azlinux)
		}
	}
}
