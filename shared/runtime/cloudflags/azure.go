//go:build !lambda.norpc

package cloudflags

import (
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/registry"
)

// azureConfig is the Azure cloud's settings from the flags (none in the Lambda build, which has
// no Azure cloud: azure_lambda.go).
func (o *Options) azureConfig() registry.AzureConfig {
	return registry.AzureConfig{Region: o.Region, SubscriptionID: o.AzureSubscriptionID, NodeResourceGroup: o.AzureNodeResourceGroup,
		SubnetID: o.AzureSubnetID, NetworkPlugin: o.AzureNetworkPlugin, SSHPublicKey: o.AKSSSHPublicKey, KubernetesVersion: o.AKSKubernetesVersion, KubeletIdentityID: o.AKSKubeletIdentityID,
		ProvisionMode: o.AKSProvisionMode, NodeBootstrappingServerURL: o.AKSNodeBootstrappingServerURL, ClusterResourceGroup: o.AKSClusterResourceGroup, ClusterName: o.AKSClusterName,
		Bootstrap: azure.Bootstrap{APIServer: o.AKSAPIServer, CA: o.AKSCA, Token: o.AKSBootstrapToken, KubeletIdentityClientID: o.AKSKubeletIdentityClientID,
			TenantID: o.AKSTenantID, NetworkPolicy: o.AKSNetworkPolicy, NetworkDataplane: o.AKSNetworkDataplane, VNetGUID: o.AKSVNetGUID}}
}
