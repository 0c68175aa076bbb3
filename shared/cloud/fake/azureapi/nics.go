package azureapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"
	networkfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8/fake"
)

func (s *Server) interfaces() networkfake.InterfacesServer {
	return networkfake.InterfacesServer{BeginCreateOrUpdate: s.createNIC, Get: s.getNIC, BeginDelete: s.deleteNIC}
}

// createNIC creates or updates a NIC: one IP configuration in an existing subnet of this region.
func (s *Server) createNIC(_ context.Context, rg, name string, nic armnetwork.Interface, _ *armnetwork.InterfacesClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armnetwork.InterfacesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
	fail := func(status int, code, why string) {
		s.refuse("NetworkInterfaces.CreateOrUpdate "+name, code, why)
		errResp.SetResponseError(status, code)
	}
	switch {
	case !s.rgOK(rg):
		fail(http.StatusNotFound, "ResourceGroupNotFound", rg)
		return
	case !vmNamePattern.MatchString(name):
		fail(http.StatusBadRequest, "InvalidResourceName", name)
		return
	case nic.Location == nil || !strings.EqualFold(*nic.Location, s.region):
		fail(http.StatusBadRequest, "InvalidResourceLocation", val(nic.Location))
		return
	case nic.Properties == nil || len(nic.Properties.IPConfigurations) == 0:
		fail(http.StatusBadRequest, "InvalidRequestFormat", "ipConfigurations required")
		return
	}
	if e := checkTags(nic.Tags); e != nil {
		fail(e.status, e.code, e.msg)
		return
	}
	for _, ipc := range nic.Properties.IPConfigurations {
		if ipc.Properties == nil || ipc.Properties.Subnet == nil || !s.subnetExists(val(ipc.Properties.Subnet.ID)) {
			fail(http.StatusBadRequest, "InvalidResourceReference", "subnet not found")
			return
		}
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

func (s *Server) getNIC(_ context.Context, rg, name string, _ *armnetwork.InterfacesClientGetOptions) (resp azfake.Responder[armnetwork.InterfacesClientGetResponse], errResp azfake.ErrorResponder) {
	nic, ok := s.NIC(name)
	if !s.rgOK(rg) || !ok {
		errResp.SetResponseError(http.StatusNotFound, "NotFound")
		return
	}
	resp.SetResponse(http.StatusOK, armnetwork.InterfacesClientGetResponse{Interface: nic}, nil)
	return
}

// deleteNIC deletes a NIC no VM uses (ARM: NicInUse otherwise); a missing one is success.
func (s *Server) deleteNIC(ctx context.Context, rg, name string, _ *armnetwork.InterfacesClientBeginDeleteOptions) (resp azfake.PollerResponder[armnetwork.InterfacesClientDeleteResponse], errResp azfake.ErrorResponder) {
	s.sync(ctx)
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
