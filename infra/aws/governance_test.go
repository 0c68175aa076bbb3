package awsinfra

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dovetail-dev/dovetail/shared/cloud/aws/iampolicy"
)

// The deployment the tables are decided for: account, region, cluster and the node role.
const (
	partition = "aws"
	region    = "us-east-1"
	account   = "111122223333"
	cluster   = "prod"
	eksName   = "prod-eks"
	nodeRole  = "arn:aws:iam::111122223333:role/prod-node"
	vpc       = "vpc-0abc"
	kmsKey    = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	approved  = "444455556666" // an image account the platform team approves
	community = "999988887777" // anyone else's
)

var stack = Stack{Partition: partition, Region: region, Account: account}

// governance is one configuration of the stacks, spelled for both.
type governance struct {
	discoveryKey, discoveryValue, vpc string
	owners, paths, mandatory          []string
	kmsKey                            string
}

var (
	full       = governance{vpc: vpc, owners: []string{approved}, paths: []string{"/platform/amis", "/team/amis"}, mandatory: []string{"Environment", "CostCenter"}}
	byDefault  = governance{}
	customKey  = governance{discoveryKey: "example.com/nodes", discoveryValue: "team-a"}
	withKMS    = governance{kmsKey: kmsKey}
	everyShape = []governance{byDefault, full, customKey, withKMS, {paths: []string{"/a", "/b", "/c"}, mandatory: []string{"Owner"}}}
)

func (g governance) sam() map[string]string {
	p := map[string]string{"ClusterName": cluster, "NodeRoleArn": nodeRole, "EksClusterName": eksName, "EksEndpoint": "https://eks.example",
		"EksCertificateAuthority": "Q0E=", "VpcId": g.vpc, "DiscoveryTagValue": g.discoveryValue, "ImageOwners": strings.Join(g.owners, ","),
		"AMIParameterPaths": strings.Join(g.paths, ","), "MandatoryTags": strings.Join(g.mandatory, ",")}
	if g.discoveryKey != "" {
		p["DiscoveryTagKey"] = g.discoveryKey
	}
	if g.kmsKey != "" {
		p["KmsKeyArn"] = g.kmsKey
	}
	return p
}

func (g governance) tf() map[string]any {
	v := map[string]any{"cluster_name": cluster, "node_role_arn": nodeRole, "eks_cluster_name": eksName, "eks_endpoint": "https://eks.example",
		"eks_certificate_authority": "Q0E=", "vpc_id": g.vpc, "discovery_tag_value": g.discoveryValue,
		"image_owners": g.owners, "ami_parameter_paths": g.paths, "mandatory_tags": g.mandatory}
	if g.discoveryKey != "" {
		v["discovery_tag_key"] = g.discoveryKey
	}
	if g.kmsKey != "" {
		v["kms_key_arn"] = g.kmsKey
	}
	return v
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bothStacks resolves the SAM template and the Terraform stack for g.
func bothStacks(t *testing.T, g governance) map[string]map[string]Role {
	t.Helper()
	st := stack
	st.Params = g.sam()
	sam, err := SAMRoles(readFile(t, "template.yaml"), st)
	if err != nil {
		t.Fatalf("SAM: %v", err)
	}
	tf, err := terraformRoles(readTFModule(t), stack, g.tf())
	if err != nil {
		t.Fatalf("Terraform: %v", err)
	}
	return map[string]map[string]Role{"SAM": sam, "Terraform": tf}
}

func roleName(short string) string { return "dovetail-" + cluster + "-" + short }

var (
	launchers = []string{"provision", "consolidate", "drift", "interruption"}
	fnRoles   = append(slices.Clone(launchers), "lifecycle")
	noRole    []string
)

func ec2ARN(kind, id string) string {
	return "arn:aws:ec2:" + region + ":" + account + ":" + kind + "/" + id
}

func kv(pairs ...string) map[string][]string {
	m := map[string][]string{}
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i]] = append(m[pairs[i]], pairs[i+1])
	}
	return m
}

// discovered is the context of a subnet or security group: its tags (as ec2:ResourceTag and
// aws:ResourceTag) and its VPC (ec2:Vpc, an ARN).
func discovered(vpcID string, tags ...string) map[string][]string {
	m := kv()
	for i := 0; i < len(tags); i += 2 {
		m["ec2:ResourceTag/"+tags[i]] = []string{tags[i+1]}
		m["aws:ResourceTag/"+tags[i]] = []string{tags[i+1]}
	}
	m["ec2:Vpc"] = []string{ec2ARN("vpc", vpcID)}
	return m
}

// created is the context of a resource created with tags: aws:RequestTag/K and aws:TagKeys.
func created(tags ...string) map[string][]string {
	m := kv()
	for i := 0; i < len(tags); i += 2 {
		m["aws:RequestTag/"+tags[i]] = []string{tags[i+1]}
		m["aws:TagKeys"] = append(m["aws:TagKeys"], tags[i])
	}
	return m
}

func with(m map[string][]string, pairs ...string) map[string][]string {
	out := map[string][]string{}
	for k, v := range m {
		out[k] = v
	}
	for k, v := range kv(pairs...) {
		out[k] = v
	}
	return out
}

// row is one request and the roles that must allow it; every other role must deny it.
type row struct {
	name  string
	req   iampolicy.Request
	allow []string
}

func req(action, resource string, ctx map[string][]string) iampolicy.Request {
	return iampolicy.Request{Action: action, Resource: resource, Context: ctx}
}

var fullTags = []string{"dovetail.dev/cluster", cluster, "Environment", "prod", "CostCenter", "cc-42"}

// fullTable is decided against both stacks configured with `full`. Each condition of each
// statement has a row denied by it alone, so dropping any one fails a row (TestWideningFails).
func fullTable() []row {
	var rows []row
	for _, action := range []string{"ec2:RunInstances", "ec2:CreateFleet"} {
		a := strings.TrimPrefix(action, "ec2:")
		rows = append(rows,
			row{a + ": subnet with the discovery tag, in the cluster's VPC", req(action, ec2ARN("subnet", "subnet-1"), discovered(vpc, "karpenter.sh/discovery", eksName)), launchers},
			row{a + ": subnet with another cluster's discovery tag", req(action, ec2ARN("subnet", "subnet-1"), discovered(vpc, "karpenter.sh/discovery", "dev")), noRole},
			row{a + ": untagged subnet", req(action, ec2ARN("subnet", "subnet-2"), discovered(vpc)), noRole},
			row{a + ": tagged subnet in a foreign VPC", req(action, ec2ARN("subnet", "subnet-3"), discovered("vpc-0other", "karpenter.sh/discovery", eksName)), noRole},
			row{a + ": tagged subnet of another account", req(action, "arn:aws:ec2:us-east-1:"+community+":subnet/subnet-4", discovered(vpc, "karpenter.sh/discovery", eksName)), noRole},
			row{a + ": tagged security group in the VPC", req(action, ec2ARN("security-group", "sg-1"), discovered(vpc, "karpenter.sh/discovery", eksName)), launchers},
			row{a + ": untagged security group (the VPC's default)", req(action, ec2ARN("security-group", "sg-2"), discovered(vpc)), noRole},
			row{a + ": tagged security group in a foreign VPC", req(action, ec2ARN("security-group", "sg-3"), discovered("vpc-0other", "karpenter.sh/discovery", eksName)), noRole},
			row{a + ": Amazon image", req(action, "arn:aws:ec2:us-east-1::image/ami-1", kv("ec2:Owner", "amazon")), launchers},
			row{a + ": approved account's image", req(action, "arn:aws:ec2:us-east-1::image/ami-2", kv("ec2:Owner", approved)), launchers},
			row{a + ": community image", req(action, "arn:aws:ec2:us-east-1::image/ami-3", kv("ec2:Owner", community)), noRole},
			row{a + ": Marketplace image", req(action, "arn:aws:ec2:us-east-1::image/ami-4", kv("ec2:Owner", "aws-marketplace")), noRole},
			row{a + ": Amazon image's snapshot", req(action, "arn:aws:ec2:us-east-1::snapshot/snap-1", kv("ec2:Owner", "amazon")), launchers},
			row{a + ": community snapshot", req(action, "arn:aws:ec2:us-east-1::snapshot/snap-2", kv("ec2:Owner", community)), noRole},
			row{a + ": the cluster's launch template", req(action, ec2ARN("launch-template", "lt-1"), kv("aws:ResourceTag/dovetail.dev/cluster", cluster)), launchers},
			row{a + ": another cluster's launch template", req(action, ec2ARN("launch-template", "lt-2"), kv("aws:ResourceTag/dovetail.dev/cluster", "dev")), noRole},
			row{a + ": fleet tagged for the cluster", req(action, ec2ARN("fleet", "*"), created("dovetail.dev/cluster", cluster)), launchers},
			row{a + ": fleet tagged for another cluster", req(action, ec2ARN("fleet", "*"), created("dovetail.dev/cluster", "dev")), noRole},
			row{a + ": spot request tagged for the cluster", req(action, ec2ARN("spot-instances-request", "*"), created("dovetail.dev/cluster", cluster)), launchers},
			row{a + ": the account's capacity reservation", req(action, ec2ARN("capacity-reservation", "cr-1"), nil), launchers},
			row{a + ": another account's capacity reservation", req(action, "arn:aws:ec2:us-east-1:"+community+":capacity-reservation/cr-2", nil), noRole},
			row{a + ": the account's placement group", req(action, ec2ARN("placement-group", "ml-training"), nil), launchers},
			row{a + ": another account's placement group", req(action, "arn:aws:ec2:us-east-1:"+community+":placement-group/pg-2", nil), noRole},
		)
		for _, kind := range []string{"instance", "volume", "network-interface"} {
			rows = append(rows,
				row{a + ": " + kind + " with the cluster and mandatory tags", req(action, ec2ARN(kind, "*"), created(fullTags...)), launchers},
				row{a + ": " + kind + " without CostCenter", req(action, ec2ARN(kind, "*"), created(fullTags[:4]...)), noRole},
				row{a + ": " + kind + " without Environment", req(action, ec2ARN(kind, "*"), created("dovetail.dev/cluster", cluster, "CostCenter", "cc-42")), noRole},
				row{a + ": " + kind + " tagged for another cluster", req(action, ec2ARN(kind, "*"), created("dovetail.dev/cluster", "dev", "Environment", "prod", "CostCenter", "cc-42")), noRole},
				row{a + ": " + kind + " with no tag", req(action, ec2ARN(kind, "*"), nil), noRole},
			)
		}
	}
	onCreate := func(action string, tags ...string) map[string][]string {
		return with(created(tags...), "ec2:CreateAction", action)
	}
	rows = append(rows,
		row{"CreateLaunchTemplate tagged for the cluster", req("ec2:CreateLaunchTemplate", ec2ARN("launch-template", "*"), created("dovetail.dev/cluster", cluster)), launchers},
		row{"CreateLaunchTemplate tagged for another cluster", req("ec2:CreateLaunchTemplate", ec2ARN("launch-template", "*"), created("dovetail.dev/cluster", "dev")), noRole},
		row{"CreateTags on a new instance", req("ec2:CreateTags", ec2ARN("instance", "i-1"), onCreate("RunInstances", fullTags...)), launchers},
		row{"CreateTags on a fleet's new volume", req("ec2:CreateTags", ec2ARN("volume", "vol-1"), onCreate("CreateFleet", fullTags...)), launchers},
		row{"CreateTags on an existing instance", req("ec2:CreateTags", ec2ARN("instance", "i-1"), created(fullTags...)), noRole},
		row{"CreateTags on a new instance without CostCenter", req("ec2:CreateTags", ec2ARN("instance", "i-1"), onCreate("RunInstances", fullTags[:4]...)), noRole},
		row{"CreateTags on a new instance without Environment", req("ec2:CreateTags", ec2ARN("instance", "i-1"), onCreate("RunInstances", "dovetail.dev/cluster", cluster, "CostCenter", "cc")), noRole},
		row{"CreateTags on a new instance of another cluster", req("ec2:CreateTags", ec2ARN("instance", "i-1"), onCreate("RunInstances", "dovetail.dev/cluster", "dev", "Environment", "prod", "CostCenter", "cc")), noRole},
		row{"CreateTags on a new fleet", req("ec2:CreateTags", ec2ARN("fleet", "fleet-1"), onCreate("CreateFleet", "dovetail.dev/cluster", cluster)), launchers},
		row{"CreateTags on an existing launch template", req("ec2:CreateTags", ec2ARN("launch-template", "lt-1"), created("dovetail.dev/cluster", cluster)), noRole},
		row{"CreateTags on a new fleet of another cluster", req("ec2:CreateTags", ec2ARN("fleet", "fleet-1"), onCreate("CreateFleet", "dovetail.dev/cluster", "dev")), noRole},
		row{"PassRole of the node role to EC2", req("iam:PassRole", nodeRole, kv("iam:PassedToService", "ec2.amazonaws.com")), fnRoles},
		row{"PassRole of the node role to Lambda", req("iam:PassRole", nodeRole, kv("iam:PassedToService", "lambda.amazonaws.com")), noRole},
		row{"PassRole of another role", req("iam:PassRole", "arn:aws:iam::111122223333:role/admin", kv("iam:PassedToService", "ec2.amazonaws.com")), noRole},
		row{"TerminateInstances of the cluster's instance", req("ec2:TerminateInstances", ec2ARN("instance", "i-1"), kv("aws:ResourceTag/dovetail.dev/cluster", cluster)), fnRoles},
		row{"TerminateInstances of another cluster's instance", req("ec2:TerminateInstances", ec2ARN("instance", "i-2"), kv("aws:ResourceTag/dovetail.dev/cluster", "dev")), noRole},
		row{"TerminateInstances of an untagged instance", req("ec2:TerminateInstances", ec2ARN("instance", "i-3"), nil), noRole},
		row{"DeleteLaunchTemplate of the cluster's", req("ec2:DeleteLaunchTemplate", ec2ARN("launch-template", "lt-1"), kv("aws:ResourceTag/dovetail.dev/cluster", cluster)), []string{"provision"}},
		row{"DeleteLaunchTemplate of another cluster's", req("ec2:DeleteLaunchTemplate", ec2ARN("launch-template", "lt-2"), kv("aws:ResourceTag/dovetail.dev/cluster", "dev")), noRole},
		row{"GetParameter of a public EKS AMI parameter", req("ssm:GetParameter", "arn:aws:ssm:us-east-1::parameter/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id", nil), fnRoles},
		row{"GetParameter of a public Bottlerocket parameter", req("ssm:GetParameter", "arn:aws:ssm:us-east-1::parameter/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id", nil), fnRoles},
		row{"GetParameter of a public EKS Windows parameter", req("ssm:GetParameter", "arn:aws:ssm:us-east-1::parameter/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id", nil), fnRoles},
		row{"GetParameter under an approved path", req("ssm:GetParameter", "arn:aws:ssm:us-east-1:111122223333:parameter/platform/amis/al2023", nil), fnRoles},
		row{"GetParameter under the second approved path", req("ssm:GetParameter", "arn:aws:ssm:us-east-1:111122223333:parameter/team/amis/gpu", nil), fnRoles},
		row{"GetParameter beside an approved path", req("ssm:GetParameter", "arn:aws:ssm:us-east-1:111122223333:parameter/platform/amis-evil/x", nil), noRole},
		row{"GetParameter of another parameter", req("ssm:GetParameter", "arn:aws:ssm:us-east-1:111122223333:parameter/db/password", nil), noRole},
		row{"DescribeSubnets in the stack's region", req("ec2:DescribeSubnets", "*", kv("aws:RequestedRegion", region)), fnRoles},
		row{"DescribeSubnets in another region", req("ec2:DescribeSubnets", "*", kv("aws:RequestedRegion", "eu-west-1")), noRole},
		row{"DescribeCapacityReservations in the stack's region", req("ec2:DescribeCapacityReservations", "*", kv("aws:RequestedRegion", region)), []string{"lifecycle", "provision"}},
		row{"DescribeCapacityReservations in another region", req("ec2:DescribeCapacityReservations", "*", kv("aws:RequestedRegion", "eu-west-1")), noRole},
		row{"DescribePlacementGroups in the stack's region", req("ec2:DescribePlacementGroups", "*", kv("aws:RequestedRegion", region)), fnRoles},
		row{"DescribePlacementGroups in another region", req("ec2:DescribePlacementGroups", "*", kv("aws:RequestedRegion", "eu-west-1")), noRole},
		row{"DeletePlacementGroup", req("ec2:DeletePlacementGroup", ec2ARN("placement-group", "ml-training"), nil), noRole},
		row{"CancelCapacityReservation", req("ec2:CancelCapacityReservation", ec2ARN("capacity-reservation", "cr-1"), nil), noRole},
		row{"ModifyCapacityReservation", req("ec2:ModifyCapacityReservation", ec2ARN("capacity-reservation", "cr-1"), nil), noRole},
		row{"DescribeInstanceTypes in another region", req("ec2:DescribeInstanceTypes", "*", kv("aws:RequestedRegion", "eu-west-1")), noRole},
		row{"CreateInstanceProfile under the cluster's path, tagged", req("iam:CreateInstanceProfile", "arn:aws:iam::111122223333:instance-profile/dovetail/us-east-1/prod/uid/p", created("dovetail.dev/cluster", cluster)), []string{"lifecycle"}},
		row{"CreateInstanceProfile under the cluster's path, untagged", req("iam:CreateInstanceProfile", "arn:aws:iam::111122223333:instance-profile/dovetail/us-east-1/prod/uid/p", nil), noRole},
		row{"CreateInstanceProfile elsewhere", req("iam:CreateInstanceProfile", "arn:aws:iam::111122223333:instance-profile/admin", created("dovetail.dev/cluster", cluster)), noRole},
		row{"AddRoleToInstanceProfile on the cluster's profile", req("iam:AddRoleToInstanceProfile", "arn:aws:iam::111122223333:instance-profile/dovetail/us-east-1/prod/uid/p", kv("aws:ResourceTag/dovetail.dev/cluster", cluster)), []string{"lifecycle"}},
		row{"AddRoleToInstanceProfile on an untagged profile", req("iam:AddRoleToInstanceProfile", "arn:aws:iam::111122223333:instance-profile/dovetail/us-east-1/prod/uid/p", nil), noRole},
		row{"ListInstanceProfileTags of the cluster's profile (release reads the cluster tag)", req("iam:ListInstanceProfileTags", "arn:aws:iam::111122223333:instance-profile/dovetail/us-east-1/prod/uid/p", nil), []string{"lifecycle"}},
		row{"ListInstanceProfiles", req("iam:ListInstanceProfiles", "arn:aws:iam::111122223333:instance-profile/dovetail/us-east-1/prod/uid/", nil), []string{"lifecycle"}},
		row{"UntagInstanceProfile on the cluster's profile", req("iam:UntagInstanceProfile", "arn:aws:iam::111122223333:instance-profile/dovetail/us-east-1/prod/uid/p", kv("aws:ResourceTag/dovetail.dev/cluster", cluster)), noRole},
		row{"CreateRole", req("iam:CreateRole", "arn:aws:iam::111122223333:role/x", nil), noRole},
		row{"PutRolePolicy on a Dovetail role", req("iam:PutRolePolicy", "arn:aws:iam::111122223333:role/dovetail-prod-provision", nil), noRole},
		row{"AttachRolePolicy on the node role", req("iam:AttachRolePolicy", nodeRole, nil), noRole},
		row{"SendMessage of events to the provision queue", req("sqs:SendMessage", "arn:aws:sqs:us-east-1:111122223333:dovetail-prod-events.fifo", nil), []string{"agent"}},
		row{"SendMessage of commands", req("sqs:SendMessage", "arn:aws:sqs:us-east-1:111122223333:dovetail-prod-commands.fifo", nil), fnRoles},
	)
	// Trust: Lambda may assume a function's role only for that function, in this account; EKS
	// Pod Identity the agent's only for this cluster.
	lambda := &iampolicy.Principal{Type: "Service", ID: "lambda.amazonaws.com"}
	for _, fn := range fnRoles {
		fnARN := "arn:aws:lambda:us-east-1:111122223333:function:" + roleName(fn)
		rows = append(rows,
			row{"trust: Lambda for " + fn, iampolicy.Request{Action: "sts:AssumeRole", Principal: lambda, Context: kv("aws:SourceAccount", account, "aws:SourceArn", fnARN)}, []string{fn}},
			row{"trust: Lambda for " + fn + " of another account", iampolicy.Request{Action: "sts:AssumeRole", Principal: lambda,
				Context: kv("aws:SourceAccount", community, "aws:SourceArn", strings.Replace(fnARN, account, community, 1))}, noRole},
			row{"trust: Lambda for " + fn + " claiming this account", iampolicy.Request{Action: "sts:AssumeRole", Principal: lambda,
				Context: kv("aws:SourceAccount", account, "aws:SourceArn", strings.Replace(fnARN, account, community, 1))}, noRole},
		)
	}
	pods := &iampolicy.Principal{Type: "Service", ID: "pods.eks.amazonaws.com"}
	eksARN := "arn:aws:eks:us-east-1:111122223333:cluster/" + eksName
	rows = append(rows,
		row{"trust: Lambda without a source", iampolicy.Request{Action: "sts:AssumeRole", Principal: lambda}, noRole},
		row{"trust: EC2", iampolicy.Request{Action: "sts:AssumeRole", Principal: &iampolicy.Principal{Type: "Service", ID: "ec2.amazonaws.com"}, Context: kv("aws:SourceAccount", account)}, noRole},
		row{"trust: Pod Identity of the cluster", iampolicy.Request{Action: "sts:AssumeRole", Principal: pods, Context: kv("aws:SourceAccount", account, "aws:SourceArn", eksARN)}, []string{"agent"}},
		row{"trust: Pod Identity tags the session", iampolicy.Request{Action: "sts:TagSession", Principal: pods, Context: kv("aws:SourceAccount", account, "aws:SourceArn", eksARN)}, []string{"agent"}},
		row{"trust: Pod Identity of another cluster", iampolicy.Request{Action: "sts:AssumeRole", Principal: pods, Context: kv("aws:SourceAccount", account, "aws:SourceArn", eksARN+"-other")}, noRole},
		row{"trust: Pod Identity of another account", iampolicy.Request{Action: "sts:AssumeRole", Principal: pods, Context: kv("aws:SourceAccount", community, "aws:SourceArn", strings.Replace(eksARN, account, community, 1))}, noRole},
	)
	return rows
}

// defaultTable is decided against the stacks with no governance parameter set.
func defaultTable() []row {
	return []row{
		{"instance with only the cluster tag (no mandatory tags)", req("ec2:RunInstances", ec2ARN("instance", "*"), created("dovetail.dev/cluster", cluster)), launchers},
		{"tagged subnet in any VPC (no VpcId)", req("ec2:RunInstances", ec2ARN("subnet", "subnet-1"), discovered("vpc-0any", "karpenter.sh/discovery", eksName)), launchers},
		{"untagged subnet", req("ec2:RunInstances", ec2ARN("subnet", "subnet-1"), discovered("vpc-0any")), noRole},
		{"Amazon image", req("ec2:RunInstances", "arn:aws:ec2:us-east-1::image/ami-1", kv("ec2:Owner", "amazon")), launchers},
		{"an account's image (none approved)", req("ec2:RunInstances", "arn:aws:ec2:us-east-1::image/ami-2", kv("ec2:Owner", approved)), noRole},
		{"own account's image (not approved unless listed)", req("ec2:RunInstances", "arn:aws:ec2:us-east-1::image/ami-3", kv("ec2:Owner", account)), noRole},
		{"custom parameter (no approved path)", req("ssm:GetParameter", "arn:aws:ssm:us-east-1:111122223333:parameter/platform/amis/x", nil), noRole},
		{"public EKS parameter", req("ssm:GetParameter", "arn:aws:ssm:us-east-1::parameter/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id", nil), fnRoles},
		{"a KMS key (none configured: SSE-SQS and SSE-S3)", req("kms:Decrypt", kmsKey, kv("kms:ViaService", "sqs.us-east-1.amazonaws.com")), noRole},
	}
}

// kmsTable: with a customer managed key every role (each sends or receives on a queue and
// reads or writes claim checks) may use it through SQS and S3, for nothing else and no other key.
func kmsTable() []row {
	via := func(service string) map[string][]string {
		return kv("kms:ViaService", service+".us-east-1.amazonaws.com")
	}
	other := "arn:aws:kms:us-east-1:111122223333:key/ffffffff-0000-0000-0000-000000000000"
	return []row{
		{"Decrypt through SQS (receive)", req("kms:Decrypt", kmsKey, via("sqs")), everyRole},
		{"GenerateDataKey through SQS (send)", req("kms:GenerateDataKey", kmsKey, via("sqs")), everyRole},
		{"GenerateDataKey through S3 (PutObject)", req("kms:GenerateDataKey", kmsKey, via("s3")), everyRole},
		{"Decrypt called directly", req("kms:Decrypt", kmsKey, nil), noRole},
		{"Decrypt through EC2", req("kms:Decrypt", kmsKey, via("ec2")), noRole},
		{"Decrypt of another key through SQS", req("kms:Decrypt", other, via("sqs")), noRole},
		{"Encrypt through SQS", req("kms:Encrypt", kmsKey, via("sqs")), noRole},
	}
}

func customKeyTable() []row {
	return []row{
		{"subnet with the configured discovery tag", req("ec2:RunInstances", ec2ARN("subnet", "s"), discovered("vpc-1", "example.com/nodes", "team-a")), launchers},
		{"subnet with Karpenter's tag only", req("ec2:RunInstances", ec2ARN("subnet", "s"), discovered("vpc-1", "karpenter.sh/discovery", eksName)), noRole},
		{"subnet with the key and another value", req("ec2:RunInstances", ec2ARN("subnet", "s"), discovered("vpc-1", "example.com/nodes", cluster)), noRole},
	}
}

var everyRole = append(slices.Clone(fnRoles), "agent")

// decide returns the failures of a table against one stack's roles.
func decide(roles map[string]Role, rows []row) []string {
	var bad []string
	for _, r := range rows {
		for _, short := range everyRole {
			role, ok := roles[roleName(short)]
			if !ok {
				bad = append(bad, "no role "+roleName(short))
				continue
			}
			policies := role.Policies
			if r.req.Principal != nil {
				policies = []iampolicy.Policy{role.Trust}
			}
			d, err := iampolicy.Evaluate(r.req, policies...)
			want := slices.Contains(r.allow, short)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s, %s: %v", r.name, short, err))
			} else if d.Allowed != want {
				bad = append(bad, fmt.Sprintf("%s: %s allowed=%v, want %v (matched %v)", r.name, short, d.Allowed, want, d.Matched))
			}
		}
	}
	return bad
}

func TestAllowDenyTable(t *testing.T) {
	for _, c := range []struct {
		name string
		g    governance
		rows []row
	}{{"full governance", full, fullTable()}, {"defaults", byDefault, defaultTable()}, {"custom discovery tag", customKey, customKeyTable()},
		{"customer managed key", withKMS, kmsTable()}} {
		for src, roles := range bothStacks(t, c.g) {
			for _, f := range decide(roles, c.rows) {
				t.Errorf("%s, %s: %s", src, c.name, f)
			}
			t.Logf("%s, %s: %d requests × %d roles decided", src, c.name, len(c.rows), len(everyRole))
		}
	}
}

// Both stacks grant exactly the same thing, role by role, in every configuration.
func TestSAMAndTerraformGrantTheSame(t *testing.T) {
	for _, g := range everyShape {
		stacks := bothStacks(t, g)
		sam, tf := stacks["SAM"], stacks["Terraform"]
		if len(sam) != len(tf) {
			t.Errorf("%+v: SAM has %d roles, Terraform %d", g, len(sam), len(tf))
		}
		for name, r := range sam {
			other, ok := tf[name]
			if !ok {
				t.Errorf("%+v: role %s only in SAM", g, name)
				continue
			}
			if a, b := canonical(r), canonical(other); a != b {
				t.Errorf("%+v: role %s differs:\n SAM       %s\n Terraform %s", g, name, a, b)
			}
		}
	}
}

// canonical is a role's trust policy and the set of its statements (sorted, lists sorted),
// whichever policy holds them.
func canonical(r Role) string {
	var stmts []string
	for _, p := range r.Policies {
		for _, s := range p.Statement {
			b, _ := json.Marshal(s.Normalized())
			stmts = append(stmts, string(b))
		}
	}
	sort.Strings(stmts)
	trust, _ := json.Marshal(r.Trust)
	return string(trust) + "\n" + strings.Join(stmts, "\n")
}

// noResourceLevelActions are the only actions granted on Resource "*": read-only calls for which
// AWS supports no resource-level permission (Service Authorization Reference, "Actions,
// resources, and condition keys for Amazon EC2": the Describe* rows list no resource type; "for
// AWS Price List": GetProducts).
var noResourceLevelActions = regexp.MustCompile(`^(ec2:Describe[A-Za-z]+|pricing:GetProducts)$`)

var namedAction = regexp.MustCompile(`^[a-z0-9-]+:[A-Za-z0-9]+$`)

// instanceProfileWrites are the only IAM writes any role holds (the lifecycle role's, for
// EC2NodeClass spec.role), besides iam:PassRole of the node role.
var instanceProfileWrites = []string{"iam:CreateInstanceProfile", "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile",
	"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"}

// leastPrivilege lists what breaks the rules every role follows.
func leastPrivilege(roles map[string]Role) []string {
	var bad []string
	for _, short := range everyRole {
		r := roles[roleName(short)]
		for _, p := range r.Policies {
			for _, s := range p.Statement {
				where := r.Name + " " + s.Sid
				if s.Effect != "Allow" || len(s.NotAction) > 0 || len(s.NotResource) > 0 {
					bad = append(bad, where+": only Allow statements with Action and Resource")
				}
				for _, a := range s.Action {
					if !namedAction.MatchString(a) {
						bad = append(bad, where+": action "+a+" is not one named action")
					}
					if short == "agent" && (strings.HasPrefix(a, "ec2:") || strings.HasPrefix(a, "iam:")) {
						bad = append(bad, where+": the agent holds "+a)
					}
					if strings.HasPrefix(a, "iam:") && !strings.HasPrefix(a, "iam:Get") && !strings.HasPrefix(a, "iam:List") && a != "iam:PassRole" &&
						(short != "lifecycle" || !slices.Contains(instanceProfileWrites, a)) {
						bad = append(bad, where+": IAM write "+a+" beyond the lifecycle role's instance-profile statements")
					}
					if slices.Contains(instanceProfileWrites, a) && !slices.Equal(s.Resource, []string{"arn:aws:iam::111122223333:instance-profile/dovetail/us-east-1/prod/*"}) {
						bad = append(bad, where+": "+a+" beyond the cluster's instance-profile path")
					}
					if a == "iam:PassRole" && !slices.Equal(s.Resource, []string{nodeRole}) {
						bad = append(bad, where+": iam:PassRole of "+strings.Join(s.Resource, ",")+", want only the node role")
					}
				}
				for _, res := range s.Resource {
					if res == "*" {
						for _, a := range s.Action {
							if !noResourceLevelActions.MatchString(a) {
								bad = append(bad, where+": "+a+` on Resource "*"`)
							}
						}
					} else if strings.Contains(res, ":*:") || strings.HasPrefix(res, "arn:*") || strings.Contains(res, "::*:") {
						bad = append(bad, where+": resource "+res+" wildcards a partition, region or account")
					}
				}
			}
		}
		bad = append(bad, trustRules(short, r.Trust)...)
	}
	return bad
}

// trustRules: every trust statement names one service and is bound to this account and to the
// one function (or cluster) that may assume the role.
func trustRules(short string, trust iampolicy.Policy) []string {
	var bad []string
	for _, s := range trust.Statement {
		src := s.Condition["ArnLike"]["aws:SourceArn"]
		if short == "agent" {
			src = s.Condition["ArnEquals"]["aws:SourceArn"]
		}
		want := "arn:aws:lambda:us-east-1:111122223333:function:" + roleName(short)
		if short == "agent" {
			want = "arn:aws:eks:us-east-1:111122223333:cluster/" + eksName
		}
		if !slices.Equal(src, []string{want}) || !slices.Equal(s.Condition["StringEquals"]["aws:SourceAccount"], []string{account}) {
			bad = append(bad, fmt.Sprintf("%s trust: aws:SourceArn %v and aws:SourceAccount %v, want %s in %s", short, src, s.Condition["StringEquals"]["aws:SourceAccount"], want, account))
		}
		wantActions := []string{"sts:AssumeRole"}
		if short == "agent" {
			wantActions = []string{"sts:AssumeRole", "sts:TagSession"} // EKS Pod Identity tags the session
		}
		if !slices.Equal(s.Normalized().Action, wantActions) || len(s.NotAction) > 0 {
			bad = append(bad, fmt.Sprintf("%s trust: actions %v, want %v", short, s.Action, wantActions))
		}
		if len(s.Principal) != 1 || len(s.Principal["Service"]) != 1 {
			bad = append(bad, fmt.Sprintf("%s trust: principal %v, want one service", short, s.Principal))
		}
	}
	return bad
}

func TestLeastPrivilege(t *testing.T) {
	for _, g := range everyShape {
		for src, roles := range bothStacks(t, g) {
			for _, f := range leastPrivilege(roles) {
				t.Errorf("%s %+v: %s", src, g, f)
			}
		}
	}
}

// violations is everything the tests refuse about a stack's roles under `full`.
func violations(roles map[string]Role) []string {
	return append(leastPrivilege(roles), decide(roles, fullTable())...)
}

// Any one-step widening of any statement of either stack fails a test: dropping one condition
// key, one condition operator's keys all at once, putting Resource "*", or wildcarding an
// action. The mutations are made on the resolved roles of both stacks (so the JSON-string policy
// of the SAM template and Terraform's dynamic blocks are covered as written), and on the source
// text of both files for the widenings a hand edit would make.
func TestWideningFails(t *testing.T) {
	for src, roles := range bothStacks(t, full) {
		if v := violations(roles); len(v) > 0 {
			t.Fatalf("%s: the unmutated stack already fails: %v", src, v)
		}
		n := 0
		for _, m := range mutations(roles) {
			n++
			if len(violations(m.roles)) == 0 {
				t.Errorf("%s: widening %s passes every test", src, m.what)
			}
		}
		t.Logf("%s: %d widenings, each caught", src, n)
	}
}

type mutant struct {
	what  string
	roles map[string]Role
}

func cloneRoles(roles map[string]Role) map[string]Role {
	b, _ := json.Marshal(roles)
	var out map[string]Role
	_ = json.Unmarshal(b, &out)
	return out
}

// mutations widens each statement of each role (trust policies included) one way at a time.
func mutations(roles map[string]Role) []mutant {
	var out []mutant
	names := make([]string, 0, len(roles))
	for n := range roles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		docs := append([]iampolicy.Policy{roles[name].Trust}, roles[name].Policies...)
		for pi, doc := range docs {
			for si, s := range doc.Statement {
				at := func(what string, change func(*iampolicy.Statement)) {
					m := cloneRoles(roles)
					r := m[name]
					if pi == 0 {
						change(&r.Trust.Statement[si])
					} else {
						change(&r.Policies[pi-1].Statement[si])
					}
					m[name] = r
					out = append(out, mutant{fmt.Sprintf("%s %s (%s): %s", name, s.Sid, map[bool]string{true: "trust", false: "policy"}[pi == 0], what), m})
				}
				for op, keys := range s.Condition {
					for k := range keys {
						at("drop "+op+" "+k, func(st *iampolicy.Statement) { delete(st.Condition[op], k) })
					}
					at("drop "+op, func(st *iampolicy.Statement) { delete(st.Condition, op) })
				}
				if len(s.Resource) > 0 && !slices.Equal(s.Resource, []string{"*"}) {
					at(`Resource "*"`, func(st *iampolicy.Statement) { st.Resource = []string{"*"} })
				}
				if len(s.Action) > 0 {
					svc, _, _ := strings.Cut(s.Action[0], ":")
					at(svc+":*", func(st *iampolicy.Statement) { st.Action[0] = svc + ":*" })
				}
				if pi == 0 {
					at(`Principal "*"`, func(st *iampolicy.Statement) { st.Principal = map[string][]string{"*": {"*"}} })
				}
			}
		}
	}
	return out
}

// One-line widenings a hand edit of the files would make, on the files' own text.
func TestTextWideningFails(t *testing.T) {
	sam, tf := string(readFile(t, "template.yaml")), readTFModule(t)
	for _, c := range []struct{ file, old, new string }{
		{"template.yaml", `"StringEquals": {"ec2:ResourceTag/${DiscoveryTagKey}": "${DiscoveryValue}"}${InVpc}`, `"StringLike": {"ec2:ResourceTag/${DiscoveryTagKey}": "*"}${InVpc}`},
		{"template.yaml", `"StringEquals": {"ec2:ResourceTag/${DiscoveryTagKey}": "${DiscoveryValue}"}${InVpc}`, `"StringEquals": {"ec2:ResourceTag/${DiscoveryTagKey}": "${DiscoveryValue}"}`},
		{"template.yaml", `"Condition": {"StringEquals": {"ec2:Owner": ["amazon"${MoreImageOwners}]}}`, `"Condition": {"StringLike": {"ec2:Owner": ["*"]}}`},
		{"template.yaml", `"StringEquals": {"aws:RequestTag/dovetail.dev/cluster": "${ClusterName}"}${MandatoryTagsPresent}`, `"StringEquals": {"aws:RequestTag/dovetail.dev/cluster": "${ClusterName}"}`},
		{"template.yaml", `"Resource": ["${NodeRoleArn}"],`, `"Resource": ["arn:${AWS::Partition}:iam::${AWS::AccountId}:role/*"],`},
		{"template.yaml", `function:dovetail-${ClusterName}-provision"`, `function:dovetail-${ClusterName}-*"`},
		{"template.yaml", `"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${Path}/*"
                      - Path:
                          Fn::Select: [0, Ref: AMIParameterPaths]`, `"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${Path}*"
                      - Path:
                          Fn::Select: [0, Ref: AMIParameterPaths]`},
		{"terraform/iam.tf", `variable = "ec2:ResourceTag/${var.discovery_tag_key}"`, `variable = "ec2:ResourceTag/${var.discovery_tag_key}/*"`},
		{"terraform/iam.tf", `values   = concat(["amazon"], var.image_owners)`, `values   = concat(["amazon", "aws-marketplace"], var.image_owners)`},
		{"terraform/iam.tf", `for_each = var.mandatory_tags`, `for_each = slice(var.mandatory_tags, 0, 1)`},
		{"terraform/iam.tf", `for_each = var.vpc_id == "" ? [] : [var.vpc_id]`, `for_each = []`},
		{"terraform/iam.tf", `:function:dovetail-${var.cluster_name}-${each.key}"`, `:function:dovetail-${var.cluster_name}-*"`},
		{"terraform/iam.tf", `parameter${p}/*"]`, `parameter${p}*"]`},
		{"terraform/agent.tf", `cluster/${var.eks_cluster_name}",`, `cluster/*",`},
	} {
		var src string
		if c.file == "template.yaml" {
			src = sam
		} else {
			src = string(tf[filepath.FromSlash(c.file)])
		}
		if n := strings.Count(src, c.old); n == 0 {
			t.Errorf("%s: %q not found", c.file, c.old)
			continue
		}
		mutated := strings.Replace(src, c.old, c.new, 1)
		var roles map[string]Role
		var err error
		if c.file == "template.yaml" {
			st := stack
			st.Params = full.sam()
			roles, err = SAMRoles([]byte(mutated), st)
		} else {
			files := maps.Clone(tf)
			files[filepath.FromSlash(c.file)] = []byte(mutated)
			roles, err = terraformRoles(files, stack, full.tf())
		}
		if err != nil {
			t.Errorf("%s with %q: %v", c.file, c.new, err)
			continue
		}
		if len(violations(roles)) == 0 {
			t.Errorf("%s: replacing %q with %q passes every test", c.file, c.old, c.new)
		}
	}
}
