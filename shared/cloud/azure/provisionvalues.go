package azure

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dovetail-dev/dovetail/shared/apis/validate"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/customdata"
)

// Validate checks a NodeBootstrapping request as the services that read its values would, before
// it leaves Dovetail: AKS renders these values into the provisioning command the VM's
// CustomScript extension runs as root, in a quoting Dovetail does not choose, so each string must
// be one its own API admits, which leaves none that a shell reads as more than text. The rules:
// labels and taints as the API server validates them (apimachinery, via shared/apis/validate),
// labels the kubelet would refuse to set on itself (customdata.IsKubeletLabel); the Kubernetes
// version as <major>.<minor>.<patch>; the VM size as ARM's size names are spelled
// (Standard_E64-16ds_v4: letters, digits, '_' and '-'); the subnet as an ARM subnet id whose
// names follow ARM's naming rules ("Naming rules and restrictions for Azure resources":
// Microsoft.Network virtualNetworks and subnets, resource groups); the distro one of AgentBaker's
// names Dovetail knows; the enums the swagger's. Errors name each field as
// provisionProfile.<json name>.
func (v ProvisionValues) Validate() error {
	p := field.NewPath("provisionProfile")
	pp := v.ProvisionProfile
	var errs field.ErrorList
	if pp.Name != "" {
		// The provider sends "" (ConstructProvisionValues); any other name is an agent pool's.
		errs = append(errs, validate.LabelValue(pp.Name, p.Child("name"))...)
	}
	if !vmSizePattern.MatchString(pp.VMSize) {
		errs = append(errs, field.Invalid(p.Child("vmSize"), pp.VMSize, "must be an Azure VM size name (letters, digits, '_' and '-')"))
	}
	if pp.OSType != osTypeLinux {
		errs = append(errs, field.NotSupported(p.Child("osType"), pp.OSType, []string{fmt.Sprint(osTypeLinux)}))
	}
	if pp.OSSKU != osSKUUbuntu && pp.OSSKU != osSKUAzureLinux {
		errs = append(errs, field.NotSupported(p.Child("osSku"), pp.OSSKU, []string{fmt.Sprint(osSKUUbuntu), fmt.Sprint(osSKUAzureLinux)}))
	}
	if pp.StorageProfile != "ManagedDisks" {
		errs = append(errs, field.NotSupported(p.Child("storageProfile"), pp.StorageProfile, []string{"ManagedDisks"}))
	}
	if !knownDistro(pp.Distro) {
		errs = append(errs, field.Invalid(p.Child("distro"), pp.Distro, "not an AKS node image distro Dovetail knows"))
	}
	errs = append(errs, validate.Labels(pp.CustomNodeLabels, p.Child("customNodeLabels"))...)
	for k := range pp.CustomNodeLabels {
		if !customdata.IsKubeletLabel(k) {
			errs = append(errs, field.Invalid(p.Child("customNodeLabels").Key(k), k, "a label the kubelet may not set on its own Node (--node-labels)"))
		}
	}
	if !kubeVersionPattern.MatchString(pp.OrchestratorVersion) {
		errs = append(errs, field.Invalid(p.Child("orchestratorVersion"), pp.OrchestratorVersion, "must be <major>.<minor>.<patch>"))
	}
	for i, c := range pp.VnetCidrs {
		if _, err := netip.ParsePrefix(c); err != nil {
			errs = append(errs, field.Invalid(p.Child("vnetCidrs").Index(i), c, "must be a CIDR"))
		}
	}
	if err := checkSubnetID(pp.VnetSubnetID); err != "" {
		errs = append(errs, field.Invalid(p.Child("vnetSubnetID"), pp.VnetSubnetID, err))
	}
	if pp.Mode != modeUserEnum {
		errs = append(errs, field.NotSupported(p.Child("mode"), pp.Mode, []string{fmt.Sprint(modeUserEnum)}))
	}
	if pp.Architecture != "x64" && pp.Architecture != "Arm64" {
		errs = append(errs, field.NotSupported(p.Child("architecture"), pp.Architecture, []string{"x64", "Arm64"}))
	}
	if pp.MaxPods < 1 {
		errs = append(errs, field.Invalid(p.Child("maxPods"), pp.MaxPods, "must be at least 1"))
	}
	for i, s := range pp.NodeTaints {
		t, ok := parseTaint(s)
		if !ok {
			errs = append(errs, field.Invalid(p.Child("nodeTaints").Index(i), s, "must be key[=value]:Effect"))
			continue
		}
		errs = append(errs, validate.Taint(t, p.Child("nodeTaints").Index(i))...)
	}
	if g := pp.GPUProfile; g != nil && g.DriverType != driverTypeGRID && g.DriverType != driverTypeCUDA {
		errs = append(errs, field.NotSupported(p.Child("gpuProfile", "driverType"), g.DriverType, []string{fmt.Sprint(driverTypeGRID), fmt.Sprint(driverTypeCUDA)}))
	}
	h := field.NewPath("provisionHelperValues")
	if v.ProvisionHelperValues.SKUCPU <= 0 {
		errs = append(errs, field.Invalid(h.Child("skuCPU"), v.ProvisionHelperValues.SKUCPU, "must be positive"))
	}
	if v.ProvisionHelperValues.SKUMemory <= 0 {
		errs = append(errs, field.Invalid(h.Child("skuMemory"), v.ProvisionHelperValues.SKUMemory, "must be positive"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("node bootstrapping request: %w", errs.ToAggregate())
	}
	return nil
}

var (
	vmSizePattern      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	kubeVersionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	// ARM's naming rules: a subscription is a GUID; a resource group 1-90 of letters, digits,
	// '_', '-', '.', '(' and ')', not ending in '.'; a virtual network 2-64 and a subnet 1-80 of
	// letters, digits, '_', '.' and '-', starting with a letter or digit and ending with one or
	// '_'. The resource group's '(' and ')' are refused here: AKS's own resource groups never
	// use them and a shell reads them.
	subnetIDStrict = regexp.MustCompile(`(?i)^/subscriptions/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}` +
		`/resourceGroups/[A-Za-z0-9_.-]{0,89}[A-Za-z0-9_-]` +
		`/providers/Microsoft\.Network/virtualNetworks/[A-Za-z0-9][A-Za-z0-9_.-]{0,62}[A-Za-z0-9_]` +
		`/subnets/([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])$`)
)

// checkSubnetID is why id is not a subnet id ARM would accept ("" when it is).
func checkSubnetID(id string) string {
	if !subnetIDStrict.MatchString(id) {
		return "must be /subscriptions/<GUID>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet> with names ARM accepts"
	}
	return ""
}

func knownDistro(d string) bool {
	for _, v := range distros {
		if v == d {
			return true
		}
	}
	return false
}

// parseTaint reads key[=value]:Effect (taintString's form).
func parseTaint(s string) (corev1.Taint, bool) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, false
	}
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, true
}
