package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Azure provider's API group and the version Dovetail reads. Source: the AKSNodeClass CRD of
// Azure/karpenter-provider-azure (pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml, commit
// 352646f599290c3a6d2f9710fb535a7b288f88ed, the newest main commit Dovetail could read; copy in
// infra/crds): it serves v1beta1 (the storage version) and v1alpha2 (served, deprecated: "use
// v1beta1.AKSNodeClass instead"), with the same fields, enums and rules.
const (
	AzureGroup        = "karpenter.azure.com"
	AzureVersion      = "v1beta1"
	AzureGroupVersion = AzureGroup + "/" + AzureVersion
	// AzureV1alpha2GroupVersion is the deprecated version the CRD still serves.
	AzureV1alpha2GroupVersion = AzureGroup + "/v1alpha2"
	KindAKSNodeClass          = "AKSNodeClass"
)

// Image families of spec.imageFamily (the CRD enum: Ubuntu, Ubuntu2204, Ubuntu2404, AzureLinux;
// provider constants UbuntuImageFamily and friends in pkg/apis/v1beta1/labels.go). "Ubuntu" is
// the CRD default and lets the provider choose the Ubuntu release for the cluster's Kubernetes
// version. The Windows families are not in the CRD of the provider's main branch (Windows nodes
// exist only on its feature branches, e.g. robin/windows-dualstack-e2e-coverage); their names are
// kept so a Windows class is recognised and refused by name.
const (
	ImageFamilyUbuntu      = "Ubuntu"
	ImageFamilyUbuntu2204  = "Ubuntu2204"
	ImageFamilyUbuntu2404  = "Ubuntu2404"
	ImageFamilyAzureLinux  = "AzureLinux"
	ImageFamilyWindows2022 = "Windows2022"
	ImageFamilyWindows2025 = "Windows2025"

	// AKSDefaultImageFamily is the CRD default of spec.imageFamily.
	AKSDefaultImageFamily = ImageFamilyUbuntu
)

// AKSImageFamilies lists the spec.imageFamily values in the CRD's enum order.
var AKSImageFamilies = []string{
	ImageFamilyUbuntu, ImageFamilyUbuntu2204, ImageFamilyUbuntu2404, ImageFamilyAzureLinux,
}

// Enum values of the AKSNodeClass spec (CRD enums; provider type names in parentheses).
const (
	// spec.fipsMode (FIPSMode).
	FIPSModeFIPS     = "FIPS"
	FIPSModeDisabled = "Disabled"

	// spec.gpu.mode; Driver is the default.
	GPUModeDriver = "Driver"
	GPUModeNone   = "None"

	// spec.localDNS.mode (LocalDNSMode).
	LocalDNSModePreferred = "Preferred"
	LocalDNSModeRequired  = "Required"
	LocalDNSModeDisabled  = "Disabled"

	// Zone override fields (LocalDNSQueryLogging, LocalDNSProtocol, LocalDNSForwardDestination,
	// LocalDNSForwardPolicy, LocalDNSServeStale).
	LocalDNSQueryLoggingError                = "Error"
	LocalDNSQueryLoggingLog                  = "Log"
	LocalDNSProtocolPreferUDP                = "PreferUDP"
	LocalDNSProtocolForceTCP                 = "ForceTCP"
	LocalDNSForwardDestinationClusterCoreDNS = "ClusterCoreDNS"
	LocalDNSForwardDestinationVnetDNS        = "VnetDNS"
	LocalDNSForwardPolicySequential          = "Sequential"
	LocalDNSForwardPolicyRoundRobin          = "RoundRobin"
	LocalDNSForwardPolicyRandom              = "Random"
	LocalDNSServeStaleVerify                 = "Verify"
	LocalDNSServeStaleImmediate              = "Immediate"
	LocalDNSServeStaleDisable                = "Disable"

	// status.localDNSState (LocalDNSState).
	LocalDNSStateEnabled  = "Enabled"
	LocalDNSStateDisabled = "Disabled"

	// spec.kubelet.cpuManagerPolicy; none is the default.
	CPUManagerPolicyNone   = "none"
	CPUManagerPolicyStatic = "static"

	// spec.kubelet.topologyManagerPolicy; none is the default.
	TopologyManagerPolicyRestricted     = "restricted"
	TopologyManagerPolicyBestEffort     = "best-effort"
	TopologyManagerPolicyNone           = "none"
	TopologyManagerPolicySingleNUMANode = "single-numa-node"
)

// AKSNodeClass is karpenter.azure.com/v1beta1 AKSNodeClass: how an Azure node is launched (image
// family, OS disk, subnet, tags, kubelet and OS settings). Cluster-scoped; short names aksnc,
// aksncs. The field names and JSON shape are the provider's CRD (see AzureVersion for the source).
// +kubebuilder:object:root=true
type AKSNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AKSNodeClassSpec   `json:"spec,omitempty"`
	Status            AKSNodeClassStatus `json:"status,omitempty"`
}

// AKSNodeClassSpec mirrors the karpenter.azure.com/v1beta1 spec. Every field is optional; the CRD
// defaults imageFamily to Ubuntu and osDiskSizeGB to 128 (apis.SetAKSNodeClassDefaults).
type AKSNodeClassSpec struct {
	// VNETSubnetID is the ARM id of the subnet the node's NIC joins
	// (/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>);
	// unset means the provider's --vnet-subnet-id.
	VNETSubnetID *string `json:"vnetSubnetID,omitempty"`
	// OSDiskSizeGB is the OS disk size in GB, 30-2048 (default 128).
	OSDiskSizeGB *int32 `json:"osDiskSizeGB,omitempty"`
	// ImageFamily is one of AKSImageFamilies (default Ubuntu).
	ImageFamily *string `json:"imageFamily,omitempty"`
	// FIPSMode is FIPS or Disabled. FIPS is not available for Ubuntu2404, and on Ubuntu2204 only
	// with trusted launch (security.trustedLaunch vtpm or secureBoot).
	FIPSMode *string `json:"fipsMode,omitempty"`
	// Tags are applied to the Azure resources of the node (keys at most 512 characters without
	// < > % & ? or \, values at most 256 characters).
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet holds the kubelet settings the provider passes to AKS (its own shape, not EC2's).
	Kubelet *AKSKubeletConfiguration `json:"kubelet,omitempty"`
	// MaxPods overrides the pods-per-node limit, 10-250. Unset, the provider derives it from the
	// cluster's network plugin: 30 for Azure CNI (node subnet), 250 for Azure CNI overlay or no
	// plugin, otherwise 110.
	MaxPods *int32 `json:"maxPods,omitempty"`
	// Security holds security settings (encryption at host).
	Security *AKSSecurity `json:"security,omitempty"`
	// LocalDNS configures the per-node local DNS proxy and its overrides.
	LocalDNS *AKSLocalDNS `json:"localDNS,omitempty"`
	// ArtifactStreaming streams container images on demand instead of pulling them whole.
	ArtifactStreaming *AKSArtifactStreaming `json:"artifactStreaming,omitempty"`
	// LinuxOSConfig holds the AKS custom Linux OS configuration (swap file, sysctls,
	// transparent huge pages); not allowed for Windows image families.
	LinuxOSConfig *AKSLinuxOSConfig `json:"linuxOSConfig,omitempty"`
	// GPU configures GPU driver management on GPU VM sizes.
	GPU *AKSGPU `json:"gpu,omitempty"`
}

// AKSKubeletConfiguration is the subset of kubelet settings the Azure provider exposes (AKS
// CustomKubeletConfig without cpuReserved/memoryReserved/seccompDefault). Inside a present
// kubelet object the CRD defaults cpuManagerPolicy none, cpuCFSQuota true, cpuCFSQuotaPeriod
// 100ms, topologyManagerPolicy none, containerLogMaxSize 50Mi and containerLogMaxFiles 5.
type AKSKubeletConfiguration struct {
	// CPUManagerPolicy is none or static.
	CPUManagerPolicy *string `json:"cpuManagerPolicy,omitempty"`
	// CPUCFSQuota enforces CPU CFS quota for containers with CPU limits.
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
	// CPUCFSQuotaPeriod is cpu.cfs_period_us as a duration, between 1ms and 1s inclusive.
	CPUCFSQuotaPeriod *metav1.Duration `json:"cpuCFSQuotaPeriod,omitempty"`
	// ImageGCHighThresholdPercent is 0-100 and greater than ImageGCLowThresholdPercent.
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is 0-100.
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// TopologyManagerPolicy is restricted, best-effort, none or single-numa-node.
	TopologyManagerPolicy *string `json:"topologyManagerPolicy,omitempty"`
	// AllowedUnsafeSysctls are unsafe sysctls or sysctl patterns ending in "*".
	AllowedUnsafeSysctls []string `json:"allowedUnsafeSysctls,omitempty"`
	// ContainerLogMaxSize is a size such as "50Mi" (digits then one of E P T G M K Ei Pi Ti Gi Mi Ki).
	ContainerLogMaxSize *string `json:"containerLogMaxSize,omitempty"`
	// ContainerLogMaxFiles is at least 2.
	ContainerLogMaxFiles *int32 `json:"containerLogMaxFiles,omitempty"`
	// PodPidsLimit is the maximum number of PIDs in a pod (AKS default -1, unlimited).
	PodPidsLimit *int64 `json:"podPidsLimit,omitempty"`
	// FailSwapOn makes the kubelet refuse to start with swap on; must be false when
	// linuxOSConfig.swapFileSize is set.
	FailSwapOn *bool `json:"failSwapOn,omitempty"`
}

// AKSSecurity holds the node class's security settings.
type AKSSecurity struct {
	// EncryptionAtHost turns on host-level encryption of the node's disks and caches.
	EncryptionAtHost *bool `json:"encryptionAtHost,omitempty"`
	// TrustedLaunch turns on Trusted Launch (Secure Boot, virtual TPM) for the node's VM.
	TrustedLaunch *AKSTrustedLaunch `json:"trustedLaunch,omitempty"`
}

// AKSTrustedLaunch holds the Trusted Launch settings of the node's VM (Azure's
// securityProfile.uefiSettings).
type AKSTrustedLaunch struct {
	// SecureBoot turns on Secure Boot.
	SecureBoot *bool `json:"secureBoot,omitempty"`
	// VTPM turns on the virtual TPM.
	VTPM *bool `json:"vtpm,omitempty"`
}

// TrustedLaunchEnabled reports whether the class asks for Trusted Launch: secureBoot or vtpm
// true (the CRD's rules test exactly this).
func (s *AKSSecurity) TrustedLaunchEnabled() bool {
	if s == nil || s.TrustedLaunch == nil {
		return false
	}
	t := s.TrustedLaunch
	return (t.SecureBoot != nil && *t.SecureBoot) || (t.VTPM != nil && *t.VTPM)
}

// AKSArtifactStreaming configures artifact streaming (images must also enable it in ACR).
type AKSArtifactStreaming struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// AKSGPU configures GPU nodes.
type AKSGPU struct {
	// Mode is Driver (AKS installs the driver; only SKUs with managed driver support are used;
	// the default) or None (drivers are managed elsewhere, e.g. by the GPU Operator).
	Mode *string `json:"mode,omitempty"`
}

// AKSLocalDNS configures the per-node local DNS. All three fields are required; each override
// list must contain the zones "." and "cluster.local", at most 100 entries, zones unique.
type AKSLocalDNS struct {
	// Mode is Preferred, Required or Disabled.
	Mode string `json:"mode,omitempty"`
	// VnetDNSOverrides apply to traffic from pods with dnsPolicy Default and from the kubelet.
	VnetDNSOverrides []AKSLocalDNSZoneOverride `json:"vnetDNSOverrides,omitempty"`
	// KubeDNSOverrides apply to traffic from pods with dnsPolicy ClusterFirst.
	KubeDNSOverrides []AKSLocalDNSZoneOverride `json:"kubeDNSOverrides,omitempty"`
}

// AKSLocalDNSZoneOverride is the local DNS configuration of one zone; every field is required.
type AKSLocalDNSZoneOverride struct {
	// Zone is a DNS zone such as "." or "cluster.local" (1-254 characters).
	Zone string `json:"zone,omitempty"`
	// QueryLogging is Error or Log.
	QueryLogging string `json:"queryLogging,omitempty"`
	// Protocol is PreferUDP or ForceTCP.
	Protocol string `json:"protocol,omitempty"`
	// ForwardDestination is ClusterCoreDNS or VnetDNS.
	ForwardDestination string `json:"forwardDestination,omitempty"`
	// ForwardPolicy is Sequential, RoundRobin or Random.
	ForwardPolicy string `json:"forwardPolicy,omitempty"`
	// MaxConcurrent is the maximum number of concurrent queries (>= 0).
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`
	// CacheDuration is the cache's maximum TTL, such as "3600s" or "1h" (^([0-9]+(s|m|h))+$).
	CacheDuration string `json:"cacheDuration"`
	// ServeStaleDuration is how long stale entries may be served, in the same form.
	ServeStaleDuration string `json:"serveStaleDuration"`
	// ServeStale is Verify, Immediate or Disable; Verify cannot be combined with ForceTCP.
	ServeStale string `json:"serveStale,omitempty"`
}

// AKSLinuxOSConfig is the AKS custom Linux OS configuration.
type AKSLinuxOSConfig struct {
	// SwapFileSize is the size of a swap file created on each node, such as "1500Mi" or "2Gi".
	SwapFileSize *string `json:"swapFileSize,omitempty"`
	// Sysctls are kernel settings, each within the range AKS accepts.
	Sysctls *AKSSysctls `json:"sysctls,omitempty"`
	// TransparentHugePageDefrag is always, defer, defer+madvise, madvise or never.
	TransparentHugePageDefrag *string `json:"transparentHugePageDefrag,omitempty"`
	// TransparentHugePageEnabled is always, madvise or never.
	TransparentHugePageEnabled *string `json:"transparentHugePageEnabled,omitempty"`
}

// AKSSysctls are the sysctls AKS lets a node pool set; each field maps to the sysctl named in
// its comment. The ranges are the CRD's (apis.ValidateAKSNodeClass enforces them).
type AKSSysctls struct {
	FsAioMaxNr              *int32 `json:"fsAioMaxNr,omitempty"`              // fs.aio-max-nr
	FsFileMax               *int32 `json:"fsFileMax,omitempty"`               // fs.file-max
	FsInotifyMaxUserWatches *int32 `json:"fsInotifyMaxUserWatches,omitempty"` // fs.inotify.max_user_watches
	FsNrOpen                *int32 `json:"fsNrOpen,omitempty"`                // fs.nr_open
	KernelThreadsMax        *int32 `json:"kernelThreadsMax,omitempty"`        // kernel.threads-max
	NetCoreNetdevMaxBacklog *int32 `json:"netCoreNetdevMaxBacklog,omitempty"` // net.core.netdev_max_backlog
	NetCoreOptmemMax        *int32 `json:"netCoreOptmemMax,omitempty"`        // net.core.optmem_max
	NetCoreRmemDefault      *int32 `json:"netCoreRmemDefault,omitempty"`      // net.core.rmem_default
	NetCoreRmemMax          *int32 `json:"netCoreRmemMax,omitempty"`          // net.core.rmem_max
	NetCoreSomaxconn        *int32 `json:"netCoreSomaxconn,omitempty"`        // net.core.somaxconn
	NetCoreWmemDefault      *int32 `json:"netCoreWmemDefault,omitempty"`      // net.core.wmem_default
	NetCoreWmemMax          *int32 `json:"netCoreWmemMax,omitempty"`          // net.core.wmem_max
	// NetIPv4IPLocalPortRange is "first last": first 1024-60999, last 32768-65535, first <= last.
	NetIPv4IPLocalPortRange        *string `json:"netIPv4IPLocalPortRange,omitempty"`        // net.ipv4.ip_local_port_range
	NetIPv4NeighDefaultGcThresh1   *int32  `json:"netIPv4NeighDefaultGcThresh1,omitempty"`   // net.ipv4.neigh.default.gc_thresh1
	NetIPv4NeighDefaultGcThresh2   *int32  `json:"netIPv4NeighDefaultGcThresh2,omitempty"`   // net.ipv4.neigh.default.gc_thresh2
	NetIPv4NeighDefaultGcThresh3   *int32  `json:"netIPv4NeighDefaultGcThresh3,omitempty"`   // net.ipv4.neigh.default.gc_thresh3
	NetIPv4TCPFinTimeout           *int32  `json:"netIPv4TCPFinTimeout,omitempty"`           // net.ipv4.tcp_fin_timeout
	NetIPv4TCPKeepaliveIntvl       *int32  `json:"netIPv4TCPKeepaliveIntvl,omitempty"`       // net.ipv4.tcp_keepalive_intvl
	NetIPv4TCPKeepaliveProbes      *int32  `json:"netIPv4TCPKeepaliveProbes,omitempty"`      // net.ipv4.tcp_keepalive_probes
	NetIPv4TCPKeepaliveTime        *int32  `json:"netIPv4TCPKeepaliveTime,omitempty"`        // net.ipv4.tcp_keepalive_time
	NetIPv4TCPMaxSynBacklog        *int32  `json:"netIPv4TCPMaxSynBacklog,omitempty"`        // net.ipv4.tcp_max_syn_backlog
	NetIPv4TCPMaxTwBuckets         *int32  `json:"netIPv4TCPMaxTwBuckets,omitempty"`         // net.ipv4.tcp_max_tw_buckets
	NetIPv4TCPTwReuse              *bool   `json:"netIPv4TCPTwReuse,omitempty"`              // net.ipv4.tcp_tw_reuse
	NetNetfilterNfConntrackBuckets *int32  `json:"netNetfilterNfConntrackBuckets,omitempty"` // net.netfilter.nf_conntrack_buckets
	NetNetfilterNfConntrackMax     *int32  `json:"netNetfilterNfConntrackMax,omitempty"`     // net.netfilter.nf_conntrack_max
	VMMaxMapCount                  *int32  `json:"vmMaxMapCount,omitempty"`                  // vm.max_map_count
	VMSwappiness                   *int32  `json:"vmSwappiness,omitempty"`                   // vm.swappiness
	VMVfsCachePressure             *int32  `json:"vmVfsCachePressure,omitempty"`             // vm.vfs_cache_pressure
}

// AKSNodeClassStatus holds what the Azure provider resolved: the images per requirement set, the
// Kubernetes version nodes get, the local DNS decision and the readiness conditions.
type AKSNodeClassStatus struct {
	Images []AKSNodeImage `json:"images,omitempty"`
	// KubernetesVersion is the version nodes of this class are provisioned with.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Conditions are the readiness signals (Ready and the provider's own types).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LocalDNSState is Enabled or Disabled: the resolved spec.localDNS.mode.
	LocalDNSState string `json:"localDNSState,omitempty"`
}

// AKSNodeImage is a resolved node image (a community or shared image gallery version id) with the
// requirements (architecture, Hyper-V generation...) of the VM sizes it serves.
type AKSNodeImage struct {
	ID           string                           `json:"id"`
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// AKSNodeClassList is a list of AKSNodeClasses.
// +kubebuilder:object:root=true
type AKSNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AKSNodeClass `json:"items"`
}

// ImageFamily returns spec.imageFamily, or the CRD default (Ubuntu) when it is unset or empty.
func (nc *AKSNodeClass) ImageFamily() string {
	if nc != nil && nc.Spec.ImageFamily != nil && *nc.Spec.ImageFamily != "" {
		return *nc.Spec.ImageFamily
	}
	return AKSDefaultImageFamily
}

// IsWindowsImageFamily reports whether an image family provisions Windows nodes
// (Windows2022, Windows2025).
func IsWindowsImageFamily(family string) bool {
	return family == ImageFamilyWindows2022 || family == ImageFamilyWindows2025
}

// OSSKUForImageFamily returns the kubernetes.azure.com/os-sku label value AKS writes for an image
// family (provider: GetOSSKUFromImageFamily): Ubuntu for every Ubuntu family, AzureLinux,
// Windows2022, Windows2025; "" (the default family) counts as Ubuntu and an unknown family is
// returned unchanged.
func OSSKUForImageFamily(family string) string {
	switch family {
	case "", ImageFamilyUbuntu, ImageFamilyUbuntu2204, ImageFamilyUbuntu2404:
		return OSSKUUbuntu
	}
	return family
}
