package azureapi

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	computefake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"
	networkfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8/fake"
)

// ImageVersion is one published version of an AKS node image definition.
type ImageVersion struct {
	Name      string // AKS node image versions are YYYYMM.DD.PATCH
	Published time.Time
}

// DefaultImageVersions are the versions every AKS node image definition has unless
// Options.ImageVersions says otherwise: two releases, the later published last.
var DefaultImageVersions = []ImageVersion{
	{Name: "202611.03.0", Published: time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)},
	{Name: "202611.18.0", Published: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
}

// knownDefinitions are the AKS node image definitions of the two public galleries.
var knownDefinitions = regexp.MustCompile(`^(2204|2404)(gen2)?(arm64)?containerd$|^V3(gen2)?(arm64)?$`)

// versionsOf lists a definition's versions (nil for a gallery or definition that does not exist).
func (s *Server) versionsOf(gallery, definition string) []ImageVersion {
	if !communityGalleries[gallery] || !knownDefinitions.MatchString(definition) {
		return nil
	}
	if v, ok := s.o.ImageVersions[definition]; ok {
		return v
	}
	return DefaultImageVersions
}

var communityGalleries = map[string]bool{
	"AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2":     true,
	"AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b": true,
}

func (s *Server) galleryImageVersions() computefake.CommunityGalleryImageVersionsServer {
	return computefake.CommunityGalleryImageVersionsServer{NewListPager: s.listImageVersions}
}

// listImageVersions lists a community gallery image's versions in this region, one per page.
func (s *Server) listImageVersions(location, gallery, definition string, _ *armcompute.CommunityGalleryImageVersionsClientListOptions) (resp azfake.PagerResponder[armcompute.CommunityGalleryImageVersionsClientListResponse]) {
	versions := s.versionsOf(gallery, definition)
	if !strings.EqualFold(location, s.region) || versions == nil {
		resp.AddResponseError(http.StatusNotFound, "GalleryImageNotFound")
		return
	}
	for _, v := range versions {
		resp.AddPage(http.StatusOK, armcompute.CommunityGalleryImageVersionsClientListResponse{CommunityGalleryImageVersionList: armcompute.CommunityGalleryImageVersionList{
			Value: []*armcompute.CommunityGalleryImageVersion{{Name: to.Ptr(v.Name), Location: to.Ptr(s.region),
				Properties: &armcompute.CommunityGalleryImageVersionProperties{PublishedDate: to.Ptr(v.Published)}}}}}, nil)
	}
	return
}

// imageVersionExists reports whether a VM may boot gallery/definition at version ("latest" or a
// listed version).
func (s *Server) imageVersionExists(gallery, definition, version string) bool {
	versions := s.versionsOf(gallery, definition)
	if version == "latest" {
		return len(versions) > 0
	}
	for _, v := range versions {
		if v.Name == version {
			return true
		}
	}
	return false
}

func (s *Server) subnets() networkfake.SubnetsServer {
	return networkfake.SubnetsServer{Get: s.getSubnet}
}

// getSubnet answers a subnet of Options.Subnets (any resource group: the VNet may live outside
// the node resource group), provisioning state Succeeded.
func (s *Server) getSubnet(_ context.Context, rg, vnet, subnet string, _ *armnetwork.SubnetsClientGetOptions) (resp azfake.Responder[armnetwork.SubnetsClientGetResponse], errResp azfake.ErrorResponder) {
	id := "/subscriptions/" + s.o.SubscriptionID + "/resourceGroups/" + rg + "/providers/Microsoft.Network/virtualNetworks/" + vnet + "/subnets/" + subnet
	if !s.subnetExists(id) {
		errResp.SetResponseError(http.StatusNotFound, "NotFound")
		return
	}
	resp.SetResponse(http.StatusOK, armnetwork.SubnetsClientGetResponse{Subnet: armnetwork.Subnet{ID: to.Ptr(id), Name: to.Ptr(subnet),
		Properties: &armnetwork.SubnetPropertiesFormat{ProvisioningState: to.Ptr(armnetwork.ProvisioningStateSucceeded)}}}, nil)
	return
}
