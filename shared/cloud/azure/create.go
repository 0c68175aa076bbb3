package azure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// MaxAttempts bounds the VM creates one Create makes: Azure has no fleet call, so each offering
// is one create, and a launch that has tried this many has said enough about capacity (the
// refused offerings are marked; the launch step re-plans around them).
const MaxAttempts = 6

// DefaultPollInterval is how often a long-running operation is polled when ARM gives no
// Retry-After (Options.PollInterval; the SDK's floor is one second outside tests).
const DefaultPollInterval = 2 * time.Second

// Codes the provider gives offerings it could not try.
const (
	CodeUnknownSize     = "SkuNotAvailable"         // the catalog does not know the size
	CodeNoImageForSize  = "NoImageForSize"          // the image family has no image for the size (architecture, GPU)
	CodeUnsupportedType = "UnsupportedCapacityType" // reserved capacity is not launched on Azure yet
)

// Create launches one VM for the request. The VM is named from the NodeClaim (VMName), so a
// redelivered launch finds the VM the first delivery made and returns it. Before any create the
// provider reads the Compute usages (quotas): an offering whose vCPU quota has no room for the
// size is refused untried (CodeFamilyQuota, CodeRegionalQuota, CodeLowPriorityQuota, marked
// LowQuotaTTL). The rest are tried in the request's order (cheapest first), spot before on
// demand, one VM create each, at most MaxAttempts: a capacity error marks what its class covers
// (classify: offerings of the request and of the catalog, each with its class's TTL) and the
// next offering not covered is tried, so a spot launch that finds no spot capacity falls back to
// a regular VM in the same call. A NIC named like the VM (in the AKSNodeClass's subnet, in the
// cluster's load balancer backend pools, with the cluster NSG on a BYO subnet: network) is
// created (or updated) before each VM create, and deleted when no VM was made. When nothing
// launches the error is a *cloud.InsufficientCapacityError listing every refused offering with
// its code and TTL; other errors (auth, a bad request, a missing subnet or pool, an identity
// the launch identity may not assign) are returned as they are, an *azcore.ResponseError inside.
func (p *Provider) Create(ctx context.Context, req cloud.LaunchRequest) (*cloud.Instance, error) {
	nc, subnet, err := p.validate(req)
	if err != nil {
		return nil, err
	}
	name := VMName(req.NodeClaim.Name)
	if inst, err := p.existing(ctx, name, req); inst != nil || err != nil {
		return inst, err
	}
	settings, err := cloud.AKSNodeSettings(nc, p.o.NetworkPlugin)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", apisv1.KindAKSNodeClass, nc.Name, err)
	}
	net, err := p.network(ctx, subnet)
	if err != nil {
		return nil, err
	}
	room, err := p.quotas(ctx)
	if err != nil {
		return nil, err
	}
	l := launchState{name: name, req: req, nc: nc, settings: settings, subnet: subnet, net: net, out: map[cloud.OfferingRef]bool{}}
	for _, o := range ordered(req.Offerings) {
		inst, err := p.try(ctx, &l, o, room)
		if inst != nil {
			inst.Refused = l.refused
		}
		if inst != nil || err != nil {
			return inst, err
		}
	}
	if l.attempts > 0 {
		// No VM uses the NIC the attempts made: delete it now rather than leave it to the
		// leftover collector (best effort; a refusal leaves it there).
		_ = p.releaseNIC(ctx, name)
	}
	return nil, &cloud.InsufficientCapacityError{Unavailable: l.refused}
}

// launchState is one Create's progress over its offerings.
type launchState struct {
	name     string
	req      cloud.LaunchRequest
	nc       *apisv1.AKSNodeClass
	settings catalog.NodeSettings
	subnet   string
	net      nicNetwork
	attempts int
	refused  []cloud.UnavailableOffering
	out      map[cloud.OfferingRef]bool // offerings already ruled out (refused lists them)
}

func (l *launchState) refuse(u cloud.UnavailableOffering) {
	k := cloud.OfferingRef{InstanceType: u.Offering.InstanceType, Zone: u.Offering.Zone, CapacityType: u.Offering.CapacityType}
	if !l.out[k] {
		l.out[k] = true
		l.refused = append(l.refused, u)
	}
}

// try launches offering o unless it is ruled out, unlaunchable or over quota. It returns the
// instance, or a non-capacity error, or (nil, nil) to go on with the next offering.
func (p *Provider) try(ctx context.Context, l *launchState, o cloud.OfferingRef, room quotaRoom) (*cloud.Instance, error) {
	key := cloud.OfferingRef{InstanceType: o.InstanceType, Zone: o.Zone, CapacityType: o.CapacityType}
	if l.out[key] {
		return nil, nil
	}
	it := p.o.Catalog.Get(o.InstanceType)
	code, ttl := "", time.Duration(0)
	switch {
	case it == nil:
		code = CodeUnknownSize
	case o.CapacityType != apisv1.CapacityTypeSpot && o.CapacityType != apisv1.CapacityTypeOnDemand:
		code = CodeUnsupportedType
	case imageFor(l.nc, it) == "":
		code = CodeNoImageForSize
	default:
		if code = room.refuse(it, o.CapacityType); code != "" {
			ttl = LowQuotaTTL
		}
	}
	if code != "" || l.attempts == MaxAttempts {
		if code != "" {
			l.refuse(cloud.UnavailableOffering{Offering: o, Code: code, TTL: ttl})
		}
		return nil, nil
	}
	l.attempts++
	inst, err := p.launch(ctx, l, o, it)
	if err == nil {
		return inst, nil
	}
	c := classify(err, o.CapacityType)
	if c.scope == notCapacity || errors.As(err, new(notCapacityError)) {
		_ = p.deleteFailed(ctx, l.name)
		_ = p.releaseNIC(ctx, l.name) // best effort: the leftover collector takes what remains
		return nil, fmt.Errorf("creating VM %s (%s): %w", l.name, o, err)
	}
	for _, u := range p.ruledOut(c, o, l.req.Offerings) {
		l.refuse(u)
	}
	return nil, p.deleteFailed(ctx, l.name)
}

// validate checks the request and picks the NodeClass and subnet. Errors name the field.
func (p *Provider) validate(req cloud.LaunchRequest) (*apisv1.AKSNodeClass, string, error) {
	nc := req.NodeClass.AKS
	switch {
	case nc == nil && !req.NodeClass.IsZero():
		return nil, "", fmt.Errorf("nodeClass: %s %s is not served by the azure provider (it launches for %s)", req.NodeClass.Kind(), req.NodeClass.Name(), apisv1.KindAKSNodeClass)
	case nc == nil:
		return nil, "", fmt.Errorf("nodeClass: an %s is required", apisv1.KindAKSNodeClass)
	case req.NodeClaim == nil || req.NodeClaim.Name == "":
		return nil, "", errors.New("nodeClaim: its name is required (the VM is named from it)")
	case req.Tags[apisv1.TagCluster] != p.o.Cluster:
		return nil, "", fmt.Errorf("tags[%q]: %q is not this provider's cluster %q", apisv1.TagCluster, req.Tags[apisv1.TagCluster], p.o.Cluster)
	case len(req.Offerings) == 0:
		return nil, "", errors.New("offerings: empty, nothing to launch")
	}
	if err := unhonouredError(nc); err != nil {
		return nil, "", err
	}
	subnet := p.o.SubnetID
	if nc.Spec.VNETSubnetID != nil && *nc.Spec.VNETSubnetID != "" {
		subnet = *nc.Spec.VNETSubnetID
	}
	if subnet == "" {
		return nil, "", fmt.Errorf("%s %s: spec.vnetSubnetID is unset and the provider has no default subnet", apisv1.KindAKSNodeClass, nc.Name)
	}
	return nc, subnet, nil
}

// ordered puts spot offerings first, each group in the request's order (cheapest first).
func ordered(offs []cloud.OfferingRef) []cloud.OfferingRef {
	out := make([]cloud.OfferingRef, 0, len(offs))
	for _, spot := range []bool{true, false} {
		for _, o := range offs {
			if (o.CapacityType == apisv1.CapacityTypeSpot) == spot {
				out = append(out, o)
			}
		}
	}
	return out
}

// vmNameUnsafe are the characters a VM's computer name cannot hold.
var vmNameUnsafe = regexp.MustCompile(`[^a-z0-9-]`)

// VMName is the VM (and computer, and so Node) name of a NodeClaim: "aks-" + the NodeClaim name,
// lower case, as AKS Node Auto-Provisioning names its VMs; a name over 64 characters (the Linux
// computer-name limit) keeps its first 53 and a hash of the whole.
func VMName(nodeClaim string) string {
	name := "aks-" + vmNameUnsafe.ReplaceAllString(strings.ToLower(nodeClaim), "-")
	if len(name) <= 64 {
		return strings.TrimRight(name, "-")
	}
	sum := sha256.Sum256([]byte(nodeClaim))
	return strings.TrimRight(name[:53], "-") + "-" + hex.EncodeToString(sum[:5])
}

// existing returns the VM a former delivery of the same launch made. A VM of that name that
// belongs to another NodeClaim or cluster wraps cloud.ErrIdempotentParameterMismatch; one left
// in state Failed is deleted so the launch can start over.
func (p *Provider) existing(ctx context.Context, name string, req cloud.LaunchRequest) (*cloud.Instance, error) {
	got, err := p.vms.Get(ctx, p.o.ResourceGroup, name, nil)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading VM %s: %w", name, err)
	}
	vm := got.VirtualMachine
	tags := FromAzureTags(vm.Tags)
	if tags[apisv1.TagCluster] != p.o.Cluster || tags[apisv1.TagNodeClaim] != req.NodeClaim.Name {
		return nil, fmt.Errorf("%w: VM %s exists for cluster %q, NodeClaim %q", cloud.ErrIdempotentParameterMismatch, name, tags[apisv1.TagCluster], tags[apisv1.TagNodeClaim])
	}
	if val(vm.Properties.ProvisioningState) == "Failed" {
		return nil, p.deleteFailed(ctx, name)
	}
	inst := p.toInstance(&vm)
	return &inst, nil
}

// deleteFailed removes a VM a failed create left behind (ARM keeps it in state Failed), waiting
// for the delete, so the name can be used again.
func (p *Provider) deleteFailed(ctx context.Context, name string) error {
	poller, err := p.vms.BeginDelete(ctx, p.o.ResourceGroup, name, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, p.poll())
	}
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting failed VM %s: %w", name, err)
	}
	return nil
}

// launch creates the NIC and then the VM for one offering, polling both operations to completion:
// a NIC exists only for a VM create that is attempted.
func (p *Provider) launch(ctx context.Context, l *launchState, o cloud.OfferingRef, it *catalog.InstanceType) (*cloud.Instance, error) {
	tags := ToAzureTags(l.req.Tags)
	nicID, err := p.createNIC(ctx, l.name, l.subnet, l.net, *l.settings.Kubelet.MaxPods, it, tags)
	if err != nil {
		return nil, err
	}
	data, cse, err := p.nodeBootstrap(ctx, l.req, l.nc, l.settings, o, it, nicSubnet(p, l.nc), imageFor(l.nc, it))
	if err != nil {
		return nil, err
	}
	vm := p.vmParameters(l.name, l.nc, o, it, nicID, tags, data)
	poller, err := p.vms.BeginCreateOrUpdate(ctx, p.o.ResourceGroup, l.name, vm, nil)
	if err != nil {
		return nil, err
	}
	res, err := poller.PollUntilDone(ctx, p.poll())
	if err != nil {
		return nil, err
	}
	if cse != "" {
		// bootstrappingclient: the node provisions only once its CustomScript extension runs.
		// A VM whose extension failed never joins; it is deleted (with its NIC, deleteOption
		// Delete) and the error returned, as the provider's Create cleans up after a failed CSE.
		if err := p.createCSE(ctx, l.name, cse, tags); err != nil {
			if derr := p.deleteFailed(ctx, l.name); derr != nil {
				return nil, errors.Join(err, derr)
			}
			return nil, notCapacityError{err}
		}
	}
	inst := p.toInstance(&res.VirtualMachine)
	return &inst, nil
}

// notCapacityError marks an error of a launch step after the VM create (its extension) that
// says nothing about the offering's capacity: try returns it as it is, untried offerings left.
type notCapacityError struct{ error }

func (e notCapacityError) Unwrap() error { return e.error }

// vmParameters is the VM a NodeClaim gets for one offering.
func (p *Provider) vmParameters(name string, nc *apisv1.AKSNodeClass, o cloud.OfferingRef, it *catalog.InstanceType,
	nicID string, tags map[string]*string, data string) armcompute.VirtualMachine {
	// A zonal offering pins the VM to its zone; a regional one (catalog.AzureRegionalZone: a region
	// or size without zones) names none, and ARM places it.
	var zones []*string
	if o.Zone != catalog.AzureRegionalZone {
		zones = []*string{to.Ptr(strings.TrimPrefix(o.Zone, p.o.Location+"-"))}
	}
	disk := armcompute.StorageAccountTypesStandardLRS
	if it.Labels[apisv1.LabelSKUStoragePremiumCapable] == "true" {
		disk = armcompute.StorageAccountTypesPremiumLRS
	}
	diskGB := int32(catalog.AKSDefaultOSDiskSizeGB)
	if nc.Spec.OSDiskSizeGB != nil {
		diskGB = *nc.Spec.OSDiskSizeGB
	}
	vm := armcompute.VirtualMachine{
		Location: to.Ptr(p.o.Location), Zones: zones, Tags: tags,
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes(it.Name))},
			StorageProfile: &armcompute.StorageProfile{
				ImageReference: &armcompute.ImageReference{CommunityGalleryImageID: to.Ptr(imageFor(nc, it))},
				OSDisk: &armcompute.OSDisk{CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage), OSType: to.Ptr(armcompute.OperatingSystemTypesLinux),
					DiskSizeGB: to.Ptr(diskGB), DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete),
					ManagedDisk: &armcompute.ManagedDiskParameters{StorageAccountType: to.Ptr(disk)}},
			},
			OSProfile: &armcompute.OSProfile{ComputerName: to.Ptr(name), AdminUsername: to.Ptr(AdminUsername), CustomData: to.Ptr(data),
				LinuxConfiguration: &armcompute.LinuxConfiguration{DisablePasswordAuthentication: to.Ptr(true),
					SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{Path: to.Ptr("/home/" + AdminUsername + "/.ssh/authorized_keys"), KeyData: to.Ptr(p.o.SSHPublicKey)}}}}},
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: to.Ptr(nicID),
				Properties: &armcompute.NetworkInterfaceReferenceProperties{Primary: to.Ptr(true), DeleteOption: to.Ptr(armcompute.DeleteOptionsDelete)}}}},
			Priority: to.Ptr(armcompute.VirtualMachinePriorityTypesRegular),
		},
	}
	if p.o.KubeletIdentityID != "" {
		vm.Identity = &armcompute.VirtualMachineIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{p.o.KubeletIdentityID: {}}}
	}
	if nc.Spec.Security != nil && nc.Spec.Security.EncryptionAtHost != nil && *nc.Spec.Security.EncryptionAtHost {
		vm.Properties.SecurityProfile = &armcompute.SecurityProfile{EncryptionAtHost: to.Ptr(true)}
	}
	if o.CapacityType == apisv1.CapacityTypeSpot {
		// Evicted spot VMs are deleted, not deallocated, and pay up to the on-demand price (-1).
		vm.Properties.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
		vm.Properties.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		vm.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(-1.0)}
	}
	return vm
}

// AdminUsername is the Linux admin user of AKS nodes.
const AdminUsername = "azureuser"

// NormalizeResourceGroupLabel is the kubernetes.azure.com/cluster value of a node resource group:
// parentheses become "-", at most 63 characters, and a trailing "-", "_" or "." gets a "z" (AKS
// node bootstrapping, provider labels.normalizeResourceGroupNameForLabel).
func NormalizeResourceGroupLabel(rg string) string {
	s := strings.NewReplacer("(", "-", ")", "-").Replace(rg)
	if len(s) > 63 {
		s = s[:63]
	}
	if strings.HasSuffix(s, "-") || strings.HasSuffix(s, "_") || strings.HasSuffix(s, ".") {
		if len(s) > 62 {
			return s[:len(s)-1] + "z"
		}
		return s + "z"
	}
	return s
}

func (p *Provider) poll() *runtime.PollUntilDoneOptions {
	return &runtime.PollUntilDoneOptions{Frequency: p.o.PollInterval}
}
