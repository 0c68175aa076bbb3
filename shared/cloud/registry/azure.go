//go:build !lambda.norpc

// The Azure cloud links the Azure SDK (azcore, azidentity, armcompute): left out of the Lambda
// build (-tags lambda.norpc, azure_lambda.go), which runs only on AWS.

package registry

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/azurerefresh"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/aksclass"
)

func init() {
	clouds = append(clouds, Cloud{Name: Azure, NodeClassKind: apisv1.KindAKSNodeClass, Catalog: catalog.AzureRegionCatalog,
		FunctionCatalog: azureFunctionCatalog, NodeSettings: cloud.NodeSettingsFor, NodeClassRules: aksclass.Rules{}, New: newAzure})
}

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
	// KubernetesVersion is the control plane's version (AKSNodeClass status.kubernetesVersion).
	KubernetesVersion string
	// KubeletIdentityID is the ARM id of the kubelet user-assigned identity every VM carries.
	KubeletIdentityID string
	// ProvisionMode is azure.ProvisionModeScriptless ("" too) or
	// azure.ProvisionModeBootstrappingClient, which asks the NodeBootstrapping server at
	// NodeBootstrappingServerURL (http or https) about the AKS cluster ClusterName (empty: the
	// Dovetail cluster's name) in ClusterResourceGroup, in SubscriptionID, with Credential and
	// Bootstrap.Token (azure.NodeBootstrappingClient).
	ProvisionMode, NodeBootstrappingServerURL, ClusterResourceGroup, ClusterName string
	// RetailPricesURL is the Retail Prices API; empty: azurerefresh.RetailPricesURL (a local
	// endpoint in tests).
	RetailPricesURL string
	// Credential authenticates ARM calls; nil: azidentity's DefaultAzureCredential (workload
	// identity, managed identity, environment). ClientOptions nil is the public cloud (a local
	// fake's transport in local dev).
	Credential    azcore.TokenCredential
	ClientOptions *arm.ClientOptions
}

// azureFunctionCatalog is the catalog the functions decide with on Azure: with a subscription
// (a deployment), the region's catalog from the Resource SKUs and Retail Prices APIs
// (azurerefresh), shared through the claim-check store for Config.CatalogTTL
// (azurerefresh.Cached), falling back to the embedded one, logged, when they cannot be read;
// without one (local dev, tests), the embedded catalog of Config.Azure.Region.
func azureFunctionCatalog(ctx context.Context, c Config) (*catalog.Catalog, error) {
	a := c.Azure
	region := a.Region
	if region == "" {
		region = catalog.AzureRegion
	}
	if a.SubscriptionID == "" {
		return catalog.AzureRegionCatalog(region)
	}
	cred, err := azureCredential(a)
	if err != nil {
		return nil, err
	}
	skus, err := armcompute.NewResourceSKUsClient(a.SubscriptionID, cred, a.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure resource SKUs client: %w", err)
	}
	cat, err := azurerefresh.Cached(ctx, c.Blobs, c.CatalogTTL, time.Now(), azurerefresh.Options{Region: region, SKUs: skus, PricesURL: a.RetailPricesURL})
	if cat != nil {
		if err != nil && c.Logger != nil {
			c.Logger.Warn("azure catalog cache", "region", region, "err", err)
		}
		return cat, nil
	}
	if c.Logger != nil {
		c.Logger.Warn("azure catalog refresh failed; deciding with the embedded catalog", "region", region, "err", err)
	}
	return catalog.AzureRegionCatalog(region)
}

func azureCredential(a AzureConfig) (azcore.TokenCredential, error) {
	if a.Credential != nil {
		return a.Credential, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("azure credential: %w", err)
	}
	return cred, nil
}

func newAzure(_ context.Context, c Config) (cloud.Provider, error) {
	a := c.Azure
	cred, err := azureCredential(a)
	if err != nil {
		return nil, err
	}
	region := a.Region
	if region == "" {
		region = catalog.AzureRegion
	}
	nb, err := nodeBootstrappingClient(c, cred)
	if err != nil {
		return nil, err
	}
	return azure.New(azure.Options{Cluster: c.Cluster, SubscriptionID: a.SubscriptionID, ResourceGroup: a.NodeResourceGroup, Location: region,
		SubnetID: a.SubnetID, Catalog: c.Catalog, Credential: cred, ClientOptions: a.ClientOptions, Bootstrap: a.Bootstrap,
		NetworkPlugin: a.NetworkPlugin, SSHPublicKey: a.SSHPublicKey, KubernetesVersion: a.KubernetesVersion, KubeletIdentityID: a.KubeletIdentityID,
		ProvisionMode: a.ProvisionMode, NodeBootstrapping: nb})
}

// nodeBootstrappingClient is the NodeBootstrapping client of bootstrappingclient mode (nil in
// the other modes; an unknown mode is azure.New's to refuse). Errors name the flag of each
// setting the mode requires (shared/runtime/cloudflags), as the provider's option validation
// requires its server URL.
func nodeBootstrappingClient(c Config, cred azcore.TokenCredential) (azure.NodeBootstrappingAPI, error) {
	a := c.Azure
	if a.ProvisionMode != azure.ProvisionModeBootstrappingClient {
		return nil, nil
	}
	var missing []string
	if a.NodeBootstrappingServerURL == "" {
		missing = append(missing, "--aks-nodebootstrapping-server-url")
	}
	if a.ClusterResourceGroup == "" {
		missing = append(missing, "--aks-cluster-resource-group")
	}
	if a.SubscriptionID == "" {
		missing = append(missing, "--azure-subscription-id")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("azure: provision mode %s requires %s", azure.ProvisionModeBootstrappingClient, strings.Join(missing, ", "))
	}
	u, err := url.Parse(a.NodeBootstrappingServerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("azure: --aks-nodebootstrapping-server-url %q is not an http(s) URL without query or fragment", a.NodeBootstrappingServerURL)
	}
	cluster := a.ClusterName
	if cluster == "" {
		cluster = c.Cluster
	}
	return &azure.NodeBootstrappingClient{Endpoint: a.NodeBootstrappingServerURL, SubscriptionID: a.SubscriptionID, ResourceGroup: a.ClusterResourceGroup,
		Cluster: cluster, Credential: cred, Token: a.Bootstrap.Token}, nil
}
