package azure_test

import (
	"context"
	"errors"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
)

// TestNoNICLeftWhenEveryOfferingFails: a launch whose every VM create fails, refused at once by
// the PUT (SkuNotAvailable) or at the end of the operation (ZonalAllocationFailed,
// AllocationFailed), leaves no network interface behind.
func TestNoNICLeftWhenEveryOfferingFails(t *testing.T) {
	for _, code := range []string{"SkuNotAvailable", "ZonalAllocationFailed", "AllocationFailed"} {
		t.Run(code, func(t *testing.T) {
			w := newWorld(t, "prod")
			if err := w.cloud.InjectICE(fake.Pattern{}, code); err != nil {
				t.Fatal(err)
			}
			_, err := w.p.Create(context.Background(), request("prod", "default-leak", spot1, spot2, onDemand1))
			if !cloud.IsInsufficientCapacity(err) {
				t.Fatalf("err %v, want insufficient capacity", err)
			}
			if s := w.cloud.Stats(); s.CreateCalls == 0 {
				t.Fatal("no VM create was attempted")
			}
			if nics := w.srv.NICNames(); len(nics) != 0 {
				t.Errorf("NICs left behind: %v", nics)
			}
		})
	}
}

// TestNoNICWithoutAVMCreate: offerings the provider cannot try (unknown size, reserved) make no
// NIC at all.
func TestNoNICWithoutAVMCreate(t *testing.T) {
	w := newWorld(t, "prod")
	_, err := w.p.Create(context.Background(), request("prod", "default-none",
		cloud.OfferingRef{InstanceType: "Standard_Nope_v9", Zone: "eastus-1", CapacityType: "on-demand"},
		cloud.OfferingRef{InstanceType: "Standard_D2s_v5", Zone: "eastus-1", CapacityType: "reserved"}))
	if !cloud.IsInsufficientCapacity(err) {
		t.Fatalf("err %v", err)
	}
	if nics := w.srv.NICNames(); len(nics) != 0 {
		t.Errorf("NICs %v, want none", nics)
	}
}

// TestLeftovers: only unattached NICs tagged for the cluster are leftovers (with the creation time
// the provider tagged them with); DeleteLeftover deletes those and refuses another cluster's NIC
// and one a VM uses.
func TestLeftovers(t *testing.T) {
	w := newWorld(t, "prod")
	ctx := context.Background()
	created := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	leaked := makeNIC(t, w, "aks-default-leaked", map[string]*string{"dovetail.dev_cluster": to.Ptr("prod"), "dovetail.dev_created": to.Ptr(created.Format(time.RFC3339))})
	foreign := makeNIC(t, w, "aks-other-leaked", map[string]*string{"dovetail.dev_cluster": to.Ptr("staging")})
	untagged := makeNIC(t, w, "someone-elses", nil)
	inst, err := w.p.Create(ctx, request("prod", "default-live", onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.p.Leftovers(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != leaked || !got[0].Created.Equal(created) || got[0].Kind != azure.KindNetworkInterface || got[0].Tags[apisv1.TagCluster] != "prod" {
		t.Fatalf("leftovers %+v, want only %s created %s", got, leaked, created)
	}
	live, _ := w.srv.NIC(inst.ID)
	for _, id := range []string{foreign, untagged, *live.ID} {
		if err := w.p.DeleteLeftover(ctx, id); !errors.Is(err, cloud.ErrNotOwned) {
			t.Errorf("DeleteLeftover(%s) = %v, want ErrNotOwned", id, err)
		}
	}
	if err := w.p.DeleteLeftover(ctx, leaked); err != nil {
		t.Fatal(err)
	}
	if err := w.p.DeleteLeftover(ctx, leaked); err != nil {
		t.Errorf("deleting a NIC already gone: %v", err)
	}
	want := []string{"aks-default-live", "aks-other-leaked", "someone-elses"}
	if nics := w.srv.NICNames(); len(nics) != 3 || nics[0] != want[0] || nics[1] != want[1] || nics[2] != want[2] {
		t.Errorf("NICs %v, want %v", nics, want)
	}
	// The live VM's NIC carries the provider's creation tag from its clock.
	if v := live.Tags["dovetail.dev_created"]; v == nil || *v == "" {
		t.Error("the NIC of a launch has no dovetail.dev_created tag")
	}
}

// makeNIC creates a NIC with the raw SDK client and returns its ARM id.
func makeNIC(t *testing.T, w *world, name string, tags map[string]*string) string {
	t.Helper()
	ctx := context.Background()
	nics, err := armnetwork.NewInterfacesClient(sub, &azfake.TokenCredential{}, w.srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	np, err := nics.BeginCreateOrUpdate(ctx, rg, name, armnetwork.Interface{Location: to.Ptr("eastus"), Tags: tags, Properties: &armnetwork.InterfacePropertiesFormat{
		IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr(subnet)}}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nic, err := np.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return *nic.ID
}

const pollFast = 10 * time.Millisecond

func (w *world) cred() *azfake.TokenCredential { return &azfake.TokenCredential{} }
