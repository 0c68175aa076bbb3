package aws_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

func governed(g dvaws.Governance) func(*dvaws.Options) {
	return func(o *dvaws.Options) { o.Governance = g }
}

// notReady asserts a condition is False with the reason and a message holding every part.
func notReady(t *testing.T, nc *apisv1.EC2NodeClass, typ, reason string, parts ...string) {
	t.Helper()
	c := condition(t, nc, typ)
	if c.Status != "False" || c.Reason != reason {
		t.Fatalf("%s = %s/%s (%s), want False/%s", typ, c.Status, c.Reason, c.Message, reason)
	}
	for _, p := range parts {
		if !strings.Contains(c.Message, p) {
			t.Errorf("%s message %q lacks %q", typ, c.Message, p)
		}
	}
	if r := condition(t, nc, apisv1.ConditionReady); r.Status != "False" {
		t.Errorf("Ready = %s, want False", r.Status)
	}
}

// A selector that reaches a subnet or security group without the discovery tag is refused in
// status, naming it and the tag; nothing it resolved is listed for launches.
func TestUntaggedSubnetAndSecurityGroupRefused(t *testing.T) {
	e := setup(t)
	nc := nodeClass("al2023@latest")
	nc.Spec.SubnetSelectorTerms = append(nc.Spec.SubnetSelectorTerms, apisv1.SubnetSelectorTerm{Tags: map[string]string{"Name": ec2api.PublicSubnetName("us-east-1a")}})
	nc.Spec.SecurityGroupSelectorTerms = []apisv1.SecurityGroupSelectorTerm{{Name: "default"}}
	got := resolve(t, e, nc)
	notReady(t, got, apisv1.ConditionSubnetsReady, apisv1.ReasonSubnetsNotAllowed,
		"(dovetail-fake-public-us-east-1a) lacks the discovery tag karpenter.sh/discovery=test")
	notReady(t, got, apisv1.ConditionSecurityGroupsReady, apisv1.ReasonSecurityGroupsNotAllowed, "(default) lacks the discovery tag karpenter.sh/discovery=test")
	for _, s := range got.Status.Subnets {
		if strings.Contains(s.ID, "public") {
			t.Errorf("refused subnet listed: %+v", s)
		}
	}
	if len(got.Status.SecurityGroups) != 0 {
		t.Errorf("security groups %+v, want none (the default group is refused)", got.Status.SecurityGroups)
	}
	// The launch path refuses too when it resolves the selectors itself (a class without status).
	nc.Status = apisv1.EC2NodeClassStatus{}
	if _, err := e.p.Create(context.Background(), request("tok-untagged", nc, e.offering(t, "m5.large", "us-east-1a", "on-demand"))); err == nil ||
		!strings.Contains(err.Error(), "lacks the discovery tag") {
		t.Fatalf("Create: %v, want the refusal", err)
	}
	if n := len(e.srv.RequestsOf("CreateFleet")); n != 0 {
		t.Errorf("%d CreateFleet calls, want none", n)
	}
}

// Governance.VPC refuses a tagged subnet of another VPC; a custom discovery tag replaces
// Karpenter's.
func TestForeignVPCAndCustomDiscoveryTag(t *testing.T) {
	e := setup(t, governed(dvaws.Governance{VPC: "vpc-0cluster"}))
	got := resolve(t, e, nodeClass("al2023@latest"))
	notReady(t, got, apisv1.ConditionSubnetsReady, apisv1.ReasonSubnetsNotAllowed, "not the cluster's VPC vpc-0cluster")

	e = setup(t, governed(dvaws.Governance{DiscoveryTagKey: "example.com/nodes", DiscoveryTagValue: "team-a"}))
	if err := e.srv.AddSubnet(ec2types.Subnet{SubnetId: aws.String("subnet-0teama"), AvailabilityZone: aws.String("us-east-1a"), AvailableIpAddressCount: aws.Int32(100),
		Tags: []ec2types.Tag{{Key: aws.String("example.com/nodes"), Value: aws.String("team-a")}}}); err != nil {
		t.Fatal(err)
	}
	nc := nodeClass("al2023@latest")
	nc.Spec.SubnetSelectorTerms = []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"example.com/nodes": "team-a"}}}
	got = resolve(t, e, nc)
	if c := condition(t, got, apisv1.ConditionSubnetsReady); c.Status != "True" || len(got.Status.Subnets) != 1 {
		t.Errorf("subnets %+v, %s: want the team-a subnet", got.Status.Subnets, c.Message)
	}
	// The node security group carries Karpenter's tag, not the configured one.
	notReady(t, got, apisv1.ConditionSecurityGroupsReady, apisv1.ReasonSecurityGroupsNotAllowed, "lacks the discovery tag example.com/nodes=team-a")
}

// Images: Amazon's always, an approved account's, never a community image; ssmParameter terms
// only under the approved paths, refused before any SSM call.
func TestImageOwnersAndParameterPaths(t *testing.T) {
	const approved, community = "444455556666", "999988887777"
	e := setup(t, governed(dvaws.Governance{ImageOwners: []string{approved}, AMIParameterPaths: []string{"/platform/amis"}}))
	mine := e.srv.AddImage(ec2types.Image{Name: aws.String("platform-al2023-v1"), Architecture: ec2types.ArchitectureValuesX8664,
		CreationDate: aws.String("2026-11-20T00:00:00.000Z"), OwnerId: aws.String(approved)})
	theirs := e.srv.AddImage(ec2types.Image{Name: aws.String("cheap-k8s-node"), Architecture: ec2types.ArchitectureValuesX8664,
		CreationDate: aws.String("2026-11-20T00:00:00.000Z"), OwnerId: aws.String(community)})
	e.srv.PutParameter("/platform/amis/al2023", aws.ToString(mine.ImageId))
	e.srv.PutParameter("/scratch/ami", aws.ToString(mine.ImageId))

	nc := nodeClass("")
	nc.Spec.AMIFamily = aws.String(apisv1.AMIFamilyAL2023)
	nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{ID: aws.ToString(theirs.ImageId)}}
	notReady(t, resolve(t, e, nc), apisv1.ConditionAMIsReady, apisv1.ReasonAMINotAllowed,
		"image "+aws.ToString(theirs.ImageId)+" (cheap-k8s-node) is owned by "+community+", not Amazon or an approved account ("+approved+")")

	nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{SSMParameter: "/platform/amis/al2023"}}
	if got := resolve(t, e, nc); condition(t, got, apisv1.ConditionAMIsReady).Status != "True" || got.Status.AMIs[0].ID != aws.ToString(mine.ImageId) {
		t.Errorf("approved path and owner: %+v %+v", got.Status.AMIs, got.Status.Conditions)
	}
	calls := len(e.srv.RequestsOf("AmazonSSM.GetParameter"))
	nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{SSMParameter: "/scratch/ami"}}
	notReady(t, resolve(t, e, nc), apisv1.ConditionAMIsReady, apisv1.ReasonAMINotAllowed,
		"spec.amiSelectorTerms[0].ssmParameter: parameter /scratch/ami is under no approved parameter path (/platform/amis)")
	if n := len(e.srv.RequestsOf("AmazonSSM.GetParameter")); n != calls {
		t.Errorf("%d GetParameter calls for a refused term, want none (IAM would deny it)", n-calls)
	}
	// Amazon's alias images need no approval.
	if got := resolve(t, e, nodeClass("al2023@latest")); condition(t, got, apisv1.ConditionReady).Status != "True" {
		t.Errorf("alias: %+v", got.Status.Conditions)
	}
}

// A NodeClass without the mandatory tags is not Ready, naming them; a launch without them is
// refused before any call; with them, every network interface is tagged through the template.
func TestMandatoryTags(t *testing.T) {
	e := setup(t, governed(dvaws.Governance{MandatoryTags: []string{"Environment", "CostCenter"}}))
	nc := nodeClass("al2023@latest")
	nc.Spec.Tags = map[string]string{"Environment": "prod"}
	notReady(t, resolve(t, e, nc), apisv1.ConditionValidationSucceeded, apisv1.ReasonMandatoryTagsMissing, "spec.tags lacks the mandatory tags CostCenter:")
	req := request("tok-tags", nc, e.offering(t, "m5.large", "us-east-1a", "on-demand"))
	req.Tags["Environment"] = "prod"
	if _, err := e.p.Create(context.Background(), req); err == nil || !strings.Contains(err.Error(), "lacks the mandatory tags CostCenter") {
		t.Fatalf("Create without CostCenter: %v", err)
	}

	nc.Spec.Tags["CostCenter"] = "cc-42"
	got := resolve(t, e, nc)
	if c := condition(t, got, apisv1.ConditionReady); c.Status != "True" {
		t.Fatalf("with both tags: %+v", got.Status.Conditions)
	}
	req = request("tok-tags-2", got, e.offering(t, "m5.large", "us-east-1a", "on-demand"))
	req.Tags["Environment"], req.Tags["CostCenter"] = "prod", "cc-42"
	if _, err := e.p.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	lts := e.srv.RequestsOf("CreateLaunchTemplate")
	if len(lts) == 0 {
		t.Fatal("no launch template")
	}
	d := templateInput(t, lts[len(lts)-1]).LaunchTemplateData
	if len(d.TagSpecifications) != 1 || d.TagSpecifications[0].ResourceType != ec2types.ResourceTypeNetworkInterface {
		t.Fatalf("template tag specifications %+v, want the network interface's", d.TagSpecifications)
	}
	tags := map[string]string{}
	for _, tg := range d.TagSpecifications[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if tags["Environment"] != "prod" || tags["CostCenter"] != "cc-42" || tags[apisv1.TagCluster] != cluster {
		t.Errorf("network interface tags %v, want the cluster and mandatory tags", tags)
	}
}

func TestGovernanceSettingsValidated(t *testing.T) {
	for _, g := range []dvaws.Governance{{ImageOwners: []string{"amazon"}}, {AMIParameterPaths: []string{"platform/amis"}},
		{AMIParameterPaths: []string{"/platform/"}}, {MandatoryTags: []string{"aws:cost"}}, {VPC: "subnet-1"}} {
		if err := dvaws.ValidateGovernance(g); err == nil {
			t.Errorf("%+v accepted", g)
		}
	}
}

func templateInput(t *testing.T, in any) *ec2.CreateLaunchTemplateInput {
	t.Helper()
	lt, ok := in.(*ec2.CreateLaunchTemplateInput)
	if !ok {
		t.Fatalf("%T is not a CreateLaunchTemplateInput", in)
	}
	return lt
}
