package cloud

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func bdm(device string, size string, root bool) apisv1.BlockDeviceMapping {
	q := resource.MustParse(size)
	return apisv1.BlockDeviceMapping{DeviceName: &device, EBS: &apisv1.BlockDevice{VolumeSize: &q}, RootVolume: root}
}

// The volume backing ephemeral storage, per Karpenter's rule (see NodeSettingsFor).
func TestNodeSettingsForEphemeralVolume(t *testing.T) {
	const gi = int64(1) << 30
	cases := map[string]struct {
		alias string
		bdms  []apisv1.BlockDeviceMapping
		want  int64 // bytes; 0 = the catalog default (20Gi)
	}{
		"none":                      {"al2023@latest", nil, 0},
		"rootVolume wins":           {"al2023@latest", []apisv1.BlockDeviceMapping{bdm("/dev/xvda", "30Gi", false), bdm("/dev/sdf", "50Gi", true)}, 50 * gi},
		"al2023 root device":        {"al2023@latest", []apisv1.BlockDeviceMapping{bdm("/dev/xvda", "80Gi", false)}, 80 * gi},
		"al2023 other device":       {"al2023@latest", []apisv1.BlockDeviceMapping{bdm("/dev/xvdb", "80Gi", false)}, 0},
		"bottlerocket data volume":  {"bottlerocket@latest", []apisv1.BlockDeviceMapping{bdm("/dev/xvda", "4Gi", false), bdm("/dev/xvdb", "60Gi", false)}, 60 * gi},
		"custom takes the last one": {"", []apisv1.BlockDeviceMapping{bdm("/dev/xvda", "10Gi", false), bdm("/dev/xvdc", "70Gi", false)}, 70 * gi},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nc := &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{BlockDeviceMappings: tc.bdms}}
			if tc.alias != "" {
				nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: tc.alias}}
			}
			s, err := NodeSettingsFor(apisv1.NodeClassOf(nc))
			if err != nil {
				t.Fatal(err)
			}
			if s.EphemeralStorageBytes != tc.want {
				t.Fatalf("ephemeral %d, want %d", s.EphemeralStorageBytes, tc.want)
			}
		})
	}
}

func TestNodeSettingsForRefusesBadKubelet(t *testing.T) {
	maxPods := int32(-1)
	_, err := NodeSettingsFor(apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{Kubelet: &apisv1.KubeletConfiguration{MaxPods: &maxPods}}}})
	if err == nil || !strings.Contains(err.Error(), "spec.kubelet.maxPods") {
		t.Fatalf("err %v, want spec.kubelet.maxPods", err)
	}
}

func TestAKSNodeSettings(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	family := apisv1.ImageFamilyAzureLinux
	nc := &apisv1.AKSNodeClass{Spec: apisv1.AKSNodeClassSpec{ImageFamily: &family, MaxPods: i32(60), OSDiskSizeGB: i32(64)}}
	s, err := NodeSettingsFor(apisv1.NodeClassOf(nc))
	if err != nil || *s.Kubelet.MaxPods != 60 || s.EphemeralStorageBytes != 64e9 || s.AMIFamily != family {
		t.Fatalf("AzureLinux, maxPods 60, 64 GB: %+v, %v", s, err)
	}
	for plugin, want := range map[string]int64{"azure-overlay": 250, "azure": 30, "kubenet": 110, "none": 250} {
		s, err := AKSNodeSettings(&apisv1.AKSNodeClass{}, plugin)
		if err != nil || *s.Kubelet.MaxPods != want || s.EphemeralStorageBytes != 0 {
			t.Errorf("%s: %+v %v, want %d pods", plugin, s, err, want)
		}
	}
	win := apisv1.ImageFamilyWindows2022
	for _, bad := range []*apisv1.AKSNodeClass{
		{Spec: apisv1.AKSNodeClassSpec{MaxPods: i32(5)}}, {Spec: apisv1.AKSNodeClassSpec{OSDiskSizeGB: i32(10)}},
		{Spec: apisv1.AKSNodeClassSpec{ImageFamily: &win}},
	} {
		if _, err := NodeSettingsFor(apisv1.NodeClassOf(bad)); err == nil || !strings.Contains(err.Error(), "spec.") {
			t.Errorf("%+v: error %v, want one naming the field", bad.Spec, err)
		}
	}
}

// instanceStorePolicy reaches the node settings: RAID0 sets InstanceStoreRAID0 (and keeps the
// root volume for types without instance store); any other value is refused naming the field.
func TestNodeSettingsForInstanceStorePolicy(t *testing.T) {
	raid0, bad := apisv1.InstanceStorePolicyRAID0, "RAID1"
	nc := &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{InstanceStorePolicy: &raid0,
		AMISelectorTerms:    []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		BlockDeviceMappings: []apisv1.BlockDeviceMapping{bdm("/dev/xvda", "80Gi", false)}}}
	s, err := NodeSettingsFor(apisv1.NodeClassOf(nc))
	if err != nil || !s.InstanceStoreRAID0 || s.EphemeralStorageBytes != 80<<30 {
		t.Fatalf("settings %+v, err %v: want RAID0 and the 80Gi root volume", s, err)
	}
	nc.Spec.InstanceStorePolicy = &bad
	if _, err := NodeSettingsFor(apisv1.NodeClassOf(nc)); err == nil || !strings.Contains(err.Error(), "spec.instanceStorePolicy") {
		t.Fatalf("err %v, want spec.instanceStorePolicy refused", err)
	}
	nc.Spec.InstanceStorePolicy = nil
	if s, _ := NodeSettingsFor(apisv1.NodeClassOf(nc)); s.InstanceStoreRAID0 {
		t.Fatal("RAID0 set without instanceStorePolicy")
	}
}

// The node settings of an EC2NodeClass in a placement group carry its capacity scope, so the
// solver skips offerings a launch into that group found unavailable (and only those): the id
// itself for an id selector, none without a selector.
func TestNodeSettingsCapacityScope(t *testing.T) {
	for _, tc := range []struct {
		sel  *apisv1.PlacementGroupSelector
		want string
	}{{nil, ""}, {&apisv1.PlacementGroupSelector{ID: "pg-0abc"}, "pg-0abc"}, {&apisv1.PlacementGroupSelector{Name: "ml-training"}, "pgname-3939283794785d5c"}} {
		nc := &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{PlacementGroupSelector: tc.sel}}
		s, err := NodeSettingsFor(apisv1.NodeClassOf(nc))
		if err != nil || s.CapacityScope != tc.want {
			t.Errorf("%+v: scope %q, %v; want %q", tc.sel, s.CapacityScope, err, tc.want)
		}
	}
}
