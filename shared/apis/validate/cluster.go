package validate

import (
	"net/netip"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// IP families of a cluster's services (Kubernetes Service spec.ipFamilies, lower-cased as EKS
// DescribeCluster kubernetesNetworkConfig.ipFamily and nodeadm spell them).
const (
	IPFamilyIPv4 = "ipv4"
	IPFamilyIPv6 = "ipv6"
)

// kubernetesMinor is a Kubernetes major.minor version as the API server's /version gives its
// parts (version.Info Major and Minor; Minor may carry a "+" on some distributions, which the
// reader strips as Karpenter's version provider does): "1.31".
var kubernetesMinor = regexp.MustCompile(`^[1-9][0-9]{0,2}\.(0|[1-9][0-9]{0,2})$`)

// ClusterNetwork checks what an agent discovered about its cluster: version is a Kubernetes
// major.minor ("1.31"); dnsIP the kube-dns Service's clusterIP (an IP address); serviceCIDR the
// service range (a CIDR, in its canonical masked form as the ServiceCIDR API stores it); family
// "ipv4" or "ipv6"; and, when they are set, they agree with each other: the DNS IP is of the
// family and inside the service range, the range is of the family (the API server allocates
// every clusterIP from the service range, in the Service's family). Empty values are unknown and
// valid.
func ClusterNetwork(version, dnsIP, serviceCIDR, family string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if version != "" && !kubernetesMinor.MatchString(version) {
		errs = append(errs, field.Invalid(p.Child("kubernetesVersion"), version, "must be a Kubernetes major.minor version such as 1.31"))
	}
	if family != "" && family != IPFamilyIPv4 && family != IPFamilyIPv6 {
		errs = append(errs, field.NotSupported(p.Child("ipFamily"), family, []string{IPFamilyIPv4, IPFamilyIPv6}))
		family = ""
	}
	is6 := func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }
	var prefix netip.Prefix
	if serviceCIDR != "" {
		pr, err := netip.ParsePrefix(serviceCIDR)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("serviceCIDR"), serviceCIDR, "must be a CIDR"))
		case pr.Masked() != pr:
			errs = append(errs, field.Invalid(p.Child("serviceCIDR"), serviceCIDR, "must be the network address ("+pr.Masked().String()+")"))
		case family != "" && is6(pr.Addr()) != (family == IPFamilyIPv6):
			errs = append(errs, field.Invalid(p.Child("serviceCIDR"), serviceCIDR, "is not of the cluster's IP family "+family))
		default:
			prefix = pr
		}
	}
	if dnsIP != "" {
		a, err := netip.ParseAddr(dnsIP)
		switch {
		case err != nil || a.Zone() != "":
			errs = append(errs, field.Invalid(p.Child("clusterDNSIP"), dnsIP, "must be an IP address"))
		case family != "" && is6(a) != (family == IPFamilyIPv6):
			errs = append(errs, field.Invalid(p.Child("clusterDNSIP"), dnsIP, "is not of the cluster's IP family "+family))
		case prefix.IsValid() && !prefix.Contains(a):
			errs = append(errs, field.Invalid(p.Child("clusterDNSIP"), dnsIP, "is outside the service CIDR "+prefix.String()))
		}
	}
	return errs
}
