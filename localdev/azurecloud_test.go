package localdev

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// The AKS seed scenario with the real Azure provider: every launch goes through the
// azure-sdk-for-go armnetwork and armcompute clients to the SDK's server fakes, answered by the
// fake cloud's Azure face; the fake's kubelets boot from the custom data the provider rendered.
// Each Dovetail node carries exactly what an AKS node would: the labels its custom data gives the
// kubelet, the kubelet's and the Azure cloud provider's own (hostname, os, arch, instance type,
// zone <region>-N, region, and their beta forms), and what registration synced from its NodeClaim.
func TestSeedScenarioAllPodsBoundThroughAzureProvider(t *testing.T) {
	env, out := startEnv(t, Options{CloudProvider: CloudAzure})
	// Bounded, so a wait that never ends fails naming what it waited for instead of hanging the package.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bound, total, err := env.count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bound != total || total != 40 {
		t.Fatalf("bound %d of %d workload pods, want 40 of 40\n%s", bound, total, out)
	}
	if env.Provider.Name() != "azure" || env.AzureAPI == nil || env.Catalog.Region != "eastus" {
		t.Fatalf("provider %s, face %v, catalog %s", env.Provider.Name(), env.AzureAPI, env.Catalog.Region)
	}
	if err := env.WaitNodeClaimsReady(ctx); err != nil {
		t.Fatal(err)
	}
	claims, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) == 0 {
		t.Fatalf("NodeClaims: %v (%d)", err, len(claims.Items))
	}
	zone := regexp.MustCompile(`^eastus-[123]$`)
	var sawSpot, sawOnDemand bool
	for i := range claims.Items {
		var nc apisv1.NodeClaim
		if err := kube.FromUnstructured(&claims.Items[i], &nc); err != nil {
			t.Fatal(err)
		}
		node, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, ok := env.AzureAPI.CustomData(node.Name)
		if !ok {
			t.Fatalf("node %s: no VM custom data", node.Name)
		}
		// The node image's provisioning reads the AKS bootstrap contract; the kubelet registers
		// with what it was given there.
		kubelet, err := customdata.Read(data)
		if err != nil {
			t.Fatal(err)
		}
		l := node.Labels
		facts := map[string]string{
			"kubernetes.io/hostname": node.Name, "kubernetes.io/os": "linux", "beta.kubernetes.io/os": "linux",
			"kubernetes.io/arch": l["kubernetes.io/arch"], "beta.kubernetes.io/arch": l["kubernetes.io/arch"],
			"node.kubernetes.io/instance-type": nc.Labels["node.kubernetes.io/instance-type"], "beta.kubernetes.io/instance-type": nc.Labels["node.kubernetes.io/instance-type"],
			"topology.kubernetes.io/zone": l["topology.kubernetes.io/zone"], "failure-domain.beta.kubernetes.io/zone": l["topology.kubernetes.io/zone"],
			"topology.kubernetes.io/region": "eastus", "failure-domain.beta.kubernetes.io/region": "eastus",
		}
		for k, v := range facts {
			if l[k] != v {
				t.Errorf("node %s: %s = %q, want %q", node.Name, k, l[k], v)
			}
		}
		if !zone.MatchString(l["topology.kubernetes.io/zone"]) || node.Spec.ProviderID != providerIDOf(node.Name) || nc.Status.ProviderID != node.Spec.ProviderID {
			t.Errorf("node %s: zone %q, providerID %q (NodeClaim %q), want %q", node.Name, l["topology.kubernetes.io/zone"], node.Spec.ProviderID, nc.Status.ProviderID, providerIDOf(node.Name))
		}
		// What AKS node bootstrapping gives every node of this seed (Ubuntu2204 Gen2 or Gen1 image
		// at the face's version, Azure CNI Overlay on aks-subnet, Kubernetes 1.37), hand-written;
		// a spot node also carries kubernetes.azure.com/scalesetpriority=spot, an on-demand one not.
		image := "AKSUbuntu-2204gen2containerd-202611.18.0"
		if l[apisv1.LabelSKUHyperVGeneration] == "1" {
			image = "AKSUbuntu-2204containerd-202611.18.0"
		}
		aks := map[string]string{
			"agentpool": "default", "kubernetes.azure.com/agentpool": "default", "kubernetes.azure.com/mode": "user",
			"kubernetes.azure.com/role": "agent", apisv1.AKSLabelCluster: localNodeResourceGroup, apisv1.AKSLabelOSSKU: "Ubuntu",
			"kubernetes.azure.com/network-subnet": "aks-subnet", "kubernetes.azure.com/azure-cni-overlay": "true",
			"kubernetes.azure.com/podnetwork-type": "overlay", "kubernetes.azure.com/network-stateless-cni": "true",
			"kubernetes.azure.com/node-image-version": image,
		}
		if nc.Labels[apisv1.LabelCapacityType] == apisv1.CapacityTypeSpot {
			aks[apisv1.AKSLabelScaleSetPriority] = "spot"
			sawSpot = true
		} else {
			sawOnDemand = true
		}
		for k, v := range aks {
			if kubelet.Labels[k] != v || l[k] != v {
				t.Errorf("node %s: AKS bootstrap label %s = %q (kubelet given %q), want %q", node.Name, k, l[k], kubelet.Labels[k], v)
			}
		}
		for k, v := range kubelet.Labels {
			if _, ok := aks[k]; !ok && nc.Labels[k] != v {
				t.Errorf("node %s: the kubelet is given %s=%s, neither AKS's nor its NodeClaim's", node.Name, k, v)
			}
		}
		if _, ok := l[apisv1.AKSLabelScaleSetPriority]; ok && nc.Labels[apisv1.LabelCapacityType] != apisv1.CapacityTypeSpot {
			t.Errorf("node %s: an on-demand node labelled %s", node.Name, apisv1.AKSLabelScaleSetPriority)
		}
		if l[apisv1.LabelSKUName] != l["node.kubernetes.io/instance-type"] || l[apisv1.LabelSKUFamily] == "" {
			t.Errorf("node %s: registration did not sync the SKU labels: %v", node.Name, l)
		}
		lifecycle := map[string]bool{"karpenter.sh/registered": true, "karpenter.sh/initialized": true} // Karpenter's own, on registration and initialization
		for k, v := range l {
			if facts[k] == "" && kubelet.Labels[k] != v && nc.Labels[k] != v && !lifecycle[k] {
				t.Errorf("node %s: label %s=%s comes from neither its kubelet, the cloud provider, its NodeClaim nor the lifecycle", node.Name, k, v)
			}
		}
	}
	if !sawSpot {
		t.Errorf("no spot node among %d (on demand: %v): the spot label went unchecked", len(claims.Items), sawOnDemand)
	}
	checkAKSNodeClassReady(ctx, t, env)
	checkNoOrphans(t, env)
	if len(env.AzureAPI.NICNames()) != len(claims.Items) {
		t.Errorf("%d NICs for %d NodeClaims", len(env.AzureAPI.NICNames()), len(claims.Items))
	}
}

// providerIDOf is a fake VM's providerID as cloud-node-manager spells it: the node resource group
// (MC_rg-fake-nodes) in lower case.
func providerIDOf(vm string) string {
	return "azure:///subscriptions/" + localSubscription + "/resourceGroups/mc_rg-fake-nodes/providers/Microsoft.Compute/virtualMachines/" + vm
}

// TestSeedScenarioInARegionWithoutZones: the AKS seed in westcentralus, a region without
// availability zones: every pod is bound, every VM is created without zones, and its Node is in
// zone "0" of region westcentralus, as AKS labels a node of a VM without a zone.
func TestSeedScenarioInARegionWithoutZones(t *testing.T) {
	env, out := startEnv(t, Options{CloudProvider: CloudAzure, Region: "westcentralus"})
	// Bounded, so a wait that never ends fails naming what it waited for instead of hanging the package.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bound, total, err := env.count(ctx)
	if err != nil || bound != total || total != 40 || env.Catalog.Region != "westcentralus" {
		t.Fatalf("bound %d of %d workload pods (%v), catalog %s; want 40 of 40 in westcentralus\n%s", bound, total, err, env.Catalog.Region, out)
	}
	claims, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) == 0 {
		t.Fatalf("NodeClaims: %v (%d)", err, len(claims.Items))
	}
	for i := range claims.Items {
		var nc apisv1.NodeClaim
		if err := kube.FromUnstructured(&claims.Items[i], &nc); err != nil {
			t.Fatal(err)
		}
		vm, ok := env.AzureAPI.VM("aks-" + nc.Name)
		if !ok || len(vm.Zones) != 0 {
			t.Errorf("NodeClaim %s: VM found %v, zones %v; want a VM without zones", nc.Name, ok, vm.Zones)
		}
		if nc.Status.NodeName == "" {
			continue
		}
		node, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if z, r := node.Labels["topology.kubernetes.io/zone"], node.Labels["topology.kubernetes.io/region"]; z != "0" || r != "westcentralus" {
			t.Errorf("node %s: zone %q, region %q; want 0 in westcentralus", node.Name, z, r)
		}
	}
}

// checkAKSNodeClassReady: the lifecycle function resolved the seed's AKSNodeClass through the
// Azure provider and the agent wrote its status: the Ubuntu 22.04 images at the face's latest
// version (202611.18.0) for Gen2 amd64, Gen1 amd64 and Gen2 arm64, the control plane's version,
// every condition True, and the Azure provider's finalizer.
func checkAKSNodeClassReady(ctx context.Context, t *testing.T, env *Env) {
	t.Helper()
	u, err := env.Cluster.Dynamic.Resource(kube.AKSNodeClassGVR).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nc apisv1.AKSNodeClass
	if err := kube.FromUnstructured(u, &nc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"ImagesReady", "KubernetesVersionReady", "SubnetsReady", "ValidationSucceeded", "Ready"} {
		if got := meta.FindStatusCondition(nc.Status.Conditions, c); got == nil || got.Status != metav1.ConditionTrue {
			t.Errorf("AKSNodeClass default: condition %s = %+v, want True", c, got)
		}
	}
	const gallery = "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/"
	want := []string{gallery + "2204gen2containerd/versions/202611.18.0", gallery + "2204containerd/versions/202611.18.0", gallery + "2204gen2arm64containerd/versions/202611.18.0"}
	if len(nc.Status.Images) != len(want) {
		t.Fatalf("AKSNodeClass default: images %+v, want %v", nc.Status.Images, want)
	}
	for i, w := range want {
		if nc.Status.Images[i].ID != w {
			t.Errorf("images[%d] = %s, want %s", i, nc.Status.Images[i].ID, w)
		}
	}
	if nc.Status.KubernetesVersion == "" || !slices.Contains(nc.Finalizers, "karpenter.azure.com/termination") {
		t.Errorf("AKSNodeClass default: kubernetesVersion %q, finalizers %v", nc.Status.KubernetesVersion, nc.Finalizers)
	}
	// Every VM booted the resolved image, not "latest".
	for _, name := range env.AzureAPI.NICNames() {
		vm, ok := env.AzureAPI.VM(name)
		if !ok {
			continue
		}
		if id := *vm.Properties.StorageProfile.ImageReference.CommunityGalleryImageID; !slices.Contains(want, id) {
			t.Errorf("VM %s booted %s, not a resolved image", name, id)
		}
	}
}
