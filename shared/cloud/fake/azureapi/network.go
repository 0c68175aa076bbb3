package azureapi

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"
	networkfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8/fake"
)

// Network is what the node resource group holds besides VMs and NICs: the cluster's load
// balancers and network security groups, by name.
type Network struct {
	// LoadBalancers are the load balancers of the node resource group, each with the names of its
	// backend address pools.
	LoadBalancers map[string][]string
	// SecurityGroups are the names of the network security groups of the node resource group.
	SecurityGroups []string
}

// Names AKS gives what it creates in the node resource group of a cluster with the default
// outboundType=loadBalancer: the Standard load balancer "kubernetes" with the inbound pool
// "kubernetes" and the outbound pool "aksOutboundBackendPool", and the agent pool NSG
// "aks-agentpool-<8 digits>-nsg" (karpenter-provider-azure pkg/providers/loadbalancer SLBName,
// SLBInboundBackendPoolName, SLBOutboundBackendPoolName; pkg/providers/networksecuritygroup
// managedNSGRegex).
const (
	LoadBalancerKubernetes = "kubernetes"
	PoolKubernetes         = "kubernetes"
	PoolOutbound           = "aksOutboundBackendPool"
	DefaultSecurityGroup   = "aks-agentpool-00000000-nsg"
)

// DefaultNetwork is a cluster's node resource group as AKS creates it with outboundType
// loadBalancer: the Options.Network of a Server that gives none.
func DefaultNetwork() *Network {
	return &Network{LoadBalancers: map[string][]string{LoadBalancerKubernetes: {PoolKubernetes, PoolOutbound}}, SecurityGroups: []string{DefaultSecurityGroup}}
}

// MaxIPConfigurations is the number of IP configurations a network interface may carry (Azure
// "Networking limits": private IP addresses per network interface, 256).
const MaxIPConfigurations = 256

func (s *Server) loadBalancers() networkfake.LoadBalancersServer {
	return networkfake.LoadBalancersServer{NewListPager: s.listLoadBalancers}
}

func (s *Server) securityGroups() networkfake.SecurityGroupsServer {
	return networkfake.SecurityGroupsServer{NewListPager: s.listSecurityGroups}
}

func lbID(sub, rg, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s", sub, rg, name)
}

func nsgID(sub, rg, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/networkSecurityGroups/%s", sub, rg, name)
}

// listLoadBalancers lists the node resource group's load balancers with their backend pools, as
// LoadBalancers.List returns them (one page; a missing group is ResourceGroupNotFound).
func (s *Server) listLoadBalancers(rg string, _ *armnetwork.LoadBalancersClientListOptions) (resp azfake.PagerResponder[armnetwork.LoadBalancersClientListResponse]) {
	if !s.rgOK(rg) {
		resp.AddResponseError(http.StatusNotFound, codeRGNotFound)
		return
	}
	names := make([]string, 0, len(s.o.Network.LoadBalancers))
	for n := range s.o.Network.LoadBalancers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*armnetwork.LoadBalancer
	for _, n := range names {
		id := lbID(s.o.SubscriptionID, s.o.ResourceGroup, n)
		lb := &armnetwork.LoadBalancer{ID: to.Ptr(id), Name: to.Ptr(n), Location: to.Ptr(s.region), Type: to.Ptr("Microsoft.Network/loadBalancers"),
			Properties: &armnetwork.LoadBalancerPropertiesFormat{ProvisioningState: to.Ptr(armnetwork.ProvisioningStateSucceeded)}}
		for _, pool := range s.o.Network.LoadBalancers[n] {
			lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, &armnetwork.BackendAddressPool{
				ID: to.Ptr(id + "/backendAddressPools/" + pool), Name: to.Ptr(pool), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}})
		}
		out = append(out, lb)
	}
	resp.AddPage(http.StatusOK, armnetwork.LoadBalancersClientListResponse{LoadBalancerListResult: armnetwork.LoadBalancerListResult{Value: out}}, nil)
	return
}

func (s *Server) listSecurityGroups(rg string, _ *armnetwork.SecurityGroupsClientListOptions) (resp azfake.PagerResponder[armnetwork.SecurityGroupsClientListResponse]) {
	if !s.rgOK(rg) {
		resp.AddResponseError(http.StatusNotFound, codeRGNotFound)
		return
	}
	names := append([]string(nil), s.o.Network.SecurityGroups...)
	sort.Strings(names)
	var out []*armnetwork.SecurityGroup
	for _, n := range names {
		out = append(out, &armnetwork.SecurityGroup{ID: to.Ptr(nsgID(s.o.SubscriptionID, s.o.ResourceGroup, n)), Name: to.Ptr(n), Location: to.Ptr(s.region),
			Type: to.Ptr("Microsoft.Network/networkSecurityGroups"), Properties: &armnetwork.SecurityGroupPropertiesFormat{ProvisioningState: to.Ptr(armnetwork.ProvisioningStateSucceeded)}})
	}
	resp.AddPage(http.StatusOK, armnetwork.SecurityGroupsClientListResponse{SecurityGroupListResult: armnetwork.SecurityGroupListResult{Value: out}}, nil)
	return
}

// poolExists reports whether id names a backend pool of a load balancer of the node resource group.
func (s *Server) poolExists(id string) bool {
	for lb, pools := range s.o.Network.LoadBalancers {
		for _, p := range pools {
			if strings.EqualFold(id, lbID(s.o.SubscriptionID, s.o.ResourceGroup, lb)+"/backendAddressPools/"+p) {
				return true
			}
		}
	}
	return false
}

func (s *Server) securityGroupExists(id string) bool {
	for _, n := range s.o.Network.SecurityGroups {
		if strings.EqualFold(id, nsgID(s.o.SubscriptionID, s.o.ResourceGroup, n)) {
			return true
		}
	}
	return false
}

// checkIPConfigurations validates a NIC's IP configurations as Microsoft.Network does. A
// missing subnet, backend pool or NSG is 400 "InvalidResourceReference" (ARM, "Resolve resource
// not found errors": a resource referenced by another that does not exist). The other rules are
// documented limits whose exact error code the docs do not give, so the fake names its own (the
// provider treats every one as a bad request, never as capacity): at most MaxIPConfigurations
// (Azure "Networking limits"), unique names, exactly one primary among several, and every IP
// configuration in the same virtual network (Virtual Network docs, "Configure IP addresses for
// an Azure network interface").
func (s *Server) checkIPConfigurations(nic *armnetwork.Interface) *armError {
	ipcs := nic.Properties.IPConfigurations
	if len(ipcs) > MaxIPConfigurations {
		return &armError{http.StatusBadRequest, "IPConfigurationCountLimitReached", fmt.Sprintf("%d IP configurations on one network interface; the limit is %d", len(ipcs), MaxIPConfigurations)}
	}
	names := map[string]bool{}
	primaries := 0
	vnet := ""
	for i, ipc := range ipcs {
		name := strings.ToLower(val(ipc.Name))
		if name == "" || names[name] {
			return &armError{http.StatusBadRequest, "InvalidRequestFormat", fmt.Sprintf("ipConfigurations[%d].name %q is empty or repeated", i, val(ipc.Name))}
		}
		names[name] = true
		if ipc.Properties == nil || ipc.Properties.Subnet == nil || !s.subnetExists(val(ipc.Properties.Subnet.ID)) {
			return &armError{http.StatusBadRequest, "InvalidResourceReference", fmt.Sprintf("ipConfigurations[%d]: subnet not found", i)}
		}
		sub := strings.ToLower(val(ipc.Properties.Subnet.ID))
		v := sub[:strings.LastIndex(sub, "/subnets/")]
		if vnet != "" && v != vnet {
			return &armError{http.StatusBadRequest, "IPConfigurationsInDifferentVirtualNetworks", fmt.Sprintf("ipConfigurations[%d] is in another virtual network", i)}
		}
		vnet = v
		if val(ipc.Properties.Primary) {
			primaries++
		}
		for _, pool := range ipc.Properties.LoadBalancerBackendAddressPools {
			if pool == nil || !s.poolExists(val(pool.ID)) {
				return &armError{http.StatusBadRequest, "InvalidResourceReference", fmt.Sprintf("ipConfigurations[%d]: backend address pool %s not found", i, val(pool.ID))}
			}
		}
	}
	if len(ipcs) > 1 && primaries != 1 {
		return &armError{http.StatusBadRequest, "OnePrimaryIPConfigurationRequired", fmt.Sprintf("%d primary IP configurations, want exactly one", primaries)}
	}
	if g := nic.Properties.NetworkSecurityGroup; g != nil && !s.securityGroupExists(val(g.ID)) {
		return &armError{http.StatusBadRequest, "InvalidResourceReference", "network security group " + val(g.ID) + " not found"}
	}
	return nil
}
