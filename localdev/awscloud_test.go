package localdev

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// The seed scenario with the real AWS provider: every launch goes through the aws-sdk-go-v2 EC2
// and SSM clients to the fake cloud's EC2 Query / SSM JSON endpoint on loopback, and the fake's
// kubelets boot from the launch templates' Bottlerocket user data (the seed EC2NodeClass uses
// bottlerocket@latest).
func TestSeedScenarioAllPodsBoundThroughAWSProvider(t *testing.T) {
	env, out := startEnv(t, Options{CloudProvider: CloudAWS})
	bound, total, err := env.count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The seed has 40 workload pods (see TestDefaultScenarioAllPodsBound).
	if bound != total || total != 40 {
		t.Fatalf("bound %d of %d workload pods, want 40 of 40\n%s", bound, total, out)
	}
	if env.Provider.Name() != "aws" || env.EC2API == nil {
		t.Fatalf("provider %s, endpoint %v: want the aws provider on the in-process endpoint", env.Provider.Name(), env.EC2API)
	}
	fleets := env.EC2API.RequestsOf("CreateFleet")
	if len(fleets) == 0 {
		t.Fatal("no CreateFleet reached the endpoint")
	}
	for _, f := range fleets {
		in := f.(*ec2.CreateFleetInput)
		if n := len(in.LaunchTemplateConfigs); n == 0 || !strings.HasPrefix(*in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName, "dovetail/dev/default/") {
			t.Fatalf("fleet without the NodeClass's launch template: %+v", in.LaunchTemplateConfigs)
		}
	}
	if len(env.EC2API.RequestsOf("AmazonSSM.GetParameter")) == 0 {
		t.Fatal("the bottlerocket@latest alias was not resolved through SSM")
	}
	checkNoOrphans(t, env)
	if !strings.Contains(out.String(), "EC2/SSM endpoint of the fake cloud at http://127.0.0.1:") {
		t.Fatalf("progress does not show the loopback endpoint:\n%s", out)
	}
}

func TestCloudOptionRefusals(t *testing.T) {
	for _, o := range []Options{{CloudProvider: "gcp"}, {AWSEndpoint: "http://127.0.0.1:1"}} {
		o.Out = &strings.Builder{}
		ctx, cancel := context.WithCancel(context.Background())
		env, err := Start(ctx, o)
		cancel()
		if err == nil {
			env.Stop()
			t.Errorf("%+v started, want a refusal", o)
		}
	}
}
