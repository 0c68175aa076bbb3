package v1

import (
	"fmt"
	"strings"
)

// AMI families of karpenter.k8s.aws/v1 EC2NodeClass spec.amiFamily (Karpenter's enum:
// AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025;
// pkg/apis/v1/ec2nodeclass.go of aws/karpenter-provider-aws v1.14.0). Ubuntu exists only in
// v1beta1 and converts to AL2.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
	AMIFamilyUbuntu       = "Ubuntu" // v1beta1 only

	// AliasVersionLatest is the alias version that tracks the newest EKS-optimized AMI.
	AliasVersionLatest = "latest"
)

// InstanceStorePolicyRAID0 is EC2NodeClass spec.instanceStorePolicy's one value (Karpenter's
// enum, pkg/apis/v1/ec2nodeclass.go InstanceStorePolicyRAID0): the node assembles its
// instance-store volumes into one RAID0 array for ephemeral storage.
const InstanceStorePolicyRAID0 = "RAID0"

// AliasFamilies are the alias families Karpenter accepts ("family@version"), lower case, each
// mapped to its spec.amiFamily value.
var AliasFamilies = map[string]string{
	"al2":          AMIFamilyAL2,
	"al2023":       AMIFamilyAL2023,
	"bottlerocket": AMIFamilyBottlerocket,
	"windows2019":  AMIFamilyWindows2019,
	"windows2022":  AMIFamilyWindows2022,
	"windows2025":  AMIFamilyWindows2025,
}

// Compatibility annotations Karpenter writes while converting v1beta1 objects to v1; Dovetail
// writes the same keys so tools that know Karpenter's migration read them unchanged.
const (
	// AnnotationKubeletCompatibility holds a v1beta1 NodePool's spec.template.spec.kubelet as JSON.
	// Karpenter: KubeletCompatibilityAnnotationKey = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"
	// (kubernetes-sigs/karpenter pkg/apis/v1/labels.go); it takes precedence over the
	// EC2NodeClass kubelet when launching (Karpenter v1 migration guide).
	AnnotationKubeletCompatibility = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"
	// AnnotationUbuntuCompatibility marks a v1beta1 Ubuntu EC2NodeClass converted to AL2; its value
	// lists what was changed ("amiFamily", "blockDeviceMappings").
	// Karpenter: AnnotationUbuntuCompatibilityKey = "compatibility.karpenter.k8s.aws/v1beta1-ubuntu".
	AnnotationUbuntuCompatibility = "compatibility.karpenter.k8s.aws/v1beta1-ubuntu"
)

// Alias is a parsed amiSelectorTerms[].alias such as "al2023@latest".
type Alias struct {
	// Family is the spec.amiFamily spelling (AL2023, Bottlerocket, ...).
	Family string
	// Version is "latest" or a pinned release ("v20240625", "v1.20.0").
	Version string
}

// String renders the alias back as "family@version" with a lower-case family.
func (a Alias) String() string { return strings.ToLower(a.Family) + "@" + a.Version }

// ParseAlias parses "family@version". Errors: no "@", empty version, unknown family, or a pinned
// version for a Windows family (Karpenter allows only "latest" there).
func ParseAlias(s string) (Alias, error) {
	fam, ver, ok := strings.Cut(s, "@")
	if !ok || fam == "" || ver == "" {
		return Alias{}, fmt.Errorf("%q must have the form family@version", s)
	}
	family, known := AliasFamilies[fam]
	if !known {
		return Alias{}, fmt.Errorf("family %q is not one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025", fam)
	}
	if IsWindowsFamily(family) && ver != AliasVersionLatest {
		return Alias{}, fmt.Errorf("windows families may only use version %q, got %q", AliasVersionLatest, ver)
	}
	return Alias{Family: family, Version: ver}, nil
}

// Alias returns the parsed alias of the first amiSelectorTerm that has one, or nil.
func (in *EC2NodeClass) Alias() *Alias {
	for _, t := range in.Spec.AMISelectorTerms {
		if t.Alias != "" {
			a, err := ParseAlias(t.Alias)
			if err != nil {
				return nil
			}
			return &a
		}
	}
	return nil
}

// AMIFamily resolves the family: spec.amiFamily when set, else the alias family, else Custom
// (Karpenter's EC2NodeClass.AMIFamily() precedence).
func (in *EC2NodeClass) AMIFamily() string {
	if in.Spec.AMIFamily != nil && *in.Spec.AMIFamily != "" {
		return *in.Spec.AMIFamily
	}
	if a := in.Alias(); a != nil {
		return a.Family
	}
	return AMIFamilyCustom
}

// IsWindowsFamily reports a Windows AMI family (Windows2019, Windows2022, Windows2025).
func IsWindowsFamily(family string) bool {
	_, ok := windowsReleases[family]
	return ok
}

// WindowsRelease is what a Windows AMI family stands for: the Windows Server version (the
// year, as the EKS-optimized image names spell it) and its build, which the kubelet reports as
// node.kubernetes.io/windows-build (Karpenter's pkg/apis/v1/labels.go Windows2019 "2019" /
// Windows2019Build "10.0.17763", Windows2022 "2022" / "10.0.20348", Windows2025 "2025" /
// "10.0.26100").
type WindowsRelease struct {
	Version string
	Build   string
}

var windowsReleases = map[string]WindowsRelease{
	AMIFamilyWindows2019: {"2019", "10.0.17763"},
	AMIFamilyWindows2022: {"2022", "10.0.20348"},
	AMIFamilyWindows2025: {"2025", "10.0.26100"},
}

// WindowsReleaseOf returns the release of a Windows AMI family; false for any other family.
func WindowsReleaseOf(family string) (WindowsRelease, bool) {
	r, ok := windowsReleases[family]
	return r, ok
}
