// Package azure is the cloud.Provider for Azure VMs, over azure-sdk-for-go (armcompute/v7 and
// armnetwork/v8), as AKS Node Auto-Provisioning launches nodes: one network interface and one VM
// per NodeClaim, named from the NodeClaim (so a redelivered launch finds the VM it made), tagged
// with the cluster, NodePool and NodeClaim, booted from the AKS node image of the AKSNodeClass's
// image family with custom data that joins the cluster, pinned to the offering's zone; spot VMs
// are deleted on eviction. Only VMs tagged for this cluster are ever deleted. The NIC joins the
// cluster's load balancer backend pools, carries the cluster NSG on a BYO subnet and the pod IPs
// of Azure CNI node-subnet mode; the VM carries the kubelet identity (nics.go). Quotas are read
// before a launch and each ARM capacity error marks what it covers for its own TTL (capacity.go).
//
// Retries of throttled or transient ARM calls are the SDK's (azcore's retry policy); long-running
// operations are polled to completion with the SDK's pollers.
package azure

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v8"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// Options configure the provider.
type Options struct {
	// Cluster is the value of the cluster tag this provider launches with and may delete. Required.
	Cluster string
	// SubscriptionID, ResourceGroup (the cluster's node resource group, MC_…) and Location
	// (eastus) say where VMs and NICs are created. Required.
	SubscriptionID, ResourceGroup, Location string
	// SubnetID is the ARM id of the subnet NICs join when the AKSNodeClass gives no vnetSubnetID
	// (the provider's --vnet-subnet-id). Required unless every class sets one.
	SubnetID string
	// Catalog gives each size's labels (architecture, accelerated networking, premium storage)
	// and prices. Required.
	Catalog *catalog.Catalog
	// Credential authenticates ARM calls (azidentity; the fakes take azfake.TokenCredential).
	// Required.
	Credential azcore.TokenCredential
	// ClientOptions are the ARM clients' options (a fake server's transport in tests); nil is
	// the public cloud.
	ClientOptions *arm.ClientOptions
	// Bootstrap is what nodes join the cluster with.
	Bootstrap Bootstrap
	// NetworkPlugin is the cluster's (catalog.AKSNetwork*; "" is Azure CNI Overlay): the pods a
	// node takes when the AKSNodeClass sets no maxPods.
	NetworkPlugin string
	// SSHPublicKey is the admin key every AKS Linux node carries (required by the Compute API for
	// Linux VMs without a password).
	SSHPublicKey string
	// PollInterval is how often long-running operations are polled without a Retry-After
	// (default DefaultPollInterval).
	PollInterval time.Duration
	// KubernetesVersion is the control plane's Kubernetes version (1.33.2): status.kubernetesVersion
	// of every AKSNodeClass (the provider reads it from the API server; functions have none).
	KubernetesVersion string
	// Now is the provider's clock (default time.Now): the creation time NICs are tagged with.
	Now func() time.Time
	// KubeletIdentityID is the ARM id of the cluster's kubelet user-assigned managed identity
	// (/subscriptions/…/resourceGroups/…/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>):
	// every VM carries it, so the kubelet pulls from ACR and the disk and file CSI drivers
	// authenticate as AKS nodes do (the provider's NodeIdentities). Optional; the launch
	// identity must be allowed to assign it (userAssignedIdentities/assign/action).
	KubeletIdentityID string
	// ProvisionMode is how a node gets its bootstrap: ProvisionModeScriptless ("" too) renders the
	// AKS bootstrap contract locally into the custom data; ProvisionModeBootstrappingClient asks
	// AKS (NodeBootstrapping) for the custom data and the provisioning command, and runs the
	// command as the CustomScript VM extension "cse-agent-karpenter" once the VM exists (the
	// Azure Karpenter provider's --provision-mode values and behaviour).
	ProvisionMode string
	// NodeBootstrapping answers NodeBootstrapping_Get; required with ProvisionModeBootstrappingClient.
	NodeBootstrapping NodeBootstrappingAPI
}

// Provision modes (the Azure Karpenter provider's consts.ProvisionMode* names).
const (
	ProvisionModeScriptless          = "aksscriptless"
	ProvisionModeBootstrappingClient = "bootstrappingclient"
)

// Bootstrap is what a node needs to join the cluster, beyond what the provider knows of the VM:
// the cluster-level inputs of the AKS bootstrap contract (customdata.Contract).
type Bootstrap struct {
	// APIServer is the cluster's API server URL (https://<fqdn>:443); its host is the contract's
	// API_SERVER_NAME. Required.
	APIServer string
	// CA is the cluster CA bundle, base64 of PEM certificates (KUBE_CA_CRT). Required.
	CA string
	// Token is the kubelet's TLS bootstrap token, <6>.<16> of [a-z0-9] (TLS_BOOTSTRAP_TOKEN);
	// never logged. Required.
	Token string
	// TenantID is the Microsoft Entra tenant of the subscription (TENANT_ID, azure.json). Required.
	TenantID string
	// KubeletIdentityClientID is the kubelet managed identity's client id
	// (USER_ASSIGNED_IDENTITY_ID and the kubernetes.azure.com/kubelet-identity-client-id label);
	// optional.
	KubeletIdentityClientID string
	// ClusterDNS is the kube-dns service IP (AKS default 10.0.0.10 when empty).
	ClusterDNS string
	// NetworkPolicy is the cluster's network policy engine: "", azure, calico or cilium
	// (NETWORK_POLICY).
	NetworkPolicy string
	// NetworkDataplane is the cluster's dataplane: "" (Azure) or cilium, which labels nodes
	// kubernetes.azure.com/ebpf-dataplane=cilium for the Cilium DaemonSet.
	NetworkDataplane string
	// VNetGUID is the cluster VNet's resourceGuid (kubernetes.azure.com/nodenetwork-vnetguid on
	// Azure CNI Overlay nodes); optional.
	VNetGUID string
}

// Provider launches and deletes Azure VMs. It keeps no state between calls: it is safe for
// concurrent use and for stateless functions.
type Provider struct {
	o       Options
	vms     *armcompute.VirtualMachinesClient
	nics    *armnetwork.InterfacesClient
	subnets *armnetwork.SubnetsClient
	gallery *armcompute.CommunityGalleryImageVersionsClient
	lbs     *armnetwork.LoadBalancersClient
	nsgs    *armnetwork.SecurityGroupsClient
	usages  *armcompute.UsageClient
	exts    *armcompute.VirtualMachineExtensionsClient
	// pages serializes the provider's list pagers, each from its first page to its last. ARM
	// serves concurrent lists independently, but the SDK's fake server transports (the armcompute
	// and armnetwork fake packages, tracker keyed by request path) share one pager between
	// concurrent lists of the same resource, so each caller read part of the pages: local dev's
	// lifecycle function then saw running VMs missing and garbage-collected their NodeClaims.
	// A function holds one list at a time anyway, so this costs production nothing.
	pages sync.Mutex
}

var _ cloud.Provider = (*Provider)(nil)

// listing takes the pager lock (Provider.pages) and returns its release, for a deferred call.
func (p *Provider) listing() func() {
	mu := &p.pages
	mu.Lock()
	return mu.Unlock
}

// New checks the options and builds the ARM clients. Errors name the missing option.
func New(o Options) (*Provider, error) {
	var missing []string
	for name, v := range map[string]string{"Cluster": o.Cluster, "SubscriptionID": o.SubscriptionID, "ResourceGroup": o.ResourceGroup,
		"Location": o.Location, "Bootstrap.APIServer": o.Bootstrap.APIServer, "SSHPublicKey": o.SSHPublicKey,
		"Bootstrap.CA": o.Bootstrap.CA, "Bootstrap.Token": o.Bootstrap.Token, "Bootstrap.TenantID": o.Bootstrap.TenantID} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if o.Catalog == nil {
		missing = append(missing, "Catalog")
	}
	if o.Credential == nil {
		missing = append(missing, "Credential")
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("azure provider: Options.%s required", strings.Join(missing, ", Options."))
	}
	if o.KubeletIdentityID != "" && !identityIDPattern.MatchString(o.KubeletIdentityID) {
		return nil, fmt.Errorf("azure provider: Options.KubeletIdentityID %q: want /subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>", o.KubeletIdentityID)
	}
	if _, ok := catalog.AKSDefaultMaxPods(o.NetworkPlugin); !ok {
		return nil, fmt.Errorf("azure provider: Options.NetworkPlugin %q is not one of %s, %s, %s, %s", o.NetworkPlugin,
			catalog.AKSNetworkOverlay, catalog.AKSNetworkNodeSubnet, catalog.AKSNetworkKubenet, catalog.AKSNetworkNone)
	}
	switch o.ProvisionMode {
	case "":
		o.ProvisionMode = ProvisionModeScriptless
	case ProvisionModeScriptless:
	case ProvisionModeBootstrappingClient:
		if o.NodeBootstrapping == nil {
			return nil, fmt.Errorf("azure provider: Options.NodeBootstrapping required with provision mode %s", ProvisionModeBootstrappingClient)
		}
	default:
		return nil, fmt.Errorf("azure provider: Options.ProvisionMode %q is not %s or %s", o.ProvisionMode, ProvisionModeScriptless, ProvisionModeBootstrappingClient)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Bootstrap.ClusterDNS == "" {
		o.Bootstrap.ClusterDNS = DefaultClusterDNS
	}
	vms, err := armcompute.NewVirtualMachinesClient(o.SubscriptionID, o.Credential, o.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure provider: %w", err)
	}
	nics, err := armnetwork.NewInterfacesClient(o.SubscriptionID, o.Credential, o.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure provider: %w", err)
	}
	subnets, err := armnetwork.NewSubnetsClient(o.SubscriptionID, o.Credential, o.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure provider: %w", err)
	}
	gallery, err := armcompute.NewCommunityGalleryImageVersionsClient(o.SubscriptionID, o.Credential, o.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure provider: %w", err)
	}
	lbs, err := armnetwork.NewLoadBalancersClient(o.SubscriptionID, o.Credential, o.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure provider: %w", err)
	}
	nsgs, err := armnetwork.NewSecurityGroupsClient(o.SubscriptionID, o.Credential, o.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure provider: %w", err)
	}
	usages, err := armcompute.NewUsageClient(o.SubscriptionID, o.Credential, o.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure provider: %w", err)
	}
	exts, err := armcompute.NewVirtualMachineExtensionsClient(o.SubscriptionID, o.Credential, o.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure provider: %w", err)
	}
	return &Provider{o: o, vms: vms, nics: nics, subnets: subnets, gallery: gallery, lbs: lbs, nsgs: nsgs, usages: usages, exts: exts}, nil
}

// DefaultClusterDNS is AKS's default kube-dns service IP (the .10 of the default 10.0.0.0/16
// service CIDR).
const DefaultClusterDNS = "10.0.0.10"

// Name is "azure".
func (p *Provider) Name() string { return "azure" }

// ProviderID renders a VM's node.spec.providerID as cloud-node-manager writes it:
// azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<name>
// with the resource group in lower case ("for historical reasons": cloud-provider-azure
// convertResourceGroupNameToLower; the Azure Karpenter provider's VMResourceIDToProviderID does
// the same so a NodeClaim's providerID equals its Node's).
func ProviderID(subscription, resourceGroup, vm string) string {
	return "azure://" + VMID(subscription, strings.ToLower(resourceGroup), vm)
}

// VMID is a VM's ARM resource id.
func VMID(subscription, resourceGroup, vm string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s", subscription, resourceGroup, vm)
}

var identityIDPattern = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ManagedIdentity/userAssignedIdentities/[^/]+$`)

var providerIDPattern = regexp.MustCompile(`(?i)^azure:///subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Compute/virtualMachines/([^/]+)$`)

// ParseProviderID splits an Azure VM providerID. Error: another shape (a VMSS instance, an AWS id).
func ParseProviderID(providerID string) (subscription, resourceGroup, vm string, err error) {
	m := providerIDPattern.FindStringSubmatch(providerID)
	if m == nil {
		return "", "", "", fmt.Errorf("providerID %q: want azure:///subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<name>", providerID)
	}
	return m[1], m[2], m[3], nil
}

// vmName checks that a providerID names a VM of this provider's subscription and resource group.
func (p *Provider) vmName(providerID string) (string, error) {
	sub, rg, name, err := ParseProviderID(providerID)
	if err != nil {
		return "", err
	}
	if !strings.EqualFold(sub, p.o.SubscriptionID) || !strings.EqualFold(rg, p.o.ResourceGroup) {
		return "", fmt.Errorf("%w: %s is not in resource group %s of subscription %s", cloud.ErrNotOwned, providerID, p.o.ResourceGroup, p.o.SubscriptionID)
	}
	return name, nil
}

// responseCode returns the ARM error code of err ("" when err is not an *azcore.ResponseError).
func responseCode(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && (re.StatusCode == 404 || re.ErrorCode == "ResourceNotFound" || re.ErrorCode == "NotFound")
}
