package azureapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

const sub = "00000000-0000-0000-0000-000000000000"

// A call on a resource group that does not exist is 404 ResourceGroupNotFound, a List included
// (not an empty list), and a missing resource in the group is 404 ResourceNotFound (Azure
// Resource Manager docs, "Resolve resource not found errors"). The fake answered every GET
// ResourceNotFound, listed nothing, and deleted a NIC of the same name in its own group.
func TestMissingResourceGroupIsNotAnEmptyGroup(t *testing.T) {
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	srv := azureapi.New(azureapi.Options{Cloud: fake.New(fake.Options{Catalog: cat, Cluster: "prod"}), SubscriptionID: sub, ResourceGroup: "rg-nodes"})
	vms, err := armcompute.NewVirtualMachinesClient(sub, &azfake.TokenCredential{}, srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	nics, err := armnetwork.NewInterfacesClient(sub, &azfake.TokenCredential{}, srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	code := func(err error) string {
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
			return "not a 404: " + errString(err)
		}
		return re.ErrorCode
	}
	_, err = vms.Get(ctx, "rg-other", "vm1", nil)
	if got := code(err); got != "ResourceGroupNotFound" {
		t.Errorf("GET a VM in a missing group: %s", got)
	}
	_, err = vms.Get(ctx, "rg-nodes", "vm1", nil)
	if got := code(err); got != "ResourceNotFound" {
		t.Errorf("GET a missing VM: %s", got)
	}
	_, err = vms.NewListPager("rg-other", nil).NextPage(ctx)
	if got := code(err); got != "ResourceGroupNotFound" {
		t.Errorf("List VMs of a missing group: %s", got)
	}
	if page, err := vms.NewListPager("rg-nodes", nil).NextPage(ctx); err != nil || len(page.Value) != 0 {
		t.Errorf("List VMs of the empty group: %+v %v, want an empty list", page, err)
	}
	_, err = nics.NewListPager("rg-other", nil).NextPage(ctx)
	if got := code(err); got != "ResourceGroupNotFound" {
		t.Errorf("List NICs of a missing group: %s", got)
	}
	_, err = nics.Get(ctx, "rg-other", "nic1", nil)
	if got := code(err); got != "ResourceGroupNotFound" {
		t.Errorf("GET a NIC in a missing group: %s", got)
	}
	_, err = nics.BeginDelete(ctx, "rg-other", "nic1", nil)
	if got := code(err); got != "ResourceGroupNotFound" {
		t.Errorf("DELETE a NIC in a missing group: %s", got)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
