package fake

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testclock "k8s.io/utils/clock/testing"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

func realCloud(t *testing.T) (*Cloud, *registrar) {
	t.Helper()
	reg := newRegistrar()
	return New(Options{Catalog: catalog.MustAWS(), Cluster: cluster, Clock: testclock.NewFakeClock(t0), Registrar: reg}), reg
}

// On the embedded catalog, on-demand picks follow the list prices of
// shared/data/aws/ec2_instance_types.csv: m6g.large 0.077 < c5.large 0.085 < m5.large 0.096 < r5.large 0.126.
func TestRealCatalogLowestOnDemandPrice(t *testing.T) {
	c, _ := realCloud(t)
	inst := mustCreate(t, c, request("t1",
		off("r5.large", "us-east-1a", "on-demand"),
		off("m5.large", "us-east-1a", "on-demand"),
		off("c5.large", "us-east-1a", "on-demand"),
		off("m6g.large", "us-east-1a", "on-demand")))
	if inst.InstanceType != "m6g.large" || inst.PricePerHour != 0.077 {
		t.Fatalf("got %s at %v, want m6g.large at 0.077", inst.InstanceType, inst.PricePerHour)
	}
	// us-east-1e offers only Xen types in the embedded catalog, so m5.large there is Unsupported.
	_, err := c.Create(context.Background(), request("t2", off("m5.large", "us-east-1e", "on-demand")))
	if !cloud.IsInsufficientCapacity(err) {
		t.Fatalf("err %v, want insufficient capacity (Unsupported)", err)
	}
}

// The spot pick is the lowest of the type's modelled spot prices (an estimate, about 0.426 × the
// on-demand 0.096 = 0.0409 $/h, ±6 % per zone plus centring), whatever order they are listed in.
func TestRealCatalogSpotPicksCheapestZone(t *testing.T) {
	c, _ := realCloud(t)
	m5 := catalog.MustAWS().Get("m5.large")
	var refs []cloud.OfferingRef
	cheapest := 1.0
	for i := len(m5.Offerings) - 1; i >= 0; i-- { // most expensive first
		o := m5.Offerings[i]
		refs = append(refs, off("m5.large", o.Zone, o.CapacityType))
		if o.CapacityType == "spot" && o.PricePerHour < cheapest {
			cheapest = o.PricePerHour
		}
	}
	inst := mustCreate(t, c, request("t1", refs...))
	if inst.CapacityType != "spot" || inst.PricePerHour != cheapest {
		t.Fatalf("got %s at %v, want spot at %v", inst.CapacityType, inst.PricePerHour, cheapest)
	}
	if inst.PricePerHour < 0.096*0.426*0.88 || inst.PricePerHour > 0.096*0.426*1.12 {
		t.Fatalf("spot price %v outside the model's band around 0.0409", inst.PricePerHour)
	}
}

func bootOne(t *testing.T, nc *apisv1.EC2NodeClass) *corev1.Node {
	t.Helper()
	return bootType(t, "m5.large", nc)
}

func bootType(t *testing.T, instanceType string, nc *apisv1.EC2NodeClass) *corev1.Node {
	t.Helper()
	c, reg := realCloud(t)
	req := request("t1", off(instanceType, "us-east-1a", "on-demand"))
	req.NodeClass = apisv1.NodeClassOf(nc)
	mustCreate(t, c, req)
	if err := c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	node := reg.get("ip-10-0-0-4.ec2.internal")
	if node == nil {
		t.Fatal("no node registered")
	}
	return node
}

func checkResources(t *testing.T, what string, got corev1.ResourceList, want map[corev1.ResourceName]string) {
	t.Helper()
	for k, w := range want {
		if q := got[k]; q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s %s = %s, want %s", what, k, q.String(), w)
		}
	}
}

// m5.large on the embedded catalog, EKS rules by hand (see m5Large): allocatable cpu 1930m,
// memory 6903Mi, pods 29, ephemeral-storage 17Gi; capacity memory 7577Mi, ephemeral 20Gi.
func TestRealCatalogM5LargeNode(t *testing.T) {
	node := bootOne(t, nil)
	checkResources(t, "allocatable", node.Status.Allocatable, map[corev1.ResourceName]string{
		corev1.ResourceCPU: "1930m", corev1.ResourceMemory: "6903Mi", corev1.ResourcePods: "29", corev1.ResourceEphemeralStorage: "17Gi",
	})
	checkResources(t, "capacity", node.Status.Capacity, map[corev1.ResourceName]string{
		corev1.ResourceCPU: "2", corev1.ResourceMemory: "7577Mi", corev1.ResourcePods: "29", corev1.ResourceEphemeralStorage: "20Gi",
	})
	for k, v := range map[string]string{
		"kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
	} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if v, ok := node.Labels["karpenter.k8s.aws/instance-family"]; ok {
		t.Errorf("the kubelet registered a catalog label (instance-family %q); only registration adds those", v)
	}
}

// NodeClass settings change what the node reports:
//   - AL2023 with kubelet maxPods 20 and a 100Gi root volume: pods 20; kube-reserved memory still
//     counts the ENI-limited 29 pods on AL2023 (Karpenter's UsesENILimitedMemoryOverhead flag), so
//     memory stays 6903Mi; ephemeral 100Gi − 1Gi kube-reserved − 10 % nodefs eviction (10Gi) = 89Gi.
//   - Bottlerocket with maxPods 20: kube-reserved memory counts maxPods, 11 × 20 + 255 = 475Mi, so
//     memory 7577 − 475 − 100 = 7002Mi.
func TestRealCatalogNodeClassSettings(t *testing.T) {
	maxPods := int32(20)
	size := resource.MustParse("100Gi")
	al2023 := &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{InstanceProfile: &testProfile,
		AMISelectorTerms:    []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Kubelet:             &apisv1.KubeletConfiguration{MaxPods: &maxPods},
		BlockDeviceMappings: []apisv1.BlockDeviceMapping{{DeviceName: ptr("/dev/xvda"), EBS: &apisv1.BlockDevice{VolumeSize: &size}}},
	}}
	node := bootOne(t, al2023)
	checkResources(t, "al2023 allocatable", node.Status.Allocatable, map[corev1.ResourceName]string{
		corev1.ResourcePods: "20", corev1.ResourceMemory: "6903Mi", corev1.ResourceEphemeralStorage: "89Gi",
	})
	checkResources(t, "al2023 capacity", node.Status.Capacity, map[corev1.ResourceName]string{
		corev1.ResourcePods: "20", corev1.ResourceEphemeralStorage: "100Gi",
	})
	if node.Status.NodeInfo.OSImage != "Amazon Linux 2023" {
		t.Errorf("osImage %q", node.Status.NodeInfo.OSImage)
	}

	bottlerocket := &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{InstanceProfile: &testProfile,
		AMISelectorTerms: []apisv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}},
		Kubelet:          &apisv1.KubeletConfiguration{MaxPods: &maxPods},
	}}
	node = bootOne(t, bottlerocket)
	checkResources(t, "bottlerocket allocatable", node.Status.Allocatable, map[corev1.ResourceName]string{
		corev1.ResourcePods: "20", corev1.ResourceMemory: "7002Mi",
	})
}

func TestInvalidNodeClassIsRefused(t *testing.T) {
	c, _ := realCloud(t)
	req := request("t1", off("m5.large", "us-east-1a", "on-demand"))
	req.NodeClass = apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{InstanceProfile: &testProfile,
		Kubelet: &apisv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "lots"}},
	}}}
	_, err := c.Create(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "nodeClass: spec.kubelet.kubeReserved") {
		t.Fatalf("err %v, want a field path under nodeClass: spec.kubelet.kubeReserved", err)
	}
}

func ptr[T any](v T) *T { return &v }

// instanceStorePolicy RAID0 on an i4i.xlarge (one 937 GB NVMe volume, EC2 TotalSizeInGB 937):
// the user data asks the boot agent for the array and the kubelet reports 937e9 bytes of
// ephemeral storage; allocatable 937e9 − 1Gi kube-reserved − 93.7e9 (10 % nodefs eviction) =
// 842226258176. On m5.large (no instance store) RAID0 changes nothing: 20Gi.
func TestRealCatalogInstanceStoreRAID0(t *testing.T) {
	raid0 := apisv1.InstanceStorePolicyRAID0
	for _, family := range []string{"al2023@latest", "al2@latest", "bottlerocket@latest"} {
		nc := &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{InstanceProfile: &testProfile, InstanceStorePolicy: &raid0,
			AMISelectorTerms: []apisv1.AMISelectorTerm{{Alias: family}}}}
		node := bootType(t, "i4i.xlarge", nc)
		checkResources(t, family+" i4i capacity", node.Status.Capacity, map[corev1.ResourceName]string{corev1.ResourceEphemeralStorage: "937G"})
		checkResources(t, family+" i4i allocatable", node.Status.Allocatable, map[corev1.ResourceName]string{corev1.ResourceEphemeralStorage: "842226258176"})
		node = bootType(t, "m5.large", nc)
		checkResources(t, family+" m5 capacity", node.Status.Capacity, map[corev1.ResourceName]string{corev1.ResourceEphemeralStorage: "20Gi"})
	}
}
