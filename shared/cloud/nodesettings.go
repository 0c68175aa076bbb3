package cloud

import (
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
}

// NodeSettingsFor parses the NodeClass settings that change a node's capacity and allocatable
// into catalog.NodeSettings. It is the edge's half of the solver's allocatable: the core takes it
// as provisioning.Input.NodeSettings and never parses a NodeClass of any cloud itself.
//
// For an EC2NodeClass: the resolved AMI family, the kubelet block and the size of the volume
// that backs ephemeral storage. That volume is chosen as Karpenter does: the mapping marked
// rootVolume; else, for Custom, the last mapping; else the family's ephemeral device (/dev/xvda
// on Amazon Linux, /dev/xvdb on Bottlerocket); else the 20Gi default. Instance-store RAID0
// (instanceStorePolicy) is not modelled. The zero NodeClass gives the defaults. Errors name the
// field under "spec".
func NodeSettingsFor(class apisv1.NodeClass) (catalog.NodeSettings, error) {
	if class.AKS != nil {
		return catalog.NodeSettings{}, fmt.Errorf("%s %q: node settings of an AKSNodeClass need the Azure provider, which this build does not include", class.Kind(), class.Name())
	}
	nc := class.EC2
	if nc == nil {
		return catalog.NewNodeSettings("", nil, nil, "spec")
	}
	family := nc.AMIFamily()
	return catalog.NewNodeSettings(family, nc.Spec.Kubelet, ephemeralVolumeSize(family, nc.Spec.BlockDeviceMappings), "spec")
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
