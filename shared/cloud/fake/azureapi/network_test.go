package azureapi_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

const subnetA = "/subscriptions/" + sub + "/resourceGroups/rg-vnet/providers/Microsoft.Network/virtualNetworks/vnet-a/subnets/nodes"
const subnetB = "/subscriptions/" + sub + "/resourceGroups/rg-vnet/providers/Microsoft.Network/virtualNetworks/vnet-b/subnets/nodes"

func newServer(t *testing.T, o azureapi.Options) *azureapi.Server {
	t.Helper()
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	o.Cloud = fake.New(fake.Options{Catalog: cat, Cluster: "prod"})
	o.SubscriptionID, o.ResourceGroup = sub, "rg-nodes"
	return azureapi.New(o)
}

func ipc(name string, primary bool, subnet string) *armnetwork.InterfaceIPConfiguration {
	return &armnetwork.InterfaceIPConfiguration{Name: to.Ptr(name), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
		Primary: to.Ptr(primary), Subnet: &armnetwork.Subnet{ID: to.Ptr(subnet)}}}
}

// TestNICIPConfigurationRules: ARM's rules on a NIC's IP configurations, each refused as a bad
// request (never a capacity code): at most 256 (Azure "Networking limits"), one primary among
// several, one virtual network; 256 with one primary are accepted.
func TestNICIPConfigurationRules(t *testing.T) {
	srv := newServer(t, azureapi.Options{Subnets: []string{subnetA, subnetB}})
	c, err := armnetwork.NewInterfacesClient(sub, &azfake.TokenCredential{}, srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	many := func(n int) []*armnetwork.InterfaceIPConfiguration {
		out := []*armnetwork.InterfaceIPConfiguration{ipc("primary", true, subnetA)}
		for i := 1; i < n; i++ {
			out = append(out, ipc(fmt.Sprintf("ipconfig%d", i), false, subnetA))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ipcs []*armnetwork.InterfaceIPConfiguration
		want string
	}{
		{"256", many(256), ""},
		{"257", many(257), "IPConfigurationCountLimitReached"},
		{"two primaries", []*armnetwork.InterfaceIPConfiguration{ipc("a", true, subnetA), ipc("b", true, subnetA)}, "OnePrimaryIPConfigurationRequired"},
		{"two vnets", []*armnetwork.InterfaceIPConfiguration{ipc("a", true, subnetA), ipc("b", false, subnetB)}, "IPConfigurationsInDifferentVirtualNetworks"},
		{"repeated name", []*armnetwork.InterfaceIPConfiguration{ipc("a", true, subnetA), ipc("A", false, subnetA)}, "InvalidRequestFormat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.BeginCreateOrUpdate(context.Background(), "rg-nodes", "nic-"+strings.ReplaceAll(tc.name, " ", "-"),
				armnetwork.Interface{Location: to.Ptr("eastus"), Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: tc.ipcs}}, nil)
			var re *azcore.ResponseError
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!errors.As(err, &re) || re.ErrorCode != tc.want || re.StatusCode != http.StatusBadRequest):
				t.Errorf("err %v, want 400 %s", err, tc.want)
			}
		})
	}
}

// TestUsagesAndQuotaRefusal: the Compute usages list the quotas with the vCPUs live VMs hold
// (regular VMs count against "cores" and their family, Spot VMs against "lowPriorityCores"), and
// a create past a limit is 409 OperationNotAllowed with ARM's message, its numbers included, in
// the response body the SDK reads.
func TestUsagesAndQuotaRefusal(t *testing.T) {
	srv := newServer(t, azureapi.Options{Subnets: []string{subnetA}, Quotas: map[string]int32{"cores": 10, "lowPriorityCores": 4, "standardDSv5Family": 6}})
	ctx := context.Background()
	nics, _ := armnetwork.NewInterfacesClient(sub, &azfake.TokenCredential{}, srv.ClientOptions())
	vms, _ := armcompute.NewVirtualMachinesClient(sub, &azfake.TokenCredential{}, srv.ClientOptions())
	usages, _ := armcompute.NewUsageClient(sub, &azfake.TokenCredential{}, srv.ClientOptions())
	launch := func(name, size string, spot bool) error {
		np, err := nics.BeginCreateOrUpdate(ctx, "rg-nodes", name, armnetwork.Interface{Location: to.Ptr("eastus"),
			Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{ipc("ipconfig1", true, subnetA)}}}, nil)
		if err != nil {
			return err
		}
		nic, err := np.PollUntilDone(ctx, nil)
		if err != nil {
			return err
		}
		vm := testVM(size, *nic.ID, name)
		if spot {
			vm.Properties.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
			vm.Properties.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
			vm.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(-1.0)}
		}
		p, err := vms.BeginCreateOrUpdate(ctx, "rg-nodes", name, vm, nil)
		if err != nil {
			return err
		}
		_, err = p.PollUntilDone(ctx, nil)
		return err
	}
	if err := launch("vm-a", "Standard_D4s_v5", false); err != nil {
		t.Fatal(err)
	}
	if err := launch("vm-b", "Standard_D2as_v5", true); err != nil {
		t.Fatal(err)
	}
	page, err := usages.NewListPager("eastus", nil).NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range page.Value {
		got[*u.Name.Value] = fmt.Sprintf("%d/%d %s %s", *u.CurrentValue, *u.Limit, *u.Unit, *u.Name.LocalizedValue)
	}
	want := map[string]string{"cores": "4/10 Count Total Regional vCPUs", "lowPriorityCores": "2/4 Count Total Regional Low-priority vCPUs",
		"standardDSv5Family": "4/6 Count Standard DSv5 Family vCPUs"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("usages %v, want %v", got, want)
	}
	// 4 + 4 > 6: the family quota refuses a second D4s_v5.
	err = launch("vm-c", "Standard_D4s_v5", false)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusConflict || re.ErrorCode != "OperationNotAllowed" ||
		!strings.Contains(err.Error(), "exceeding approved standardDSv5Family Cores quota") ||
		!strings.Contains(err.Error(), "Current Limit: 6, Current Usage: 4, Additional Required: 4, (Minimum) New Limit Required: 8.") {
		t.Errorf("err %v, want 409 OperationNotAllowed naming the family quota and its numbers", err)
	}
}

// testVM is a regular VM of size in zone 1 booting the AKS Ubuntu 22.04 gen2 image.
func testVM(size, nicID, name string) armcompute.VirtualMachine {
	// ARM stores custom data without reading it (the node image does), so these ARM checks need
	// none that boots a node: a script that does nothing.
	data := base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\n"))
	return armcompute.VirtualMachine{
		Location: to.Ptr("eastus"), Zones: []*string{to.Ptr("1")},
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes(size))},
			StorageProfile: &armcompute.StorageProfile{ImageReference: &armcompute.ImageReference{CommunityGalleryImageID: to.Ptr("/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/latest")},
				OSDisk: &armcompute.OSDisk{CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage)}},
			OSProfile: &armcompute.OSProfile{ComputerName: to.Ptr(name), AdminUsername: to.Ptr("azureuser"), CustomData: to.Ptr(data),
				LinuxConfiguration: &armcompute.LinuxConfiguration{SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{KeyData: to.Ptr("ssh-rsa AAAA")}}}}},
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: to.Ptr(nicID)}}},
		},
	}
}
