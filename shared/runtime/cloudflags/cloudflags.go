// Package cloudflags holds the cloud-provider flags every function binary shares (--cloud, one of
// the clouds in shared/cloud/registry, and the AWS provider's settings) and the scheduling
// policies (policyflags), and builds the cloud.Provider they select. Each flag also reads its environment variable (runtime.EnvName:
// --cloud → DOVETAIL_CLOUD), which is how Lambda passes them.
package cloudflags

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/catalogcache"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/cloudmetrics"
	"github.com/dovetail-dev/dovetail/shared/cloud/registry"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provisioning/policyflags"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Options are the flags' values.
type Options struct {
	Cloud, AWSEndpoint, Region                                  string
	EKSName, EKSEndpoint, EKSCA, ServiceCIDR, KubernetesVersion string
	ClusterDNS                                                  string
	// Governance is what the deployment's IAM lets NodeClasses launch with (infra/aws's
	// governance parameters, passed as DOVETAIL_DISCOVERY_TAG_KEY and the like).
	Governance dvaws.Governance
	// Azure: where node VMs go and what they join with (registry.AzureConfig). The bootstrap
	// token is a secret: pass it in the environment (DOVETAIL_AKS_BOOTSTRAP_TOKEN), not argv.
	AzureSubscriptionID, AzureNodeResourceGroup, AzureSubnetID, AzureNetworkPlugin                            string
	AKSAPIServer, AKSCA, AKSBootstrapToken, AKSSSHPublicKey, AKSKubeletIdentityClientID, AKSKubernetesVersion string
	// The rest of the AKS bootstrap contract's cluster inputs (azure.Bootstrap).
	AKSTenantID, AKSNetworkPolicy, AKSNetworkDataplane, AKSVNetGUID string
	AKSKubeletIdentityID                                            string
	// AKSProvisionMode is the Azure provider's provision mode (aksscriptless or
	// bootstrappingclient); with bootstrappingclient, the NodeBootstrapping server and the managed
	// cluster it is asked about (registry.AzureConfig).
	AKSProvisionMode, AKSNodeBootstrappingServerURL, AKSClusterResourceGroup, AKSClusterName string
	// Policies are the scheduling policies every planning function decides under
	// (--min-values-policy, --preference-policy; env DOVETAIL_MIN_VALUES_POLICY and
	// DOVETAIL_PREFERENCE_POLICY).
	Policies policyflags.Flags
}

// Register adds the flags to fs, with their environment variables as defaults.
func (o *Options) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Cloud, "cloud", runtime.EnvDefault("cloud", registry.Fake), "cloud provider: "+strings.Join(registry.Names(), ", ")+" (fake: in-memory, local dev; aws: EC2; azure: Azure VMs for AKS); env "+runtime.EnvName("cloud"))
	fs.StringVar(&o.AWSEndpoint, "aws-endpoint", runtime.EnvDefault("aws-endpoint", ""), "aws: EC2/SSM endpoint URL (a local endpoint); empty: the real AWS endpoints")
	fs.StringVar(&o.Region, "region", runtime.EnvDefault("region", ""), "region whose catalog the function decides with; aws: empty is the SDK's default (AWS_REGION), the catalog is refreshed from the EC2 and Price List APIs; fake: an embedded region ("+strings.Join(catalog.EmbeddedRegions, ", ")+"), empty is us-east-1")
	fs.StringVar(&o.EKSName, "eks-cluster-name", runtime.EnvDefault("eks-cluster-name", ""), "aws: EKS cluster name nodes join; empty: --cluster")
	fs.StringVar(&o.EKSEndpoint, "eks-endpoint", runtime.EnvDefault("eks-endpoint", ""), "aws: EKS API server URL nodes join")
	fs.StringVar(&o.EKSCA, "eks-ca", runtime.EnvDefault("eks-ca", ""), "aws: EKS cluster CA bundle (base64)")
	fs.StringVar(&o.ServiceCIDR, "service-cidr", runtime.EnvDefault("service-cidr", ""), "aws: override of the service CIDR the agent discovers (the default ServiceCIDR object); empty: the discovered one, else "+dvaws.DefaultServiceCIDR)
	fs.StringVar(&o.KubernetesVersion, "kubernetes-version", runtime.EnvDefault("kubernetes-version", ""), "aws: override of the Kubernetes minor version (1.31) the agent discovers (/version), for AMI aliases; empty: the discovered one")
	fs.StringVar(&o.ClusterDNS, "cluster-dns", runtime.EnvDefault("cluster-dns", ""), "aws: override of the cluster DNS address the agent discovers (the kube-system/kube-dns Service), the kubelet's clusterDNS when a NodeClass sets none; empty: the discovered one")
	g := &o.Governance
	fs.StringVar(&g.DiscoveryTagKey, "discovery-tag-key", runtime.EnvDefault("discovery-tag-key", ""), "aws: tag key of the subnets and security groups nodes may use; empty: "+dvaws.DefaultDiscoveryTagKey)
	fs.StringVar(&g.DiscoveryTagValue, "discovery-tag-value", runtime.EnvDefault("discovery-tag-value", ""), "aws: the discovery tag's value; empty: --eks-cluster-name")
	fs.StringVar(&g.VPC, "vpc-id", runtime.EnvDefault("vpc-id", ""), "aws: the only VPC nodes may use; empty: any")
	fs.StringSliceVar(&g.ImageOwners, "image-owners", envList("image-owners"), "aws: account IDs whose AMIs may boot besides Amazon's (comma-separated)")
	fs.StringSliceVar(&g.AMIParameterPaths, "ami-parameter-paths", envList("ami-parameter-paths"), "aws: SSM paths custom ssmParameter AMI terms may read (comma-separated)")
	fs.StringSliceVar(&g.MandatoryTags, "mandatory-tags", envList("mandatory-tags"), "aws: tag keys every EC2NodeClass's spec.tags must hold (comma-separated)")
	fs.StringVar(&o.AzureSubscriptionID, "azure-subscription-id", runtime.EnvDefault("azure-subscription-id", ""), "azure: subscription of the node resource group; with it the catalog is read from the Resource SKUs and Retail Prices APIs")
	fs.StringVar(&o.AzureNodeResourceGroup, "azure-node-resource-group", runtime.EnvDefault("azure-node-resource-group", ""), "azure: the cluster's node resource group (MC_...)")
	fs.StringVar(&o.AzureSubnetID, "azure-subnet-id", runtime.EnvDefault("azure-subnet-id", ""), "azure: default subnet of node NICs (ARM id)")
	fs.StringVar(&o.AzureNetworkPlugin, "azure-network-plugin", runtime.EnvDefault("azure-network-plugin", ""), "azure: azure-overlay (default), azure, kubenet or none")
	fs.StringVar(&o.AKSAPIServer, "aks-api-server", runtime.EnvDefault("aks-api-server", ""), "azure: API server URL nodes join")
	fs.StringVar(&o.AKSCA, "aks-ca", runtime.EnvDefault("aks-ca", ""), "azure: cluster CA bundle (base64)")
	fs.StringVar(&o.AKSBootstrapToken, "aks-bootstrap-token", runtime.EnvDefault("aks-bootstrap-token", ""), "azure: kubelet TLS bootstrap token (set it in the environment)")
	fs.StringVar(&o.AKSKubernetesVersion, "aks-kubernetes-version", runtime.EnvDefault("aks-kubernetes-version", ""), "azure: the control plane's Kubernetes version (1.33.2), written to AKSNodeClass status.kubernetesVersion")
	fs.StringVar(&o.AKSSSHPublicKey, "aks-ssh-public-key", runtime.EnvDefault("aks-ssh-public-key", ""), "azure: admin SSH public key of the nodes")
	fs.StringVar(&o.AKSKubeletIdentityClientID, "aks-kubelet-identity-client-id", runtime.EnvDefault("aks-kubelet-identity-client-id", ""), "azure: kubelet managed identity client id")
	fs.StringVar(&o.AKSTenantID, "aks-tenant-id", runtime.EnvDefault("aks-tenant-id", ""), "azure: Microsoft Entra tenant of the subscription (nodes' azure.json)")
	fs.StringVar(&o.AKSNetworkPolicy, "aks-network-policy", runtime.EnvDefault("aks-network-policy", ""), "azure: the cluster's network policy: empty, azure, calico or cilium")
	fs.StringVar(&o.AKSNetworkDataplane, "aks-network-dataplane", runtime.EnvDefault("aks-network-dataplane", ""), "azure: the cluster's network dataplane: empty (azure) or cilium")
	fs.StringVar(&o.AKSVNetGUID, "aks-vnet-guid", runtime.EnvDefault("aks-vnet-guid", ""), "azure: resourceGuid of the cluster VNet (Azure CNI Overlay node label)")
	o.Policies.Register(fs, runtime.EnvDefault)
	fs.StringVar(&o.AKSProvisionMode, "aks-provision-mode", runtime.EnvDefault("aks-provision-mode", "aksscriptless"), "azure: how nodes get the AKS bootstrap: aksscriptless (rendered by the function into the VM's custom data) or bootstrappingclient (asked of AKS's NodeBootstrapping server, the provisioning command run as the VM's CustomScript extension cse-agent-karpenter); the Azure Karpenter provider's --provision-mode")
	fs.StringVar(&o.AKSNodeBootstrappingServerURL, "aks-nodebootstrapping-server-url", runtime.EnvDefault("aks-nodebootstrapping-server-url", ""), "azure: URL of the NodeBootstrapping server (the provider's --nodebootstrapping-server-url); required with --aks-provision-mode bootstrappingclient")
	fs.StringVar(&o.AKSClusterResourceGroup, "aks-cluster-resource-group", runtime.EnvDefault("aks-cluster-resource-group", ""), "azure: resource group of the AKS cluster resource (not the node resource group); required with --aks-provision-mode bootstrappingclient")
	fs.StringVar(&o.AKSClusterName, "aks-cluster-name", runtime.EnvDefault("aks-cluster-name", ""), "azure: name of the AKS cluster resource, asked about in bootstrappingclient mode; empty: --cluster")
	fs.StringVar(&o.AKSKubeletIdentityID, "aks-kubelet-identity-id", runtime.EnvDefault("aks-kubelet-identity-id", ""), "azure: ARM id of the kubelet user-assigned identity every node VM carries (the launch identity must be allowed to assign it)")
}

// envList reads a comma-separated list flag's environment variable; empty items are dropped (the
// stacks pass "" for an empty list).
func envList(flag string) []string {
	var out []string
	for _, v := range strings.Split(runtime.EnvDefault(flag, ""), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Env is what a function's Build starts with: the selected cloud's catalog, its NodeClass →
// node settings rule and its provider.
type Env struct {
	Catalog      *catalog.Catalog
	NodeSettings provisioning.NodeSettingsFunc
	Provider     cloud.Provider
	// Policies are the parsed --min-values-policy and --preference-policy.
	Policies provisioning.Policies
}

// Setup looks the selected cloud up in the registry, builds the catalog of the region (the
// fake: embedded; aws: from the APIs, cached in the claim-check store) and the provider on it. The fake cloud's instances boot on its own clock, which runs (every 100 ms,
// until ctx ends) only in NATS mode: a Lambda invocation is too short-lived to drive it. An
// unknown --cloud is an error naming the flag.
func (o *Options) Setup(ctx context.Context, t runtime.Transport) (Env, error) {
	c, err := registry.Lookup(o.Cloud)
	if err != nil {
		return Env{}, fmt.Errorf("--cloud (%s) %w", runtime.EnvName("cloud"), err)
	}
	pol, err := o.Policies.Policies()
	if err != nil {
		return Env{}, err
	}
	cfg := registry.Config{Cluster: t.Cluster, Logger: t.Logger, DriveClock: t.Mode == runtime.ModeNATS,
		AWS: registry.AWSConfig{Endpoint: o.AWSEndpoint, Region: o.Region, EKSName: o.EKSName, EKSEndpoint: o.EKSEndpoint,
			EKSCA: o.EKSCA, ServiceCIDR: o.ServiceCIDR, KubernetesVersion: o.KubernetesVersion, ClusterDNS: o.ClusterDNS, Governance: o.Governance},
		Azure: o.azureConfig()}
	if s, ok := t.Blobs.(catalogcache.Store); ok {
		cfg.Blobs = s
	}
	cat, err := c.FunctionCatalog(ctx, cfg)
	if err != nil {
		return Env{}, fmt.Errorf("catalog: %w", err)
	}
	cfg.Catalog = cat
	p, err := c.New(ctx, cfg)
	if err != nil {
		return Env{}, err
	}
	// Karpenter's cloud provider metrics, under the function's controller label.
	p = cloudmetrics.Decorate(p, t.Metrics, telemetry.ControllerOf(t.Function))
	return Env{Catalog: cat, NodeSettings: c.NodeSettings, Provider: p, Policies: pol}, nil
}
