package azure_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

func resolveWith(t *testing.T, p *azure.Provider, edit func(*apisv1.AKSNodeClass)) *apisv1.AKSNodeClass {
	t.Helper()
	nc := aksClass()
	nc.AKS.Generation = 3
	if edit != nil {
		edit(nc.AKS)
	}
	got, err := p.ResolveNodeClass(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	return got.AKS
}

func condition(nc *apisv1.AKSNodeClass, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(nc.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestResolveNodeClass: the images of the family at the gallery's latest published version
// (the face publishes 202611.03.0 then 202611.18.0) with the sizes each serves, the control
// plane's version, and every condition True at the class's generation.
func TestResolveNodeClass(t *testing.T) {
	w := newWorld(t, "prod")
	p := newProviderWith(t, w, func(o *azure.Options) { o.KubernetesVersion = "v1.33.2" })
	nc := resolveWith(t, p, func(c *apisv1.AKSNodeClass) { f := apisv1.ImageFamilyAzureLinux; c.Spec.ImageFamily = &f })
	const g = "/CommunityGalleries/AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b/images/"
	want := []struct{ id, arch, gen string }{{g + "V3gen2/versions/202611.18.0", "amd64", "2"}, {g + "V3/versions/202611.18.0", "amd64", "1"}, {g + "V3gen2arm64/versions/202611.18.0", "arm64", "2"}}
	if len(nc.Status.Images) != len(want) {
		t.Fatalf("images %+v", nc.Status.Images)
	}
	for i, w := range want {
		img := nc.Status.Images[i]
		if img.ID != w.id || len(img.Requirements) != 2 || img.Requirements[0].Values[0] != w.arch || img.Requirements[1].Key != apisv1.LabelSKUHyperVGeneration || img.Requirements[1].Values[0] != w.gen {
			t.Errorf("images[%d] = %+v, want %s for %s Gen%s", i, img, w.id, w.arch, w.gen)
		}
	}
	if nc.Status.KubernetesVersion != "1.33.2" {
		t.Errorf("kubernetesVersion %q", nc.Status.KubernetesVersion)
	}
	for _, typ := range []string{"ImagesReady", "KubernetesVersionReady", "SubnetsReady", "ValidationSucceeded", "Ready"} {
		if c := condition(nc, typ); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
			t.Errorf("%s = %+v, want True at generation 3", typ, c)
		}
	}
}

// TestResolveNodeClassProblems: each problem the user must fix is its condition False with the
// provider's reason, and Ready False.
func TestResolveNodeClassProblems(t *testing.T) {
	w := newWorld(t, "prod")
	p := newProviderWith(t, w, func(o *azure.Options) { o.KubernetesVersion = "1.33.2" })
	other := "/subscriptions/" + sub + "/resourceGroups/rg-fake-vnet/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/missing"
	foreign := "/subscriptions/" + sub + "/resourceGroups/rg-other/providers/Microsoft.Network/virtualNetworks/other/subnets/s"
	bad := "subnet-1"
	fips, win := apisv1.FIPSModeFIPS, apisv1.ImageFamilyWindows2022
	for _, c := range []struct {
		name, cond, reason string
		edit               func(*apisv1.AKSNodeClass)
		p                  *azure.Provider
	}{
		{"missing subnet", "SubnetsReady", azure.ReasonSubnetNotFound, func(c *apisv1.AKSNodeClass) { c.Spec.VNETSubnetID = &other }, p},
		{"subnet of another VNet", "SubnetsReady", azure.ReasonSubnetIDInvalid, func(c *apisv1.AKSNodeClass) { c.Spec.VNETSubnetID = &foreign }, p},
		{"malformed subnet", "SubnetsReady", azure.ReasonSubnetIDInvalid, func(c *apisv1.AKSNodeClass) { c.Spec.VNETSubnetID = &bad }, p},
		{"FIPS", "ImagesReady", azure.ReasonSIGRequiredForFIPS, func(c *apisv1.AKSNodeClass) { c.Spec.FIPSMode = &fips }, p},
		{"Windows", "ValidationSucceeded", apisv1.ReasonNotSupported, func(c *apisv1.AKSNodeClass) { c.Spec.ImageFamily = &win }, p},
		{"no control plane version", "KubernetesVersionReady", azure.ReasonKubernetesVersionUnknown, nil, newProviderWith(t, w, nil)},
	} {
		nc := resolveWith(t, c.p, c.edit)
		if got := condition(nc, c.cond); got.Status != metav1.ConditionFalse || got.Reason != c.reason || got.Message == "" {
			t.Errorf("%s: %s = %+v, want False %s with a message", c.name, c.cond, got, c.reason)
		}
		if r := condition(nc, "Ready"); r.Status != metav1.ConditionFalse {
			t.Errorf("%s: Ready = %+v, want False", c.name, r)
		}
		if why := apisv1.NodeClassOf(nc).NotReady(); why == "" {
			t.Errorf("%s: the class would launch", c.name)
		}
	}
}

// TestLaunchUsesResolvedImage: a launch boots the resolved image whose requirements the size
// meets: Standard_D2_v2 boots only Hyper-V Gen1 (eastus Resource SKUs), so it gets the Gen1
// image at its pinned version; a Gen2 size the Gen2 image.
func TestLaunchUsesResolvedImage(t *testing.T) {
	w := newWorld(t, "prod")
	p := newProviderWith(t, w, func(o *azure.Options) { o.KubernetesVersion = "1.33.2" })
	nc := resolveWith(t, p, nil)
	for size, image := range map[string]string{"Standard_D2_v2": "2204containerd", "Standard_D2s_v5": "2204gen2containerd"} {
		req := request("prod", "default-"+size[9:13], cloud.OfferingRef{InstanceType: size, Zone: "eastus-2", CapacityType: "on-demand"})
		req.NodeClass = apisv1.NodeClassOf(nc)
		inst, err := p.Create(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		vm, _ := w.srv.VM(inst.ID)
		want := "/CommunityGalleries/" + azure.AKSUbuntuGallery + "/images/" + image + "/versions/202611.18.0"
		if got := *vm.Properties.StorageProfile.ImageReference.CommunityGalleryImageID; got != want {
			t.Errorf("%s booted %s, want %s", size, got, want)
		}
	}
}

func newProviderWith(t *testing.T, w *world, edit func(*azure.Options)) *azure.Provider {
	t.Helper()
	o := azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
		Catalog: w.cloud.Catalog(), Credential: w.cred(), ClientOptions: w.srv.ClientOptions(), SSHPublicKey: "ssh-rsa AAAA fake",
		PollInterval: pollFast, Bootstrap: azureapi.LocalBootstrap("https://example.invalid")}
	if edit != nil {
		edit(&o)
	}
	p, err := azure.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
