package apis

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// AKSNodeClass defaults and rules. Source: the v1beta1 schema of the Azure provider's CRD,
// Azure/karpenter-provider-azure pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml at commit
// 352646f599290c3a6d2f9710fb535a7b288f88ed (copied to infra/crds): its default markers, enums,
// minimum/maximum, patterns, maxItems/maxLength, list-map keys and x-kubernetes-validations
// (CEL) rules, here written in Go.

// Defaults of the AKSNodeClass CRD. The kubelet ones apply inside a spec.kubelet that is present
// and the GPU one inside a present spec.gpu, as the API server applies nested defaults.
const (
	DefaultAKSImageFamily           = v1.AKSDefaultImageFamily
	DefaultAKSOSDiskSizeGB          = int32(128)
	DefaultAKSGPUMode               = v1.GPUModeDriver
	DefaultAKSCPUManagerPolicy      = v1.CPUManagerPolicyNone
	DefaultAKSCPUCFSQuota           = true
	DefaultAKSCPUCFSQuotaPeriod     = 100 * time.Millisecond
	DefaultAKSTopologyManagerPolicy = v1.TopologyManagerPolicyNone
	DefaultAKSContainerLogMaxSize   = "50Mi"
	DefaultAKSContainerLogMaxFiles  = int32(5)
)

// SetAKSNodeClassDefaults fills the CRD's defaults into an AKSNodeClass in place:
// spec.imageFamily Ubuntu and spec.osDiskSizeGB 128 when unset; inside a present spec.kubelet,
// cpuManagerPolicy none, cpuCFSQuota true, cpuCFSQuotaPeriod 100ms, topologyManagerPolicy none,
// containerLogMaxSize 50Mi, containerLogMaxFiles 5; inside a present spec.gpu, mode Driver.
// maxPods stays unset (its default depends on the cluster's network plugin). Idempotent; nil is
// a no-op.
func SetAKSNodeClassDefaults(nc *v1.AKSNodeClass) {
	if nc == nil {
		return
	}
	s := &nc.Spec
	setPtr(&s.ImageFamily, DefaultAKSImageFamily)
	setPtr(&s.OSDiskSizeGB, DefaultAKSOSDiskSizeGB)
	if k := s.Kubelet; k != nil {
		setPtr(&k.CPUManagerPolicy, DefaultAKSCPUManagerPolicy)
		setPtr(&k.CPUCFSQuota, DefaultAKSCPUCFSQuota)
		setPtr(&k.CPUCFSQuotaPeriod, metav1.Duration{Duration: DefaultAKSCPUCFSQuotaPeriod})
		setPtr(&k.TopologyManagerPolicy, DefaultAKSTopologyManagerPolicy)
		setPtr(&k.ContainerLogMaxSize, DefaultAKSContainerLogMaxSize)
		setPtr(&k.ContainerLogMaxFiles, DefaultAKSContainerLogMaxFiles)
	}
	if g := s.GPU; g != nil {
		setPtr(&g.Mode, DefaultAKSGPUMode)
	}
}

// Ranges and limits of the CRD.
const (
	aksMinOSDiskSizeGB         = 30
	aksMaxOSDiskSizeGB         = 2048
	aksMinMaxPods              = 10
	aksMaxMaxPods              = 250
	aksMinContainerLogMaxFiles = 2
	aksMaxTagKeyLength         = 512 // characters (CEL size: code points)
	aksMaxTagValueLength       = 256
	aksMaxDNSOverrides         = 100
	aksMaxZoneLength           = 254
	// The kubelet's own bounds of cpuCFSQuotaPeriod (stated in the CRD's description; the kubelet
	// refuses to start outside them).
	aksMinCPUCFSQuotaPeriod = time.Millisecond
	aksMaxCPUCFSQuotaPeriod = time.Second
)

var (
	aksSubnetIDRe = regexp.MustCompile(`(?i)^\/subscriptions\/[^\/]+\/resourceGroups\/[a-zA-Z0-9_\-().]{0,89}[a-zA-Z0-9_\-()]\/providers\/Microsoft\.Network\/virtualNetworks\/[^\/]+\/subnets\/[^\/]+$`)
	aksSizeRe     = regexp.MustCompile(`^\d+(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$`)
	aksDNSTTLRe   = regexp.MustCompile(`^([0-9]+(s|m|h))+$`)
	aksZoneRe     = regexp.MustCompile(`^(\.|[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?)$`)
	aksPortPairRe = regexp.MustCompile(`^\d+ \d+$`)

	aksFIPSModes        = []string{v1.FIPSModeFIPS, v1.FIPSModeDisabled}
	aksGPUModes         = []string{v1.GPUModeDriver, v1.GPUModeNone}
	aksCPUManagerPolicy = []string{v1.CPUManagerPolicyNone, v1.CPUManagerPolicyStatic}
	aksTopologyPolicies = []string{v1.TopologyManagerPolicyRestricted, v1.TopologyManagerPolicyBestEffort,
		v1.TopologyManagerPolicyNone, v1.TopologyManagerPolicySingleNUMANode}
	aksTHPDefrag       = []string{"always", "defer", "defer+madvise", "madvise", "never"}
	aksTHPEnabled      = []string{"always", "madvise", "never"}
	aksLocalDNSModes   = []string{v1.LocalDNSModePreferred, v1.LocalDNSModeRequired, v1.LocalDNSModeDisabled}
	aksQueryLogging    = []string{v1.LocalDNSQueryLoggingError, v1.LocalDNSQueryLoggingLog}
	aksDNSProtocols    = []string{v1.LocalDNSProtocolPreferUDP, v1.LocalDNSProtocolForceTCP}
	aksForwardDests    = []string{v1.LocalDNSForwardDestinationClusterCoreDNS, v1.LocalDNSForwardDestinationVnetDNS}
	aksForwardPolicies = []string{v1.LocalDNSForwardPolicySequential, v1.LocalDNSForwardPolicyRoundRobin, v1.LocalDNSForwardPolicyRandom}
	aksServeStale      = []string{v1.LocalDNSServeStaleVerify, v1.LocalDNSServeStaleImmediate, v1.LocalDNSServeStaleDisable}
	aksRequiredZones   = []string{".", "cluster.local"}
)

// aksSysctlRange is the CRD's [min, max] of one integer sysctl, by its JSON name.
type aksSysctlRange struct {
	name     string
	get      func(*v1.AKSSysctls) *int32
	min, max int32
}

var aksSysctlRanges = []aksSysctlRange{
	{"fsAioMaxNr", func(s *v1.AKSSysctls) *int32 { return s.FsAioMaxNr }, 65536, 6553500},
	{"fsFileMax", func(s *v1.AKSSysctls) *int32 { return s.FsFileMax }, 8192, 12000500},
	{"fsInotifyMaxUserWatches", func(s *v1.AKSSysctls) *int32 { return s.FsInotifyMaxUserWatches }, 781250, 2097152},
	{"fsNrOpen", func(s *v1.AKSSysctls) *int32 { return s.FsNrOpen }, 8192, 20000500},
	{"kernelThreadsMax", func(s *v1.AKSSysctls) *int32 { return s.KernelThreadsMax }, 20, 513785},
	{"netCoreNetdevMaxBacklog", func(s *v1.AKSSysctls) *int32 { return s.NetCoreNetdevMaxBacklog }, 1000, 3240000},
	{"netCoreOptmemMax", func(s *v1.AKSSysctls) *int32 { return s.NetCoreOptmemMax }, 20480, 4194304},
	{"netCoreRmemDefault", func(s *v1.AKSSysctls) *int32 { return s.NetCoreRmemDefault }, 212992, 134217728},
	{"netCoreRmemMax", func(s *v1.AKSSysctls) *int32 { return s.NetCoreRmemMax }, 212992, 134217728},
	{"netCoreSomaxconn", func(s *v1.AKSSysctls) *int32 { return s.NetCoreSomaxconn }, 4096, 3240000},
	{"netCoreWmemDefault", func(s *v1.AKSSysctls) *int32 { return s.NetCoreWmemDefault }, 212992, 134217728},
	{"netCoreWmemMax", func(s *v1.AKSSysctls) *int32 { return s.NetCoreWmemMax }, 212992, 134217728},
	{"netIPv4NeighDefaultGcThresh1", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4NeighDefaultGcThresh1 }, 128, 80000},
	{"netIPv4NeighDefaultGcThresh2", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4NeighDefaultGcThresh2 }, 512, 90000},
	{"netIPv4NeighDefaultGcThresh3", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4NeighDefaultGcThresh3 }, 1024, 100000},
	{"netIPv4TCPFinTimeout", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4TCPFinTimeout }, 5, 120},
	{"netIPv4TCPKeepaliveIntvl", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4TCPKeepaliveIntvl }, 10, 90},
	{"netIPv4TCPKeepaliveProbes", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4TCPKeepaliveProbes }, 1, 15},
	{"netIPv4TCPKeepaliveTime", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4TCPKeepaliveTime }, 30, 432000},
	{"netIPv4TCPMaxSynBacklog", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4TCPMaxSynBacklog }, 128, 3240000},
	{"netIPv4TCPMaxTwBuckets", func(s *v1.AKSSysctls) *int32 { return s.NetIPv4TCPMaxTwBuckets }, 8000, 1440000},
	{"netNetfilterNfConntrackBuckets", func(s *v1.AKSSysctls) *int32 { return s.NetNetfilterNfConntrackBuckets }, 65536, 524288},
	{"netNetfilterNfConntrackMax", func(s *v1.AKSSysctls) *int32 { return s.NetNetfilterNfConntrackMax }, 131072, 2097152},
	{"vmMaxMapCount", func(s *v1.AKSSysctls) *int32 { return s.VMMaxMapCount }, 65530, 262144},
	{"vmSwappiness", func(s *v1.AKSSysctls) *int32 { return s.VMSwappiness }, 0, 100},
	{"vmVfsCachePressure", func(s *v1.AKSSysctls) *int32 { return s.VMVfsCachePressure }, 0, 100},
}

// ValidateAKSNodeClass checks an AKSNodeClass against the CRD's schema and CEL rules, and returns
// every problem with its field path. Schema: metadata.name (DNS subdomain); imageFamily,
// fipsMode, gpu.mode, kubelet cpuManagerPolicy/topologyManagerPolicy, linuxOSConfig
// transparentHugePage* and localDNS enums; osDiskSizeGB 30-2048; maxPods 10-250; vnetSubnetID an
// ARM subnet id; kubelet imageGC*ThresholdPercent 0-100, containerLogMaxFiles >= 2,
// containerLogMaxSize and linuxOSConfig.swapFileSize sizes ("50Mi"); each sysctl's range; each
// localDNS zone override complete (zone 1-254 characters and a DNS name, durations such as "1h",
// maxConcurrent >= 0), at most 100 per list, zones unique. CEL: tag keys at most 512 characters
// without < > % & ? or \, tag values at most 256; imageGCHigh > imageGCLow; rmem/wmem default <=
// max; gc_thresh1 <= gc_thresh2 <= gc_thresh3; ip_local_port_range "first last" with first
// 1024-60999, last 32768-65535, first <= last; each override list holds "." and "cluster.local";
// cluster.local never forwarded to VnetDNS; serveStale Verify not with ForceTCP; vnetDNSOverrides
// never forward "." or external zones to ClusterCoreDNS; FIPS not with Ubuntu2404, with
// Ubuntu2204 only under trusted launch, and FIPS with trusted launch only on Ubuntu or
// Ubuntu2204; linuxOSConfig.swapFileSize needs kubelet.failSwapOn false. Beyond the CRD, kubelet.cpuCFSQuotaPeriod must be 1ms-1s, as its description says and
// the kubelet enforces. An unset imageFamily is taken as its default (Ubuntu), as the API server
// defaults before it validates. Never panics; nil is reported as spec Required.
func ValidateAKSNodeClass(nc *v1.AKSNodeClass) field.ErrorList {
	if nc == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no AKSNodeClass")}
	}
	errs := validateName(nc.Name)
	s := &nc.Spec
	p := field.NewPath("spec")
	family := nc.ImageFamily()
	if s.ImageFamily != nil {
		family = *s.ImageFamily
		errs = append(errs, aksEnum(p.Child("imageFamily"), family, v1.AKSImageFamilies)...)
	}
	if s.FIPSMode != nil {
		fp := p.Child("fipsMode")
		errs = append(errs, aksEnum(fp, *s.FIPSMode, aksFIPSModes)...)
		if *s.FIPSMode == v1.FIPSModeFIPS {
			tl := s.Security.TrustedLaunchEnabled()
			switch {
			case family == v1.ImageFamilyUbuntu2404:
				errs = append(errs, field.Forbidden(fp, "FIPS is not yet supported for Ubuntu2404"))
			case family == v1.ImageFamilyUbuntu2204 && !tl:
				errs = append(errs, field.Forbidden(fp, "TrustedLaunch is required for FIPS support with Ubuntu2204 (security.trustedLaunch vtpm or secureBoot)"))
			}
			if tl && family != v1.ImageFamilyUbuntu && family != v1.ImageFamilyUbuntu2204 {
				errs = append(errs, field.Forbidden(p.Child("security", "trustedLaunch"), "TrustedLaunch with FIPSMode FIPS is only supported for Ubuntu and Ubuntu2204 (imageFamily "+family+")"))
			}
		}
	}
	errs = append(errs, aksRange(p.Child("osDiskSizeGB"), s.OSDiskSizeGB, aksMinOSDiskSizeGB, aksMaxOSDiskSizeGB)...)
	errs = append(errs, aksRange(p.Child("maxPods"), s.MaxPods, aksMinMaxPods, aksMaxMaxPods)...)
	if id := s.VNETSubnetID; id != nil && !aksSubnetIDRe.MatchString(*id) {
		errs = append(errs, field.Invalid(p.Child("vnetSubnetID"), *id,
			"must be a subnet resource id: /subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>"))
	}
	errs = append(errs, validateAKSTags(s.Tags, p.Child("tags"))...)
	errs = append(errs, validateAKSKubelet(s.Kubelet, p.Child("kubelet"))...)
	if g := s.GPU; g != nil && g.Mode != nil {
		errs = append(errs, aksEnum(p.Child("gpu", "mode"), *g.Mode, aksGPUModes)...)
	}
	if l := s.LinuxOSConfig; l != nil {
		lp := p.Child("linuxOSConfig")
		errs = append(errs, validateAKSLinuxOSConfig(l, lp)...)
		if l.SwapFileSize != nil {
			fsp := p.Child("kubelet", "failSwapOn")
			const why = "must be set to false when linuxOSConfig.swapFileSize is specified"
			switch {
			case s.Kubelet == nil || s.Kubelet.FailSwapOn == nil:
				errs = append(errs, field.Required(fsp, why))
			case *s.Kubelet.FailSwapOn:
				errs = append(errs, field.Invalid(fsp, true, why))
			}
		}
	}
	if d := s.LocalDNS; d != nil {
		errs = append(errs, validateAKSLocalDNS(d, p.Child("localDNS"))...)
	}
	return errs
}

func validateAKSTags(tags map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(tags) {
		if n := utf8.RuneCountInString(k); n > aksMaxTagKeyLength {
			errs = append(errs, field.Invalid(p.Key(k), k, fmt.Sprintf("tag keys must be at most %d characters (has %d)", aksMaxTagKeyLength, n)))
		}
		if strings.ContainsAny(k, "<>%&?") {
			errs = append(errs, field.Invalid(p.Key(k), k, "tag keys must not contain '<', '>', '%', '&', or '?'"))
		}
		if strings.Contains(k, `\`) {
			errs = append(errs, field.Invalid(p.Key(k), k, `tag keys must not contain '\'`))
		}
		if n := utf8.RuneCountInString(tags[k]); n > aksMaxTagValueLength {
			errs = append(errs, field.Invalid(p.Key(k), tags[k], fmt.Sprintf("tag values must be at most %d characters (has %d)", aksMaxTagValueLength, n)))
		}
	}
	return errs
}

func validateAKSKubelet(k *v1.AKSKubeletConfiguration, p *field.Path) field.ErrorList {
	if k == nil {
		return nil
	}
	var errs field.ErrorList
	if k.CPUManagerPolicy != nil {
		errs = append(errs, aksEnum(p.Child("cpuManagerPolicy"), *k.CPUManagerPolicy, aksCPUManagerPolicy)...)
	}
	if k.TopologyManagerPolicy != nil {
		errs = append(errs, aksEnum(p.Child("topologyManagerPolicy"), *k.TopologyManagerPolicy, aksTopologyPolicies)...)
	}
	if d := k.CPUCFSQuotaPeriod; d != nil && (d.Duration < aksMinCPUCFSQuotaPeriod || d.Duration > aksMaxCPUCFSQuotaPeriod) {
		errs = append(errs, field.Invalid(p.Child("cpuCFSQuotaPeriod"), d.Duration.String(), "must be between 1ms and 1s, inclusive"))
	}
	hp, lp := p.Child("imageGCHighThresholdPercent"), p.Child("imageGCLowThresholdPercent")
	errs = append(errs, aksRange(hp, k.ImageGCHighThresholdPercent, 0, 100)...)
	errs = append(errs, aksRange(lp, k.ImageGCLowThresholdPercent, 0, 100)...)
	if h, l := k.ImageGCHighThresholdPercent, k.ImageGCLowThresholdPercent; h != nil && l != nil && *h <= *l {
		errs = append(errs, field.Invalid(hp, *h, fmt.Sprintf("imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent (%d)", *l)))
	}
	if sz := k.ContainerLogMaxSize; sz != nil && !aksSizeRe.MatchString(*sz) {
		errs = append(errs, field.Invalid(p.Child("containerLogMaxSize"), *sz, `must be digits and a unit of E, P, T, G, M, K, Ei, Pi, Ti, Gi, Mi or Ki (e.g. "50Mi")`))
	}
	if n := k.ContainerLogMaxFiles; n != nil && *n < aksMinContainerLogMaxFiles {
		errs = append(errs, field.Invalid(p.Child("containerLogMaxFiles"), *n, fmt.Sprintf("must be at least %d", aksMinContainerLogMaxFiles)))
	}
	return errs
}

func validateAKSLinuxOSConfig(l *v1.AKSLinuxOSConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sz := l.SwapFileSize; sz != nil && !aksSizeRe.MatchString(*sz) {
		errs = append(errs, field.Invalid(p.Child("swapFileSize"), *sz, `must be digits and a unit of E, P, T, G, M, K, Ei, Pi, Ti, Gi, Mi or Ki (e.g. "2Gi")`))
	}
	if v := l.TransparentHugePageDefrag; v != nil {
		errs = append(errs, aksEnum(p.Child("transparentHugePageDefrag"), *v, aksTHPDefrag)...)
	}
	if v := l.TransparentHugePageEnabled; v != nil {
		errs = append(errs, aksEnum(p.Child("transparentHugePageEnabled"), *v, aksTHPEnabled)...)
	}
	s := l.Sysctls
	if s == nil {
		return errs
	}
	sp := p.Child("sysctls")
	for _, r := range aksSysctlRanges {
		errs = append(errs, aksRange(sp.Child(r.name), r.get(s), r.min, r.max)...)
	}
	le := func(a, b *int32, an, bn string) {
		if a != nil && b != nil && *a > *b {
			errs = append(errs, field.Invalid(sp.Child(an), *a, fmt.Sprintf("%s must be <= %s (%d)", an, bn, *b)))
		}
	}
	le(s.NetCoreRmemDefault, s.NetCoreRmemMax, "netCoreRmemDefault", "netCoreRmemMax")
	le(s.NetCoreWmemDefault, s.NetCoreWmemMax, "netCoreWmemDefault", "netCoreWmemMax")
	le(s.NetIPv4NeighDefaultGcThresh1, s.NetIPv4NeighDefaultGcThresh2, "netIPv4NeighDefaultGcThresh1", "netIPv4NeighDefaultGcThresh2")
	le(s.NetIPv4NeighDefaultGcThresh2, s.NetIPv4NeighDefaultGcThresh3, "netIPv4NeighDefaultGcThresh2", "netIPv4NeighDefaultGcThresh3")
	if r := s.NetIPv4IPLocalPortRange; r != nil {
		rp := sp.Child("netIPv4IPLocalPortRange")
		if !aksPortPairRe.MatchString(*r) {
			errs = append(errs, field.Invalid(rp, *r, `must be "first last", two port numbers separated by one space`))
		} else {
			a, b, _ := strings.Cut(*r, " ")
			first, err1 := strconv.ParseInt(a, 10, 64)
			last, err2 := strconv.ParseInt(b, 10, 64)
			if err1 != nil || first < 1024 || first > 60999 {
				errs = append(errs, field.Invalid(rp, *r, "netIPv4IPLocalPortRange first port must be in [1024, 60999]"))
			}
			if err2 != nil || last < 32768 || last > 65535 {
				errs = append(errs, field.Invalid(rp, *r, "netIPv4IPLocalPortRange last port must be in [32768, 65535]"))
			}
			if err1 != nil || err2 != nil || first > last {
				errs = append(errs, field.Invalid(rp, *r, "netIPv4IPLocalPortRange first port must be <= last port"))
			}
		}
	}
	return errs
}

func validateAKSLocalDNS(d *v1.AKSLocalDNS, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d.Mode == "" {
		errs = append(errs, field.Required(p.Child("mode"), "one of Preferred, Required, Disabled"))
	} else {
		errs = append(errs, aksEnum(p.Child("mode"), d.Mode, aksLocalDNSModes)...)
	}
	errs = append(errs, validateAKSZoneOverrides(d.VnetDNSOverrides, p.Child("vnetDNSOverrides"), true)...)
	errs = append(errs, validateAKSZoneOverrides(d.KubeDNSOverrides, p.Child("kubeDNSOverrides"), false)...)
	return errs
}

func validateAKSZoneOverrides(list []v1.AKSLocalDNSZoneOverride, p *field.Path, vnet bool) field.ErrorList {
	if len(list) == 0 {
		return field.ErrorList{field.Required(p, "must contain required zones '.' and 'cluster.local'")}
	}
	var errs field.ErrorList
	if len(list) > aksMaxDNSOverrides {
		errs = append(errs, field.TooMany(p, len(list), aksMaxDNSOverrides))
	}
	seen := map[string]bool{}
	for i := range list {
		o := &list[i]
		ip := p.Index(i)
		errs = append(errs, validateAKSZoneOverride(o, ip)...)
		if o.Zone != "" {
			if seen[o.Zone] {
				errs = append(errs, field.Duplicate(ip.Child("zone"), o.Zone))
			}
			seen[o.Zone] = true
		}
		if vnet && o.ForwardDestination == v1.LocalDNSForwardDestinationClusterCoreDNS {
			switch {
			case o.Zone == ".":
				errs = append(errs, field.Forbidden(ip.Child("forwardDestination"), "root zone '.' cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides"))
			case !strings.HasSuffix(o.Zone, "cluster.local"):
				errs = append(errs, field.Forbidden(ip.Child("forwardDestination"), "external domains cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides"))
			}
		}
	}
	for _, z := range aksRequiredZones {
		if !seen[z] {
			errs = append(errs, field.Required(p, fmt.Sprintf("must contain required zones '.' and 'cluster.local' (no %q)", z)))
		}
	}
	return errs
}

func validateAKSZoneOverride(o *v1.AKSLocalDNSZoneOverride, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	zp := p.Child("zone")
	switch n := len(o.Zone); {
	case n == 0:
		errs = append(errs, field.Required(zp, `a DNS zone such as "." or "cluster.local"`))
	case n > aksMaxZoneLength:
		errs = append(errs, field.TooLong(zp, o.Zone, aksMaxZoneLength))
	case !aksZoneRe.MatchString(o.Zone):
		errs = append(errs, field.Invalid(zp, o.Zone, `must be "." or a DNS name of labels of letters, digits, '-' and '_'`))
	}
	enum := func(name, v string, allowed []string) {
		if v == "" {
			errs = append(errs, field.Required(p.Child(name), "one of "+strings.Join(allowed, ", ")))
			return
		}
		errs = append(errs, aksEnum(p.Child(name), v, allowed)...)
	}
	enum("queryLogging", o.QueryLogging, aksQueryLogging)
	enum("protocol", o.Protocol, aksDNSProtocols)
	enum("forwardDestination", o.ForwardDestination, aksForwardDests)
	enum("forwardPolicy", o.ForwardPolicy, aksForwardPolicies)
	enum("serveStale", o.ServeStale, aksServeStale)
	if o.MaxConcurrent == nil {
		errs = append(errs, field.Required(p.Child("maxConcurrent"), "the maximum number of concurrent queries (0 or more)"))
	} else if *o.MaxConcurrent < 0 {
		errs = append(errs, field.Invalid(p.Child("maxConcurrent"), *o.MaxConcurrent, "must not be negative"))
	}
	ttl := func(name, v string) {
		switch {
		case v == "":
			errs = append(errs, field.Required(p.Child(name), `a duration such as "3600s" or "1h"`))
		case !aksDNSTTLRe.MatchString(v):
			errs = append(errs, field.Invalid(p.Child(name), v, `must be whole numbers of s, m or h, such as "3600s" or "1h30m"`))
		}
	}
	ttl("cacheDuration", o.CacheDuration)
	ttl("serveStaleDuration", o.ServeStaleDuration)
	if strings.HasSuffix(o.Zone, "cluster.local") && o.ForwardDestination == v1.LocalDNSForwardDestinationVnetDNS {
		errs = append(errs, field.Forbidden(p.Child("forwardDestination"), "'cluster.local' cannot be forwarded to VnetDNS"))
	}
	if o.ServeStale == v1.LocalDNSServeStaleVerify && o.Protocol == v1.LocalDNSProtocolForceTCP {
		errs = append(errs, field.Forbidden(p.Child("serveStale"), "serveStale Verify cannot be used with protocol ForceTCP"))
	}
	return errs
}

func aksEnum(p *field.Path, v string, allowed []string) field.ErrorList {
	if contains(allowed, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}

func aksRange(p *field.Path, v *int32, lo, hi int32) field.ErrorList {
	if v == nil || (*v >= lo && *v <= hi) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, *v, fmt.Sprintf("must be between %d and %d", lo, hi))}
}
