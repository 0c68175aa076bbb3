package ec2api_test

import (
	"context"
	"encoding/base64"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/userdata"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

// EC2 accepts one fleet whose launch templates boot different images with different user data
// (Karpenter and Dovetail send one template per AMI, e.g. per architecture). The instance boots
// with the template of the offering the fleet chose, not the first template's: here an
// AL2023 amd64 template labelled "boot=al2023" for m5.large and a Bottlerocket arm64 template
// labelled "boot=bottlerocket" for m6g.large. m6g.large lists at 0.077 USD/h on demand and
// m5.large at 0.096 (the embedded catalog), so lowest-price takes m6g.large; with m6g.large out
// of capacity the same fleet falls to m5.large and its template. (A fake that refused such a
// fleet, as this one once did, failed drift replacements after a new arm64 AMI was published.)
func TestFleetBootsTheChosenOfferingsTemplate(t *testing.T) {
	const cluster, k8s, role, profile = "c1", "1.37", "node-role", "node-profile"
	reg := &fake.NodeRecorder{}
	fc := fake.New(fake.Options{Catalog: catalog.MustAWS(), Cluster: cluster, Registrar: reg})
	srv, err := ec2api.New(ec2api.Options{Cloud: fc, KubernetesVersion: k8s, Roles: []string{role}})
	if err != nil {
		t.Fatal(err)
	}
	srv.AddInstanceProfile(profile, role)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", "")}
	e, s := ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	ctx := context.Background()

	template := func(name, family, param, boot string) string {
		t.Helper()
		p, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(param)})
		if err != nil {
			t.Fatal(err)
		}
		ud, err := userdata.Render(userdata.Spec{Family: family, ClusterName: cluster, APIServerEndpoint: "https://example.eks.amazonaws.com",
			CertificateAuthority: base64.StdEncoding.EncodeToString([]byte("ca")), ServiceCIDR: "10.100.0.0/16",
			Labels: map[string]string{"boot": boot}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: p.Parameter.Value,
				UserData:           aws.String(base64.StdEncoding.EncodeToString([]byte(ud))),
				IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)}}}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	al2023 := template("lt-al2023-amd64", apisv1.AMIFamilyAL2023, ec2api.AL2023Parameter(k8s, "x86_64"), "al2023")
	bottlerocket := template("lt-bottlerocket-arm64", apisv1.AMIFamilyBottlerocket, ec2api.BottlerocketParameter(k8s, "arm64"), "bottlerocket")

	fleet := func(token string) string {
		t.Helper()
		cfgs := []ec2types.FleetLaunchTemplateConfigRequest{
			{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(al2023), Version: aws.String("$Latest")},
				Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", AvailabilityZone: aws.String("us-east-1a")}}},
			{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(bottlerocket), Version: aws.String("$Latest")},
				Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m6g.large", AvailabilityZone: aws.String("us-east-1a")}}},
		}
		out, err := e.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, ClientToken: aws.String(token), LaunchTemplateConfigs: cfgs,
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
				DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
				Tags: []ec2types.Tag{{Key: aws.String(apisv1.TagCluster), Value: aws.String(cluster)}}}}})
		if err != nil {
			t.Fatalf("CreateFleet %s: %v", token, err)
		}
		if len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 1 {
			t.Fatalf("CreateFleet %s: instances %+v, errors %+v", token, out.Instances, out.Errors)
		}
		got := out.Instances[0]
		if got.LaunchTemplateAndOverrides == nil || got.LaunchTemplateAndOverrides.LaunchTemplateSpecification == nil {
			t.Fatalf("CreateFleet %s: the instance names no launch template: %+v", token, got)
		}
		return string(got.InstanceType) + " " + aws.ToString(got.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateName)
	}
	bootedLabel := func(i int) string {
		t.Helper()
		if err := fc.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		nodes := reg.Nodes()
		if len(nodes) != i+1 {
			t.Fatalf("%d nodes registered, want %d", len(nodes), i+1)
		}
		return nodes[i].Labels["boot"]
	}

	if got := fleet("mixed-1"); got != "m6g.large "+bottlerocket {
		t.Fatalf("first fleet launched %q, want m6g.large from %s", got, bottlerocket)
	}
	if got := bootedLabel(0); got != "bottlerocket" {
		t.Errorf("m6g.large's node registered with boot=%q, want bottlerocket (its own template's user data)", got)
	}
	if err := fc.InjectOfferingICE(cloud.OfferingRef{InstanceType: "m6g.large", Zone: "us-east-1a", CapacityType: apisv1.CapacityTypeOnDemand},
		"InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	if got := fleet("mixed-2"); got != "m5.large "+al2023 {
		t.Fatalf("second fleet launched %q, want m5.large from %s", got, al2023)
	}
	if got := bootedLabel(1); got != "al2023" {
		t.Errorf("m5.large's node registered with boot=%q, want al2023", got)
	}
}
