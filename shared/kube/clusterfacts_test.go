package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dovetail-dev/dovetail/events"
)

func factsClient(v *version.Info, objs ...runtime.Object) *fake.Clientset {
	c := fake.NewSimpleClientset(objs...)
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = v
	return c
}

func dnsService(ip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Spec: corev1.ServiceSpec{ClusterIP: ip}}
}

func serviceCIDR(cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

// What the agent reads, as the API server of each kind of cluster answers: an EKS cluster
// (version "1", "31+", as EKS's /version gives Minor; kube-dns at 10.100.0.10; the default
// ServiceCIDR 10.100.0.0/16), a dual-stack IPv6-first cluster (the range of the DNS address's
// family is taken), and a pre-1.33 cluster without the ServiceCIDR API and with a headless
// kube-dns (nothing to read: left empty, no error).
func TestDiscoverClusterFacts(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		kube *fake.Clientset
		want events.ClusterFacts
	}{
		{"eks", factsClient(&version.Info{Major: "1", Minor: "31+"}, dnsService("10.100.0.10"), serviceCIDR("10.100.0.0/16")),
			events.ClusterFacts{KubernetesVersion: "1.31", ClusterDNSIP: "10.100.0.10", ServiceCIDR: "10.100.0.0/16", IPFamily: "ipv4"}},
		{"dual-stack ipv6", factsClient(&version.Info{Major: "1", Minor: "34"}, dnsService("fd00:10:96::a"), serviceCIDR("10.96.0.0/16", "fd00:10:96::/108")),
			events.ClusterFacts{KubernetesVersion: "1.34", ClusterDNSIP: "fd00:10:96::a", ServiceCIDR: "fd00:10:96::/108", IPFamily: "ipv6"}},
		{"old cluster, headless dns", factsClient(&version.Info{Major: "1", Minor: "30"}, dnsService("None")),
			events.ClusterFacts{KubernetesVersion: "1.30"}},
		{"no dns, service range only", factsClient(&version.Info{Major: "1", Minor: "33"}, serviceCIDR("172.20.0.0/16")),
			events.ClusterFacts{KubernetesVersion: "1.33", ServiceCIDR: "172.20.0.0/16", IPFamily: "ipv4"}},
	} {
		f, err := DiscoverClusterFacts(ctx, c.kube)
		if err != nil || f == nil || *f != c.want {
			t.Errorf("%s: %+v (%v), want %+v", c.name, f, err, c.want)
		}
	}
}

// A read the agent is refused is an error naming it, with the other facts still returned; a
// fact that would fail the functions' check is dropped and named.
func TestDiscoverClusterFactsErrors(t *testing.T) {
	kube := factsClient(&version.Info{Major: "1", Minor: "31"}, dnsService("172.20.0.10"), serviceCIDR("10.100.0.0/16"))
	f, err := DiscoverClusterFacts(context.Background(), kube)
	if err == nil || !strings.Contains(err.Error(), "clusterDNSIP") || f.ClusterDNSIP != "" || f.ServiceCIDR != "10.100.0.0/16" {
		t.Errorf("DNS outside the range: %+v, %v", f, err)
	}
	kube = factsClient(&version.Info{Major: "1", Minor: "31"}, dnsService("10.100.0.10"))
	kube.PrependReactor("get", "servicecidrs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	f, err = DiscoverClusterFacts(context.Background(), kube)
	if err == nil || !strings.Contains(err.Error(), "servicecidr kubernetes: forbidden") || f.KubernetesVersion != "1.31" || f.ClusterDNSIP != "10.100.0.10" {
		t.Errorf("refused read: %+v, %v", f, err)
	}
}
