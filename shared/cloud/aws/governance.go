package aws

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// DefaultDiscoveryTagKey is the tag of the subnets and security groups nodes may be launched
// into when Governance names none: Karpenter's discovery tag (its getting-started guide tags
// them karpenter.sh/discovery=<cluster>).
const DefaultDiscoveryTagKey = "karpenter.sh/discovery"

// AmazonOwner is the ec2:Owner of the images Amazon publishes (the EKS-optimized and Bottlerocket
// AMIs: DescribeImages reports their ImageOwnerAlias as "amazon"). Always allowed.
const AmazonOwner = "amazon"

// PublicAMIParameterPaths are the public SSM paths of the EKS-optimized (Amazon Linux and
// Windows Server) and Bottlerocket AMIs, which aliases read and every deployment may read
// (infra/aws PublicAMIParameters).
var PublicAMIParameterPaths = []string{"/aws/service/eks/optimized-ami", "/aws/service/bottlerocket", "/aws/service/ami-windows-latest"}

// Governance is what a deployment lets NodeClasses launch with: the same settings as
// infra/aws's IAM policies (SAM parameters / Terraform variables, passed to the functions as
// DOVETAIL_DISCOVERY_TAG_KEY, _VALUE, DOVETAIL_VPC_ID, DOVETAIL_IMAGE_OWNERS,
// DOVETAIL_AMI_PARAMETER_PATHS, DOVETAIL_MANDATORY_TAGS), checked while a NodeClass's status is
// resolved so that a class IAM would refuse is not Ready, with the reason, before any launch.
// The zero value is the stacks' defaults.
type Governance struct {
	// DiscoveryTagKey and DiscoveryTagValue are the tag every subnet and security group a
	// NodeClass resolves must carry (ec2:ResourceTag). Defaults: DefaultDiscoveryTagKey and
	// Options.ClusterName, the EKS cluster's name (Karpenter's convention).
	DiscoveryTagKey, DiscoveryTagValue string
	// VPC, when set (vpc-...), is the only VPC whose subnets and security groups may be used.
	VPC string
	// ImageOwners are the account IDs whose AMIs may boot besides Amazon's (ec2:Owner).
	ImageOwners []string
	// AMIParameterPaths are the SSM paths ("/platform/amis") under which an ssmParameter AMI
	// term may read, besides PublicAMIParameterPaths.
	AMIParameterPaths []string
	// MandatoryTags are the tag keys every instance, volume and network interface must carry:
	// an EC2NodeClass's spec.tags must hold them all (aws:RequestTag).
	MandatoryTags []string
}

// governance returns the provider's settings with their defaults filled in.
func (p *Provider) governance() Governance {
	g := p.o.Governance
	if g.DiscoveryTagKey == "" {
		g.DiscoveryTagKey = DefaultDiscoveryTagKey
	}
	if g.DiscoveryTagValue == "" {
		g.DiscoveryTagValue = p.o.ClusterName
	}
	return g
}

func (g Governance) discovery() string { return g.DiscoveryTagKey + "=" + g.DiscoveryTagValue }

// networkRefusal says why a subnet or security group (its id, name, VPC and tags) may not be
// launched into, "" when it may.
func (g Governance) networkRefusal(id, name, vpc string, tags []ec2types.Tag) string {
	label := id
	if name != "" {
		label += " (" + name + ")"
	}
	if g.VPC != "" && vpc != g.VPC {
		return fmt.Sprintf("%s is in %s, not the cluster's VPC %s", label, vpc, g.VPC)
	}
	for _, t := range tags {
		if aws.ToString(t.Key) == g.DiscoveryTagKey {
			if aws.ToString(t.Value) == g.DiscoveryTagValue {
				return ""
			}
			return fmt.Sprintf("%s has %s=%s, not the discovery tag %s", label, g.DiscoveryTagKey, aws.ToString(t.Value), g.discovery())
		}
	}
	return fmt.Sprintf("%s lacks the discovery tag %s", label, g.discovery())
}

// networkProblem collects the refusals of one selector field into a condition problem.
func (g Governance) networkProblem(field, what, reason string, refusals []string) *problem {
	if len(refusals) == 0 {
		return nil
	}
	sort.Strings(refusals)
	return &problem{reason, fmt.Sprintf("spec.%s selects %s IAM refuses to launch into (only those tagged %s%s may be used): %s",
		field, what, g.discovery(), g.inVPC(), strings.Join(refusals, "; "))}
}

func (g Governance) inVPC() string {
	if g.VPC == "" {
		return ""
	}
	return " in " + g.VPC
}

// imageOwner is an image's ec2:Owner: its owner alias (amazon, aws-marketplace) or account.
func imageOwner(img ec2types.Image) string {
	if a := aws.ToString(img.ImageOwnerAlias); a == AmazonOwner || a == "aws-marketplace" {
		return a
	}
	return aws.ToString(img.OwnerId)
}

// imageRefusal says why an image may not boot, "" when it may.
func (g Governance) imageRefusal(img ec2types.Image) string {
	owner := imageOwner(img)
	if owner == AmazonOwner {
		return ""
	}
	for _, o := range g.ImageOwners {
		if o == owner {
			return ""
		}
	}
	return fmt.Sprintf("image %s (%s) is owned by %s, not Amazon or an approved account (%s)", aws.ToString(img.ImageId), aws.ToString(img.Name),
		owner, listOrNone(g.ImageOwners))
}

// parameterRefusal says why an ssmParameter term may not be read, "" when it may.
func (g Governance) parameterRefusal(name string) string {
	for _, p := range append(append([]string(nil), PublicAMIParameterPaths...), g.AMIParameterPaths...) {
		if strings.HasPrefix(name, strings.TrimSuffix(p, "/")+"/") {
			return ""
		}
	}
	return fmt.Sprintf("parameter %s is under no approved parameter path (%s) nor the public EKS and Bottlerocket paths: IAM allows ssm:GetParameter nowhere else",
		name, listOrNone(g.AMIParameterPaths))
}

// missingTags lists the mandatory tag keys tags lack, sorted.
func (g Governance) missingTags(tags map[string]string) []string {
	var out []string
	for _, k := range g.MandatoryTags {
		if _, ok := tags[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (g Governance) mandatoryTagsMessage(missing []string) string {
	return fmt.Sprintf("spec.tags lacks the mandatory tags %s: every instance, volume and network interface must carry %s, and IAM refuses a launch without them",
		strings.Join(missing, ", "), strings.Join(g.MandatoryTags, ", "))
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none configured"
	}
	return strings.Join(l, ", ")
}

// ValidateGovernance checks the settings: account IDs of 12 digits, absolute SSM paths, tag
// keys EC2 accepts. Errors name the setting.
func ValidateGovernance(g Governance) error {
	for _, o := range g.ImageOwners {
		if len(o) != 12 || strings.Trim(o, "0123456789") != "" {
			return fmt.Errorf("image owners: %q is not a 12-digit account ID", o)
		}
	}
	for _, p := range g.AMIParameterPaths {
		if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "*") {
			return fmt.Errorf("AMI parameter paths: %q must be an absolute SSM path without a trailing slash or wildcard (/platform/amis)", p)
		}
	}
	for _, k := range g.MandatoryTags {
		if k == "" || len(k) > 128 || strings.HasPrefix(strings.ToLower(k), "aws:") {
			return fmt.Errorf("mandatory tags: %q is not a tag key EC2 accepts (1-128 characters, not aws:)", k)
		}
	}
	if g.VPC != "" && !strings.HasPrefix(g.VPC, "vpc-") {
		return fmt.Errorf("VPC: %q is not a VPC id (vpc-...)", g.VPC)
	}
	return nil
}
