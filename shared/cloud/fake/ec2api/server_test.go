package ec2api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

func clients(t *testing.T) (*ec2.Client, *ssm.Client, *ec2api.Server) {
	t.Helper()
	srv, err := ec2api.New(ec2api.Options{Cloud: fake.New(fake.Options{Catalog: catalog.MustAWS(), Cluster: "c1"})})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", "")}
	return ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg), srv
}

// Errors reach the SDK as smithy.APIError carrying EC2's (and SSM's) real codes.
func TestErrorsCarryRealCodes(t *testing.T) {
	e, s, _ := clients(t)
	ctx := context.Background()
	for name, call := range map[string]struct {
		err  error
		code string
	}{
		"unknown instance": {func() error {
			_, err := e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-1234567890abcdef0"}})
			return err
		}(), "InvalidInstanceID.NotFound"},
		"unknown template": {func() error {
			_, err := e.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"nope"}})
			return err
		}(), "InvalidLaunchTemplateName.NotFoundException"},
		"unknown subnet": {func() error {
			_, err := e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0123456789abcdef0"}})
			return err
		}(), "InvalidSubnetID.NotFound"},
		"bad filter": {func() error {
			_, err := e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("colour"), Values: []string{"x"}}}})
			return err
		}(), "InvalidParameterValue"},
		"unknown parameter": {func() error {
			_, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/nope")})
			return err
		}(), "ParameterNotFound"},
	} {
		var ae smithy.APIError
		if !errors.As(call.err, &ae) || ae.ErrorCode() != call.code {
			t.Errorf("%s: err %v, want API error %s", name, call.err, call.code)
		}
	}
	_, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/nope")})
	var nf *ssmtypes.ParameterNotFound
	if !errors.As(err, &nf) {
		t.Errorf("SSM error %T, want the modelled *types.ParameterNotFound", err)
	}
}

// The fake VPC: one subnet per catalog zone, tagged for discovery, on the fake cloud's /19 plan.
func TestFakeVPC(t *testing.T) {
	e, s, _ := clients(t)
	ctx := context.Background()
	out, err := e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"c1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The embedded catalog sells in us-east-1a..f (catalog.AWSZones).
	if len(out.Subnets) != len(catalog.AWSZones) {
		t.Fatalf("%d subnets, want %d", len(out.Subnets), len(catalog.AWSZones))
	}
	if z, c := aws.ToString(out.Subnets[1].AvailabilityZone), aws.ToString(out.Subnets[1].CidrBlock); z != "us-east-1b" || c != "10.0.32.0/19" {
		t.Errorf("second subnet %s %s, want us-east-1b 10.0.32.0/19", z, c)
	}
	p, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(ec2api.BottlerocketParameter("1.37", "arm64"))})
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := e.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(p.Parameter.Value)}})
	if err != nil || len(imgs.Images) != 1 || imgs.Images[0].Architecture != ec2types.ArchitectureValuesArm64 {
		t.Fatalf("bottlerocket arm64 image: %+v %v", imgs, err)
	}
}
