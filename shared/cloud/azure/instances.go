package azure

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// Get returns the VM of a providerID. A VM that is gone (deleted, or evicted with
// evictionPolicy Delete) wraps cloud.ErrNotFound.
func (p *Provider) Get(ctx context.Context, providerID string) (*cloud.Instance, error) {
	name, err := p.vmName(providerID)
	if err != nil {
		return nil, err
	}
	got, err := p.vms.Get(ctx, p.o.ResourceGroup, name, nil)
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: %w", providerID, cloud.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading VM %s: %w", name, err)
	}
	inst := p.toInstance(&got.VirtualMachine)
	return &inst, nil
}

// List returns the VMs of the resource group tagged for cluster (every page), sorted by name.
func (p *Provider) List(ctx context.Context, cluster string) ([]cloud.Instance, error) {
	defer p.listing()()
	pager := p.vms.NewListPager(p.o.ResourceGroup, nil)
	out := []cloud.Instance{}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing VMs of %s: %w", p.o.ResourceGroup, err)
		}
		for _, vm := range page.Value {
			if FromAzureTags(vm.Tags)[apisv1.TagCluster] == cluster {
				out = append(out, p.toInstance(vm))
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// Delete deletes a VM tagged for this provider's cluster (its OS disk and NIC go with it: both
// are created with deleteOption Delete). It reads the VM first and refuses, wrapping
// cloud.ErrNotOwned and naming the VM and the tag, one that is untagged or tagged for another
// cluster. A VM already gone wraps cloud.ErrNotFound; one already deleting is success. The delete
// is started, not waited for: the VM shows provisioning state Deleting until it is gone.
func (p *Provider) Delete(ctx context.Context, providerID string) error {
	name, err := p.vmName(providerID)
	if err != nil {
		return err
	}
	got, err := p.vms.Get(ctx, p.o.ResourceGroup, name, nil)
	if isNotFound(err) {
		return fmt.Errorf("%s: %w", providerID, cloud.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("reading VM %s: %w", name, err)
	}
	switch tag, ok := FromAzureTags(got.Tags)[apisv1.TagCluster]; {
	case !ok || tag == "":
		return fmt.Errorf("%w: refusing to delete VM %s: it has no %q tag (not launched for cluster %q)", cloud.ErrNotOwned, name, apisv1.TagCluster, p.o.Cluster)
	case tag != p.o.Cluster:
		return fmt.Errorf("%w: refusing to delete VM %s: its %q tag is %q, not this cluster %q", cloud.ErrNotOwned, name, apisv1.TagCluster, tag, p.o.Cluster)
	}
	if got.Properties != nil && val(got.Properties.ProvisioningState) == "Deleting" {
		return nil
	}
	if _, err := p.vms.BeginDelete(ctx, p.o.ResourceGroup, name, nil); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("%s: %w", providerID, cloud.ErrNotFound)
		}
		return fmt.Errorf("deleting VM %s: %w", name, err)
	}
	return nil
}

// toInstance reads a VM: ARM's provisioning state Creating is pending, Succeeded running,
// Deleting shutting-down; the price is the catalog's for the offering; the image is its
// storageProfile.imageReference.
func (p *Provider) toInstance(vm *armcompute.VirtualMachine) cloud.Instance {
	name := val(vm.Name)
	inst := cloud.Instance{ID: name, ProviderID: ProviderID(p.o.SubscriptionID, p.o.ResourceGroup, name), Tags: FromAzureTags(vm.Tags),
		CapacityType: apisv1.CapacityTypeOnDemand, State: cloud.StatePending}
	inst.Zone = catalog.AzureRegionalZone
	if len(vm.Zones) > 0 {
		inst.Zone = catalog.AzureZone(p.o.Location, val(vm.Zones[0]))
	}
	if props := vm.Properties; props != nil {
		if props.HardwareProfile != nil {
			inst.InstanceType = string(val(props.HardwareProfile.VMSize))
		}
		if val(props.Priority) == armcompute.VirtualMachinePriorityTypesSpot {
			inst.CapacityType = apisv1.CapacityTypeSpot
		}
		switch val(props.ProvisioningState) {
		case "Succeeded":
			inst.State = cloud.StateRunning
		case "Deleting":
			inst.State = cloud.StateShuttingDown
		}
		if props.TimeCreated != nil {
			inst.LaunchTime = *props.TimeCreated
		}
		// The image the VM boots: a shared gallery id, else a community gallery id (the
		// provider's drift reads the VM's imageReference the same way).
		if sp := props.StorageProfile; sp != nil && sp.ImageReference != nil {
			inst.ImageID = val(sp.ImageReference.ID)
			if inst.ImageID == "" {
				inst.ImageID = val(sp.ImageReference.CommunityGalleryImageID)
			}
		}
	}
	if it := p.o.Catalog.Get(inst.InstanceType); it != nil {
		for _, o := range it.Offerings {
			if o.Zone == inst.Zone && o.CapacityType == inst.CapacityType {
				inst.PricePerHour = o.PricePerHour
			}
		}
	}
	return inst
}

// dovetailTagKeys are the tags Dovetail reads back; their "/" is "_" on Azure.
var dovetailTagKeys = []string{apisv1.TagCluster, apisv1.TagNodePool, apisv1.TagNodeClaim, TagCreated}

// ToAzureTags renders tags for ARM, whose tag names cannot hold < > % & \ ? /: "/" becomes "_"
// (karpenter.sh/nodepool → karpenter.sh_nodepool, as the Azure Karpenter provider tags) and the
// other characters are dropped.
func ToAzureTags(tags map[string]string) map[string]*string {
	out := make(map[string]*string, len(tags))
	strip := strings.NewReplacer("/", "_", "<", "", ">", "", "%", "", "&", "", `\`, "", "?", "")
	for k, v := range tags {
		out[strip.Replace(k)] = to.Ptr(v)
	}
	return out
}

// FromAzureTags reads ARM tags back with Dovetail's own keys restored (dovetail.dev_cluster →
// dovetail.dev/cluster); other tags are returned as they are.
func FromAzureTags(tags map[string]*string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		out[k] = val(v)
	}
	for _, k := range dovetailTagKeys {
		az := strings.ReplaceAll(k, "/", "_")
		if v, ok := out[az]; ok {
			delete(out, az)
			out[k] = v
		}
	}
	return out
}

// val dereferences an SDK pointer field, the zero value for nil.
func val[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
