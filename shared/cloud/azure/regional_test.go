package azure_test

import (
	"context"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

// TestRegionWithoutZones launches in westcentralus, a region without availability zones (the
// recorded Resource SKUs list every size there with no zones): the offering is the regional zone
// "0", the VM is created with no zones (ARM places it), the instance reads back in zone "0", and
// the Node carries topology.kubernetes.io/zone=0 as cloud-provider-azure labels a standalone VM
// with its fault domain (karpenter-provider-azure #1384), so zone spread and pod affinity see one
// domain that matches the plan.
func TestRegionWithoutZones(t *testing.T) {
	cat, err := catalog.AzureRegionCatalog("westcentralus")
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	reg := &fake.NodeRecorder{}
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clk, BootDelay: 10 * time.Second, Registrar: reg})
	srv := azureapi.New(azureapi.Options{Cloud: fc, SubscriptionID: sub, ResourceGroup: rg, Subnets: []string{subnet}})
	p, err := azure.New(azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: rg, Location: "westcentralus", SubnetID: subnet,
		Catalog: cat, Credential: &azfake.TokenCredential{}, ClientOptions: srv.ClientOptions(), SSHPublicKey: "ssh-rsa AAAAB3NzaC1yc2E fake", PollInterval: 10 * time.Millisecond,
		KubernetesVersion: "1.33.2", Bootstrap: azureapi.LocalBootstrap("https://dev-dns-00000000.hcp.westcentralus.azmk8s.io:443")})
	if err != nil {
		t.Fatal(err)
	}
	regional := cloud.OfferingRef{InstanceType: "Standard_D2s_v3", Zone: "0", CapacityType: apisv1.CapacityTypeOnDemand}
	inst, err := p.Create(context.Background(), request("prod", "default-west1", regional))
	if err != nil {
		t.Fatal(err)
	}
	// westcentralus,Standard_D2s_v3 is 0.11 USD/h in the embedded prices.
	if inst.Zone != "0" || inst.InstanceType != "Standard_D2s_v3" || inst.PricePerHour != 0.11 {
		t.Fatalf("instance %+v: want Standard_D2s_v3 in zone 0 at 0.11 USD/h", inst)
	}
	vm, ok := srv.VM("aks-default-west1")
	if !ok || len(vm.Zones) != 0 {
		t.Fatalf("VM %v zones %v: want a VM without zones", ok, vm.Zones)
	}
	clk.Step(10 * time.Second)
	if err := fc.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(reg.Nodes()) != 1 {
		t.Fatalf("%d nodes registered, want 1", len(reg.Nodes()))
	}
	if z := reg.Nodes()[0].Labels[corev1.LabelTopologyZone]; z != "0" {
		t.Errorf("node zone label %q, want 0", z)
	}

	// A zone in a region without zones is not an offering: refused, and the VM not made.
	zonal := cloud.OfferingRef{InstanceType: "Standard_D2s_v3", Zone: "westcentralus-1", CapacityType: apisv1.CapacityTypeOnDemand}
	if _, err := p.Create(context.Background(), request("prod", "default-west2", zonal)); err == nil {
		t.Fatal("a zonal VM in westcentralus was created")
	}
	if _, ok := srv.VM("aks-default-west2"); ok {
		t.Error("the refused VM exists")
	}
}
