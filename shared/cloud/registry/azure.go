package registry

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
)

// AzureConfig configures the Azure provider (shared/cloud/azure.Options has each field's rules).
type AzureConfig struct {
	// Region is the Azure location (eastus); empty: catalog.AzureRegion.
	Region string
	// SubscriptionID and NodeResourceGroup (MC_…) are where node VMs and NICs live.
	SubscriptionID, NodeResourceGroup string
	// SubnetID is the default subnet of node NICs (--vnet-subnet-id).
	SubnetID string
	// NetworkPlugin is catalog.AKSNetwork* ("" is Azure CNI Overlay).
	NetworkPlugin string
	// Bootstrap is what nodes join the cluster with; SSHPublicKey the nodes' admin key.
	Bootstrap    azure.Bootstrap
	SSHPublicKey string
	// Credential authenticates ARM calls; nil: azidentity's DefaultAzureCredential (workload
	// identity, managed identity, environment). ClientOptions nil is the public cloud (a local
	// fake's transport in local dev).
	Credential    azcore.TokenCredential
	ClientOptions *arm.ClientOptions
}

// azureFunctionCatalog is the catalog the functions decide with on Azure: the embedded catalog of
// Config.Azure.Region (the Resource SKUs and Retail Prices refresh is not built yet).
func azureFunctionCatalog(_ context.Context, c Config) (*catalog.Catalog, error) {
	return catalog.AzureRegionCatalog(c.Azure.Region)
}

func newAzure(_ context.Context, c Config) (cloud.Provider, error) {
	a := c.Azure
	cred := a.Credential
	if cred == nil {
		var err error
		if cred, err = azidentity.NewDefaultAzureCredential(nil); err != nil {
			return nil, fmt.Errorf("azure credential: %w", err)
		}
	}
	region := a.Region
	if region == "" {
		region = catalog.AzureRegion
	}
	return azure.New(azure.Options{Cluster: c.Cluster, SubscriptionID: a.SubscriptionID, ResourceGroup: a.NodeResourceGroup, Location: region,
		SubnetID: a.SubnetID, Catalog: c.Catalog, Credential: cred, ClientOptions: a.ClientOptions, Bootstrap: a.Bootstrap,
		NetworkPlugin: a.NetworkPlugin, SSHPublicKey: a.SSHPublicKey})
}
