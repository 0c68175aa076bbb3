package azure_test

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

// The tests run the real provider through the real SDK clients (armcompute/v7, armnetwork/v8:
// their pipelines, pollers and error handling) against the SDK's own server fakes, answered by
// the fake cloud's Azure face (shared/cloud/fake/azureapi). Only the token is fake
// (azfake.TokenCredential): nothing real can authenticate offline.

const (
	sub    = "00000000-0000-0000-0000-000000000000"
	rg     = "mc_rg-fake-nodes"
	subnet = "/subscriptions/" + sub + "/resourceGroups/rg-fake-vnet/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet"
)

type world struct {
	p     *azure.Provider
	srv   *azureapi.Server
	cloud *fake.Cloud
	clock *clocktesting.FakeClock
}

func newWorld(t *testing.T, cluster string) *world {
	t.Helper()
	return newWorldWith(t, cluster, nil)
}

// newWorldWith is newWorld with the fake ARM's and the provider's options adjusted by setup.
func newWorldWith(t *testing.T, cluster string, setup func(*azureapi.Options, *azure.Options)) *world {
	t.Helper()
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clk, BootDelay: 10 * time.Second})
	ao := azureapi.Options{Cloud: fc, SubscriptionID: sub, ResourceGroup: rg, Subnets: []string{subnet}}
	po := azure.Options{Cluster: cluster, SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
		Catalog: cat, Credential: &azfake.TokenCredential{}, SSHPublicKey: "ssh-rsa AAAAB3NzaC1yc2E fake", PollInterval: 10 * time.Millisecond,
		KubernetesVersion: "1.33.2", Bootstrap: azureapi.LocalBootstrap("https://dev-dns-00000000.hcp.eastus.azmk8s.io:443")}
	if setup != nil {
		setup(&ao, &po)
	}
	srv := azureapi.New(ao)
	if po.ClientOptions == nil {
		po.ClientOptions = srv.ClientOptions()
	}
	p, err := azure.New(po)
	if err != nil {
		t.Fatal(err)
	}
	return &world{p: p, srv: srv, cloud: fc, clock: clk}
}

func aksClass() apisv1.NodeClass {
	family, disk := apisv1.ImageFamilyUbuntu2204, int32(64)
	return apisv1.NodeClassOf(&apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apisv1.AKSNodeClassSpec{ImageFamily: &family, OSDiskSizeGB: &disk, Tags: map[string]string{"team": "platform"}}})
}

func request(cluster, claim string, offs ...cloud.OfferingRef) cloud.LaunchRequest {
	return cloud.LaunchRequest{
		ClientToken: "token-" + claim, Cluster: cluster, NodeClass: aksClass(),
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim}},
		Offerings: offs,
		Labels:    map[string]string{apisv1.LabelNodePool: "default", "team": "platform"},
		Taints:    []corev1.Taint{{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}},
		Tags:      map[string]string{apisv1.TagCluster: cluster, apisv1.TagNodePool: "default", apisv1.TagNodeClaim: claim, "Name": claim, "team": "platform"},
	}
}

var (
	spot1     = cloud.OfferingRef{InstanceType: "Standard_D2s_v5", Zone: "eastus-1", CapacityType: "spot"}
	spot2     = cloud.OfferingRef{InstanceType: "Standard_D2as_v5", Zone: "eastus-2", CapacityType: "spot"}
	onDemand1 = cloud.OfferingRef{InstanceType: "Standard_D2s_v5", Zone: "eastus-1", CapacityType: "on-demand"}
)

func TestCreateSpotVM(t *testing.T) {
	w := newWorld(t, "prod")
	inst, err := w.p.Create(context.Background(), request("prod", "default-a1b2c3", spot1, onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	want := "azure:///subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachines/aks-default-a1b2c3"
	if inst.ID != "aks-default-a1b2c3" || inst.ProviderID != want || inst.InstanceType != "Standard_D2s_v5" || inst.Zone != "eastus-1" ||
		inst.CapacityType != "spot" || inst.State != cloud.StateRunning || inst.PricePerHour <= 0 || inst.Tags[apisv1.TagCluster] != "prod" {
		t.Fatalf("instance %+v", inst)
	}
	vm, ok := w.srv.VM("aks-default-a1b2c3")
	if !ok {
		t.Fatal("no VM")
	}
	p := vm.Properties
	if *p.Priority != armcompute.VirtualMachinePriorityTypesSpot || *p.EvictionPolicy != armcompute.VirtualMachineEvictionPolicyTypesDelete ||
		*p.BillingProfile.MaxPrice != -1 || *vm.Zones[0] != "1" || *p.StorageProfile.OSDisk.DiskSizeGB != 64 ||
		*p.StorageProfile.OSDisk.ManagedDisk.StorageAccountType != armcompute.StorageAccountTypesPremiumLRS ||
		*p.StorageProfile.ImageReference.CommunityGalleryImageID != "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/latest" {
		t.Errorf("VM properties: priority %v, zone %v, disk %v, image %v", *p.Priority, *vm.Zones[0], *p.StorageProfile.OSDisk.DiskSizeGB, *p.StorageProfile.ImageReference.CommunityGalleryImageID)
	}
	for k, v := range map[string]string{"dovetail.dev_cluster": "prod", "karpenter.sh_nodepool": "default", "karpenter.sh_nodeclaim": "default-a1b2c3", "team": "platform"} {
		if val := vm.Tags[k]; val == nil || *val != v {
			t.Errorf("tag %s = %v, want %s", k, val, v)
		}
	}
	nic, ok := w.srv.NIC("aks-default-a1b2c3")
	if !ok || *nic.Properties.IPConfigurations[0].Properties.Subnet.ID != subnet || !*nic.Properties.EnableAcceleratedNetworking {
		t.Errorf("NIC %+v", nic)
	}
	if vm.Properties.OSProfile.CustomData != nil {
		t.Error("a GET returned customData; ARM never does")
	}
}

// TestCustomDataGivesTheKubeletItsLabels renders what the provider sends and reads it back as the
// node image's provisioning does: for an on-demand and a spot Standard_D2s_v5 (2 vCPU, 8 GiB) of
// the Ubuntu2204 family on Azure CNI Overlay, exactly the hand-written labels below, the
// unregistered taint, 250 pods and AKS's kube-reserved for the size (cpu 60+40 = 100m; memory
// 25% of 4 GiB + 20% of 4 GiB = 1024 + 819.2 → 1843Mi).
func TestCustomDataGivesTheKubeletItsLabels(t *testing.T) {
	onDemand := []string{
		"agentpool=default",
		"karpenter.sh/nodepool=default",
		"kubernetes.azure.com/agentpool=default",
		"kubernetes.azure.com/azure-cni-overlay=true",
		"kubernetes.azure.com/cluster=mc_rg-fake-nodes",
		"kubernetes.azure.com/mode=user",
		"kubernetes.azure.com/network-stateless-cni=false",
		"kubernetes.azure.com/network-subnet=aks-subnet",
		"kubernetes.azure.com/node-image-version=AKSUbuntu-2204gen2containerd-latest",
		"kubernetes.azure.com/os-sku=Ubuntu",
		"kubernetes.azure.com/podnetwork-type=overlay",
		"kubernetes.azure.com/role=agent",
		"team=platform",
	}
	spot := append(append([]string(nil), onDemand...), "kubernetes.azure.com/scalesetpriority=spot")
	sort.Strings(spot)
	for _, c := range []struct {
		name string
		off  cloud.OfferingRef
		want []string
	}{{"on-demand", onDemand1, onDemand}, {"spot", spot1, spot}} {
		w := newWorld(t, "prod")
		if _, err := w.p.Create(context.Background(), request("prod", "default-a1b2c3", c.off)); err != nil {
			t.Fatal(err)
		}
		node, err := customdata.Read(renderFor(t, w))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for k, v := range node.Labels {
			got = append(got, k+"="+v)
		}
		sort.Strings(got)
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: kubelet labels\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
		if node.MaxPods != 250 || len(node.Taints) != 1 || node.Taints[0].Key != apisv1.TaintKeyUnregistered ||
			node.Flags["--kube-reserved"] != "cpu=100m,memory=1843Mi" || node.Flags["--eviction-hard"] != "memory.available<750Mi" {
			t.Errorf("%s: kubelet gets %d pods, taints %v, flags %v", c.name, node.MaxPods, node.Taints, node.Flags)
		}
		v := node.Variables
		if v["API_SERVER_NAME"] != "dev-dns-00000000.hcp.eastus.azmk8s.io" || v["NETWORK_PLUGIN"] != "none" || v["RESOURCE_GROUP"] != rg ||
			v["SUBNET"] != "aks-subnet" || v["VIRTUAL_NETWORK"] != "aks-vnet" || v["TENANT_ID"] != azureapi.LocalTenantID {
			t.Errorf("%s: variables %v", c.name, v)
		}
	}
}

// A contract the node image cannot use fails the launch before any VM is made, naming the field.
func TestCreateRefusesABootstrapTheNodeCannotUse(t *testing.T) {
	w := newWorld(t, "prod")
	b := azureapi.LocalBootstrap("https://dev-dns-00000000.hcp.eastus.azmk8s.io:443")
	b.Token = "not-a-token"
	p, err := azure.New(azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
		Catalog: w.cloud.Catalog(), Credential: &azfake.TokenCredential{}, ClientOptions: w.srv.ClientOptions(), SSHPublicKey: "ssh-rsa AAAA fake",
		PollInterval: 10 * time.Millisecond, KubernetesVersion: "1.33.2", Bootstrap: b})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(context.Background(), request("prod", "default-a1b2c3", onDemand1)); err == nil || !strings.Contains(err.Error(), "tlsBootstrapToken") {
		t.Fatalf("err = %v, want one naming tlsBootstrapToken", err)
	}
	if _, ok := w.srv.VM("aks-default-a1b2c3"); ok {
		t.Error("a VM was created")
	}
}

// The providerID is spelled as cloud-node-manager spells it: the resource group in lower case,
// whatever case the provider was configured with (ARM names compare case-insensitively).
func TestProviderIDLowerCasesTheResourceGroup(t *testing.T) {
	got := azure.ProviderID(sub, "MC_rg_Dovetail_eastus", "aks-default-a1b2c3")
	want := "azure:///subscriptions/" + sub + "/resourceGroups/mc_rg_dovetail_eastus/providers/Microsoft.Compute/virtualMachines/aks-default-a1b2c3"
	if got != want {
		t.Errorf("%s, want %s", got, want)
	}
}

// renderFor reads the custom data the VM was created with from the face's record.
func renderFor(t *testing.T, w *world) string {
	t.Helper()
	data, ok := w.srv.CustomData("aks-default-a1b2c3")
	if !ok {
		t.Fatal("no custom data recorded")
	}
	return data
}

func TestCreateIsIdempotentByName(t *testing.T) {
	w := newWorld(t, "prod")
	req := request("prod", "default-a1b2c3", spot1, onDemand1)
	a, err := w.p.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.p.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if a.ProviderID != b.ProviderID || w.cloud.Stats().Launches != 1 || len(w.srv.NICNames()) != 1 {
		t.Fatalf("second delivery: %s vs %s, %d launches, NICs %v", a.ProviderID, b.ProviderID, w.cloud.Stats().Launches, w.srv.NICNames())
	}
	// The VM name is taken by another cluster's VM (same resource group, same NodeClaim name):
	// refused, never adopted.
	staging := newProviderOn(t, w, "staging")
	if _, err := staging.Create(context.Background(), request("staging", "default-x", onDemand1)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.p.Create(context.Background(), request("prod", "default-x", onDemand1)); !errors.Is(err, cloud.ErrIdempotentParameterMismatch) {
		t.Fatalf("VM of another cluster: %v", err)
	}
}

// TestSpotFallsBackToRegular: no spot capacity anywhere (the create operation fails with
// OverconstrainedAllocationRequest, leaving a Failed VM that is cleaned up) → the same Create
// launches a regular VM.
func TestSpotFallsBackToRegular(t *testing.T) {
	w := newWorld(t, "prod")
	if err := w.cloud.InjectICE(fake.Pattern{CapacityType: "spot"}, "OverconstrainedAllocationRequest"); err != nil {
		t.Fatal(err)
	}
	inst, err := w.p.Create(context.Background(), request("prod", "default-a1b2c3", spot1, spot2, onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	vm, _ := w.srv.VM(inst.ID)
	if inst.CapacityType != "on-demand" || *vm.Properties.Priority != armcompute.VirtualMachinePriorityTypesRegular || vm.Properties.EvictionPolicy != nil {
		t.Fatalf("fallback: %+v", inst)
	}
	if s := w.cloud.Stats(); s.ICEs != 2 || s.Launches != 1 {
		t.Errorf("stats %+v: want both spot offerings tried, one launch", s)
	}
}

// TestCapacityErrors: every offering refused → an *InsufficientCapacityError with ARM's codes
// and each class's TTL. The Compute usages show no Spot quota left (lowPriorityCores limit 0), so
// both Spot offerings are refused untried; the regular one fails ZonalAllocationFailed (1 h).
func TestCapacityErrors(t *testing.T) {
	w := newWorldWith(t, "prod", func(ao *azureapi.Options, _ *azure.Options) {
		ao.Quotas = map[string]int32{azureapi.UsageLowPriorityCores: 0}
	})
	if err := w.cloud.InjectICE(fake.Pattern{Zone: "eastus-1"}, "ZonalAllocationFailed"); err != nil {
		t.Fatal(err)
	}
	_, err := w.p.Create(context.Background(), request("prod", "default-a1b2c3", spot1, spot2, onDemand1))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("err %v, want InsufficientCapacityError", err)
	}
	// ZonalAllocationFailed rules out the size in the zone at both priorities: onDemand1 and
	// Standard_D2s_v5/eastus-1/spot, already refused for quota.
	want := map[string]mark{
		spot1.String():     {azure.CodeLowPriorityQuota, azure.LowQuotaTTL},
		spot2.String():     {azure.CodeLowPriorityQuota, azure.LowQuotaTTL},
		onDemand1.String(): {"ZonalAllocationFailed", time.Hour},
	}
	checkMarks(t, ice.Unavailable, want)
	if s := w.cloud.Stats(); s.CreateCalls != 1 {
		t.Errorf("%d VM creates, want 1 (no Spot quota: neither Spot offering is tried)", s.CreateCalls)
	}
	// A non-capacity error is returned as ARM's *azcore.ResponseError, not as capacity.
	bad := request("prod", "default-bad", onDemand1)
	cls := aksClass()
	sub := "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/missing"
	cls.AKS.Spec.VNETSubnetID = &sub
	bad.NodeClass = cls
	w.cloud.ClearICE()
	var re *azcore.ResponseError
	if _, err := w.p.Create(context.Background(), bad); !errors.As(err, &re) || re.ErrorCode != "InvalidResourceReference" || cloud.IsInsufficientCapacity(err) {
		t.Errorf("missing subnet: %v", err)
	}
}

// TestDeleteOnlyClusterTaggedVMs: a VM without the cluster tag, or tagged for another cluster, is
// never deleted.
func TestDeleteOnlyClusterTaggedVMs(t *testing.T) {
	w := newWorld(t, "prod")
	ctx := context.Background()
	mine, err := w.p.Create(ctx, request("prod", "default-mine", onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's VM in the same resource group, made through the same SDK without Dovetail's tags.
	otherP := newProviderOn(t, w, "staging")
	theirs, err := otherP.Create(ctx, request("staging", "default-theirs", onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	untagged := createUntagged(t, w, "jumpbox")
	for _, id := range []string{theirs.ProviderID, untagged} {
		if err := w.p.Delete(ctx, id); !errors.Is(err, cloud.ErrNotOwned) {
			t.Errorf("Delete(%s) = %v, want ErrNotOwned", id, err)
		}
		if inst, err := w.cloud.Get(ctx, id); err != nil || inst.State == cloud.StateShuttingDown {
			t.Errorf("%s was touched: %+v %v", id, inst, err)
		}
	}
	if err := w.p.Delete(ctx, mine.ProviderID); err != nil {
		t.Fatal(err)
	}
	if inst, err := w.p.Get(ctx, mine.ProviderID); err != nil || inst.State != cloud.StateShuttingDown {
		t.Fatalf("after Delete: %+v %v, want shutting-down", inst, err)
	}
	if err := w.cloud.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.p.Get(ctx, mine.ProviderID); !errors.Is(err, cloud.ErrNotFound) {
		t.Fatalf("deleted VM: %v, want ErrNotFound", err)
	}
	if _, ok := w.srv.NIC("aks-default-mine"); ok {
		t.Error("the NIC (deleteOption Delete) outlived its VM")
	}
	list, err := w.p.List(ctx, "prod")
	if err != nil || len(list) != 0 {
		t.Errorf("List(prod) = %v %v", list, err)
	}
	list, err = w.p.List(ctx, "staging")
	if err != nil || len(list) != 1 || list[0].ID != "aks-default-theirs" {
		t.Errorf("List(staging) = %v %v", list, err)
	}
}

func newProviderOn(t *testing.T, w *world, cluster string) *azure.Provider {
	t.Helper()
	p, err := azure.New(azure.Options{Cluster: cluster, SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
		Catalog: w.cloud.Catalog(), Credential: &azfake.TokenCredential{}, ClientOptions: w.srv.ClientOptions(), SSHPublicKey: "ssh-rsa AAAA fake", PollInterval: 10 * time.Millisecond,
		KubernetesVersion: "1.33.2", Bootstrap: azureapi.LocalBootstrap("https://example.invalid")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// createUntagged makes a VM with the raw SDK client, as another tool would, and returns its providerID.
func createUntagged(t *testing.T, w *world, name string) string {
	t.Helper()
	// Another tool's custom data: a script, not an AKS bootstrap contract (ARM takes any).
	return createRaw(t, w, name, base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\necho hello\n")))
}

// createRaw makes a VM with the raw SDK client and the given custom data.
func createRaw(t *testing.T, w *world, name, data string) string {
	t.Helper()
	ctx := context.Background()
	nics, err := armnetwork.NewInterfacesClient(sub, &azfake.TokenCredential{}, w.srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	np, err := nics.BeginCreateOrUpdate(ctx, rg, name, armnetwork.Interface{Location: to.Ptr("eastus"), Properties: &armnetwork.InterfacePropertiesFormat{
		IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr(subnet)}}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nic, err := np.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	nicID := *nic.ID
	c, err := armcompute.NewVirtualMachinesClient(sub, &azfake.TokenCredential{}, w.srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	poller, err := c.BeginCreateOrUpdate(ctx, rg, name, armcompute.VirtualMachine{
		Location: to.Ptr("eastus"), Zones: []*string{to.Ptr("2")},
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes("Standard_D2s_v5"))},
			StorageProfile: &armcompute.StorageProfile{ImageReference: &armcompute.ImageReference{CommunityGalleryImageID: to.Ptr("/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/latest")},
				OSDisk: &armcompute.OSDisk{CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage)}},
			OSProfile: &armcompute.OSProfile{ComputerName: to.Ptr(name), AdminUsername: to.Ptr("azureuser"), CustomData: to.Ptr(data),
				LinuxConfiguration: &armcompute.LinuxConfiguration{SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{KeyData: to.Ptr("ssh-rsa AAAA")}}}}},
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: to.Ptr(nicID)}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	return azure.ProviderID(sub, rg, name)
}

func TestRefusesOtherNodeClassKinds(t *testing.T) {
	w := newWorld(t, "prod")
	req := request("prod", "default-a1b2c3", onDemand1)
	req.NodeClass = apisv1.NodeClassOf(&apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	if _, err := w.p.Create(context.Background(), req); err == nil || !strings.Contains(err.Error(), "EC2NodeClass default is not served by the azure provider") {
		t.Fatalf("EC2NodeClass: %v", err)
	}
	if w.cloud.Stats().CreateCalls != 0 {
		t.Error("launched for an EC2NodeClass")
	}
}

func TestVMName(t *testing.T) {
	if got := azure.VMName("default-a1b2c3d4e5"); got != "aks-default-a1b2c3d4e5" {
		t.Errorf("%s", got)
	}
	long := azure.VMName(strings.Repeat("pool", 20) + "-a1b2c3d4e5")
	if len(long) > 64 || !strings.HasPrefix(long, "aks-poolpool") {
		t.Errorf("long name %q (%d)", long, len(long))
	}
	if azure.NormalizeResourceGroupLabel("MC_rg(x)_aks_eastus_") != "MC_rg-x-_aks_eastus_z" {
		t.Errorf("%s", azure.NormalizeResourceGroupLabel("MC_rg(x)_aks_eastus_"))
	}
}

// The AKSNodeClass fields that reach the kubelet flow into the contract: spec.maxPods,
// spec.kubelet as KUBELET_FLAGS, spec.linuxOSConfig.sysctls as SYSCTL_CONTENT (a sysctl.d file:
// "net.core.somaxconn=16384\nnet.ipv4.tcp_tw_reuse=1\n" in base64), the NodePool's taints as
// --register-with-taints.
func TestNodeClassSettingsReachTheContract(t *testing.T) {
	w := newWorld(t, "prod")
	req := request("prod", "default-a1b2c3", onDemand1)
	nc := req.NodeClass.AKS
	policy, maxPods := "static", int32(50)
	high, low, files, pids := int32(90), int32(70), int32(3), int64(4096)
	somax, reuse := int32(16384), true
	nc.Spec.MaxPods = &maxPods
	nc.Spec.Kubelet = &apisv1.AKSKubeletConfiguration{CPUManagerPolicy: &policy, ImageGCHighThresholdPercent: &high, ImageGCLowThresholdPercent: &low,
		ContainerLogMaxFiles: &files, PodPidsLimit: &pids, AllowedUnsafeSysctls: []string{"net.core.somaxconn"}}
	nc.Spec.LinuxOSConfig = &apisv1.AKSLinuxOSConfig{Sysctls: &apisv1.AKSSysctls{NetCoreSomaxconn: &somax, NetIPv4TCPTwReuse: &reuse}}
	req.Taints = append(req.Taints, corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	if _, err := w.p.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	node, err := customdata.Read(renderFor(t, w))
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"--max-pods": "50", "--cpu-manager-policy": "static", "--image-gc-high-threshold": "90",
		"--image-gc-low-threshold": "70", "--container-log-max-files": "3", "--pod-max-pids": "4096",
		"--allowed-unsafe-sysctls": "net.core.somaxconn", "--register-with-taints": "karpenter.sh/unregistered:NoExecute,gpu=true:NoSchedule"} {
		if node.Flags[flag] != want {
			t.Errorf("%s = %q, want %q", flag, node.Flags[flag], want)
		}
	}
	if got := node.Variables["SYSCTL_CONTENT"]; got != "bmV0LmNvcmUuc29tYXhjb25uPTE2Mzg0Cm5ldC5pcHY0LnRjcF90d19yZXVzZT0xCg==" {
		t.Errorf("SYSCTL_CONTENT = %s", got)
	}
}
