package azureapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	computefake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
)

// Provisioning states ARM reports for a VM.
const (
	stateSucceeded = "Succeeded"
	stateFailed    = "Failed"
	stateDeleting  = "Deleting"
)

// syncCapacityCodes are refused at once by the PUT; other capacity codes (ZonalAllocationFailed,
// AllocationFailed, OverconstrainedAllocationRequest) fail the create operation at its end.
var syncCapacityCodes = map[string]bool{"SkuNotAvailable": true, "OperationNotAllowed": true, "QuotaExceeded": true}

// vmNamePattern: Linux VM names are 1–64 characters of letters, digits, hyphens, underscores and
// periods, starting with a letter or digit and not ending with a period or hyphen (Azure
// "Naming rules and restrictions for Azure resources", Microsoft.Compute/virtualMachines); the
// computer name (the Node name) may not hold underscores or periods.
var vmNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}[A-Za-z0-9_]$`)

// communityImagePattern is an AKS node image in its public community gallery.
var communityImagePattern = regexp.MustCompile(`^/CommunityGalleries/(AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2|AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b)/images/([A-Za-z0-9]+)/versions/([0-9.]+|latest)$`)

func (s *Server) virtualMachines() computefake.VirtualMachinesServer {
	return computefake.VirtualMachinesServer{
		BeginCreateOrUpdate: s.createVM,
		Get:                 s.getVM,
		BeginDelete:         s.deleteVM,
		NewListPager:        s.listVMs,
	}
}

func (s *Server) createVM(_ context.Context, rg, name string, vm armcompute.VirtualMachine, _ *armcompute.VirtualMachinesClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	launch, aerr := s.checkVM(rg, name, &vm)
	if aerr == nil {
		aerr = s.existingVM(name, &vm)
		if aerr == nil {
			if prev, ok := s.VM(name); ok && prev.Properties != nil && val(prev.Properties.ProvisioningState) == stateSucceeded {
				resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientCreateOrUpdateResponse{VirtualMachine: s.view(&prev)}, nil)
				return
			}
		}
	}
	if aerr == nil {
		aerr = s.checkQuota(name, &vm)
	}
	if aerr != nil {
		s.fail(&errResp, "VirtualMachines.CreateOrUpdate "+name, aerr)
		return
	}
	inst, err := s.o.Cloud.LaunchVM(launch)
	var ce *fake.CapacityError
	switch {
	case errors.As(err, &ce) && syncCapacityCodes[ce.Code]:
		s.fail(&errResp, "VirtualMachines.CreateOrUpdate "+name, &armError{http.StatusConflict, ce.Code, capacityMessage(ce.Code, launch.Offering)})
		return
	case errors.As(err, &ce):
		// The resource exists, in state Failed, once the operation ends.
		s.store(name, &vm, stateFailed, nil)
		s.mu.Lock()
		s.failedOps[strings.ToLower(name)] = true
		s.mu.Unlock()
		resp.AddNonTerminalResponse(http.StatusCreated, nil)
		resp.SetTerminalError(http.StatusOK, ce.Code)
		return
	case err != nil:
		errResp.SetError(err)
		return
	}
	stored := s.store(name, &vm, stateSucceeded, &inst)
	resp.AddNonTerminalResponse(http.StatusCreated, nil)
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientCreateOrUpdateResponse{VirtualMachine: stored}, nil)
	return
}

// existingVM: a PUT on an existing VM is an update; the size, zone and priority cannot change
// that way (ARM: PropertyChangeNotAllowed / OperationNotAllowed), so a different request for a
// live name is refused. A Failed VM must be deleted first.
func (s *Server) existingVM(name string, vm *armcompute.VirtualMachine) *armError {
	prev, ok := s.VM(name)
	if !ok || prev.Properties == nil {
		return nil
	}
	switch val(prev.Properties.ProvisioningState) {
	case stateFailed:
		return &armError{http.StatusConflict, "OperationNotAllowed", "the VM is in a failed state; delete it first"}
	case stateDeleting:
		return &armError{http.StatusConflict, "OperationNotAllowed", "the VM is being deleted"}
	}
	if size(&prev) != size(vm) || zoneOf(&prev) != zoneOf(vm) || priority(&prev) != priority(vm) {
		return &armError{http.StatusConflict, "PropertyChangeNotAllowed", "changing the size, zone or priority of an existing VM is not allowed"}
	}
	return nil
}

// checkVM validates a create request and turns it into the VM to run. Errors carry ARM's codes.
func (s *Server) checkVM(rg, name string, vm *armcompute.VirtualMachine) (fake.VMLaunch, *armError) {
	var l fake.VMLaunch
	p := vm.Properties
	switch {
	case !s.rgOK(rg):
		return l, &armError{http.StatusNotFound, codeRGNotFound, "resource group " + rg}
	case !vmNamePattern.MatchString(name):
		return l, &armError{http.StatusBadRequest, "InvalidResourceName", "VM name " + name}
	case vm.Location == nil || !strings.EqualFold(*vm.Location, s.region):
		return l, &armError{http.StatusBadRequest, "LocationNotAvailableForResourceType", "location " + val(vm.Location)}
	case p == nil || p.HardwareProfile == nil || p.HardwareProfile.VMSize == nil:
		return l, &armError{http.StatusBadRequest, "InvalidParameter", "properties.hardwareProfile.vmSize required"}
	case len(vm.Zones) > 1:
		return l, &armError{http.StatusBadRequest, "InvalidParameter", "zones: a VM is in at most one zone"}
	}
	if e := checkTags(vm.Tags); e != nil {
		return l, e
	}
	if e := s.checkNIC(p.NetworkProfile); e != nil {
		return l, e
	}
	if e := s.checkIdentity(vm.Identity); e != nil {
		return l, e
	}
	ct, e := checkPriority(p)
	if e != nil {
		return l, e
	}
	osImage, e := s.checkOS(name, p, size(vm))
	if e != nil {
		return l, e
	}
	// ARM takes any base64 custom data; the node image's provisioning reads it once the VM
	// boots. A contract it cannot use leaves a running VM whose kubelet never registers.
	// AgentBaker's cloud-config (bootstrappingclient mode) only prepares the image: the kubelet
	// waits for the provisioning command of the CustomScript extension (extensions.go).
	l = fake.VMLaunch{
		// The Node's providerID as cloud-node-manager spells it (resource group lower case).
		Name: name, ProviderID: azure.ProviderID(s.o.SubscriptionID, s.o.ResourceGroup, name),
		Offering: cloud.OfferingRef{InstanceType: size(vm), Zone: offeringZone(s.region, vm), CapacityType: ct},
		Tags:     azure.FromAzureTags(vm.Tags), OSImage: osImage,
	}
	if isCloudConfig(*p.OSProfile.CustomData) {
		l.AwaitsProvisioning = true
		return l, nil
	}
	prov := provisioning(*p.OSProfile.CustomData, p.StorageProfile.OSDisk.DiskSizeGB)
	l.Labels, l.Taints, l.Settings, l.JoinError = prov.Labels, prov.Taints, prov.Settings, prov.JoinError
	return l, nil
}

// provisioning is what the node image's provisioning gives the kubelet from a script of the AKS
// bootstrap contract (base64): the labels, taints and max pods it reads, or why it cannot start
// a kubelet that joins. diskGB is the VM's OS disk (ephemeral storage).
func provisioning(b64 string, diskGB *int32) fake.VMProvisioning {
	node, joinErr := customdata.Read(b64)
	if joinErr != nil {
		node = &customdata.Node{}
	}
	settings := catalog.NodeSettings{Kubelet: &catalog.KubeletOverrides{MaxPods: &node.MaxPods}}
	if diskGB != nil {
		settings.EphemeralStorageBytes = int64(*diskGB) * 1_000_000_000
	}
	p := fake.VMProvisioning{Labels: node.Labels, Taints: node.Taints, Settings: settings}
	if joinErr != nil {
		p.JoinError = joinErr.Error()
	}
	return p
}

// isCloudConfig reports whether base64 custom data is a cloud-config document (AgentBaker's node
// custom data starts "#cloud-config"), not a provisioning script.
func isCloudConfig(b64 string) bool {
	raw, err := base64.StdEncoding.DecodeString(b64)
	return err == nil && strings.HasPrefix(string(raw), "#cloud-config\n")
}

// checkTags: at most 50 tags, names up to 512 characters without < > % & \ ? /, values up to 256
// (Azure "Use tags to organize your Azure resources": limitations).
func checkTags(tags map[string]*string) *armError {
	if len(tags) > 50 {
		return &armError{http.StatusBadRequest, "InvalidTagNameCharacters", "more than 50 tags"}
	}
	for k, v := range tags {
		if len(k) == 0 || len(k) > 512 || strings.ContainsAny(k, `<>%&\?/`) {
			return &armError{http.StatusBadRequest, "InvalidTagNameCharacters", "tag name " + k}
		}
		if len(val(v)) > 256 {
			return &armError{http.StatusBadRequest, "InvalidTagValueLength", "tag " + k}
		}
	}
	return nil
}

func (s *Server) checkNIC(np *armcompute.NetworkProfile) *armError {
	if np == nil || len(np.NetworkInterfaces) != 1 || np.NetworkInterfaces[0].ID == nil {
		return &armError{http.StatusBadRequest, "InvalidParameter", "networkProfile: one network interface"}
	}
	id := *np.NetworkInterfaces[0].ID
	if _, ok := s.NIC(id[strings.LastIndex(id, "/")+1:]); !ok || !strings.EqualFold(id, nicID(s.o.SubscriptionID, s.o.ResourceGroup, id[strings.LastIndex(id, "/")+1:])) {
		return &armError{http.StatusBadRequest, "InvalidResourceReference", "network interface " + id + " not found"}
	}
	return nil
}

// checkPriority: Spot needs an evictionPolicy and a billing profile (max price -1 or a positive
// cap); Regular takes neither eviction policy nor max price.
func checkPriority(p *armcompute.VirtualMachineProperties) (string, *armError) {
	switch pr := string(val(p.Priority)); pr {
	case string(armcompute.VirtualMachinePriorityTypesSpot):
		if p.EvictionPolicy == nil {
			return "", &armError{http.StatusBadRequest, "InvalidParameter", "evictionPolicy is required for Spot"}
		}
		if p.BillingProfile == nil || p.BillingProfile.MaxPrice == nil || (*p.BillingProfile.MaxPrice != -1 && *p.BillingProfile.MaxPrice <= 0) {
			return "", &armError{http.StatusBadRequest, "InvalidParameter", "billingProfile.maxPrice: -1 or a positive price"}
		}
		return apisv1.CapacityTypeSpot, nil
	case "", string(armcompute.VirtualMachinePriorityTypesRegular):
		if p.EvictionPolicy != nil || p.BillingProfile != nil {
			return "", &armError{http.StatusBadRequest, "InvalidParameter", "evictionPolicy and billingProfile are for Spot VMs"}
		}
		return apisv1.CapacityTypeOnDemand, nil
	default:
		return "", &armError{http.StatusBadRequest, "InvalidParameter", "priority " + pr}
	}
}

// checkOS validates the OS profile (computer name, admin SSH key, custom data present and within
// Azure's size limit) and the image, and returns the image's OS name.
func (s *Server) checkOS(name string, p *armcompute.VirtualMachineProperties, vmSize string) (string, *armError) {
	op, sp := p.OSProfile, p.StorageProfile
	switch {
	case op == nil || op.ComputerName == nil || op.AdminUsername == nil:
		return "", &armError{http.StatusBadRequest, "InvalidParameter", "osProfile.computerName and adminUsername required"}
	case len(*op.ComputerName) > 64 || strings.ContainsAny(*op.ComputerName, "_.") || !strings.EqualFold(*op.ComputerName, name):
		return "", &armError{http.StatusBadRequest, "InvalidParameter", "osProfile.computerName " + *op.ComputerName}
	case op.LinuxConfiguration == nil || op.LinuxConfiguration.SSH == nil || len(op.LinuxConfiguration.SSH.PublicKeys) == 0:
		return "", &armError{http.StatusBadRequest, "InvalidParameter", "linuxConfiguration.ssh.publicKeys required without a password"}
	case op.CustomData == nil || len(*op.CustomData) > customdata.MaxBase64Bytes:
		return "", &armError{http.StatusBadRequest, "InvalidParameter", "osProfile.customData missing or too long"}
	case sp == nil || sp.ImageReference == nil || sp.OSDisk == nil:
		return "", &armError{http.StatusBadRequest, "InvalidParameter", "storageProfile.imageReference and osDisk required"}
	}
	m := communityImagePattern.FindStringSubmatch(val(sp.ImageReference.CommunityGalleryImageID))
	if m == nil {
		return "", &armError{http.StatusBadRequest, "InvalidParameter", "image " + val(sp.ImageReference.CommunityGalleryImageID)}
	}
	if !s.imageVersionExists(m[1], m[2], m[3]) {
		return "", &armError{http.StatusNotFound, "GalleryImageNotFound", "image " + m[2] + " version " + m[3]}
	}
	it := s.o.Cloud.Catalog().Get(vmSize)
	if it != nil && (it.Labels["kubernetes.io/arch"] == "arm64") != strings.Contains(m[2], "arm64") {
		return "", &armError{http.StatusConflict, "BadRequest", "image " + m[2] + " does not run on " + vmSize}
	}
	// A Gen2 image on a size that boots only Gen1 (or the reverse) is refused by Compute.
	if it != nil && it.Azure != nil && (it.Azure.HyperVGeneration == "2") != (strings.Contains(m[2], "gen2") || strings.HasPrefix(m[2], "V3gen2")) {
		return "", &armError{http.StatusBadRequest, "BadRequest", "the VM size " + vmSize + " cannot boot Hypervisor Generation of image " + m[2]}
	}
	if d := sp.OSDisk.DiskSizeGB; d != nil && (*d < 30 || *d > 4095) {
		return "", &armError{http.StatusBadRequest, "InvalidParameter", "osDisk.diskSizeGB"}
	}
	osImage := "Ubuntu 22.04.5 LTS"
	switch {
	case strings.HasPrefix(m[1], "AKSAzureLinux"):
		osImage = "Microsoft Azure Linux 3.0"
	case strings.HasPrefix(m[2], "2404"):
		osImage = "Ubuntu 24.04.2 LTS"
	}
	return osImage, nil
}

// store records the VM as ARM returns it. inst, when set, gives the instance view's facts.
func (s *Server) store(name string, vm *armcompute.VirtualMachine, state string, inst *cloud.Instance) armcompute.VirtualMachine {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := *vm
	props := *vm.Properties
	cp.Properties = &props
	cp.ID = to.Ptr(vmID(s.o.SubscriptionID, s.o.ResourceGroup, name))
	cp.Name, cp.Type = to.Ptr(name), to.Ptr("Microsoft.Compute/virtualMachines")
	props.ProvisioningState = to.Ptr(state)
	props.VMID = to.Ptr(fmt.Sprintf("%08x-0000-4000-8000-000000000000", len(s.vms)+1))
	now := time.Now().UTC()
	if inst != nil {
		now = inst.LaunchTime
	}
	props.TimeCreated = &now
	props.OSProfile = cloneOSProfile(props.OSProfile)
	if props.OSProfile != nil && props.OSProfile.CustomData != nil {
		s.customData[strings.ToLower(name)] = *props.OSProfile.CustomData
	}
	s.vms[strings.ToLower(name)] = &cp
	return viewOf(&cp)
}

// viewOf is the VM as a GET shows it: customData is never returned by ARM.
func viewOf(vm *armcompute.VirtualMachine) armcompute.VirtualMachine {
	cp := *vm
	props := *vm.Properties
	props.OSProfile = cloneOSProfile(props.OSProfile)
	if props.OSProfile != nil {
		props.OSProfile.CustomData = nil
	}
	cp.Properties = &props
	return cp
}

func cloneOSProfile(o *armcompute.OSProfile) *armcompute.OSProfile {
	if o == nil {
		return nil
	}
	cp := *o
	return &cp
}

// view refreshes a VM from the fake cloud: a VM whose instance is shutting down is Deleting.
func (s *Server) view(vm *armcompute.VirtualMachine) armcompute.VirtualMachine {
	return viewOf(vm)
}

// sync drops VMs whose instance has terminated (spot eviction with evictionPolicy Delete, or a
// finished delete) with their NICs, and marks shutting-down ones Deleting.
func (s *Server) sync(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, vm := range s.vms {
		if val(vm.Properties.ProvisioningState) == stateFailed {
			continue
		}
		inst, err := s.o.Cloud.Get(ctx, "azure://"+*vm.ID)
		if errors.Is(err, cloud.ErrNotFound) || (err == nil && inst.State == cloud.StateTerminated) {
			delete(s.vms, key)
			s.dropNICsOf(vm)
			continue
		}
		if err == nil && inst.State == cloud.StateShuttingDown {
			vm.Properties.ProvisioningState = to.Ptr(stateDeleting)
		}
	}
}

// dropNICsOf deletes the VM's NICs whose deleteOption is Delete. Called with s.mu held.
func (s *Server) dropNICsOf(vm *armcompute.VirtualMachine) {
	if vm.Properties.NetworkProfile == nil {
		return
	}
	for _, n := range vm.Properties.NetworkProfile.NetworkInterfaces {
		if n.Properties != nil && val(n.Properties.DeleteOption) == armcompute.DeleteOptionsDelete && n.ID != nil {
			delete(s.nics, strings.ToLower((*n.ID)[strings.LastIndex(*n.ID, "/")+1:]))
		}
	}
}

func (s *Server) getVM(ctx context.Context, rg, name string, _ *armcompute.VirtualMachinesClientGetOptions) (resp azfake.Responder[armcompute.VirtualMachinesClientGetResponse], errResp azfake.ErrorResponder) {
	s.sync(ctx)
	vm, ok := s.VM(name)
	switch {
	case !s.rgOK(rg): // the group's error, not the VM's (rgNotFound)
		errResp.SetResponseError(http.StatusNotFound, codeRGNotFound)
		return
	case !ok:
		errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
		return
	}
	resp.SetResponse(http.StatusOK, armcompute.VirtualMachinesClientGetResponse{VirtualMachine: viewOf(&vm)}, nil)
	return
}

// deleteVM deletes whatever VM it is asked to, as ARM does (the cluster-tag check is the
// provider's): its instance starts shutting down, and it and its NIC disappear when it has.
func (s *Server) deleteVM(ctx context.Context, rg, name string, _ *armcompute.VirtualMachinesClientBeginDeleteOptions) (resp azfake.PollerResponder[armcompute.VirtualMachinesClientDeleteResponse], errResp azfake.ErrorResponder) {
	s.sync(ctx)
	vm, ok := s.VM(name)
	if !s.rgOK(rg) {
		errResp.SetResponseError(http.StatusNotFound, codeRGNotFound)
		return
	}
	if !ok {
		resp.SetTerminalResponse(http.StatusNoContent, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
		return
	}
	if val(vm.Properties.ProvisioningState) == stateFailed {
		s.mu.Lock()
		delete(s.vms, strings.ToLower(name))
		s.dropNICsOf(&vm) // ARM applies the NIC's deleteOption to a Failed VM's delete too
		s.mu.Unlock()
	} else if _, err := s.o.Cloud.Terminate(ctx, "azure://"+*vm.ID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
		errResp.SetError(err)
		return
	}
	s.sync(ctx)
	resp.AddNonTerminalResponse(http.StatusAccepted, nil)
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachinesClientDeleteResponse{}, nil)
	return
}

func (s *Server) listVMs(rg string, _ *armcompute.VirtualMachinesClientListOptions) (resp azfake.PagerResponder[armcompute.VirtualMachinesClientListResponse]) {
	s.sync(context.Background())
	if !s.rgOK(rg) {
		resp.AddResponseError(http.StatusNotFound, codeRGNotFound) // not an empty list (rgNotFound)
		return
	}
	s.mu.Lock()
	var all []*armcompute.VirtualMachine
	for _, vm := range s.vms {
		v := viewOf(vm)
		all = append(all, &v)
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return *all[i].Name < *all[j].Name })
	// Pages of at most 2 VMs, so callers must follow nextLink as they must with ARM.
	for i := 0; i < len(all) || i == 0; i += 2 {
		page := all[i:min(i+2, len(all))]
		resp.AddPage(http.StatusOK, armcompute.VirtualMachinesClientListResponse{VirtualMachineListResult: armcompute.VirtualMachineListResult{Value: page}}, nil)
		if len(all) == 0 {
			break
		}
	}
	return
}

func size(vm *armcompute.VirtualMachine) string {
	if vm.Properties == nil || vm.Properties.HardwareProfile == nil {
		return ""
	}
	return string(val(vm.Properties.HardwareProfile.VMSize))
}

// offeringZone is the zone label a VM's node gets: <region>-<zone> when it has a zone, else the
// fault domain cloud-provider-azure labels a standalone VM with (catalog.AzureRegionalZone).
// fake.LaunchVM refuses an offering its catalog does not sell (a zone in a region without zones)
// with SkuNotAvailable.
func offeringZone(region string, vm *armcompute.VirtualMachine) string {
	if len(vm.Zones) == 0 {
		return catalog.AzureRegionalZone
	}
	return catalog.AzureZone(region, val(vm.Zones[0]))
}

func zoneOf(vm *armcompute.VirtualMachine) string {
	if len(vm.Zones) == 0 {
		return ""
	}
	return val(vm.Zones[0])
}

func priority(vm *armcompute.VirtualMachine) string {
	if vm.Properties == nil {
		return ""
	}
	return string(val(vm.Properties.Priority))
}

func vmID(sub, rg, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s", sub, rg, name)
}

func nicID(sub, rg, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/networkInterfaces/%s", sub, rg, name)
}

// capacityMessage is the message Compute gives a capacity code the fake cloud reported (an
// offering it does not sell, or an InjectICE rule). SkuNotAvailable's is ARM's ("The requested
// VM size for resource 'Following SKUs have failed for Capacity Restrictions: <size>' is
// currently not available in location '<location>' …": Azure "Resolve errors for SKU not
// available"); an injected code names the rule, since no quota stands behind it (quota errors
// with their numbers come from Options.Quotas, checkQuota).
func capacityMessage(code string, o cloud.OfferingRef) string {
	if code == "SkuNotAvailable" {
		return fmt.Sprintf("The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: %s' is currently not available in location '%s'. "+
			"Please try another size or deploy to a different location or different zone. See https://aka.ms/azureskunotavailable for details.", o.InstanceType, o.Zone)
	}
	return "refused by an injected capacity rule of the fake cloud for " + o.String()
}

// checkIdentity checks the VM's managed identities: only user-assigned identities are used by
// AKS nodes (the kubelet identity), each must exist (Compute: 400 "FailedIdentityOperation",
// the identity resource not found) and the caller must hold
// Microsoft.ManagedIdentity/userAssignedIdentities/assign/action on it (ARM: 403
// "LinkedAuthorizationFailed", the client may write the VM but not act on the linked scope;
// Azure "Managed identity roles": Managed Identity Operator).
func (s *Server) checkIdentity(id *armcompute.VirtualMachineIdentity) *armError {
	if id == nil {
		return nil
	}
	t := val(id.Type)
	switch {
	case t == armcompute.ResourceIdentityTypeUserAssigned && len(id.UserAssignedIdentities) == 0:
		return &armError{http.StatusBadRequest, "InvalidParameter", "identity.userAssignedIdentities: required for type UserAssigned"}
	case t != armcompute.ResourceIdentityTypeUserAssigned && t != armcompute.ResourceIdentityTypeSystemAssignedUserAssigned && len(id.UserAssignedIdentities) > 0:
		return &armError{http.StatusBadRequest, "InvalidParameter", "identity.userAssignedIdentities: only with type UserAssigned"}
	}
	ids := make([]string, 0, len(id.UserAssignedIdentities))
	for k := range id.UserAssignedIdentities {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	for _, k := range ids {
		assignable, ok := false, false
		for known, a := range s.o.Identities {
			if strings.EqualFold(known, k) {
				assignable, ok = a, true
			}
		}
		switch {
		case !ok:
			return &armError{http.StatusBadRequest, "FailedIdentityOperation", "Identity operation for resource failed: user-assigned identity " + k + " was not found"}
		case !assignable:
			return &armError{http.StatusForbidden, "LinkedAuthorizationFailed", "the client does not have permission to perform action " +
				"'Microsoft.ManagedIdentity/userAssignedIdentities/assign/action' on the linked scope(s) '" + k + "'"}
		}
	}
	return nil
}
