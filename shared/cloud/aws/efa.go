package aws

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dovetail-dev/dovetail/shared/apis/validate"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// efaCount is how many EFA network interfaces a launch of type it gets: none unless the
// NodeClaim requests vpc.amazonaws.com/efa (any amount), then every interface the type supports
// (DescribeInstanceTypes NetworkInfo.EfaInfo.MaximumEfaInterfaces, the catalog's EFA count), as
// Karpenter's launch template resolver decides (amifamily resolver.go: efaCount is the type's
// vpc.amazonaws.com/efa capacity when the NodeClaim's requests hold the resource). Types with a
// different count get different launch templates.
func efaCount(req cloud.LaunchRequest, it *catalog.InstanceType) int {
	if req.NodeClaim == nil || it == nil || it.Spec == nil {
		return 0
	}
	if _, ok := req.NodeClaim.Spec.Resources.Requests[catalog.ResourceEFA]; !ok {
		return 0
	}
	return int(it.Spec.EFA)
}

// withEFA replaces the template's network settings with n EFA interfaces, one per network card
// 0..n-1, as Karpenter's launch template provider writes them (launchtemplate.go
// generateNetworkInterfaces): the first card's interface is the primary (device index 0), every
// other card's device index 1; each is of type "efa" with the NodeClass's security groups, its
// ipPrefixCount (IPv4 prefixes, or IPv6 prefixes on an IPv6 cluster) and associatePublicIPAddress;
// on an IPv6 cluster each gets a primary IPv6 address. The groups move from SecurityGroupIds
// into the interfaces (EC2 refuses both in one template). n == 0 leaves d as it is.
func withEFA(d *ec2types.RequestLaunchTemplateData, n int, groups []string, publicIP *bool, prefixes *int32, ipFamily string) {
	if n == 0 {
		return
	}
	ipv6 := ipFamily == validate.IPFamilyIPv6
	nis := make([]ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, n)
	for i := range nis {
		ni := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			NetworkCardIndex: aws.Int32(int32(i)), DeviceIndex: aws.Int32(1), InterfaceType: aws.String(string(ec2types.NetworkInterfaceTypeEfa)),
			Groups: append([]string(nil), groups...), AssociatePublicIpAddress: publicIP,
		}
		if i == 0 {
			ni.DeviceIndex = aws.Int32(0)
		}
		if ipv6 {
			ni.Ipv6PrefixCount, ni.PrimaryIpv6, ni.Ipv6AddressCount = prefixes, aws.Bool(true), aws.Int32(1)
		} else {
			ni.Ipv4PrefixCount = prefixes
		}
		nis[i] = ni
	}
	d.NetworkInterfaces, d.SecurityGroupIds = nis, nil
}
