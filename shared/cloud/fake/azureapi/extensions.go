package azureapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	computefake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"
)

// knownExtensions are the VM extension handlers the fake's images know, by publisher/type, with
// their major handler version: the Linux CustomScript extension 2.x (Azure
// "Use the Azure Custom Script Extension Version 2 with Linux virtual machines": publisher
// Microsoft.Azure.Extensions, type CustomScript, typeHandlerVersion 2.1 or 2.0). Another
// publisher, type or major version is ARM's 404 ArtifactNotFound (the extension image does not
// exist in the location).
var knownExtensions = map[string]string{"microsoft.azure.extensions/customscript": "2"}

func (s *Server) extensions() computefake.VirtualMachineExtensionsServer {
	return computefake.VirtualMachineExtensionsServer{BeginCreateOrUpdate: s.createExtension, Get: s.getExtension}
}

// createExtension creates a VM extension as Compute does: the parent VM must exist and be
// running (404 ParentResourceNotFound; a VM in state Failed or Deleting 409
// OperationNotAllowed), in the VM's location, of a known handler. A CustomScript extension then
// runs its command on the VM: exactly one commandToExecute, public or protected (the extension's
// schema: both, or neither, fail the operation with VMExtensionProvisioningError). The command is
// read as the node image's provisioning reads the AKS bootstrap contract, and the VM's kubelet
// registers from it (fake.Cloud.ProvisionVM), or never does when it cannot.
func (s *Server) createExtension(_ context.Context, rg, vmName, name string, ext armcompute.VirtualMachineExtension, _ *armcompute.VirtualMachineExtensionsClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armcompute.VirtualMachineExtensionsClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	call := "VirtualMachineExtensions.CreateOrUpdate " + vmName + "/" + name
	vm, ok := s.VM(vmName)
	p := ext.Properties
	var e *armError
	switch {
	case !s.rgOK(rg):
		e = &armError{http.StatusNotFound, codeRGNotFound, "resource group " + rg}
	case !ok:
		e = &armError{http.StatusNotFound, "ParentResourceNotFound", "Can not perform requested operation on nested resource. Parent resource '" + vmName + "' not found."}
	case val(vm.Properties.ProvisioningState) != stateSucceeded:
		e = &armError{http.StatusConflict, "OperationNotAllowed", "VM " + vmName + " is in state " + val(vm.Properties.ProvisioningState)}
	case ext.Location == nil || !strings.EqualFold(*ext.Location, s.region):
		e = &armError{http.StatusBadRequest, "InvalidParameter", "location " + val(ext.Location) + ": an extension is in its VM's location"}
	case p == nil || p.Publisher == nil || p.Type == nil || p.TypeHandlerVersion == nil:
		e = &armError{http.StatusBadRequest, "InvalidParameter", "properties.publisher, type and typeHandlerVersion are required"}
	}
	if e == nil {
		e = checkTags(ext.Tags)
	}
	if e == nil {
		major, _, _ := strings.Cut(*p.TypeHandlerVersion, ".")
		if knownExtensions[strings.ToLower(*p.Publisher+"/"+*p.Type)] != major {
			e = &armError{http.StatusNotFound, "ArtifactNotFound", "The VM extension with publisher '" + *p.Publisher + "' and type '" + *p.Type + "' and version '" + *p.TypeHandlerVersion + "' could not be found."}
		}
	}
	if e != nil {
		s.fail(&errResp, call, e)
		return
	}
	cmd, why := commandOf(p)
	stored := s.storeExtension(vmName, name, ext, why == "")
	if why != "" {
		s.refuse(call, "VMExtensionProvisioningError", why)
		resp.AddNonTerminalResponse(http.StatusCreated, nil)
		resp.SetTerminalError(http.StatusOK, "VMExtensionProvisioningError")
		return
	}
	var diskGB *int32
	if sp := vm.Properties.StorageProfile; sp != nil && sp.OSDisk != nil {
		diskGB = sp.OSDisk.DiskSizeGB
	}
	if err := s.o.Cloud.ProvisionVM(vmName, provisioning(base64.StdEncoding.EncodeToString([]byte(cmd)), diskGB)); err != nil {
		// The command ran on a node that had already joined (or is gone): the extension
		// succeeds, and nothing changes on the node.
		s.refuse(call, "", err.Error())
	}
	resp.AddNonTerminalResponse(http.StatusCreated, nil)
	resp.SetTerminalResponse(http.StatusOK, armcompute.VirtualMachineExtensionsClientCreateOrUpdateResponse{VirtualMachineExtension: stored}, nil)
	return
}

// commandOf is a CustomScript extension's command, from settings or protectedSettings (both maps
// as the SDK sends them), or why the extension fails.
func commandOf(p *armcompute.VirtualMachineExtensionProperties) (string, string) {
	pub, _ := p.Settings.(map[string]any)
	prot, _ := p.ProtectedSettings.(map[string]any)
	a, inPub := pub["commandToExecute"].(string)
	b, inProt := prot["commandToExecute"].(string)
	switch {
	case inPub && inProt:
		return "", "commandToExecute is in both public and protected settings"
	case inPub && a != "":
		return a, ""
	case inProt && b != "":
		return b, ""
	}
	return "", "Enable failed: commandToExecute (or script) is required"
}

// storeExtension records the extension as a GET returns it: protectedSettings are never returned.
func (s *Server) storeExtension(vm, name string, ext armcompute.VirtualMachineExtension, ok bool) armcompute.VirtualMachineExtension {
	s.mu.Lock()
	defer s.mu.Unlock()
	props := *ext.Properties
	props.ProtectedSettings = nil
	props.ProvisioningState = to.Ptr(map[bool]string{true: stateSucceeded, false: stateFailed}[ok])
	cp := ext
	cp.Properties = &props
	cp.ID = to.Ptr(vmID(s.o.SubscriptionID, s.o.ResourceGroup, vm) + "/extensions/" + name)
	cp.Name, cp.Type = to.Ptr(name), to.Ptr("Microsoft.Compute/virtualMachines/extensions")
	s.exts[strings.ToLower(vm+"/"+name)] = &cp
	return cp
}

func (s *Server) getExtension(_ context.Context, rg, vm, name string, _ *armcompute.VirtualMachineExtensionsClientGetOptions) (resp azfake.Responder[armcompute.VirtualMachineExtensionsClientGetResponse], errResp azfake.ErrorResponder) {
	ext, ok := s.Extension(vm, name)
	switch {
	case !s.rgOK(rg):
		errResp.SetResponseError(http.StatusNotFound, codeRGNotFound)
	case !ok:
		errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
	default:
		resp.SetResponse(http.StatusOK, armcompute.VirtualMachineExtensionsClientGetResponse{VirtualMachineExtension: ext}, nil)
	}
	return
}

// Extension returns a VM's extension as a GET shows it, while the VM exists.
func (s *Server) Extension(vm, name string) (armcompute.VirtualMachineExtension, bool) {
	if _, ok := s.VM(vm); !ok {
		return armcompute.VirtualMachineExtension{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.exts[strings.ToLower(vm+"/"+name)]
	if !ok {
		return armcompute.VirtualMachineExtension{}, false
	}
	return *e, true
}
