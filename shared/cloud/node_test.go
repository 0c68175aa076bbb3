package cloud

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// c5Large: 2 vCPU, 4 GiB. Capacity memory 4096 − ceil(4096 × 0.075) = 4096 − 308 = 3788 MiB;
// pods 3 × (10 − 1) + 2 = 29; kube-reserved 70m cpu and 11 × 29 + 255 = 574 MiB; eviction 100 MiB.
// Allocatable memory 3788 − 574 − 100 = 3114 MiB, the alloc_memory_mib of c5.large in
// shared/data/aws/ec2_instance_types.csv.
func c5Large() *catalog.InstanceType {
	return &catalog.InstanceType{
		Name:   "c5.large",
		Labels: map[string]string{"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "c5.large"},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("3788Mi"),
			corev1.ResourcePods:   resource.MustParse("29"),
		},
		Overhead: catalog.Overhead{
			KubeReserved:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("70m"), corev1.ResourceMemory: resource.MustParse("574Mi")},
			EvictionThreshold: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
		},
	}
}

func c5Instance() Instance {
	return Instance{ID: "i-0123456789abcdef0", ProviderID: "aws:///us-east-1b/i-0123456789abcdef0", InstanceType: "c5.large", Zone: "us-east-1b", CapacityType: "on-demand"}
}

func TestNodeForFactsWinOverRequestLabels(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	n, err := NodeFor(c5Large(), c5Instance(), NodeSpec{
		Name: "ip-10-0-32-9.ec2.internal", InternalIP: "10.0.32.9", Region: "us-east-1", Now: now,
		// A template label claiming another zone loses to what the instance is.
		Labels: map[string]string{"topology.kubernetes.io/zone": "us-east-1a", "app": "web"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Exactly the user data's labels and the kubelet's and cloud provider's own: no catalog
	// label (karpenter.k8s.aws/*), no capacity type; those come from registration.
	want := map[string]string{
		"app": "web", "kubernetes.io/hostname": "ip-10-0-32-9.ec2.internal",
		"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "c5.large",
		"topology.kubernetes.io/zone": "us-east-1b", "topology.kubernetes.io/region": "us-east-1",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "c5.large",
		"failure-domain.beta.kubernetes.io/zone": "us-east-1b", "failure-domain.beta.kubernetes.io/region": "us-east-1",
	}
	if !reflect.DeepEqual(n.Labels, want) {
		t.Errorf("labels %v, want %v", n.Labels, want)
	}
	if got := n.Status.Allocatable[corev1.ResourceMemory]; got.Cmp(resource.MustParse("3114Mi")) != 0 {
		t.Errorf("allocatable memory %s, want 3114Mi", got.String())
	}
	if got := n.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1930m")) != 0 {
		t.Errorf("allocatable cpu %s, want 1930m", got.String())
	}
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.32.9"}, {Type: corev1.NodeInternalDNS, Address: "ip-10-0-32-9.ec2.internal"}, {Type: corev1.NodeHostName, Address: "ip-10-0-32-9.ec2.internal"}}
	if len(n.Status.Addresses) != 3 || n.Status.Addresses[0] != addrs[0] || n.Status.Addresses[1] != addrs[1] || n.Status.Addresses[2] != addrs[2] {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
}

func TestNodeForRefusesBadInput(t *testing.T) {
	base := NodeSpec{Name: "ip-10-0-0-4.ec2.internal", Region: "us-east-1"}
	cases := map[string]struct {
		it   *catalog.InstanceType
		inst Instance
		spec NodeSpec
		want string
	}{
		"nil type":      {nil, c5Instance(), base, "instanceType: nil"},
		"type mismatch": {c5Large(), Instance{InstanceType: "m5.large", ProviderID: "x"}, base, `instance.instanceType: "m5.large"`},
		"bad name":      {c5Large(), c5Instance(), NodeSpec{Name: "IP_10", Region: "us-east-1"}, `name: "IP_10"`},
		"no region":     {c5Large(), c5Instance(), NodeSpec{Name: "n1"}, "region: required"},
		"bad label key": {c5Large(), c5Instance(), NodeSpec{Name: "n1", Region: "r", Labels: map[string]string{"a b": "x"}}, `labels["a b"]: invalid key`},
		"bad taint key": {c5Large(), c5Instance(), NodeSpec{Name: "n1", Region: "r", Taints: []corev1.Taint{{Key: "", Effect: corev1.TaintEffectNoSchedule}}}, "taints[0].key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NodeFor(tc.it, tc.inst, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// Hostname formats from the EC2 User Guide, "EC2 instance hostname types".
func TestPrivateDNSName(t *testing.T) {
	ip := netip.MustParseAddr("10.0.64.4")
	if got := PrivateDNSName(ip, "us-east-1"); got != "ip-10-0-64-4.ec2.internal" {
		t.Errorf("us-east-1: %s", got)
	}
	if got := PrivateDNSName(ip, "eu-west-1"); got != "ip-10-0-64-4.eu-west-1.compute.internal" {
		t.Errorf("eu-west-1: %s", got)
	}
}

func TestParseAWSProviderID(t *testing.T) {
	zone, id, err := ParseAWSProviderID("aws:///us-east-1a/i-0123456789abcdef0")
	if err != nil || zone != "us-east-1a" || id != "i-0123456789abcdef0" {
		t.Fatalf("got %q %q %v", zone, id, err)
	}
	if AWSProviderID(zone, id) != "aws:///us-east-1a/i-0123456789abcdef0" {
		t.Fatal("round trip")
	}
	for _, bad := range []string{"", "i-0123456789abcdef0", "aws:///i-0123456789abcdef0", "aws:///us-east-1a/i-xyz", "gce:///us-east-1a/i-0123456789abcdef0"} {
		if _, _, err := ParseAWSProviderID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
