package azure_test

import (
	"context"
	"errors"
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
		Bootstrap: azure.Bootstrap{APIServer: "https://dev-dns-00000000.hcp.eastus.azmk8s.io:443", CA: "Y2E=", Token: "abcdef.0123456789abcdef"}}
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
// node does: the request's labels and taints plus AKS bootstrapping's own, and maxPods.
func TestCustomDataGivesTheKubeletItsLabels(t *testing.T) {
	w := newWorld(t, "prod")
	if _, err := w.p.Create(context.Background(), request("prod", "default-a1b2c3", onDemand1)); err != nil {
		t.Fatal(err)
	}
	recs := w.cloud.Records()
	if len(recs) != 1 {
		t.Fatalf("%d instances", len(recs))
	}
	labels := map[string]string{apisv1.LabelNodePool: "default", "team": "platform", "kubernetes.azure.com/role": "agent",
		apisv1.AKSLabelCluster: rg, apisv1.AKSLabelOSSKU: "Ubuntu"}
	node, err := customdata.Parse(renderFor(t, w))
	if err != nil {
		t.Fatal(err)
	}
	if len(node.Labels) != len(labels) || node.MaxPods != 250 || len(node.Taints) != 1 || node.Taints[0].Key != apisv1.TaintKeyUnregistered {
		t.Fatalf("kubelet gets %+v, want labels %v, 250 pods, the unregistered taint", node, labels)
	}
	for k, v := range labels {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
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
		Bootstrap: azure.Bootstrap{APIServer: "https://example.invalid"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// createUntagged makes a VM with the raw SDK client, as another tool would, and returns its providerID.
func createUntagged(t *testing.T, w *world, name string) string {
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
	data, _ := customdata.Render(customdata.Spec{APIServer: "https://example.invalid", MaxPods: 30})
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
