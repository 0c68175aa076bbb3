package azure_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

// bootstrappingWorld is a world whose provider asks the fake AKS for the bootstrapping data, and
// whose fake cloud's kubelets register into reg.
func bootstrappingWorld(t *testing.T, tweak ...func(*azure.Options)) (*world, *azureapi.NodeBootstrapping, *nodes) {
	t.Helper()
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	reg := &nodes{m: map[string]*corev1.Node{}}
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clk, BootDelay: 10 * time.Second, Registrar: reg})
	srv := azureapi.New(azureapi.Options{Cloud: fc, SubscriptionID: sub, ResourceGroup: rg, Subnets: []string{subnet}})
	boot := azureapi.LocalBootstrap("https://dev-dns-00000000.hcp.eastus.azmk8s.io:443")
	aks := &azureapi.NodeBootstrapping{SubscriptionID: sub, ResourceGroup: "rg-cluster", Cluster: "aks-1",
		Answer: azureapi.AKSAnswer(azureapi.AKSCluster{Bootstrap: boot, SubscriptionID: sub, NodeResourceGroup: rg, Location: "eastus", NetworkPlugin: "none"})}
	o := azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
		Catalog: cat, Credential: &azfake.TokenCredential{}, ClientOptions: srv.ClientOptions(), SSHPublicKey: "ssh-rsa AAAA fake",
		PollInterval: 10 * time.Millisecond, KubernetesVersion: "1.33.2", Bootstrap: boot, ProvisionMode: azure.ProvisionModeBootstrappingClient,
		NodeBootstrapping: &azure.NodeBootstrappingClient{Endpoint: "http://nodebootstrapping.fake", SubscriptionID: sub, ResourceGroup: "rg-cluster",
			Cluster: "aks-1", Credential: &azfake.TokenCredential{}, Token: boot.Token, HTTP: aks.Client()}}
	for _, f := range tweak {
		f(&o)
	}
	p, err := azure.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &world{p: p, srv: srv, cloud: fc, clock: clk}, aks, reg
}

// boot lets the fake's VMs boot and register.
func boot(t *testing.T, w *world) {
	t.Helper()
	w.clock.Step(time.Minute)
	if err := w.cloud.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// In bootstrappingclient mode a launch asks AKS (one NodeBootstrapping_Get), creates the VM with
// AKS's custom data, then the CustomScript extension cse-agent-karpenter with the hydrated
// command, through the real armcompute client: the Node registers from that command with the
// contract's labels (a spot Standard_D2s_v5: scalesetpriority=spot, mode user, the pool) and
// the unregistered taint, and no sooner than the extension has run.
func TestBootstrappingClientModeRunsTheCSE(t *testing.T) {
	w, aks, reg := bootstrappingWorld(t)
	inst, err := w.p.Create(context.Background(), request("prod", "default-a1b2c3", spot1, onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	if aks.Requests != 1 || inst.CapacityType != "spot" {
		t.Fatalf("%d NodeBootstrapping requests, instance %+v", aks.Requests, inst)
	}
	ext, ok := w.srv.Extension("aks-default-a1b2c3", "cse-agent-karpenter")
	if !ok || *ext.Properties.Publisher != "Microsoft.Azure.Extensions" || *ext.Properties.Type != "CustomScript" ||
		*ext.Properties.TypeHandlerVersion != "2.0" || !*ext.Properties.AutoUpgradeMinorVersion || ext.Properties.ProtectedSettings != nil {
		t.Fatalf("extension %v %+v", ok, ext.Properties)
	}
	boot(t, w)
	n := reg.get("aks-default-a1b2c3")
	if n == nil {
		t.Fatal("no Node registered")
	}
	for k, v := range map[string]string{"kubernetes.azure.com/scalesetpriority": "spot", "kubernetes.azure.com/mode": "user",
		"karpenter.sh/nodepool": "default", "agentpool": "default", "team": "platform"} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "karpenter.sh/unregistered" {
		t.Errorf("taints %v", n.Spec.Taints)
	}
}

// The fake ARM refuses an extension as ARM does: on a VM that does not exist
// (ParentResourceNotFound) or of a handler that does not exist (ArtifactNotFound); and a VM
// booted with AKS's cloud-config but no extension never registers a Node.
func TestExtensionRefusals(t *testing.T) {
	w, _, reg := bootstrappingWorld(t)
	c, err := armcompute.NewVirtualMachineExtensionsClient(sub, &azfake.TokenCredential{}, w.srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	ext := func(publisher, version string) armcompute.VirtualMachineExtension {
		return armcompute.VirtualMachineExtension{Location: to.Ptr("eastus"), Properties: &armcompute.VirtualMachineExtensionProperties{
			Publisher: to.Ptr(publisher), Type: to.Ptr("CustomScript"), TypeHandlerVersion: to.Ptr(version),
			ProtectedSettings: map[string]any{"commandToExecute": "true"}}}
	}
	code := func(err error) string {
		var re *azcore.ResponseError
		if errors.As(err, &re) {
			return re.ErrorCode
		}
		return ""
	}
	if _, err := c.BeginCreateOrUpdate(context.Background(), rg, "aks-missing", "cse-agent-karpenter", ext("Microsoft.Azure.Extensions", "2.0"), nil); code(err) != "ParentResourceNotFound" {
		t.Errorf("missing VM: %v", err)
	}
	if _, err := w.p.Create(context.Background(), request("prod", "default-b", onDemand1)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginCreateOrUpdate(context.Background(), rg, "aks-default-b", "x", ext("Microsoft.Compute", "1.10"), nil); code(err) != "ArtifactNotFound" {
		t.Errorf("unknown handler: %v", err)
	}
	if _, err := c.BeginCreateOrUpdate(context.Background(), rg, "aks-default-b", "x", ext("Microsoft.Azure.Extensions", "1.0"), nil); code(err) != "ArtifactNotFound" {
		t.Errorf("unknown major version: %v", err)
	}
	// A VM of AKS's cloud-config whose extension was never created: it runs, no Node.
	createRaw(t, w, "aks-default-c", "I2Nsb3VkLWNvbmZpZwp3cml0ZV9maWxlczogW10K")
	boot(t, w)
	if reg.get("aks-default-c") != nil {
		t.Error("a VM registered a Node without its provisioning command")
	}
	if reg.get("aks-default-b") == nil {
		t.Error("the provider's VM did not register")
	}
}

// New refuses an unknown mode, and bootstrappingclient without a client, naming the option.
func TestProvisionModeOptions(t *testing.T) {
	for mode, want := range map[string]string{"scriptless": "ProvisionMode", azure.ProvisionModeBootstrappingClient: "NodeBootstrapping"} {
		w := newWorld(t, "prod")
		_, err := azure.New(azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
			Catalog: w.cloud.Catalog(), Credential: &azfake.TokenCredential{}, SSHPublicKey: "k", Bootstrap: azureapi.LocalBootstrap("https://x:443"), ProvisionMode: mode})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
}

// An NVIDIA size's request carries the GPU profile the provider sends (ConstructProvisionValues):
// the converged GRID driver on an A10 size (driverType 2), CUDA on a T4 (3), install on; a size
// without GPUs carries none.
func TestBootstrappingClientGPUProfile(t *testing.T) {
	w, aks, _ := bootstrappingWorld(t)
	answer := aks.Answer
	profiles := map[string]any{}
	aks.Answer = func(body map[string]any) (string, string) {
		prof := body["provisionProfile"].(map[string]any)
		profiles[prof["vmSize"].(string)] = prof["gpuProfile"]
		return answer(body)
	}
	for i, size := range []string{"Standard_NV6ads_A10_v5", "Standard_NC4as_T4_v3", "Standard_D2s_v5"} {
		o := cloud.OfferingRef{InstanceType: size, Zone: "eastus-1", CapacityType: "on-demand"}
		if _, err := w.p.Create(context.Background(), request("prod", fmt.Sprintf("default-g%d", i), o)); err != nil {
			t.Fatalf("%s: %v", size, err)
		}
	}
	want := map[string]any{
		"Standard_NV6ads_A10_v5": map[string]any{"driverType": 2.0, "installGPUDriver": true},
		"Standard_NC4as_T4_v3":   map[string]any{"driverType": 3.0, "installGPUDriver": true},
		"Standard_D2s_v5":        nil,
	}
	if !reflect.DeepEqual(profiles, want) {
		t.Fatalf("gpu profiles %v, want %v", profiles, want)
	}
}
