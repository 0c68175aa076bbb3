package azure

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// TagCreated is the tag a NIC carries with its creation time (RFC 3339, the provider's clock):
// ARM returns no creation time for network interfaces, and the leftover collector must not take
// the NIC of a launch still under way.
const TagCreated = "dovetail.dev/created"

// KindNetworkInterface is the cloud.Leftover kind of a NIC.
const KindNetworkInterface = "networkInterface"

var _ cloud.LeftoverCollector = (*Provider)(nil)

// Names of what AKS creates in the node resource group that node NICs join (karpenter-provider-azure
// pkg/providers/loadbalancer: SLBName, InternalSLBName, the IPv6 pool names it skips;
// pkg/providers/networksecuritygroup: managedNSGRegex; pkg/utils IsAKSManagedVNET).
const (
	LoadBalancerName         = "kubernetes"          // the cluster's Standard load balancer (outboundType=loadBalancer)
	InternalLoadBalancerName = "kubernetes-internal" // created by cloud-provider-azure for internal Services
)

var (
	ipv6Pools         = map[string]bool{"kubernetes-ipv6": true, "aksoutboundbackendpool-ipv6": true}
	managedNSGPattern = regexp.MustCompile(`(?i)^aks-agentpool-\d{8}-nsg$`)
	managedVNet       = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Network/virtualNetworks/aks-vnet-\d{8}/subnets/aks-subnet$`)
)

// nicNetwork is what a node NIC joins besides its subnet.
type nicNetwork struct {
	// pools are the ARM ids of the IPv4 backend pools of the cluster's load balancers, sorted.
	pools []string
	// nsg is the cluster's NSG id when the subnet is the user's (BYO VNet), else "".
	nsg string
}

// network reads what a NIC in subnet joins, as the Azure provider does: every IPv4, NIC-based
// backend pool of the node resource group's "kubernetes" and "kubernetes-internal" load
// balancers (the inbound "kubernetes" and outbound "aksOutboundBackendPool" pools of
// outboundType=loadBalancer; with another outbound type AKS creates no such load balancer and
// the NIC joins none; IPv6 pools and IP-based pools of NodeIP mode are skipped), and, when the
// subnet is not the AKS-managed aks-vnet-<8 digits>/aks-subnet of the node resource group, the
// one AKS agent pool NSG (aks-agentpool-<8 digits>-nsg) of the node resource group, which AKS
// puts on NICs rather than on a user's subnet. Errors: a failed list; no agent pool NSG, or
// more than one, for a BYO subnet.
func (p *Provider) network(ctx context.Context, subnet string) (nicNetwork, error) {
	var n nicNetwork
	defer p.listing()()
	lbs := p.lbs.NewListPager(p.o.ResourceGroup, nil)
	for lbs.More() {
		page, err := lbs.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("listing load balancers of %s: %w", p.o.ResourceGroup, err)
		}
		for _, lb := range page.Value {
			name := val(lb.Name)
			if (!strings.EqualFold(name, LoadBalancerName) && !strings.EqualFold(name, InternalLoadBalancerName)) || lb.Properties == nil {
				continue
			}
			for _, pool := range lb.Properties.BackendAddressPools {
				if pool != nil && pool.ID != nil && !ipv6Pools[strings.ToLower(val(pool.Name))] && !ipBasedPool(pool) {
					n.pools = append(n.pools, *pool.ID)
				}
			}
		}
	}
	sort.Strings(n.pools)
	if m := managedVNet.FindStringSubmatch(subnet); m != nil && strings.EqualFold(m[1], p.o.ResourceGroup) {
		return n, nil
	}
	var found []string
	nsgs := p.nsgs.NewListPager(p.o.ResourceGroup, nil)
	for nsgs.More() {
		page, err := nsgs.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("listing network security groups of %s: %w", p.o.ResourceGroup, err)
		}
		for _, g := range page.Value {
			if managedNSGPattern.MatchString(val(g.Name)) && g.ID != nil {
				found = append(found, *g.ID)
			}
		}
	}
	if len(found) != 1 {
		return n, fmt.Errorf("subnet %s is not the AKS-managed one, so its NICs carry the cluster's NSG: want one aks-agentpool-<8 digits>-nsg in %s, found %d %v",
			subnet, p.o.ResourceGroup, len(found), found)
	}
	n.nsg = found[0]
	return n, nil
}

// ipBasedPool: a pool whose backend addresses are IP addresses (NodeIP mode) is joined by
// cloud-provider-azure through the addresses, not through NICs.
func ipBasedPool(pool *armnetwork.BackendAddressPool) bool {
	if pool.Properties == nil {
		return false
	}
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if a != nil && a.Properties != nil && val(a.Properties.IPAddress) != "" {
			return true
		}
	}
	return false
}

// createNIC creates (or updates, for the next offering of the same launch) the VM's NIC in the
// subnet, polling the operation to completion. Accelerated networking follows the size; the
// primary IP configuration joins the backend pools, the NIC carries the NSG (see network); with
// Azure CNI in node-subnet mode (catalog.AKSNetworkNodeSubnet) the NIC also carries maxPods-1
// secondary IP configurations, ipconfig1…, from which the CNI hands out pod IPs (the provider's
// newNetworkInterfaceForVM; overlay, kubenet and bring-your-own CNI take pod IPs elsewhere and
// get none).
func (p *Provider) createNIC(ctx context.Context, name, subnet string, net nicNetwork, maxPods int64, it *catalog.InstanceType, tags map[string]*string) (string, error) {
	nicTags := make(map[string]*string, len(tags)+1)
	for k, v := range tags {
		nicTags[k] = v
	}
	nicTags[strings.ReplaceAll(TagCreated, "/", "_")] = to.Ptr(p.o.Now().UTC().Format(time.RFC3339))
	primary := &armnetwork.InterfaceIPConfiguration{Name: to.Ptr(name), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
		Primary: to.Ptr(true), PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic), Subnet: &armnetwork.Subnet{ID: to.Ptr(subnet)},
	}}
	for _, id := range net.pools {
		primary.Properties.LoadBalancerBackendAddressPools = append(primary.Properties.LoadBalancerBackendAddressPools, &armnetwork.BackendAddressPool{ID: to.Ptr(id)})
	}
	props := &armnetwork.InterfacePropertiesFormat{
		EnableAcceleratedNetworking: to.Ptr(it.Labels[apisv1.LabelSKUAcceleratedNetworking] == "true"),
		EnableIPForwarding:          to.Ptr(false),
		IPConfigurations:            []*armnetwork.InterfaceIPConfiguration{primary},
	}
	if net.nsg != "" {
		props.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: to.Ptr(net.nsg)}
	}
	if p.o.NetworkPlugin == catalog.AKSNetworkNodeSubnet {
		for i := 1; i < int(maxPods); i++ {
			props.IPConfigurations = append(props.IPConfigurations, &armnetwork.InterfaceIPConfiguration{Name: to.Ptr(fmt.Sprintf("ipconfig%d", i)),
				Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Primary: to.Ptr(false),
					PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic), Subnet: &armnetwork.Subnet{ID: to.Ptr(subnet)}}})
		}
	}
	poller, err := p.nics.BeginCreateOrUpdate(ctx, p.o.ResourceGroup, name, armnetwork.Interface{Location: to.Ptr(p.o.Location), Tags: nicTags, Properties: props}, nil)
	if err != nil {
		return "", fmt.Errorf("network interface %s: %w", name, err)
	}
	nic, err := poller.PollUntilDone(ctx, p.poll())
	if err != nil {
		return "", fmt.Errorf("network interface %s: %w", name, err)
	}
	return val(nic.ID), nil
}

// releaseNIC deletes the NIC of a launch that created no VM, waiting for the delete. ARM may
// refuse for a while (a NIC a failed VM referenced stays reserved for 180 s: NicReservedForAnotherVm);
// the error is then returned for the caller to drop, and the leftover collector deletes the NIC later.
func (p *Provider) releaseNIC(ctx context.Context, name string) error {
	poller, err := p.nics.BeginDelete(ctx, p.o.ResourceGroup, name, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, p.poll())
	}
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting network interface %s: %w", name, err)
	}
	return nil
}

// Leftovers lists the NICs of the resource group tagged for cluster that no VM uses (ARM's
// properties.virtualMachine is unset), every page, sorted by ID; Created is the TagCreated time
// (zero when the tag is missing or unreadable).
func (p *Provider) Leftovers(ctx context.Context, cluster string) ([]cloud.Leftover, error) {
	defer p.listing()()
	pager := p.nics.NewListPager(p.o.ResourceGroup, nil)
	var out []cloud.Leftover
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing network interfaces of %s: %w", p.o.ResourceGroup, err)
		}
		for _, nic := range page.Value {
			tags := FromAzureTags(nic.Tags)
			if tags[apisv1.TagCluster] != cluster || attached(nic) {
				continue
			}
			created, _ := time.Parse(time.RFC3339, tags[TagCreated])
			out = append(out, cloud.Leftover{ID: val(nic.ID), Kind: KindNetworkInterface, Created: created, Tags: tags})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

func attached(nic *armnetwork.Interface) bool {
	return nic.Properties != nil && nic.Properties.VirtualMachine != nil && val(nic.Properties.VirtualMachine.ID) != ""
}

var nicIDPattern = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Network/networkInterfaces/([^/]+)$`)

// DeleteLeftover deletes an unattached NIC tagged for this provider's cluster (see
// cloud.LeftoverCollector). Errors: an id of another shape or resource group, a NIC not tagged
// for the cluster or attached to a VM (both wrap cloud.ErrNotOwned), a failed call.
func (p *Provider) DeleteLeftover(ctx context.Context, id string) error {
	m := nicIDPattern.FindStringSubmatch(id)
	if m == nil {
		return fmt.Errorf("leftover %q: want /subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Network/networkInterfaces/<name>", id)
	}
	if !strings.EqualFold(m[1], p.o.SubscriptionID) || !strings.EqualFold(m[2], p.o.ResourceGroup) {
		return fmt.Errorf("%w: %s is not in resource group %s of subscription %s", cloud.ErrNotOwned, id, p.o.ResourceGroup, p.o.SubscriptionID)
	}
	name := m[3]
	got, err := p.nics.Get(ctx, p.o.ResourceGroup, name, nil)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading network interface %s: %w", name, err)
	}
	if tag := FromAzureTags(got.Tags)[apisv1.TagCluster]; tag != p.o.Cluster {
		return fmt.Errorf("%w: refusing to delete network interface %s: its %q tag is %q, not this cluster %q", cloud.ErrNotOwned, name, apisv1.TagCluster, tag, p.o.Cluster)
	}
	if attached(&got.Interface) {
		return fmt.Errorf("%w: refusing to delete network interface %s: VM %s uses it", cloud.ErrNotOwned, name, val(got.Properties.VirtualMachine.ID))
	}
	return p.releaseNIC(ctx, name)
}
