package azure_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

const (
	kubeletIdentity = "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/dev-agentpool"
	lbKubernetes    = "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/loadBalancers/kubernetes"
	clusterNSG      = "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/networkSecurityGroups/aks-agentpool-00000000-nsg"
	managedSubnet   = "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet"
)

// getNIC reads a NIC back through the SDK, as any ARM client sees it.
func getNIC(t *testing.T, w *world, name string) armnetwork.Interface {
	t.Helper()
	c, err := armnetwork.NewInterfacesClient(sub, &azfake.TokenCredential{}, w.srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(context.Background(), rg, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got.Interface
}

func getVM(t *testing.T, w *world, name string) armcompute.VirtualMachine {
	t.Helper()
	c, err := armcompute.NewVirtualMachinesClient(sub, &azfake.TokenCredential{}, w.srv.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(context.Background(), rg, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got.VirtualMachine
}

// TestNICJoinsTheClusterNetworkAndVMCarriesTheKubeletIdentity: on a cluster with the default
// outboundType=loadBalancer, the node's NIC is in the "kubernetes" load balancer's inbound
// ("kubernetes") and outbound ("aksOutboundBackendPool") backend pools, carries the cluster's
// agent pool NSG because the subnet is the user's (BYO VNet), and the VM carries the kubelet
// user-assigned identity: read back through the SDK from the fake ARM.
func TestNICJoinsTheClusterNetworkAndVMCarriesTheKubeletIdentity(t *testing.T) {
	w := newWorldWith(t, "prod", func(ao *azureapi.Options, po *azure.Options) {
		ao.Identities = map[string]bool{kubeletIdentity: true}
		po.KubeletIdentityID = kubeletIdentity
	})
	inst, err := w.p.Create(context.Background(), request("prod", "default-net", onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	nic := getNIC(t, w, inst.ID)
	ipcs := nic.Properties.IPConfigurations
	if len(ipcs) != 1 || !*ipcs[0].Properties.Primary {
		t.Fatalf("%d IP configurations, want the primary only (overlay: pod IPs are not the subnet's)", len(ipcs))
	}
	var pools []string
	for _, p := range ipcs[0].Properties.LoadBalancerBackendAddressPools {
		pools = append(pools, *p.ID)
	}
	want := []string{lbKubernetes + "/backendAddressPools/aksOutboundBackendPool", lbKubernetes + "/backendAddressPools/kubernetes"}
	if strings.Join(pools, ",") != strings.Join(want, ",") {
		t.Errorf("backend pools %v, want %v", pools, want)
	}
	if nic.Properties.NetworkSecurityGroup == nil || *nic.Properties.NetworkSecurityGroup.ID != clusterNSG {
		t.Errorf("NSG %+v, want %s on a NIC in a BYO subnet", nic.Properties.NetworkSecurityGroup, clusterNSG)
	}
	vm := getVM(t, w, inst.ID)
	if vm.Identity == nil || *vm.Identity.Type != armcompute.ResourceIdentityTypeUserAssigned || len(vm.Identity.UserAssignedIdentities) != 1 {
		t.Fatalf("VM identity %+v, want the kubelet identity only", vm.Identity)
	}
	if _, ok := vm.Identity.UserAssignedIdentities[kubeletIdentity]; !ok {
		t.Errorf("VM identities %v, want %s", vm.Identity.UserAssignedIdentities, kubeletIdentity)
	}
}

// TestManagedVNetNICHasNoNSGAndOtherOutboundTypesJoinNoPool: a NIC in the AKS-managed
// aks-vnet-<8 digits>/aks-subnet of the node resource group carries no NSG (AKS puts it on the
// subnet), and with no "kubernetes" load balancer (outboundType userDefinedRouting or a NAT
// gateway) it joins no pool; an internal load balancer's pools are joined, its IPv6 pools not.
func TestManagedVNetNICHasNoNSGAndOtherOutboundTypesJoinNoPool(t *testing.T) {
	w := newWorldWith(t, "prod", func(ao *azureapi.Options, po *azure.Options) {
		ao.Subnets = []string{managedSubnet}
		ao.Network = &azureapi.Network{LoadBalancers: map[string][]string{"kubernetes-internal": {"kubernetes", "kubernetes-ipv6"}, "someone-elses": {"pool"}}}
		po.SubnetID = managedSubnet
	})
	inst, err := w.p.Create(context.Background(), request("prod", "default-net", onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	nic := getNIC(t, w, inst.ID)
	if nic.Properties.NetworkSecurityGroup != nil {
		t.Errorf("NSG %s on a NIC of the managed VNet", *nic.Properties.NetworkSecurityGroup.ID)
	}
	pools := nic.Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools
	if len(pools) != 1 || !strings.HasSuffix(*pools[0].ID, "/loadBalancers/kubernetes-internal/backendAddressPools/kubernetes") {
		t.Errorf("pools %v, want the internal load balancer's IPv4 pool only", pools)
	}
}

// TestNodeSubnetNICCarriesPodIPs: Azure CNI in node-subnet mode hands pods IPs of the node's
// subnet from the NIC's secondary IP configurations: maxPods-1 of them (30 pods by default:
// ipconfig1…ipconfig29, not primary, in the node's subnet, in no backend pool), beside the primary.
func TestNodeSubnetNICCarriesPodIPs(t *testing.T) {
	w := newWorldWith(t, "prod", func(_ *azureapi.Options, po *azure.Options) { po.NetworkPlugin = catalog.AKSNetworkNodeSubnet })
	inst, err := w.p.Create(context.Background(), request("prod", "default-cni", onDemand1))
	if err != nil {
		t.Fatal(err)
	}
	ipcs := getNIC(t, w, inst.ID).Properties.IPConfigurations
	if len(ipcs) != 30 {
		t.Fatalf("%d IP configurations, want 30 (maxPods)", len(ipcs))
	}
	for i, c := range ipcs[1:] {
		if want := "ipconfig" + itoa(i+1); *c.Name != want || *c.Properties.Primary || *c.Properties.Subnet.ID != subnet || len(c.Properties.LoadBalancerBackendAddressPools) != 0 {
			t.Fatalf("IP configuration %d: %s primary=%v subnet=%s pools=%d, want %s, secondary, in %s, in no pool", i+1, *c.Name, *c.Properties.Primary,
				*c.Properties.Subnet.ID, len(c.Properties.LoadBalancerBackendAddressPools), want, subnet)
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// TestARMRefusesWhatARMRefuses: the fake ARM refuses, with ARM's codes, a NIC in a subnet or
// backend pool that does not exist (400 InvalidResourceReference), a VM with a kubelet identity
// that does not exist (400 FailedIdentityOperation) or that the launch identity may not assign
// (403 LinkedAuthorizationFailed); the provider returns each as it is, not as capacity, and
// leaves no NIC behind.
func TestARMRefusesWhatARMRefuses(t *testing.T) {
	ctx := context.Background()
	code := func(err error) string {
		var re *azcore.ResponseError
		if !errors.As(err, &re) {
			if err == nil {
				return "no error"
			}
			return "no ARM error: " + err.Error()
		}
		return re.ErrorCode
	}
	t.Run("pool", func(t *testing.T) {
		w := newWorld(t, "prod")
		c, err := armnetwork.NewInterfacesClient(sub, &azfake.TokenCredential{}, w.srv.ClientOptions())
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.BeginCreateOrUpdate(ctx, rg, "nic-nopool", armnetwork.Interface{Location: to.Ptr("eastus"), Properties: &armnetwork.InterfacePropertiesFormat{
			IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet:                          &armnetwork.Subnet{ID: to.Ptr(subnet)},
				LoadBalancerBackendAddressPools: []*armnetwork.BackendAddressPool{{ID: to.Ptr(lbKubernetes + "/backendAddressPools/missing")}}}}}}}, nil)
		if got := code(err); got != "InvalidResourceReference" {
			t.Errorf("NIC in a missing backend pool: %s", got)
		}
	})
	t.Run("subnet", func(t *testing.T) {
		w := newWorldWith(t, "prod", func(_ *azureapi.Options, po *azure.Options) {
			po.SubnetID = "/subscriptions/" + sub + "/resourceGroups/rg-fake-vnet/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/gone"
		})
		_, err := w.p.Create(ctx, request("prod", "default-x", onDemand1))
		if got := code(err); got != "InvalidResourceReference" || cloud.IsInsufficientCapacity(err) {
			t.Errorf("launch into a missing subnet: %s (%v)", got, err)
		}
	})
	for _, tc := range []struct {
		name       string
		identities map[string]bool
		want       string
	}{{"identity missing", nil, "FailedIdentityOperation"}, {"identity not assignable", map[string]bool{kubeletIdentity: false}, "LinkedAuthorizationFailed"}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorldWith(t, "prod", func(ao *azureapi.Options, po *azure.Options) {
				ao.Identities = tc.identities
				po.KubeletIdentityID = kubeletIdentity
			})
			_, err := w.p.Create(ctx, request("prod", "default-id", spot1, onDemand1))
			if got := code(err); got != tc.want || cloud.IsInsufficientCapacity(err) {
				t.Errorf("got %s (%v), want %s", got, err, tc.want)
			}
			if nics := w.srv.NICNames(); len(nics) != 0 {
				t.Errorf("NICs left behind: %v", nics)
			}
			if w.cloud.Stats().CreateCalls != 0 {
				t.Error("a VM ran")
			}
		})
	}
	t.Run("no cluster NSG for a BYO subnet", func(t *testing.T) {
		w := newWorldWith(t, "prod", func(ao *azureapi.Options, _ *azure.Options) {
			ao.Network = &azureapi.Network{LoadBalancers: map[string][]string{"kubernetes": {"kubernetes"}}}
		})
		_, err := w.p.Create(ctx, request("prod", "default-x", onDemand1))
		if err == nil || !strings.Contains(err.Error(), "want one aks-agentpool-<8 digits>-nsg") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("identity id", func(t *testing.T) {
		_, err := azure.New(azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", Catalog: newWorld(t, "prod").cloud.Catalog(),
			Credential: &azfake.TokenCredential{}, SSHPublicKey: "k", Bootstrap: azureapi.LocalBootstrap("https://x"), KubeletIdentityID: "dev-agentpool"})
		if err == nil || !strings.Contains(err.Error(), "Options.KubeletIdentityID") {
			t.Errorf("err %v", err)
		}
	})
}
