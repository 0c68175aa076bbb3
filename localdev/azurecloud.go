package localdev

import (
	"io/fs"
	"strings"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"

	"github.com/dovetail-dev/dovetail/localdev/azureseed"
	seed "github.com/dovetail-dev/dovetail/localdev/manifests"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

// CloudAzure uses the real Azure provider (azure-sdk-for-go armcompute/armnetwork clients)
// against the fake cloud's Azure Resource Manager face (shared/cloud/fake/azureapi: the SDK's
// own server fakes answered from the fake cloud), over the embedded Azure catalog; the seed
// scenario is the AKS one (localdev/azureseed).
const CloudAzure = "azure"

// The fake Azure account: the placeholders of the team's data (no real subscription).
const (
	localSubscription = "00000000-0000-0000-0000-000000000000"
	// localNodeResourceGroup is spelled as AKS names node resource groups (MC_…, mixed case),
	// so the providerID's lower-case resource group (cloud-node-manager's spelling) is exercised.
	localNodeResourceGroup = "MC_rg-fake-nodes"
	localSubnet            = "/subscriptions/" + localSubscription + "/resourceGroups/rg-fake-vnet/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet"
	// localClusterResourceGroup and localClusterName name the fake managed cluster (the resource
	// group of the AKS resource, not the node resource group): NodeBootstrapping_Get's path.
	localClusterResourceGroup = "rg-fake"
	localClusterName          = "aks-fake"
	// localSSHKey is a placeholder admin key: the fake checks one is given, never uses it.
	localSSHKey = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDdovetailfakekey dovetail-dev"
)

// azureProvider starts the Azure face over e.Cloud and builds the Azure provider against it.
func (e *Env) azureProvider() (cloud.Provider, error) {
	e.AzureAPI = azureapi.New(azureapi.Options{Cloud: e.Cloud, SubscriptionID: localSubscription, ResourceGroup: localNodeResourceGroup,
		Subnets: []string{localSubnet}, Log: e.Options.Log})
	e.Progress.Printf("Azure Resource Manager face of the fake cloud (armcompute/armnetwork server fakes), azure provider, %s catalog", e.Catalog.Region)
	boot := azureapi.LocalBootstrap(localClusterEndpoint)
	o := azure.Options{Cluster: e.Options.Cluster, SubscriptionID: localSubscription, ResourceGroup: localNodeResourceGroup,
		Location: e.Catalog.Region, SubnetID: localSubnet, Catalog: e.Catalog, Credential: &azfake.TokenCredential{},
		ClientOptions: e.AzureAPI.ClientOptions(), SSHPublicKey: localSSHKey, PollInterval: time.Second, KubernetesVersion: strings.TrimPrefix(fake.DefaultKubeletVersion, "v"),
		Bootstrap: boot, ProvisionMode: e.Options.AKSProvisionMode}
	if o.ProvisionMode == azure.ProvisionModeBootstrappingClient {
		// The fake AKS answers NodeBootstrapping_Get for the managed cluster from its own
		// knowledge of the cluster (the same bootstrap the local rendering uses) and the request's
		// agent pool profile; the provider's real client speaks its wire format in-process.
		e.AKSAPI = &azureapi.NodeBootstrapping{SubscriptionID: localSubscription, ResourceGroup: localClusterResourceGroup, Cluster: localClusterName,
			Answer: azureapi.AKSAnswer(azureapi.AKSCluster{Bootstrap: boot, SubscriptionID: localSubscription, NodeResourceGroup: localNodeResourceGroup,
				Location: e.Catalog.Region, NetworkPlugin: "none"})}
		o.NodeBootstrapping = &azure.NodeBootstrappingClient{Endpoint: "http://nodebootstrapping.fake", SubscriptionID: localSubscription,
			ResourceGroup: localClusterResourceGroup, Cluster: localClusterName, Credential: &azfake.TokenCredential{}, Token: boot.Token, HTTP: e.AKSAPI.Client()}
	}
	e.Progress.Printf("AKS provision mode %s", map[bool]string{true: o.ProvisionMode, false: azure.ProvisionModeScriptless}[o.ProvisionMode != ""])
	return azure.New(o)
}

// loadAzureSeed is the AKS seed scenario: the AKS NodePool, AKSNodeClass and system nodes, and
// the seed's workloads.
func loadAzureSeed() (*manifests.Set, error) {
	return manifests.LoadFS(overlayFS{azureseed.FS, seed.FS}, "nodepool.yaml", "system-nodes.yaml", "workloads.yaml")
}

// overlayFS opens a name from the first file system that has it.
type overlayFS []fs.FS

func (o overlayFS) Open(name string) (fs.File, error) {
	for _, f := range o {
		if file, err := f.Open(name); err == nil {
			return file, nil
		}
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}
