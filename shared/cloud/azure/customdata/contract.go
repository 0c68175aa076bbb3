package customdata

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dovetail-dev/dovetail/shared/apis/validate"
)

// Contract is the AKS bootstrap contract: everything an AKS node image's own provisioning needs
// to install and configure the kubelet, containerd, CNI, azure.json, the credential provider and
// the client CA, and to start the kubelet. On the image, /opt/azure/containers/provision_start.sh
// (AgentBaker's CSE) reads these as shell variables set by the command the provider hands over;
// each field names its variable and its source: AgentBaker parts/linux/cloud-init/artifacts
// (cse_cmd.sh, cse_config.sh) and the Azure Karpenter provider's self-hosted bootstrap
// (pkg/providers/imagefamily/bootstrap: NodeBootstrapVariables, cse_cmd.sh.gtpl, kubeletFlagsBase).
// Values are plain strings: Render quotes each by construction and Read reads it back exactly.
type Contract struct {
	// APIServerFQDN is API_SERVER_NAME: the control plane's host name, no scheme or port
	// (x.hcp.eastus.azmk8s.io). The scripts write it into the kubelet's bootstrap kubeconfig as
	// https://<fqdn>:443. Required.
	APIServerFQDN string
	// ClusterCA is KUBE_CA_CRT: the cluster CA bundle, base64 of PEM; written to
	// /etc/kubernetes/certs/ca.crt (the kubelet's --client-ca-file). Required.
	ClusterCA string
	// TLSBootstrapToken is TLS_BOOTSTRAP_TOKEN: "<id>.<secret>", 6 and 16 characters of [a-z0-9]
	// (Kubernetes "Authenticating with Bootstrap Tokens"); the kubelet's bootstrap credential.
	// Sensitive: never logged. Required.
	TLSBootstrapToken string
	// KubernetesVersion is KUBERNETES_VERSION (1.33.2, no "v"); with Arch it gives
	// KUBE_BINARY_URL, the kubelet the scripts install when the image does not cache it. Required.
	KubernetesVersion string
	// Arch is amd64 or arm64: KUBE_BINARY_URL and the CNI plugin URLs name it. Required.
	Arch string

	// TenantID, SubscriptionID, ResourceGroup (the node resource group) and Location are
	// TENANT_ID, SUBSCRIPTION_ID, RESOURCE_GROUP and LOCATION: the scripts write them to
	// /etc/kubernetes/azure.json, the cloud config of the kubelet's credential provider and of
	// the node's cloud-node-manager. Required.
	TenantID, SubscriptionID, ResourceGroup, Location string
	// UserAssignedIdentityID is USER_ASSIGNED_IDENTITY_ID: the kubelet identity's client id,
	// azure.json's userAssignedIdentityID (ACR pulls, disk CSI). Optional: without it azure.json
	// names no identity.
	UserAssignedIdentityID string
	// VNet, VNetResourceGroup, Subnet, NSG and RouteTable are VIRTUAL_NETWORK,
	// VIRTUAL_NETWORK_RESOURCE_GROUP, SUBNET, NETWORK_SECURITY_GROUP and ROUTE_TABLE (azure.json).
	VNet, VNetResourceGroup, Subnet, NSG, RouteTable string

	// NetworkPlugin is NETWORK_PLUGIN: azure, kubenet or none (AKS networkProfile.networkPlugin).
	// Required.
	NetworkPlugin string
	// NetworkPolicy is NETWORK_POLICY: "", azure, calico or cilium.
	NetworkPolicy string

	// Labels are KUBELET_NODE_LABELS (the kubelet's --node-labels): what the kubelet registers
	// the Node with. Each must be a valid label the kubelet may set on itself (IsKubeletLabel).
	Labels map[string]string
	// Taints are --register-with-taints in KUBELET_FLAGS.
	Taints []corev1.Taint
	// Kubelet is the rest of KUBELET_FLAGS: max pods, reservations, eviction, image GC, ….
	Kubelet KubeletConfig

	// NodeImageVersion is the kubernetes.azure.com/node-image-version label AKS gives every node:
	// <gallery>-<image definition>-<version> (AKSUbuntu-2204gen2containerd-202611.18.0; AgentBaker
	// custom node labels). Required.
	NodeImageVersion string

	// GPUNode is GPU_NODE and CONFIG_GPU_DRIVER_IF_NEEDED: the scripts install the NVIDIA
	// driver and device plugin (the provider's GPUNode, from the VM size).
	GPUNode bool
	// Sysctls are SYSCTL_CONTENT (base64 of a sysctl.d file the scripts install):
	// AKSNodeClass spec.linuxOSConfig sysctls, key (net.core.somaxconn) to value.
	Sysctls map[string]string
}

// KubeletConfig is what reaches KUBELET_FLAGS besides labels and taints: the fields of the
// Karpenter kubelet configuration and AKS's CustomKubeletConfig the provider passes as flags
// (bootstrap.KubeletConfigToMap), in the kubelet's own flag syntax. Zero values are omitted.
type KubeletConfig struct {
	// ClusterDNS is --cluster-dns (AKS default 10.0.0.10). Required.
	ClusterDNS string
	// MaxPods is --max-pods. Required, at least 1.
	MaxPods int64
	// KubeReserved, SystemReserved and EvictionHard are --kube-reserved, --system-reserved
	// ("cpu=100m,memory=1638Mi") and --eviction-hard ("memory.available<750Mi").
	KubeReserved, SystemReserved, EvictionHard map[string]string
	// ImageGCHigh and ImageGCLow are --image-gc-high-threshold and --image-gc-low-threshold,
	// in percent (AKS defaults 85 and 80).
	ImageGCHigh, ImageGCLow int32
	// CPUManagerPolicy, TopologyManagerPolicy: --cpu-manager-policy, --topology-manager-policy.
	CPUManagerPolicy, TopologyManagerPolicy string
	// AllowedUnsafeSysctls is --allowed-unsafe-sysctls.
	AllowedUnsafeSysctls []string
	// ContainerLogMaxSize ("50Mi") and ContainerLogMaxFiles: --container-log-max-size and
	// --container-log-max-files.
	ContainerLogMaxSize  string
	ContainerLogMaxFiles int32
	// PodMaxPids is --pod-max-pids (-1: unlimited, AKS's default).
	PodMaxPids int64
}

// Variable names of the contract (AgentBaker cse_cmd.sh).
const (
	VarAPIServerName    = "API_SERVER_NAME"
	VarKubeCACrt        = "KUBE_CA_CRT"
	VarTLSBootstrap     = "TLS_BOOTSTRAP_TOKEN"
	VarKubernetesVer    = "KUBERNETES_VERSION"
	VarKubeBinaryURL    = "KUBE_BINARY_URL"
	VarKubeletFlags     = "KUBELET_FLAGS"
	VarKubeletLabels    = "KUBELET_NODE_LABELS"
	VarNetworkPlugin    = "NETWORK_PLUGIN"
	VarNetworkPolicy    = "NETWORK_POLICY"
	VarContainerRuntime = "CONTAINER_RUNTIME"
	VarTenantID         = "TENANT_ID"
	VarSubscriptionID   = "SUBSCRIPTION_ID"
	VarResourceGroup    = "RESOURCE_GROUP"
	VarLocation         = "LOCATION"
	VarIdentity         = "USER_ASSIGNED_IDENTITY_ID"
	VarSysctlContent    = "SYSCTL_CONTENT"
)

// RequiredVariables are the variables without which the image's provisioning cannot produce a
// kubelet that joins: the API server, CA and token (bootstrap kubeconfig), the Kubernetes
// version and binary (the kubelet itself), the kubelet's flags and labels, the network plugin
// (CNI install), the container runtime and azure.json's identity of the VM. Read refuses a
// contract without any of them.
var RequiredVariables = []string{
	VarAPIServerName, VarKubeCACrt, VarTLSBootstrap, VarKubernetesVer, VarKubeBinaryURL,
	VarKubeletFlags, VarKubeletLabels, VarNetworkPlugin, VarContainerRuntime,
	VarTenantID, VarSubscriptionID, VarResourceGroup, VarLocation,
	"ENABLE_TLS_BOOTSTRAPPING", "IS_VHD", "NEEDS_CONTAINERD",
}

// LabelNodeImageVersion is the label naming a node's image (AgentBaker; the cluster autoscaler's
// Azure provider reads it).
const LabelNodeImageVersion = "kubernetes.azure.com/node-image-version"

// ProvisionCommand is the command that runs the image's provisioning once the variables are
// set (AgentBaker cse_cmd.sh; the provider's cse_cmd.sh.gtpl ends with it).
const ProvisionCommand = "/opt/azure/containers/provision_start.sh"

// aksMirror serves the kubelet and CNI binaries (the provider's globalAKSMirror).
const aksMirror = "https://acs-mirror.azureedge.net"

// tokenPattern is a bootstrap token (Kubernetes "Authenticating with Bootstrap Tokens": token
// format [a-z0-9]{6}.[a-z0-9]{16}).
var tokenPattern = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// IsBootstrapToken reports whether s is a bootstrap token: <6 of [a-z0-9]>.<16 of [a-z0-9]>.
// Nothing in that alphabet means anything to bash, systemd or JSON, so a token that passes can
// be put into any of them as it is.
func IsBootstrapToken(s string) bool { return tokenPattern.MatchString(s) }

// versionPattern is a Kubernetes release version without its "v".
var versionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

// Variables returns the contract as the image's provisioning reads it: variable name to value,
// every one the provider's scriptless bootstrap sets, static ones at the provider's values.
// Errors name the field: a value the kubelet, the scripts or the API server would refuse.
func (c Contract) Variables() (map[string]string, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	flags, err := c.kubeletFlags()
	if err != nil {
		return nil, err
	}
	withImage := make(map[string]string, len(c.Labels)+1)
	for k, v := range c.Labels {
		withImage[k] = v
	}
	withImage[LabelNodeImageVersion] = c.NodeImageVersion
	labels, err := labelList(withImage)
	if err != nil {
		return nil, err
	}
	v := map[string]string{
		VarAPIServerName: c.APIServerFQDN, VarKubeCACrt: c.ClusterCA, VarTLSBootstrap: c.TLSBootstrapToken,
		VarKubernetesVer:       c.KubernetesVersion,
		VarKubeBinaryURL:       fmt.Sprintf("%s/kubernetes/v%s/binaries/kubernetes-node-linux-%s.tar.gz", aksMirror, c.KubernetesVersion, c.Arch),
		"VNET_CNI_PLUGINS_URL": fmt.Sprintf("%s/azure-cni/v1.4.32/binaries/azure-vnet-cni-linux-%s-v1.4.32.tgz", aksMirror, c.Arch),
		"CNI_PLUGINS_URL":      fmt.Sprintf("%s/cni-plugins/v1.1.1/binaries/cni-plugins-linux-%s-v1.1.1.tgz", aksMirror, c.Arch),
		VarKubeletFlags:        flags, VarKubeletLabels: labels,
		VarNetworkPlugin: c.NetworkPlugin, VarNetworkPolicy: c.NetworkPolicy,
		VarTenantID: c.TenantID, VarSubscriptionID: c.SubscriptionID, VarResourceGroup: c.ResourceGroup, VarLocation: c.Location,
		VarIdentity:       c.UserAssignedIdentityID,
		"VIRTUAL_NETWORK": c.VNet, "VIRTUAL_NETWORK_RESOURCE_GROUP": c.VNetResourceGroup, "SUBNET": c.Subnet,
		"NETWORK_SECURITY_GROUP": c.NSG, "ROUTE_TABLE": c.RouteTable,
		"GPU_NODE": strconv.FormatBool(c.GPUNode), "CONFIG_GPU_DRIVER_IF_NEEDED": strconv.FormatBool(c.GPUNode),
		VarSysctlContent: base64.StdEncoding.EncodeToString([]byte(sysctlFile(c.Sysctls))),
	}
	// The provider's static values (staticNodeBootstrapVars): managed identity, instance
	// metadata, the standard load balancer, containerd, TLS bootstrapping on, a VHD image,
	// cgroup v2 (Ubuntu 22.04+ and Azure Linux). VM_TYPE is "standard": a standalone VM, not a
	// scale set (cloud-provider-azure's vmType).
	for k, s := range map[string]string{
		"ADMINUSER": "azureuser", "VM_TYPE": "standard", "SERVICE_PRINCIPAL_CLIENT_ID": "msi",
		"USE_MANAGED_IDENTITY_EXTENSION": "true", "USE_INSTANCE_METADATA": "true", "LOAD_BALANCER_SKU": "Standard",
		"EXCLUDE_MASTER_FROM_STANDARD_LB": "true", "MAXIMUM_LOADBALANCER_RULE_COUNT": "250",
		VarContainerRuntime: "containerd", "CLI_TOOL": "ctr", "NEEDS_CONTAINERD": "true", "IS_VHD": "true",
		"ENABLE_TLS_BOOTSTRAPPING": "true", "ENABLE_SECURE_TLS_BOOTSTRAPPING": "false", "NEEDS_CGROUPV2": "true",
		"TARGET_CLOUD": "AzurePublicCloud", "TARGET_ENVIRONMENT": "AzurePublicCloud", "KUBELET_CONFIG_FILE_ENABLED": "false",
		"CLOUDPROVIDER_BACKOFF": "true", "CLOUDPROVIDER_BACKOFF_MODE": "v2", "CLOUDPROVIDER_BACKOFF_RETRIES": "6",
		"CLOUDPROVIDER_RATELIMIT": "true", "CLOUDPROVIDER_RATELIMIT_QPS": "10", "CLOUDPROVIDER_RATELIMIT_BUCKET": "100",
		"MCR_REPOSITORY_BASE": "mcr.microsoft.com",
	} {
		v[k] = s
	}
	return v, nil
}

// check refuses what the API server (labels, taints), the kubelet (cluster DNS, max pods) or
// the scripts (names, versions) would refuse, naming the field.
func (c Contract) check() error {
	var errs field.ErrorList
	req := func(name, v string) {
		if v == "" {
			errs = append(errs, field.Required(field.NewPath(name), "the AKS node bootstrap needs it"))
		}
	}
	req("apiServerFQDN", c.APIServerFQDN)
	req("clusterCA", c.ClusterCA)
	req("tlsBootstrapToken", c.TLSBootstrapToken)
	req("nodeImageVersion", c.NodeImageVersion)
	if c.NodeImageVersion != "" {
		errs = append(errs, validate.LabelValue(c.NodeImageVersion, field.NewPath("nodeImageVersion"))...)
	}
	for _, f := range []struct{ name, v string }{{"tenantID", c.TenantID}, {"subscriptionID", c.SubscriptionID},
		{"resourceGroup", c.ResourceGroup}, {"location", c.Location}, {"networkPlugin", c.NetworkPlugin}} {
		req(f.name, f.v)
	}
	if c.APIServerFQDN != "" {
		for _, m := range validation.IsDNS1123Subdomain(c.APIServerFQDN) {
			errs = append(errs, field.Invalid(field.NewPath("apiServerFQDN"), c.APIServerFQDN, m))
		}
	}
	if c.ClusterCA != "" {
		if err := checkCA(c.ClusterCA); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("clusterCA"), "(not shown)", err.Error()))
		}
	}
	if c.TLSBootstrapToken != "" && !tokenPattern.MatchString(c.TLSBootstrapToken) {
		errs = append(errs, field.Invalid(field.NewPath("tlsBootstrapToken"), "(not shown)", "must be <6 of [a-z0-9]>.<16 of [a-z0-9]>"))
	}
	if !versionPattern.MatchString(c.KubernetesVersion) {
		errs = append(errs, field.Invalid(field.NewPath("kubernetesVersion"), c.KubernetesVersion, "must be <major>.<minor>.<patch>"))
	}
	if c.Arch != "amd64" && c.Arch != "arm64" {
		errs = append(errs, field.NotSupported(field.NewPath("arch"), c.Arch, []string{"amd64", "arm64"}))
	}
	switch c.NetworkPlugin {
	case "", "azure", "kubenet", "none":
	default:
		errs = append(errs, field.NotSupported(field.NewPath("networkPlugin"), c.NetworkPlugin, []string{"azure", "kubenet", "none"}))
	}
	switch c.NetworkPolicy {
	case "", "azure", "calico", "cilium":
	default:
		errs = append(errs, field.NotSupported(field.NewPath("networkPolicy"), c.NetworkPolicy, []string{"", "azure", "calico", "cilium"}))
	}
	errs = append(errs, validate.Labels(c.Labels, field.NewPath("labels"))...)
	errs = append(errs, kubeletLabelErrors(c.Labels, field.NewPath("labels"))...)
	errs = append(errs, validate.Taints(c.Taints, field.NewPath("taints"), nil)...)
	if _, err := netip.ParseAddr(c.Kubelet.ClusterDNS); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("kubelet", "clusterDNS"), c.Kubelet.ClusterDNS, "must be an IP address"))
	}
	if c.Kubelet.MaxPods < 1 {
		errs = append(errs, field.Invalid(field.NewPath("kubelet", "maxPods"), c.Kubelet.MaxPods, "must be at least 1"))
	}
	for k := range c.Sysctls {
		if !sysctlKey.MatchString(k) {
			errs = append(errs, field.Invalid(field.NewPath("sysctls").Key(k), k, "must be a sysctl name (a.b_c)"))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("custom data: %w", errs.ToAggregate())
	}
	return nil
}

var sysctlKey = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_-]+)+$`)

// kubeletFlags is KUBELET_FLAGS: the provider's base flags (kubeletFlagsBase) with the
// contract's values, sorted by flag name so the same contract renders the same text. Each flag
// is one whitespace-free word (systemd splits $KUBELET_FLAGS on whitespace).
func (c Contract) kubeletFlags() (string, error) {
	k := c.Kubelet
	f := map[string]string{
		"--address": "0.0.0.0", "--anonymous-auth": "false", "--authentication-token-webhook": "true",
		"--authorization-mode": "Webhook", "--cgroups-per-qos": "true", "--client-ca-file": "/etc/kubernetes/certs/ca.crt",
		"--cloud-config": "/etc/kubernetes/azure.json", "--cloud-provider": "external", "--cluster-domain": "cluster.local",
		"--enforce-node-allocatable": "pods", "--event-qps": "0", "--kubeconfig": "/var/lib/kubelet/kubeconfig",
		"--bootstrap-kubeconfig": BootstrapKubeconfigPath, "--node-status-update-frequency": "10s",
		"--pod-manifest-path": "/etc/kubernetes/manifests", "--protect-kernel-defaults": "true", "--read-only-port": "0",
		"--rotate-certificates": "true", "--streaming-connection-idle-timeout": "4h",
		"--tls-cert-file": "/etc/kubernetes/certs/kubeletserver.crt", "--tls-private-key-file": "/etc/kubernetes/certs/kubeletserver.key",
		// The out-of-tree ACR credential provider (AgentBaker, Kubernetes 1.30+).
		"--image-credential-provider-config":  "/var/lib/kubelet/credential-provider-config.yaml",
		"--image-credential-provider-bin-dir": "/var/lib/kubelet/credential-provider",
		"--cluster-dns":                       k.ClusterDNS, "--max-pods": strconv.FormatInt(k.MaxPods, 10),
		"--image-gc-high-threshold": "85", "--image-gc-low-threshold": "80", "--pod-max-pids": "-1",
	}
	set := func(name, v string) {
		if v != "" {
			f[name] = v
		}
	}
	set("--kube-reserved", pairList(k.KubeReserved, "="))
	set("--system-reserved", pairList(k.SystemReserved, "="))
	set("--eviction-hard", pairList(k.EvictionHard, "<"))
	if k.ImageGCHigh > 0 {
		f["--image-gc-high-threshold"] = strconv.Itoa(int(k.ImageGCHigh))
	}
	if k.ImageGCLow > 0 {
		f["--image-gc-low-threshold"] = strconv.Itoa(int(k.ImageGCLow))
	}
	set("--cpu-manager-policy", k.CPUManagerPolicy)
	set("--topology-manager-policy", k.TopologyManagerPolicy)
	set("--allowed-unsafe-sysctls", strings.Join(k.AllowedUnsafeSysctls, ","))
	set("--container-log-max-size", k.ContainerLogMaxSize)
	if k.ContainerLogMaxFiles > 0 {
		f["--container-log-max-files"] = strconv.Itoa(int(k.ContainerLogMaxFiles))
	}
	if k.PodMaxPids != 0 {
		f["--pod-max-pids"] = strconv.FormatInt(k.PodMaxPids, 10)
	}
	if len(c.Taints) > 0 {
		if err := (&envFile{}).checkTaints(c.Taints); err != nil {
			return "", err
		}
		parts := make([]string, 0, len(c.Taints))
		for _, t := range c.Taints {
			parts = append(parts, t.ToString())
		}
		f["--register-with-taints"] = strings.Join(parts, ",")
	}
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	sort.Strings(names)
	words := make([]string, 0, len(names))
	for _, n := range names {
		w := n + "=" + f[n]
		if i := strings.IndexFunc(w, func(r rune) bool { return !flagChar(r) }); i >= 0 {
			return "", fmt.Errorf("custom data: %s: %q holds %q, which the kubelet's environment file cannot carry", VarKubeletFlags, w, w[i:i+1])
		}
		words = append(words, w)
	}
	return strings.Join(words, " "), nil
}

// flagChar is wordChar plus the '<' of an eviction threshold, the '%' of a percentage and the
// '*' of an unsafe-sysctl pattern (kernel.msg*): the kubelet defaults file is an
// EnvironmentFile, where none has meaning (systemd.exec: specifiers are not expanded in
// environment files, and systemd does not glob the words of $KUBELET_FLAGS).
func flagChar(r rune) bool { return wordChar(r) || r == '<' || r == '%' || r == '*' }

// pairList joins a map as k<sep>v pairs, comma-separated, sorted by key ("" when empty).
func pairList(m map[string]string, sep string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+sep+m[k])
	}
	return strings.Join(parts, ",")
}

// labelList is KUBELET_NODE_LABELS: k=v pairs sorted by key, comma-separated; a key or value
// holding ',', '=' or ':' or a character the defaults file cannot carry is refused.
func labelList(labels map[string]string) (string, error) {
	var e envFile
	if err := e.setList(VarKubeletLabels, labelPairs(labels)); err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimPrefix(e.String(), VarKubeletLabels+"="), "\n"), nil
}

// sysctlFile is a sysctl.d file: "key=value" lines sorted by key.
func sysctlFile(s map[string]string) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, s[k])
	}
	return b.String()
}

// kubeletLabelErrors refuses the labels a kubelet will not set on its own Node: a key in the
// kubernetes.io or k8s.io namespaces (or a subdomain of them) other than the kubelet's own
// well-known labels and the kubelet.kubernetes.io and node.kubernetes.io namespaces (the
// kubelet refuses to start: k8s.io/kubelet pkg/apis/well_known_labels.go IsKubeletLabel,
// enforced by the NodeRestriction admission plugin).
func kubeletLabelErrors(labels map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !IsKubeletLabel(k) {
			errs = append(errs, field.Forbidden(path.Key(k), "the kubelet may not set a label in the kubernetes.io or k8s.io namespaces other than its own"))
		}
	}
	return errs
}

// kubeletLabels are the kubernetes.io labels the kubelet sets itself (IsKubeletLabel's list).
var kubeletLabels = map[string]bool{
	"kubernetes.io/hostname": true, "topology.kubernetes.io/zone": true, "topology.kubernetes.io/region": true,
	"failure-domain.beta.kubernetes.io/zone": true, "failure-domain.beta.kubernetes.io/region": true,
	"beta.kubernetes.io/instance-type": true, "node.kubernetes.io/instance-type": true,
	"beta.kubernetes.io/os": true, "beta.kubernetes.io/arch": true, "kubernetes.io/os": true, "kubernetes.io/arch": true,
}

// IsKubeletLabel reports whether the kubelet may set key on its own Node with --node-labels.
func IsKubeletLabel(key string) bool {
	if kubeletLabels[key] {
		return true
	}
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	inK8s := func(d string) bool { return ns == d || strings.HasSuffix(ns, "."+d) }
	if !inK8s("kubernetes.io") && !inK8s("k8s.io") {
		return true
	}
	return inK8s("kubelet.kubernetes.io") || inK8s("node.kubernetes.io")
}
