package cloud

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// ephemeralDevice is the block device each AMI family keeps ephemeral storage (the kubelet's
// root dir and container images) on: the root volume for Amazon Linux, the data volume for
// Bottlerocket, C: for Windows (Karpenter's amifamily EphemeralBlockDevice per family).
var ephemeralDevice = map[string]string{
	apisv1.AMIFamilyAL2:          "/dev/xvda",
	apisv1.AMIFamilyAL2023:       "/dev/xvda",
	apisv1.AMIFamilyBottlerocket: "/dev/xvdb",
	apisv1.AMIFamilyWindows2019:  "/dev/sda1",
	apisv1.AMIFamilyWindows2022:  "/dev/sda1",
	apisv1.AMIFamilyWindows2025:  "/dev/sda1",
}

// windowsRootVolume is the Windows families' default root volume (C:, /dev/sda1): 50Gi, where
// the Linux families' is 20Gi (Karpenter's amifamily Windows.DefaultBlockDeviceMappings). It is
// the ephemeral storage of a Windows NodeClass without blockDeviceMappings.
var windowsRootVolume = resource.MustParse("50Gi")

// NodeSettingsFor parses the NodeClass settings that change a node's capacity and allocatable
// into catalog.NodeSettings. It is the edge's half of the solver's allocatable: the core takes it
// as provisioning.Input.NodeSettings and never parses a NodeClass of any cloud itself.
//
// For an AKSNodeClass: AKSNodeSettings under Azure CNI Overlay (AKS Node Auto-Provisioning's
// network plugin). For an EC2NodeClass: the resolved AMI family, the kubelet block and the size of the volume
// that backs ephemeral storage. That volume is chosen as Karpenter does: the mapping marked
// rootVolume; else, for Custom, the last mapping; else the family's ephemeral device (/dev/xvda
// on Amazon Linux, /dev/xvdb on Bottlerocket, /dev/sda1 on Windows); else the family's default
// root volume (50Gi on Windows, 20Gi elsewhere). instanceStorePolicy RAID0
// sets InstanceStoreRAID0: a type with instance store then gets its total size instead (the
// family's bootstrap assembles the array: userdata.Spec.InstanceStorePolicy). The zero NodeClass
// gives the defaults. Errors name the field under "spec", including an instanceStorePolicy other
// than RAID0 (the CRD's one value). The class's resolved status.subnets give ZoneLabels: each
// subnet's zone carries topology.k8s.aws/zone-id = its zoneID (AvailabilityZoneId), as
// karpenter-provider-aws labels the offerings of that zone.
func NodeSettingsFor(class apisv1.NodeClass) (catalog.NodeSettings, error) {
	if class.AKS != nil {
		return AKSNodeSettings(class.AKS, catalog.AKSNetworkOverlay)
	}
	nc := class.EC2
	if nc == nil {
		return catalog.NewNodeSettings("", nil, nil, "spec")
	}
	family := nc.AMIFamily()
	s, err := catalog.NewNodeSettings(family, nc.Spec.Kubelet, ephemeralVolumeSize(family, nc.Spec.BlockDeviceMappings), "spec")
	if p := nc.Spec.InstanceStorePolicy; p != nil {
		if *p != apisv1.InstanceStorePolicyRAID0 {
			return s, errors.Join(err, fmt.Errorf("spec.instanceStorePolicy: %q is not supported, want %q", *p, apisv1.InstanceStorePolicyRAID0))
		}
		s.InstanceStoreRAID0 = true
	}
	s.CapacityScope = class.CapacityScope()
	for _, sn := range nc.Status.Subnets {
		if sn.Zone == "" || sn.ZoneID == "" {
			continue
		}
		if s.ZoneLabels == nil {
			s.ZoneLabels = map[string]map[string]string{}
		}
		s.ZoneLabels[sn.Zone] = map[string]string{apisv1.LabelTopologyZoneID: sn.ZoneID}
	}
	return s, err
}

func ephemeralVolumeSize(family string, bdms []apisv1.BlockDeviceMapping) *resource.Quantity {
	size := func(b apisv1.BlockDeviceMapping) *resource.Quantity {
		if b.EBS == nil {
			return nil
		}
		return b.EBS.VolumeSize
	}
	for _, b := range bdms {
		if b.RootVolume {
			return size(b)
		}
	}
	if len(bdms) == 0 {
		if apisv1.IsWindowsFamily(family) {
			q := windowsRootVolume.DeepCopy()
			return &q
		}
		return nil
	}
	if family == apisv1.AMIFamilyCustom {
		return size(bdms[len(bdms)-1])
	}
	for _, b := range bdms {
		if b.DeviceName != nil && *b.DeviceName == ephemeralDevice[family] {
			return size(b)
		}
	}
	return nil
}

// AKSNodeSettings are an AKSNodeClass's node settings on a cluster with the given network plugin
// (catalog.AKSNetwork*): pods = spec.maxPods, else the plugin's default (250 overlay, 30 Azure
// CNI node subnet, 110 kubenet, 250 none; provider utils.GetMaxPods); ephemeral storage =
// spec.osDiskSizeGB × 10^9 bytes (default 128 GB); the image family is recorded as AMIFamily and
// the resolved status.images' requirements as Images (the sizes the class can boot).
// Errors name the field: a Windows image family (Dovetail launches no Windows nodes yet), maxPods
// outside 10–250 or osDiskSizeGB outside 30–2048 (the CRD's bounds), an unknown plugin.
func AKSNodeSettings(nc *apisv1.AKSNodeClass, networkPlugin string) (catalog.NodeSettings, error) {
	pods, ok := catalog.AKSDefaultMaxPods(networkPlugin)
	if !ok {
		return catalog.NodeSettings{}, fmt.Errorf("network plugin %q: want %s, %s, %s or %s", networkPlugin,
			catalog.AKSNetworkOverlay, catalog.AKSNetworkNodeSubnet, catalog.AKSNetworkKubenet, catalog.AKSNetworkNone)
	}
	family := nc.ImageFamily()
	if apisv1.IsWindowsImageFamily(family) {
		return catalog.NodeSettings{}, fmt.Errorf("spec.imageFamily %s: Dovetail does not launch Windows nodes yet", family)
	}
	if m := nc.Spec.MaxPods; m != nil {
		if *m < 10 || *m > 250 {
			return catalog.NodeSettings{}, fmt.Errorf("spec.maxPods: %d is outside 10-250", *m)
		}
		pods = int64(*m)
	}
	s := catalog.NodeSettings{AMIFamily: family, Kubelet: &catalog.KubeletOverrides{MaxPods: &pods}}
	for _, img := range nc.Status.Images {
		s.Images = append(s.Images, img.Requirements)
	}
	if d := nc.Spec.OSDiskSizeGB; d != nil {
		if *d < 30 || *d > 2048 {
			return catalog.NodeSettings{}, fmt.Errorf("spec.osDiskSizeGB: %d is outside 30-2048", *d)
		}
		s.EphemeralStorageBytes = int64(*d) * 1_000_000_000
	}
	return s, nil
}
