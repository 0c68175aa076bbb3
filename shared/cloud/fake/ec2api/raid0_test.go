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
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/userdata"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

// The fake kubelet reads instance-store RAID0 from the user data, as each family's boot agent
// does (nodeadm spec.instance.localStorage.strategy, bootstrap.sh --local-disks, Bottlerocket's
// apiclient ephemeral-storage init bootstrap command), and registers the i4i.xlarge Node with
// the array's size as ephemeral-storage capacity: EC2 TotalSizeInGB 937 → 937e9 bytes
// (Karpenter's ephemeralStorage: "%dG"). Without it the kubelet's directory stays on the 20Gi
// volume of the family's default block device mapping (no blockDeviceMappings in the template:
// the fake counts Karpenter's 20Gi default).
func TestKubeletReportsTheRAID0ArrayFromUserData(t *testing.T) {
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

	params := map[string]string{apisv1.AMIFamilyAL2023: ec2api.AL2023Parameter(k8s, "x86_64"),
		apisv1.AMIFamilyBottlerocket: ec2api.BottlerocketParameter(k8s, "x86_64"), apisv1.AMIFamilyAL2: ec2api.AL2Parameter(k8s, "x86_64")}
	want := map[string]int64{"": 20 << 30, apisv1.InstanceStorePolicyRAID0: 937_000_000_000}
	n := 0
	for _, family := range []string{apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket, apisv1.AMIFamilyAL2} {
		for _, policy := range []string{"", apisv1.InstanceStorePolicyRAID0} {
			name := "lt-" + family + "-" + policy
			p, err := s.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(params[family])})
			if err != nil {
				t.Fatal(err)
			}
			ud, err := userdata.Render(userdata.Spec{Family: family, ClusterName: cluster, APIServerEndpoint: "https://example.eks.amazonaws.com",
				CertificateAuthority: base64.StdEncoding.EncodeToString([]byte("ca")), InstanceStorePolicy: policy})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: p.Parameter.Value,
					UserData:           aws.String(base64.StdEncoding.EncodeToString([]byte(ud))),
					IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, ClientToken: aws.String(name),
				LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
					LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
					Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "i4i.xlarge", AvailabilityZone: aws.String("us-east-1a")}}}},
				TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
					DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
					Tags: []ec2types.Tag{{Key: aws.String(apisv1.TagCluster), Value: aws.String(cluster)}}}}}); err != nil {
				t.Fatalf("%s: CreateFleet: %v", name, err)
			}
			if err := fc.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			nodes := reg.Nodes()
			if len(nodes) != n+1 {
				t.Fatalf("%s: %d nodes registered, want %d", name, len(nodes), n+1)
			}
			got := nodes[n].Status.Capacity[corev1.ResourceEphemeralStorage]
			if got.Value() != want[policy] {
				t.Errorf("%s: ephemeral-storage capacity %s, want %d bytes", name, got.String(), want[policy])
			}
			n++
		}
	}
}
