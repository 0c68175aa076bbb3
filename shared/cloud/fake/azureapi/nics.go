package azureapi

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"
	networkfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8/fake"
)

func (s *Server) interfaces() networkfake.InterfacesServer {
	return networkfake.InterfacesServer{BeginCreateOrUpdate: s.createNIC, Get: s.getNIC, BeginDelete: s.deleteNIC, NewListPager: s.listNICs}
}

// nicView is a NIC as ARM returns it: properties.virtualMachine names the VM that uses it (ARM
// sets it when a VM references the NIC and clears it when the VM is gone). Called with s.mu held.
func (s *Server) nicView(n *armnetwork.Interface) armnetwork.Interface {
	cp := *n
	props := *n.Properties
	props.VirtualMachine = nil
	id := strings.ToLower(val(n.ID))
	for _, vm := range s.vms {
		for _, ref := range vm.Properties.NetworkProfile.NetworkInterfaces {
			if strings.ToLower(val(ref.ID)) == id {
				props.VirtualMachine = &armnetwork.SubResource{ID: vm.ID}
			}
		}
	}
	cp.Properties = &props
	return cp
}

// listNICs lists the resource group's NICs in pages of at most 2, so callers must follow nextLink.
func (s *Server) listNICs(rg string, _ *armnetwork.InterfacesClientListOptions) (resp azfake.PagerResponder[armnetwork.InterfacesClientListResponse]) {
	s.sync(context.Background())
	if !s.rgOK(rg) {
		resp.AddResponseError(http.StatusNotFound, codeRGNotFound) // not an empty list (rgNotFound)
		return
	}
	s.mu.Lock()
	var all []*armnetwork.Interface
	for _, n := range s.nics {
		v := s.nicView(n)
		all = append(all, &v)
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return *all[i].Name < *all[j].Name })
	for i := 0; i < len(all) || i == 0; i += 2 {
		page := all[i:min(i+2, len(all))]
		resp.AddPage(http.StatusOK, armnetwork.InterfacesClientListResponse{InterfaceListResult: armnetwork.InterfaceListResult{Value: page}}, nil)
		if len(all) == 0 {
			break
		}
	}
	return
}

// createNIC creates or updates a NIC in this region: its IP configurations in existing subnets
// (checkIPConfigurations), its backend pools and NSG existing in the node resource group.
func (s *Server) createNIC(_ context.Context, rg, name string, nic armnetwork.Interface, _ *armnetwork.InterfacesClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armnetwork.InterfacesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	var e *armError
	switch {
	case !s.rgOK(rg):
		e = &armError{http.StatusNotFound, codeRGNotFound, "resource group " + rg}
	case !vmNamePattern.MatchString(name):
		e = &armError{http.StatusBadRequest, "InvalidResourceName", name}
	case nic.Location == nil || !strings.EqualFold(*nic.Location, s.region):
		e = &armError{http.StatusBadRequest, "InvalidResourceLocation", val(nic.Location)}
	case nic.Properties == nil || len(nic.Properties.IPConfigurations) == 0:
		e = &armError{http.StatusBadRequest, "InvalidRequestFormat", "ipConfigurations required"}
	}
	if e == nil {
		e = checkTags(nic.Tags)
	}
	if e == nil {
		e = s.checkIPConfigurations(&nic)
	}
	if e != nil {
		s.fail(&errResp, "NetworkInterfaces.CreateOrUpdate "+name, e)
		return
	}
	s.mu.Lock()
	cp := nic
	props := *nic.Properties
	cp.Properties = &props
	cp.ID = to.Ptr(nicID(s.o.SubscriptionID, s.o.ResourceGroup, name))
	cp.Name, cp.Type = to.Ptr(name), to.Ptr("Microsoft.Network/networkInterfaces")
	props.ProvisioningState = to.Ptr(armnetwork.ProvisioningStateSucceeded)
	props.MacAddress = to.Ptr(fmt.Sprintf("00-0D-3A-00-%02X-%02X", len(s.nics)/256%256, len(s.nics)%256))
	s.nics[strings.ToLower(name)] = &cp
	s.mu.Unlock()
	resp.AddNonTerminalResponse(http.StatusCreated, nil)
	resp.SetTerminalResponse(http.StatusOK, armnetwork.InterfacesClientCreateOrUpdateResponse{Interface: cp}, nil)
	return
}

func (s *Server) subnetExists(id string) bool {
	for _, sub := range s.o.Subnets {
		if strings.EqualFold(sub, id) {
			return true
		}
	}
	return false
}

func (s *Server) getNIC(ctx context.Context, rg, name string, _ *armnetwork.InterfacesClientGetOptions) (resp azfake.Responder[armnetwork.InterfacesClientGetResponse], errResp azfake.ErrorResponder) {
	s.sync(ctx)
	nic, ok := s.NIC(name)
	switch {
	case !s.rgOK(rg):
		errResp.SetResponseError(http.StatusNotFound, codeRGNotFound)
		return
	case !ok:
		errResp.SetResponseError(http.StatusNotFound, "NotFound")
		return
	}
	resp.SetResponse(http.StatusOK, armnetwork.InterfacesClientGetResponse{Interface: nic}, nil)
	return
}

// deleteNIC deletes a NIC no VM uses (ARM: NicInUse otherwise); a missing one is success.
func (s *Server) deleteNIC(ctx context.Context, rg, name string, _ *armnetwork.InterfacesClientBeginDeleteOptions) (resp azfake.PollerResponder[armnetwork.InterfacesClientDeleteResponse], errResp azfake.ErrorResponder) {
	s.sync(ctx)
	if !s.rgOK(rg) { // the fake deleted the NIC of that name in its own group
		errResp.SetResponseError(http.StatusNotFound, codeRGNotFound)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := strings.ToLower(nicID(s.o.SubscriptionID, s.o.ResourceGroup, name))
	for _, vm := range s.vms {
		for _, n := range vm.Properties.NetworkProfile.NetworkInterfaces {
			if strings.ToLower(val(n.ID)) == id {
				errResp.SetResponseError(http.StatusBadRequest, "NicInUse")
				return
			}
		}
	}
	delete(s.nics, strings.ToLower(name))
	resp.SetTerminalResponse(http.StatusOK, armnetwork.InterfacesClientDeleteResponse{}, nil)
	return
}
