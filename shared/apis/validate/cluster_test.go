package validate

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// What an agent may report about its cluster: EKS's defaults (service range 10.100.0.0/16 or
// 172.20.0.0/16, kube-dns at .10 of it; an IPv6 cluster's fd00::/108-style range) pass; each
// broken or inconsistent value is named by its field.
func TestClusterNetwork(t *testing.T) {
	p := field.NewPath("snapshot", "clusterFacts")
	for _, ok := range [][4]string{
		{"1.31", "10.100.0.10", "10.100.0.0/16", "ipv4"},
		{"1.37", "172.20.0.10", "172.20.0.0/16", ""},
		{"1.30", "fd12:3456:789a::a", "fd12:3456:789a::/108", "ipv6"},
		{"", "", "", ""},
	} {
		if errs := ClusterNetwork(ok[0], ok[1], ok[2], ok[3], p); len(errs) != 0 {
			t.Errorf("%q: %v", ok, errs)
		}
	}
	for _, bad := range []struct {
		v    [4]string
		want string
	}{
		{[4]string{"v1.31.2", "", "", ""}, "kubernetesVersion"},
		{[4]string{"1.31+", "", "", ""}, "kubernetesVersion"},
		{[4]string{"1.31\n--x", "", "", ""}, "kubernetesVersion"},
		{[4]string{"", "10.100.0.10 --x", "", ""}, "clusterDNSIP"},
		{[4]string{"", "fe80::1%eth0", "", ""}, "clusterDNSIP"},
		{[4]string{"", "", "10.100.0.1/16", ""}, "serviceCIDR: Invalid value: \"10.100.0.1/16\": must be the network address (10.100.0.0/16)"},
		{[4]string{"", "", "10.100.0.0", ""}, "serviceCIDR"},
		{[4]string{"", "", "", "dual"}, "ipFamily"},
		{[4]string{"", "10.100.0.10", "", "ipv6"}, "clusterDNSIP: Invalid value: \"10.100.0.10\": is not of the cluster's IP family ipv6"},
		{[4]string{"", "", "fd00::/108", "ipv4"}, "serviceCIDR"},
		{[4]string{"", "172.20.0.10", "10.100.0.0/16", ""}, "clusterDNSIP: Invalid value: \"172.20.0.10\": is outside the service CIDR 10.100.0.0/16"},
	} {
		errs := ClusterNetwork(bad.v[0], bad.v[1], bad.v[2], bad.v[3], p)
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "snapshot.clusterFacts."+bad.want) {
			t.Errorf("%q: %v, want one naming %s", bad.v, errs, bad.want)
		}
	}
}
