package azure

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Unhonoured lists the AKSNodeClass spec fields this provider cannot honour yet, each as a
// field error naming the field and why: a value that would reach only the node's bootstrap and
// that the AKS bootstrap contract (shared/cloud/azure/customdata.Contract) does not carry (the
// kubelet's CFS quota settings and failSwapOn, linuxOSConfig swap and transparent huge pages,
// local DNS, artifact streaming, the GPU driver mode), and Trusted Launch, whose images it does
// not resolve. The contract carries the kubelet's cpuManagerPolicy, topologyManagerPolicy,
// container log settings, image GC thresholds, allowedUnsafeSysctls, podPidsLimit and
// linuxOSConfig.sysctls. Every other spec field reaches the VM or the bootstrap: imageFamily and
// fipsMode (the images, status.images), osDiskSizeGB (storageProfile.osDisk), maxPods (the
// kubelet's --max-pods), tags (the VM's and NIC's tags), vnetSubnetID (the NIC's subnet) and
// security.encryptionAtHost (securityProfile.encryptionAtHost). A value equal to what the node
// image does without it (the CRD's defaults, which are AKS's: cpuManagerPolicy none, CFS quota on
// at 100ms, topologyManagerPolicy none, 50Mi × 5 container logs; gpu.mode Driver, the image's
// own driver installation; localDNS Disabled; artifact streaming off) is honoured by leaving it
// to the image. ResolveNodeClass writes the list as ValidationSucceeded=False and Create refuses
// a class with any, so no field is silently dropped. nil when every field is honoured.
func Unhonoured(nc *apisv1.AKSNodeClass) field.ErrorList {
	s := nc.Spec
	p := field.NewPath("spec")
	var errs field.ErrorList
	notCarried := func(fp *field.Path, v any) {
		errs = append(errs, field.Invalid(fp, v, "not honoured: Dovetail's AKS custom data does not carry it to the node's bootstrap yet"))
	}
	if k := s.Kubelet; k != nil {
		kp := p.Child("kubelet")
		if k.CPUCFSQuota != nil && *k.CPUCFSQuota != apis.DefaultAKSCPUCFSQuota {
			notCarried(kp.Child("cpuCFSQuota"), *k.CPUCFSQuota)
		}
		if k.CPUCFSQuotaPeriod != nil && k.CPUCFSQuotaPeriod.Duration != apis.DefaultAKSCPUCFSQuotaPeriod {
			notCarried(kp.Child("cpuCFSQuotaPeriod"), k.CPUCFSQuotaPeriod.Duration.String())
		}
		// No CRD default: any value is a setting the node would not get.
		if k.FailSwapOn != nil {
			notCarried(kp.Child("failSwapOn"), *k.FailSwapOn)
		}
	}
	// Trusted Launch boots the families' trusted-launch image definitions (2204gen2TLcontainerd,
	// V3gen2TL...) on Gen2 sizes with securityProfile.uefiSettings (the provider's
	// imagefamily/nodeimage.go); the images this provider resolves are not those.
	if s.Security.TrustedLaunchEnabled() {
		errs = append(errs, field.Invalid(p.Child("security", "trustedLaunch"), "enabled",
			"not honoured: Dovetail does not resolve the trusted-launch node images yet"))
	}
	// The sysctls reach the node (SYSCTL_CONTENT); swap and transparent huge pages do not.
	if o := s.LinuxOSConfig; o != nil {
		lp := p.Child("linuxOSConfig")
		if o.SwapFileSize != nil {
			notCarried(lp.Child("swapFileSize"), *o.SwapFileSize)
		}
		if o.TransparentHugePageEnabled != nil {
			notCarried(lp.Child("transparentHugePageEnabled"), *o.TransparentHugePageEnabled)
		}
		if o.TransparentHugePageDefrag != nil {
			notCarried(lp.Child("transparentHugePageDefrag"), *o.TransparentHugePageDefrag)
		}
	}
	if d := s.LocalDNS; d != nil && d.Mode != apisv1.LocalDNSModeDisabled {
		notCarried(p.Child("localDNS", "mode"), d.Mode)
	}
	if a := s.ArtifactStreaming; a != nil && a.Enabled != nil && *a.Enabled {
		notCarried(p.Child("artifactStreaming", "enabled"), true)
	}
	// Mode None tells the image not to install a GPU driver (and lets sizes without a managed
	// driver through); Driver is the image's own behaviour on a size AKS has a driver for, which
	// is the only GPU size the provider launches (catalog.InstanceType.BootsWith).
	if g := s.GPU; g != nil && g.Mode != nil && *g.Mode != apisv1.GPUModeDriver {
		notCarried(p.Child("gpu", "mode"), *g.Mode)
	}
	return errs
}

// unhonouredError is Unhonoured as one error naming the class and each field, or nil.
func unhonouredError(nc *apisv1.AKSNodeClass) error {
	if errs := Unhonoured(nc); len(errs) > 0 {
		return fmt.Errorf("%s %s: %w", apisv1.KindAKSNodeClass, nc.Name, errs.ToAggregate())
	}
	return nil
}
