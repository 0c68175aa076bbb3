package azure

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
)

// Labels AKS node bootstrapping gives a node beyond the request's (facts from the Azure
// Karpenter provider's launchtemplate and imagefamily packages and AgentBaker's node labels).
const (
	labelRole            = apisv1.AKSLabelDomain + "/role"
	labelAgentPool       = apisv1.AKSLabelDomain + "/agentpool"
	labelNetworkSubnet   = apisv1.AKSLabelDomain + "/network-subnet"
	labelVNetGUID        = apisv1.AKSLabelDomain + "/nodenetwork-vnetguid"
	labelCNIOverlay      = apisv1.AKSLabelDomain + "/azure-cni-overlay"
	labelPodNetworkType  = apisv1.AKSLabelDomain + "/podnetwork-type"
	labelStatelessCNI    = apisv1.AKSLabelDomain + "/network-stateless-cni"
	labelEBPFDataplane   = apisv1.AKSLabelDomain + "/ebpf-dataplane"
	networkDataplaneBPF  = "cilium"
	modeUser             = "user"
	scaleSetPrioritySpot = "spot"
)

// contract is the AKS bootstrap contract of one VM create: the cluster's bootstrap options, the
// request's labels and taints with those AKS bootstrapping adds, the AKSNodeClass's kubelet and
// sysctl settings, the offering's architecture, GPU and priority, and the image's version.
// Errors name the field.
func (p *Provider) contract(req cloud.LaunchRequest, nc *apisv1.AKSNodeClass, settings catalog.NodeSettings,
	o cloud.OfferingRef, it *catalog.InstanceType, subnet, image string) (customdata.Contract, error) {
	b := p.o.Bootstrap
	u, err := url.Parse(b.APIServer)
	if err != nil || u.Hostname() == "" {
		return customdata.Contract{}, fmt.Errorf("azure provider: Options.Bootstrap.APIServer %q is not a URL with a host", b.APIServer)
	}
	sub := parseSubnetID(subnet)
	// The version nodes of this class get (its status, as the provider's GetKubernetesVersion),
	// else the control plane's.
	version := nc.Status.KubernetesVersion
	if version == "" {
		version = p.o.KubernetesVersion
	}
	c := customdata.Contract{
		APIServerFQDN: u.Hostname(), ClusterCA: b.CA, TLSBootstrapToken: b.Token, KubernetesVersion: strings.TrimPrefix(version, "v"),
		Arch: it.Labels[corev1.LabelArchStable], TenantID: b.TenantID, SubscriptionID: p.o.SubscriptionID,
		ResourceGroup: p.o.ResourceGroup, Location: p.o.Location, UserAssignedIdentityID: b.KubeletIdentityClientID,
		VNet: sub.vnet, VNetResourceGroup: sub.resourceGroup, Subnet: sub.name,
		NetworkPlugin: agentBakerNetworkPlugin(p.o.NetworkPlugin), NetworkPolicy: b.NetworkPolicy,
		NodeImageVersion: nodeImageVersion(image),
		Labels:           p.kubeletLabels(req, nc, o, sub.name),
		Taints:           req.Taints,
		Kubelet:          kubeletConfig(nc, settings, it, b.ClusterDNS),
		GPUNode:          it.Azure != nil && it.Azure.NVIDIAGPU > 0,
		Sysctls:          sysctls(nc),
	}
	return c, nil
}

// agentBakerNetworkPlugin is NETWORK_PLUGIN for the cluster's network: Azure CNI Overlay and
// bring-your-own CNI install no Azure CNI from the image ("none"); node-subnet Azure CNI is
// "azure"; kubenet is "kubenet" (provider launchtemplate getAgentbakerNetworkPlugin).
func agentBakerNetworkPlugin(plugin string) string {
	switch plugin {
	case catalog.AKSNetworkNodeSubnet:
		return "azure"
	case catalog.AKSNetworkKubenet:
		return "kubenet"
	}
	return "none"
}

// kubeletLabels are the labels the kubelet registers with: the request's (NodePool template and
// single-valued requirements), then those AKS node bootstrapping adds: kubernetes.azure.com/mode
// user (the provider's kubeletNodeLabelsBase), role agent, the node resource group and the
// kubelet identity (AddAgentBakerGeneratedLabels), the OS SKU of the image family, the agent
// pool as both agentpool labels (AgentBaker), kubernetes.azure.com/scalesetpriority=spot on a
// spot VM (AKS spot pools), and the network labels the CNI DaemonSets select on (provider
// getVnetInfoLabels for Azure CNI Overlay; ebpf-dataplane=cilium for the Cilium DaemonSet).
func (p *Provider) kubeletLabels(req cloud.LaunchRequest, nc *apisv1.AKSNodeClass, o cloud.OfferingRef, subnetName string) map[string]string {
	l := make(map[string]string, len(req.Labels)+12)
	for k, v := range req.Labels {
		l[k] = v
	}
	if l[apisv1.AKSLabelMode] == "" {
		l[apisv1.AKSLabelMode] = modeUser
	}
	l[labelRole] = "agent"
	l[apisv1.AKSLabelCluster] = NormalizeResourceGroupLabel(p.o.ResourceGroup)
	l[apisv1.AKSLabelOSSKU] = apisv1.OSSKUForImageFamily(nc.ImageFamily())
	if id := p.o.Bootstrap.KubeletIdentityClientID; id != "" {
		l[apisv1.AKSLabelKubeletIdentityClientID] = id
	}
	if pool := req.Labels[apisv1.LabelNodePool]; pool != "" {
		l[apisv1.AKSLabelLegacyAgentPool], l[labelAgentPool] = pool, pool
	}
	if o.CapacityType == apisv1.CapacityTypeSpot {
		l[apisv1.AKSLabelScaleSetPriority] = scaleSetPrioritySpot
	}
	if p.o.NetworkPlugin == "" || p.o.NetworkPlugin == catalog.AKSNetworkOverlay {
		l[labelNetworkSubnet], l[labelCNIOverlay], l[labelPodNetworkType] = subnetName, "true", "overlay"
		if g := p.o.Bootstrap.VNetGUID; g != "" {
			l[labelVNetGUID] = g
		}
		// Stateless CNI from Kubernetes 1.34 (provider getVnetInfoLabels).
		version := nc.Status.KubernetesVersion
		if version == "" {
			version = p.o.KubernetesVersion
		}
		l[labelStatelessCNI] = strconv.FormatBool(minorAtLeast(version, 1, 34))
	}
	if p.o.Bootstrap.NetworkDataplane == networkDataplaneBPF {
		l[labelEBPFDataplane] = networkDataplaneBPF
	}
	return l
}

// minorAtLeast reports whether a "1.34.2" version is at least major.minor.
func minorAtLeast(version string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (ma > major || ma == major && mi >= minor)
}

// kubeletConfig is KUBELET_FLAGS' settings: max pods from the node settings, AKS's kube-reserved
// (catalog.AKSKubeReservedMilliCPU / AKSKubeReservedMemoryMiB, the values the plan's allocatable
// assumed) and memory.available<750Mi, and the AKSNodeClass's spec.kubelet.
func kubeletConfig(nc *apisv1.AKSNodeClass, settings catalog.NodeSettings, it *catalog.InstanceType, clusterDNS string) customdata.KubeletConfig {
	k := customdata.KubeletConfig{ClusterDNS: clusterDNS, MaxPods: catalog.AKSMaxPodsOverlay,
		EvictionHard: map[string]string{"memory.available": strconv.Itoa(catalog.AKSEvictionMemoryAvailableMiB) + "Mi"}}
	if s := settings.Kubelet; s != nil && s.MaxPods != nil {
		k.MaxPods = *s.MaxPods
	}
	if a := it.Azure; a != nil {
		k.KubeReserved = map[string]string{"cpu": strconv.FormatInt(catalog.AKSKubeReservedMilliCPU(a.VCPU), 10) + "m",
			"memory": strconv.FormatInt(catalog.AKSKubeReservedMemoryMiB(a.MemoryMiB), 10) + "Mi"}
	}
	kc := nc.Spec.Kubelet
	if kc == nil {
		return k
	}
	k.CPUManagerPolicy, k.TopologyManagerPolicy = deref(kc.CPUManagerPolicy), deref(kc.TopologyManagerPolicy)
	k.ContainerLogMaxSize = deref(kc.ContainerLogMaxSize)
	k.AllowedUnsafeSysctls = kc.AllowedUnsafeSysctls
	if kc.ImageGCHighThresholdPercent != nil {
		k.ImageGCHigh = *kc.ImageGCHighThresholdPercent
	}
	if kc.ImageGCLowThresholdPercent != nil {
		k.ImageGCLow = *kc.ImageGCLowThresholdPercent
	}
	if kc.ContainerLogMaxFiles != nil {
		k.ContainerLogMaxFiles = *kc.ContainerLogMaxFiles
	}
	if kc.PodPidsLimit != nil {
		k.PodMaxPids = *kc.PodPidsLimit
	}
	return k
}

// sysctls are spec.linuxOSConfig.sysctls by sysctl name (the names in AKSSysctls' comments).
func sysctls(nc *apisv1.AKSNodeClass) map[string]string {
	if nc.Spec.LinuxOSConfig == nil || nc.Spec.LinuxOSConfig.Sysctls == nil {
		return nil
	}
	s := nc.Spec.LinuxOSConfig.Sysctls
	out := map[string]string{}
	for name, v := range map[string]*int32{
		"fs.aio-max-nr": s.FsAioMaxNr, "fs.file-max": s.FsFileMax, "fs.inotify.max_user_watches": s.FsInotifyMaxUserWatches,
		"fs.nr_open": s.FsNrOpen, "kernel.threads-max": s.KernelThreadsMax, "net.core.netdev_max_backlog": s.NetCoreNetdevMaxBacklog,
		"net.core.optmem_max": s.NetCoreOptmemMax, "net.core.rmem_default": s.NetCoreRmemDefault, "net.core.rmem_max": s.NetCoreRmemMax,
		"net.core.somaxconn": s.NetCoreSomaxconn, "net.core.wmem_default": s.NetCoreWmemDefault, "net.core.wmem_max": s.NetCoreWmemMax,
		"net.ipv4.neigh.default.gc_thresh1": s.NetIPv4NeighDefaultGcThresh1, "net.ipv4.neigh.default.gc_thresh2": s.NetIPv4NeighDefaultGcThresh2,
		"net.ipv4.neigh.default.gc_thresh3": s.NetIPv4NeighDefaultGcThresh3, "net.ipv4.tcp_fin_timeout": s.NetIPv4TCPFinTimeout,
		"net.ipv4.tcp_keepalive_intvl": s.NetIPv4TCPKeepaliveIntvl, "net.ipv4.tcp_keepalive_probes": s.NetIPv4TCPKeepaliveProbes,
		"net.ipv4.tcp_keepalive_time": s.NetIPv4TCPKeepaliveTime, "net.ipv4.tcp_max_syn_backlog": s.NetIPv4TCPMaxSynBacklog,
		"net.ipv4.tcp_max_tw_buckets": s.NetIPv4TCPMaxTwBuckets, "net.netfilter.nf_conntrack_buckets": s.NetNetfilterNfConntrackBuckets,
		"net.netfilter.nf_conntrack_max": s.NetNetfilterNfConntrackMax, "vm.max_map_count": s.VMMaxMapCount,
		"vm.swappiness": s.VMSwappiness, "vm.vfs_cache_pressure": s.VMVfsCachePressure,
	} {
		if v != nil {
			out[name] = strconv.Itoa(int(*v))
		}
	}
	if s.NetIPv4IPLocalPortRange != nil {
		// "first last" as the sysctl file takes it; the kubelet-facing check refuses no space
		// here: the sysctl.d file is base64 in SYSCTL_CONTENT.
		out["net.ipv4.ip_local_port_range"] = *s.NetIPv4IPLocalPortRange
	}
	if s.NetIPv4TCPTwReuse != nil {
		out["net.ipv4.tcp_tw_reuse"] = map[bool]string{true: "1", false: "0"}[*s.NetIPv4TCPTwReuse]
	}
	return out
}

// nodeImageVersion is the kubernetes.azure.com/node-image-version of a community gallery image
// id: <gallery name before its GUID>-<definition>-<version> (AKSUbuntu-2204gen2containerd-202611.18.0).
func nodeImageVersion(id string) string {
	parts := strings.Split(strings.TrimPrefix(id, "/"), "/")
	// CommunityGalleries/<name>/images/<definition>/versions/<version>
	if len(parts) != 6 {
		return ""
	}
	gallery, _, _ := strings.Cut(parts[1], "-")
	return gallery + "-" + parts[3] + "-" + parts[5]
}

// subnetParts are the names in a subnet's ARM id.
type subnetParts struct{ resourceGroup, vnet, name string }

// parseSubnetID splits /subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Network/
// virtualNetworks/<vnet>/subnets/<name>; another shape gives empty parts.
func parseSubnetID(id string) subnetParts {
	p := strings.Split(strings.TrimPrefix(id, "/"), "/")
	if len(p) != 10 || !strings.EqualFold(p[2], "resourceGroups") || !strings.EqualFold(p[6], "virtualNetworks") || !strings.EqualFold(p[8], "subnets") {
		return subnetParts{}
	}
	return subnetParts{resourceGroup: p[3], vnet: p[7], name: p[9]}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nicSubnet is the subnet a class's NICs join (validate picked the same one).
func nicSubnet(p *Provider, nc *apisv1.AKSNodeClass) string {
	if nc.Spec.VNETSubnetID != nil && *nc.Spec.VNETSubnetID != "" {
		return *nc.Spec.VNETSubnetID
	}
	return p.o.SubnetID
}
