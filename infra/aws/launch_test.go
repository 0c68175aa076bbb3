package awsinfra

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

// The stack's own provision role, enforced by the fake cloud's EC2 face: the real provider's
// launches (aws-sdk-go-v2 over the wire) pass it when they are governed, and a launch into an
// untagged subnet, of a community image or without a mandatory tag is refused with EC2's own
// error, UnauthorizedOperation with an encoded authorization message, as a real account answers.

const (
	launchCluster = "test"
	launchRole    = "KarpenterNodeRole-test"
	launchProfile = "KarpenterNodeInstanceProfile-test"
	provisionKey  = "AKIDPROVISIONEXAMPLE"
)

type launchEnv struct {
	srv   *ec2api.Server
	cloud *fake.Cloud
	ec2   *ec2.Client
	cat   *catalog.Catalog
}

// launchSetup serves the fake's EC2 face to the SAM stack's provision role, configured with g.
func launchSetup(t *testing.T, g governance) *launchEnv {
	t.Helper()
	params := g.sam()
	params["ClusterName"], params["EksClusterName"] = launchCluster, launchCluster
	params["NodeRoleArn"] = "arn:aws:iam::" + ec2api.DefaultAccountID + ":role/" + launchRole
	roles, err := Roles(Stack{Partition: "aws", Region: "us-east-1", Account: ec2api.DefaultAccountID, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	role := roles["dovetail-"+launchCluster+"-provision"]
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: launchCluster})
	srv, err := ec2api.New(ec2api.Options{Cloud: fc, KubernetesVersion: "1.37", Roles: []string{launchRole},
		Identities: map[string]ec2api.Identity{provisionKey: {RoleARN: "arn:aws:iam::" + ec2api.DefaultAccountID + ":role/" + role.Name, Policies: role.Policies}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.AddInstanceProfile(launchProfile, launchRole)
	url, stop, err := srv.ListenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cfg, err := dvaws.NewConfig(context.Background(), dvaws.ConfigOptions{Endpoint: url, Region: "us-east-1", MaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(provisionKey, "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := dvaws.Clients(cfg)
	return &launchEnv{srv: srv, cloud: fc, ec2: e, cat: cat}
}

func (l *launchEnv) provider(t *testing.T, g dvaws.Governance) *dvaws.Provider {
	t.Helper()
	cfg, err := dvaws.NewConfig(context.Background(), dvaws.ConfigOptions{Endpoint: l.endpoint(), Region: "us-east-1", MaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(provisionKey, "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	e, s := dvaws.Clients(cfg)
	p, err := dvaws.New(dvaws.Options{Cluster: launchCluster, ClusterEndpoint: "https://example.eks", ClusterCA: "Q0E=", KubernetesVersion: "1.37",
		Catalog: l.cat, EC2: e, SSM: s, Region: "us-east-1", Governance: g})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (l *launchEnv) endpoint() string {
	return *l.ec2.Options().BaseEndpoint
}

func governedClass(tags map[string]string) *apisv1.EC2NodeClass {
	return &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}, Spec: apisv1.EC2NodeClassSpec{
		AMISelectorTerms:           []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": launchCluster}}},
		SecurityGroupSelectorTerms: []apisv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": launchCluster}}},
		InstanceProfile:            aws.String(launchProfile), Tags: tags,
	}}
}

func (l *launchEnv) launch(p *dvaws.Provider, nc *apisv1.EC2NodeClass, token string, tags map[string]string) (*cloud.Instance, error) {
	all := map[string]string{apisv1.TagCluster: launchCluster, apisv1.TagNodePool: "default", apisv1.TagNodeClaim: "default-" + token, "Name": "default-" + token}
	for k, v := range tags {
		all[k] = v
	}
	var offs []cloud.OfferingRef
	for _, o := range l.cat.Get("m5.large").Offerings {
		if o.Zone == "us-east-1a" && o.CapacityType == apisv1.CapacityTypeOnDemand {
			offs = append(offs, cloud.OfferingRef{InstanceType: "m5.large", Zone: o.Zone, CapacityType: o.CapacityType, PricePerHour: o.PricePerHour})
		}
	}
	return p.Create(context.Background(), cloud.LaunchRequest{ClientToken: "tok-" + token, Cluster: launchCluster, NodeClass: apisv1.NodeClassOf(nc),
		Offerings: offs, Labels: map[string]string{apisv1.LabelNodePool: "default"}, Tags: all,
		Taints: []corev1.Taint{{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}})
}

// resolved resolves a class through the provider (the provision role may Describe and read the
// public AMI parameters) and requires it Ready.
func resolved(t *testing.T, p *dvaws.Provider, nc *apisv1.EC2NodeClass) *apisv1.EC2NodeClass {
	t.Helper()
	got, err := p.ResolveNodeClass(context.Background(), apisv1.NodeClassOf(nc))
	if err != nil {
		t.Fatal(err)
	}
	if msg := got.NotReady(); msg != "" {
		t.Fatal(msg)
	}
	return got.EC2
}

// refusedBy asserts err is EC2's UnauthorizedOperation for action on a resource of that kind,
// with the encoded message naming them.
func refusedBy(t *testing.T, err error, action, resource string) map[string]any {
	t.Helper()
	if err == nil {
		t.Fatal("the launch succeeded, want UnauthorizedOperation")
	}
	msg := err.Error()
	want := "UnauthorizedOperation: You are not authorized to perform this operation. User: arn:aws:sts::123456789012:assumed-role/dovetail-test-provision/dovetail-test-provision is not authorized to perform: " +
		action + " on resource: " + resource
	if !strings.Contains(msg, want) || !strings.Contains(msg, "because no identity-based policy allows the "+action+" action. Encoded authorization failure message: ") {
		t.Fatalf("error %q\nwant it to contain %q", msg, want)
	}
	decoded, err := ec2api.DecodeAuthorizationMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := decoded["context"].(map[string]any)
	if decoded["allowed"] != false || ctx["action"] != action || ctx["resource"] != resource {
		t.Errorf("decoded message %v", decoded)
	}
	return decoded
}

func TestStackRefusesUngovernedLaunchesOnTheWire(t *testing.T) {
	l := launchSetup(t, governance{mandatory: []string{"Environment"}})
	p := l.provider(t, dvaws.Governance{MandatoryTags: []string{"Environment"}})
	env := map[string]string{"Environment": "prod"}

	// The governed launch passes the stack's policy, every check of it.
	nc := resolved(t, p, governedClass(env))
	if inst, err := l.launch(p, nc, "ok", env); err != nil || inst == nil {
		t.Fatalf("governed launch: %v", err)
	}

	// A status that lists the VPC's public subnet (no discovery tag): a stale status, a provider
	// without governance, a hand edit. IAM refuses the launch, as a real account does.
	out, err := l.ec2.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:Name"), Values: []string{ec2api.PublicSubnetName("us-east-1a")}}}})
	if err != nil || len(out.Subnets) != 1 {
		t.Fatalf("public subnet: %v %v", out, err)
	}
	public := aws.ToString(out.Subnets[0].SubnetId)
	stale := nc.DeepCopy()
	stale.Status.Subnets = []apisv1.Subnet{{ID: public, Zone: "us-east-1a"}}
	before := len(l.cloud.Records())
	_, err = l.launch(p, stale, "untagged", env)
	decoded := refusedBy(t, err, "ec2:RunInstances", "arn:aws:ec2:us-east-1:123456789012:subnet/"+public)
	conds := decoded["context"].(map[string]any)["conditions"].(map[string]any)["items"].([]any)
	var keys []string
	for _, c := range conds {
		keys = append(keys, c.(map[string]any)["key"].(string))
	}
	if !strings.Contains(strings.Join(keys, " "), "ec2:Vpc") || strings.Contains(strings.Join(keys, " "), "karpenter.sh/discovery") {
		t.Errorf("decoded condition keys %v: want the subnet's VPC and no discovery tag", keys)
	}
	if n := len(l.cloud.Records()); n != before {
		t.Errorf("%d instances launched by the refused fleet", n-before)
	}

	// A community image behind the status.
	community := l.srv.AddImage(ec2types.Image{Name: aws.String("amazon-eks-node-al2023-x86_64-standard-1.37-community"), Architecture: ec2types.ArchitectureValuesX8664,
		CreationDate: aws.String("2026-11-30T00:00:00.000Z"), OwnerId: aws.String("999988887777")})
	img := nc.DeepCopy()
	img.Status.AMIs = []apisv1.AMI{{ID: aws.ToString(community.ImageId), Requirements: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}}
	_, err = l.launch(p, img, "community", env)
	refusedBy(t, err, "ec2:RunInstances", "arn:aws:ec2:us-east-1::image/"+aws.ToString(community.ImageId))

	// Without the mandatory tag (a provider not told of it): the instance is refused.
	lax := l.provider(t, dvaws.Governance{})
	_, err = l.launch(lax, resolved(t, lax, governedClass(nil)), "untagged-instance", nil)
	refusedBy(t, err, "ec2:RunInstances", "arn:aws:ec2:us-east-1:123456789012:instance/*")

	// The provision role may not terminate what is not the cluster's, and the refusal is EC2's.
	_, err = l.ec2.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0notours"}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidInstanceID.NotFound" {
		t.Errorf("terminate of an unknown instance: %v", err)
	}
}
