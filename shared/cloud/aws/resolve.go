package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// AMI is a resolved image.
type AMI struct {
	ID   string
	Name string
	// Arch is the Kubernetes architecture: amd64 or arm64.
	Arch         string
	CreationDate string
}

// nodeClassResources are a NodeClass's selector terms resolved against EC2.
type nodeClassResources struct {
	family string
	// subnetsByZone lists each zone's subnets, most free addresses first.
	subnetsByZone map[string][]ec2types.Subnet
	groups        []string
	amis          map[string]AMI // by arch
}

func (p *Provider) resolve(ctx context.Context, nc *apisv1.EC2NodeClass, arches []string) (*nodeClassResources, error) {
	r := &nodeClassResources{family: nc.AMIFamily()}
	var err error
	if r.subnetsByZone, err = p.subnets(ctx, nc); err != nil {
		return nil, err
	}
	if r.groups, err = p.securityGroups(ctx, nc); err != nil {
		return nil, err
	}
	if r.amis, err = p.AMIs(ctx, nc, arches); err != nil {
		return nil, err
	}
	return r, nil
}

// tagFilters turns selector tags into EC2 filters: tag:<key>=<value>, or tag-key=<key> for the
// value "*" (Karpenter's selector semantics).
func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ec2types.Filter
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return out
}

// subnets resolves spec.subnetSelectorTerms (terms are ORed, a term's fields ANDed).
func (p *Provider) subnets(ctx context.Context, nc *apisv1.EC2NodeClass) (map[string][]ec2types.Subnet, error) {
	if len(nc.Spec.SubnetSelectorTerms) == 0 {
		return nil, errors.New("spec.subnetSelectorTerms: empty, no subnet to launch into")
	}
	seen := map[string]ec2types.Subnet{}
	for i, t := range nc.Spec.SubnetSelectorTerms {
		in := &ec2.DescribeSubnetsInput{Filters: tagFilters(t.Tags)}
		if t.ID != "" {
			in.SubnetIds = []string{t.ID}
		}
		if t.CIDR != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("cidr-block"), Values: []string{t.CIDR}})
		}
		pg := ec2.NewDescribeSubnetsPaginator(p.o.EC2, in)
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("spec.subnetSelectorTerms[%d]: DescribeSubnets: %w", i, err)
			}
			for _, s := range out.Subnets {
				seen[aws.ToString(s.SubnetId)] = s
			}
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("spec.subnetSelectorTerms: no subnet matches (nodeclass %s)", nc.Name)
	}
	byZone := map[string][]ec2types.Subnet{}
	for _, s := range seen {
		z := aws.ToString(s.AvailabilityZone)
		byZone[z] = append(byZone[z], s)
	}
	for _, list := range byZone {
		sort.Slice(list, func(a, b int) bool {
			fa, fb := aws.ToInt32(list[a].AvailableIpAddressCount), aws.ToInt32(list[b].AvailableIpAddressCount)
			if fa != fb {
				return fa > fb
			}
			return aws.ToString(list[a].SubnetId) < aws.ToString(list[b].SubnetId)
		})
	}
	return byZone, nil
}

// securityGroups resolves spec.securityGroupSelectorTerms to sorted group IDs.
func (p *Provider) securityGroups(ctx context.Context, nc *apisv1.EC2NodeClass) ([]string, error) {
	if len(nc.Spec.SecurityGroupSelectorTerms) == 0 {
		return nil, errors.New("spec.securityGroupSelectorTerms: empty, no security group for the nodes")
	}
	seen := map[string]bool{}
	for i, t := range nc.Spec.SecurityGroupSelectorTerms {
		in := &ec2.DescribeSecurityGroupsInput{Filters: tagFilters(t.Tags)}
		if t.ID != "" {
			in.GroupIds = []string{t.ID}
		}
		if t.Name != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{t.Name}})
		}
		pg := ec2.NewDescribeSecurityGroupsPaginator(p.o.EC2, in)
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("spec.securityGroupSelectorTerms[%d]: DescribeSecurityGroups: %w", i, err)
			}
			for _, g := range out.SecurityGroups {
				seen[aws.ToString(g.GroupId)] = true
			}
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("spec.securityGroupSelectorTerms: no security group matches (nodeclass %s)", nc.Name)
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// ec2Arch maps a Kubernetes architecture to EC2's and back.
var ec2Arch = map[string]string{"amd64": "x86_64", "arm64": "arm64", "x86_64": "amd64"}

func kubeArch(a ec2types.ArchitectureValues) string {
	switch a {
	case ec2types.ArchitectureValuesX8664:
		return "amd64"
	case ec2types.ArchitectureValuesArm64:
		return "arm64"
	}
	return string(a)
}

// AliasParameter names the public SSM parameter holding the image ID of an AMI alias for one
// architecture (amd64/arm64) and Kubernetes version (Amazon EKS User Guide, "Retrieve recommended
// Amazon Linux AMI IDs" / "Retrieve recommended Bottlerocket AMI IDs"; pinned-version paths as
// Karpenter documents them for amiSelectorTerms aliases).
func AliasParameter(a apisv1.Alias, arch, k8s string) (string, error) {
	ea := ec2Arch[arch]
	if ea == "" {
		return "", fmt.Errorf("architecture %q is not amd64 or arm64", arch)
	}
	latest := a.Version == apisv1.AliasVersionLatest
	switch a.Family {
	case apisv1.AMIFamilyAL2023:
		if latest {
			return "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/" + ea + "/standard/recommended/image_id", nil
		}
		return "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/" + ea + "/standard/amazon-eks-node-al2023-" + ea + "-standard-" + k8s + "-" + a.Version + "/image_id", nil
	case apisv1.AMIFamilyBottlerocket:
		v := "latest"
		if !latest {
			v = strings.TrimPrefix(a.Version, "v")
		}
		return "/aws/service/bottlerocket/aws-k8s-" + k8s + "/" + ea + "/" + v + "/image_id", nil
	case apisv1.AMIFamilyAL2:
		suffix := ""
		if arch == "arm64" {
			suffix = "-arm64"
		}
		if latest {
			return "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2" + suffix + "/recommended/image_id", nil
		}
		return "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2" + suffix + "/amazon-eks" + suffix + "-node-" + k8s + "-" + a.Version + "/image_id", nil
	}
	return "", fmt.Errorf("alias family %s: Dovetail resolves AL2023, AL2 and Bottlerocket aliases", a.Family)
}

// AMIs resolves spec.amiSelectorTerms to one image per requested architecture (the newest by
// creation date when several match). Aliases go through the public SSM parameters; ids,
// name/owner pairs and tags through DescribeImages; ssmParameter through GetParameter. Errors
// name the term; an architecture no image serves is left out (its offerings cannot launch).
func (p *Provider) AMIs(ctx context.Context, nc *apisv1.EC2NodeClass, arches []string) (map[string]AMI, error) {
	if len(nc.Spec.AMISelectorTerms) == 0 {
		return nil, errors.New("spec.amiSelectorTerms: empty, no image to launch")
	}
	var ids []string
	var queries []*ec2.DescribeImagesInput
	for i, t := range nc.Spec.AMISelectorTerms {
		field := fmt.Sprintf("spec.amiSelectorTerms[%d]", i)
		switch {
		case t.Alias != "":
			a, err := apisv1.ParseAlias(t.Alias)
			if err != nil {
				return nil, fmt.Errorf("%s.alias: %w", field, err)
			}
			if p.o.KubernetesVersion == "" {
				return nil, fmt.Errorf("%s.alias: the provider has no KubernetesVersion to resolve %s with", field, t.Alias)
			}
			for _, arch := range arches {
				name, err := AliasParameter(a, arch, p.o.KubernetesVersion)
				if err != nil {
					return nil, fmt.Errorf("%s.alias: %w", field, err)
				}
				id, found, err := p.parameter(ctx, name)
				if err != nil {
					return nil, fmt.Errorf("%s.alias %s: %w", field, t.Alias, err)
				}
				if found {
					ids = append(ids, id)
				}
			}
		case t.SSMParameter != "":
			id, found, err := p.parameter(ctx, t.SSMParameter)
			if err != nil {
				return nil, fmt.Errorf("%s.ssmParameter: %w", field, err)
			}
			if !found {
				return nil, fmt.Errorf("%s.ssmParameter: parameter %s does not exist", field, t.SSMParameter)
			}
			ids = append(ids, id)
		case t.ID != "":
			ids = append(ids, t.ID)
		default:
			in := &ec2.DescribeImagesInput{Filters: tagFilters(t.Tags)}
			if t.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{t.Name}})
				// Karpenter's default owners for a name without an owner: this account and Amazon.
				in.Owners = []string{"self", "amazon"}
			}
			if t.Owner != "" {
				in.Owners = []string{t.Owner}
			}
			queries = append(queries, in)
		}
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		queries = append(queries, &ec2.DescribeImagesInput{ImageIds: ids})
	}
	best := map[string]AMI{}
	for _, in := range queries {
		pg := ec2.NewDescribeImagesPaginator(p.o.EC2, in)
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("spec.amiSelectorTerms: DescribeImages: %w", err)
			}
			for _, img := range out.Images {
				a := AMI{ID: aws.ToString(img.ImageId), Name: aws.ToString(img.Name), Arch: kubeArch(img.Architecture), CreationDate: aws.ToString(img.CreationDate)}
				if cur, ok := best[a.Arch]; !ok || a.CreationDate > cur.CreationDate || (a.CreationDate == cur.CreationDate && a.ID < cur.ID) {
					best[a.Arch] = a
				}
			}
		}
	}
	if len(best) == 0 {
		return nil, fmt.Errorf("spec.amiSelectorTerms: no image matches (nodeclass %s)", nc.Name)
	}
	return best, nil
}

// parameter reads an SSM parameter; found is false when it does not exist.
func (p *Provider) parameter(ctx context.Context, name string) (value string, found bool, err error) {
	out, err := p.o.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	var nf *ssmtypes.ParameterNotFound
	if errors.As(err, &nf) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ssm GetParameter %s: %w", name, err)
	}
	return aws.ToString(out.Parameter.Value), true, nil
}
