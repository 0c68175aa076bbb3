package aws

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/userdata"
)

// Instance metadata defaults (Karpenter's EC2NodeClass defaults, which follow AWS's guidance for
// containers: IMDSv2 only, and a hop limit of 1 so pods cannot reach the node's credentials).
const (
	DefaultHTTPEndpoint     = "enabled"
	DefaultHTTPProtocolIPv6 = "disabled"
	DefaultHTTPTokens       = "required"
	DefaultHopLimit         = 1
)

// Default volumes per AMI family when the NodeClass has no blockDeviceMappings (Karpenter's
// defaults): AL2/AL2023 one 20 GiB gp3 root volume on /dev/xvda; Bottlerocket a 4 GiB OS volume
// on /dev/xvda and a 20 GiB data volume on /dev/xvdb; Windows one 50 GiB root volume (C:) on
// /dev/sda1 (amifamily Windows.DefaultBlockDeviceMappings); all encrypted.
var defaultVolumes = map[string][]struct {
	device string
	gib    int32
}{
	apisv1.AMIFamilyAL2023:       {{"/dev/xvda", 20}},
	apisv1.AMIFamilyAL2:          {{"/dev/xvda", 20}},
	apisv1.AMIFamilyBottlerocket: {{"/dev/xvda", 4}, {"/dev/xvdb", 20}},
	apisv1.AMIFamilyWindows2019:  {{"/dev/sda1", 50}},
	apisv1.AMIFamilyWindows2022:  {{"/dev/sda1", 50}},
	apisv1.AMIFamilyWindows2025:  {{"/dev/sda1", 50}},
}

// TemplateData builds the launch template data of a NodeClass × AMI for nodes with the request's
// labels and taints: image, user data (base64), security groups, metadata options, block
// devices, instance profile, monitoring and enclave options. Errors name the NodeClass field.
func (p *Provider) TemplateData(req cloud.LaunchRequest, family, imageID string, groups []string, profile string) (*ec2types.RequestLaunchTemplateData, error) {
	nc := req.NodeClass.EC2
	custom := ""
	if nc.Spec.UserData != nil {
		custom = *nc.Spec.UserData
	}
	facts := p.clusterFacts(req.ClusterFacts)
	ud, err := userdata.Render(userdata.Spec{Family: family, ClusterName: p.o.ClusterName, APIServerEndpoint: p.o.ClusterEndpoint,
		CertificateAuthority: p.o.ClusterCA, ServiceCIDR: facts.ServiceCIDR, Labels: req.Labels, Taints: req.Taints,
		Kubelet: withClusterDNS(nc.Spec.Kubelet, facts.ClusterDNSIP), Custom: custom, InstanceStorePolicy: aws.ToString(nc.Spec.InstanceStorePolicy)})
	if err != nil {
		return nil, fmt.Errorf("nodeclass %s: user data: %w", nc.Name, err)
	}
	// An IPv6 cluster's nodes reach IMDS over IPv6 (Karpenter's resolver enables the IPv6
	// endpoint by default when the kube-dns address is IPv6).
	ipv6 := DefaultHTTPProtocolIPv6
	if facts.IPFamily == validate.IPFamilyIPv6 {
		ipv6 = "enabled"
	}
	d := &ec2types.RequestLaunchTemplateData{
		ImageId:  aws.String(imageID),
		UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(ud))),
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(DefaultHTTPEndpoint),
			HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(ipv6),
			HttpPutResponseHopLimit: aws.Int32(DefaultHopLimit),
			HttpTokens:              ec2types.LaunchTemplateHttpTokensState(DefaultHTTPTokens),
		},
	}
	if m := nc.Spec.MetadataOptions; m != nil {
		if m.HTTPEndpoint != nil {
			d.MetadataOptions.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
		}
		if m.HTTPProtocolIPv6 != nil {
			d.MetadataOptions.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
		}
		if m.HTTPPutResponseHopLimit != nil {
			d.MetadataOptions.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
		}
		if m.HTTPTokens != nil {
			d.MetadataOptions.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
		}
	}
	if nc.Spec.AssociatePublicIPAddress != nil || nc.Spec.IPPrefixCount != nil {
		ni := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{DeviceIndex: aws.Int32(0), Groups: groups,
			AssociatePublicIpAddress: nc.Spec.AssociatePublicIPAddress, Ipv4PrefixCount: nc.Spec.IPPrefixCount}
		d.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{ni}
	} else {
		d.SecurityGroupIds = groups
	}
	bdms, err := blockDevices(nc, family)
	if err != nil {
		return nil, err
	}
	d.BlockDeviceMappings = bdms
	if profile != "" {
		d.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)}
	}
	if nc.Spec.DetailedMonitoring != nil {
		d.Monitoring = &ec2types.LaunchTemplatesMonitoringRequest{Enabled: nc.Spec.DetailedMonitoring}
	}
	if e := nc.Spec.EnclaveOptions; e != nil && e.Enabled != nil {
		d.EnclaveOptions = &ec2types.LaunchTemplateEnclaveOptionsRequest{Enabled: e.Enabled}
	}
	// The network interface a launch creates is tagged from the template (CreateFleet tags only
	// the fleet, instances and volumes), as Karpenter's templates do: the cluster tag and the
	// NodeClass's tags, so the interface carries the mandatory tags IAM asks for.
	d.TagSpecifications = []ec2types.LaunchTemplateTagSpecificationRequest{
		{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: ec2Tags(p.templateTags(req.NodeClass))}}
	return d, nil
}

// withClusterDNS is the NodeClass kubelet block with clusterDNS set to the cluster's DNS address
// when the block sets none, as Karpenter's resolver fills it from the discovered kube-dns IP
// (amifamily defaultClusterDNS); the NodeClass's own value wins. The block is copied, never
// changed in place.
func withClusterDNS(k *apisv1.KubeletConfiguration, dns string) *apisv1.KubeletConfiguration {
	if dns == "" || (k != nil && len(k.ClusterDNS) > 0) {
		return k
	}
	out := &apisv1.KubeletConfiguration{}
	if k != nil {
		out = k.DeepCopy()
	}
	out.ClusterDNS = []string{dns}
	return out
}

// templateTags are a launch template's tags and its network interfaces': the cluster tag, the
// NodeClass's name and its spec.tags (Dovetail's own win).
func (p *Provider) templateTags(nc apisv1.NodeClass) map[string]string {
	tags := map[string]string{apisv1.TagCluster: p.o.Cluster, apisv1.LabelEC2NodeClass: nc.Name()}
	for k, v := range nc.Tags() {
		if _, own := tags[k]; !own {
			tags[k] = v
		}
	}
	return tags
}

// blockDevices maps spec.blockDeviceMappings (volume sizes rounded up to whole GiB, EBS's unit),
// or the family's default volumes.
func blockDevices(nc *apisv1.EC2NodeClass, family string) ([]ec2types.LaunchTemplateBlockDeviceMappingRequest, error) {
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	if len(nc.Spec.BlockDeviceMappings) == 0 {
		for _, v := range defaultVolumes[family] {
			out = append(out, ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: aws.String(v.device),
				Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(v.gib), VolumeType: ec2types.VolumeTypeGp3,
					Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}})
		}
		return out, nil
	}
	for i, b := range nc.Spec.BlockDeviceMappings {
		m := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: b.DeviceName}
		if e := b.EBS; e != nil {
			ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted,
				KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID, VolumeInitializationRate: e.VolumeInitializationRate}
			if e.IOPS != nil {
				ebs.Iops = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				ebs.Throughput = aws.Int32(int32(*e.Throughput))
			}
			if e.VolumeType != nil {
				ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			if e.VolumeSize != nil {
				gib, err := wholeGiB(*e.VolumeSize)
				if err != nil {
					return nil, fmt.Errorf("nodeclass %s: spec.blockDeviceMappings[%d].ebs.volumeSize: %w", nc.Name, i, err)
				}
				ebs.VolumeSize = aws.Int32(gib)
			}
			m.Ebs = ebs
		}
		out = append(out, m)
	}
	return out, nil
}

func wholeGiB(q resource.Quantity) (int32, error) {
	const gib = 1 << 30
	b := q.Value()
	if b <= 0 {
		return 0, fmt.Errorf("%s must be positive", q.String())
	}
	n := (b + gib - 1) / gib
	// EBS volumes are at most 64 TiB (io2 Block Express), 65,536 GiB.
	if n > 65536 {
		return 0, fmt.Errorf("%s is over 64Ti, the largest EBS volume", q.String())
	}
	return int32(n), nil
}

// TemplateName names a launch template deterministically from its contents:
// "dovetail/<cluster>/<nodeclass>/<32 hex of sha256(data)>", so equal contents share one template
// and any change makes a new one. At most 128 characters (EC2's limit).
func TemplateName(cluster, nodeClass string, d *ec2types.RequestLaunchTemplateData) (string, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	prefix := "dovetail/" + cluster + "/" + nodeClass
	if len(prefix) > 94 {
		prefix = prefix[:94]
	}
	return prefix + "/" + hex.EncodeToString(sum[:16]), nil
}

// ensureTemplate creates the launch template unless one of that name exists. Names derive from
// contents, so an existing template is the same template; a concurrent create that loses the
// race (AlreadyExistsException) is success too.
func (p *Provider) ensureTemplate(ctx context.Context, req cloud.LaunchRequest, d *ec2types.RequestLaunchTemplateData) (string, error) {
	name, err := TemplateName(p.o.Cluster, req.NodeClass.Name(), d)
	if err != nil {
		return "", err
	}
	_, err = p.o.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err == nil {
		return name, nil
	}
	if !hasCode(err, "InvalidLaunchTemplateName.NotFoundException") {
		return "", fmt.Errorf("DescribeLaunchTemplates %s: %w", name, err)
	}
	_, err = p.o.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name), LaunchTemplateData: d,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ec2Tags(p.templateTags(req.NodeClass))}},
	})
	if err != nil && !hasCode(err, "InvalidLaunchTemplateName.AlreadyExistsException") {
		return "", fmt.Errorf("CreateLaunchTemplate %s: %w", name, err)
	}
	return name, nil
}

// hasCode reports whether err is an AWS API error with that code.
func hasCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

// ec2Tags renders a tag map sorted by key.
func ec2Tags(m map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}
