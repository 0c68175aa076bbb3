package kube

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
)

// Where the cluster facts are read.
const (
	// KubeDNSNamespace and KubeDNSService name the cluster DNS Service whose clusterIP nodes use
	// as their resolver (karpenter-provider-aws operator KubeDNSIP reads the same object; CoreDNS
	// keeps the kube-dns name on EKS, kubeadm and AKS).
	KubeDNSNamespace = "kube-system"
	KubeDNSService   = "kube-dns"
	// DefaultServiceCIDR is the ServiceCIDR object the API server creates from its
	// --service-cluster-ip-range (networking.k8s.io/v1, Kubernetes 1.33+; KEP-1880).
	DefaultServiceCIDR = "kubernetes"
)

// DiscoverClusterFacts reads what a node's bootstrap and image depend on from the API server:
// the Kubernetes version (discovery ServerVersion, "major.minor" with Minor's trailing "+"
// removed, as Karpenter's version provider spells it), the kube-dns Service's clusterIP, the
// default ServiceCIDR's range of that IP's family (else its first) and the IP family of the DNS
// address (else of the range). A fact the cluster does not have (no kube-dns Service, a headless
// one, no ServiceCIDR API before 1.33) is left empty. Errors: each failed read other than
// NotFound, joined; the facts read before it are still returned. The result passes
// validate.ClusterNetwork, or the offending fact is dropped and named in the error.
func DiscoverClusterFacts(ctx context.Context, kube kubernetes.Interface) (*events.ClusterFacts, error) {
	f := &events.ClusterFacts{}
	var errs []error
	if v, err := kube.Discovery().ServerVersion(); err != nil {
		errs = append(errs, fmt.Errorf("server version: %w", err))
	} else if v.Major != "" || v.Minor != "" { // a server that reports neither names no version
		f.KubernetesVersion = v.Major + "." + strings.TrimSuffix(v.Minor, "+")
	}
	svc, err := kube.CoreV1().Services(KubeDNSNamespace).Get(ctx, KubeDNSService, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		errs = append(errs, fmt.Errorf("service %s/%s: %w", KubeDNSNamespace, KubeDNSService, err))
	default:
		if a, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil { // "None" (headless) or "" is no address
			f.ClusterDNSIP = a.String()
			f.IPFamily = familyOf(a)
		}
	}
	sc, err := kube.NetworkingV1().ServiceCIDRs().Get(ctx, DefaultServiceCIDR, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		errs = append(errs, fmt.Errorf("servicecidr %s: %w", DefaultServiceCIDR, err))
	default:
		for _, c := range sc.Spec.CIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				continue
			}
			if f.ServiceCIDR == "" || familyOf(p.Addr()) == f.IPFamily {
				f.ServiceCIDR = p.Masked().String()
			}
			if familyOf(p.Addr()) == f.IPFamily {
				break
			}
		}
		if f.IPFamily == "" && f.ServiceCIDR != "" {
			f.IPFamily = familyOf(netip.MustParsePrefix(f.ServiceCIDR).Addr())
		}
	}
	// What the agent publishes must pass the functions' check: a fact that does not is dropped
	// here, loudly, rather than costing every snapshot its delivery.
	for _, e := range validate.ClusterNetwork(f.KubernetesVersion, f.ClusterDNSIP, f.ServiceCIDR, f.IPFamily, nil) {
		errs = append(errs, fmt.Errorf("discovered %s: %s", e.Field, e.Detail))
		switch e.Field {
		case "kubernetesVersion":
			f.KubernetesVersion = ""
		case "clusterDNSIP":
			f.ClusterDNSIP = ""
		case "serviceCIDR":
			f.ServiceCIDR = ""
		}
	}
	return f, errors.Join(errs...)
}

func familyOf(a netip.Addr) string {
	if a.Is4() || a.Is4In6() {
		return validate.IPFamilyIPv4
	}
	return validate.IPFamilyIPv6
}
