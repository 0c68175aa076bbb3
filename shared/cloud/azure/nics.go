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

// createNIC creates (or updates, for the next offering of the same launch) the VM's NIC in the
// subnet, polling the operation to completion. Accelerated networking follows the size.
func (p *Provider) createNIC(ctx context.Context, name, subnet string, it *catalog.InstanceType, tags map[string]*string) (string, error) {
	nicTags := make(map[string]*string, len(tags)+1)
	for k, v := range tags {
		nicTags[k] = v
	}
	nicTags[strings.ReplaceAll(TagCreated, "/", "_")] = to.Ptr(p.o.Now().UTC().Format(time.RFC3339))
	poller, err := p.nics.BeginCreateOrUpdate(ctx, p.o.ResourceGroup, name, armnetwork.Interface{
		Location: to.Ptr(p.o.Location), Tags: nicTags,
		Properties: &armnetwork.InterfacePropertiesFormat{
			EnableAcceleratedNetworking: to.Ptr(it.Labels[apisv1.LabelSKUAcceleratedNetworking] == "true"),
			IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Primary: to.Ptr(true), PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic), Subnet: &armnetwork.Subnet{ID: to.Ptr(subnet)},
			}}},
		},
	}, nil)
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
