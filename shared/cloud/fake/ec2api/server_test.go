package ec2api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
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

// A terminated instance is shown for about an hour, then its ID is unknown: "Recently
// terminated instances might appear in the returned results. This interval is usually less than
// one hour" (EC2 API reference, DescribeInstances). The fake showed it for ever.
func TestTerminatedInstancesDisappearAfterAnHour(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	fc := fake.New(fake.Options{Catalog: catalog.MustAWS(), Cluster: "c1", Clock: clk, TerminateDelay: time.Minute})
	srv, err := ec2api.New(ec2api.Options{Cloud: fc})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", "")})
	ctx := context.Background()
	const id = "i-0123456789abcdef0"
	if err := fc.AddInstance(cloud.Instance{ID: id, Zone: "us-east-1a", InstanceType: "m5.large", Tags: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	state := func() (string, error) {
		out, err := e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return "", err
		}
		return string(out.Reservations[0].Instances[0].State.Name), nil
	}
	clk.Step(time.Minute) // TerminateDelay: terminated now
	if err := fc.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(59 * time.Minute)
	if got, err := state(); got != "terminated" || err != nil {
		t.Errorf("59 minutes after termination: %q %v, want still shown terminated", got, err)
	}
	clk.Step(time.Minute)
	_, err = state()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != ec2api.CodeInvalidInstanceIDNotFound {
		t.Errorf("an hour after termination: %v, want InvalidInstanceID.NotFound", err)
	}
	_, err = e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if !errors.As(err, &ae) || ae.ErrorCode() != ec2api.CodeInvalidInstanceIDNotFound {
		t.Errorf("terminating it again: %v, want InvalidInstanceID.NotFound", err)
	}
}

// DescribeInstances refuses instance IDs with MaxResults: "You cannot specify this parameter and
// the instance IDs parameter in the same request" (EC2 API reference, DescribeInstances).
func TestDescribeInstancesIDsWithMaxResults(t *testing.T) {
	e, _, _ := clients(t)
	_, err := e.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}, MaxResults: aws.Int32(5)})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != ec2api.CodeInvalidParameterCombination {
		t.Errorf("%v, want InvalidParameterCombination", err)
	}
}
