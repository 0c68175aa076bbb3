package aws_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/userdata"
)

// anyOffering is the type's first on-demand offering in the catalog.
func (e *env) anyOffering(t *testing.T, typ string) cloud.OfferingRef {
	t.Helper()
	for _, o := range e.cat.Get(typ).Offerings {
		if o.CapacityType == apisv1.CapacityTypeOnDemand {
			return e.offering(t, typ, o.Zone, o.CapacityType)
		}
	}
	t.Fatalf("catalog has no on-demand %s", typ)
	return cloud.OfferingRef{}
}

func efaClaim(n string) *apisv1.NodeClaim {
	return &apisv1.NodeClaim{Spec: apisv1.NodeClaimSpec{Resources: apisv1.ResourceRequirements{Requests: corev1.ResourceList{
		"vpc.amazonaws.com/efa": resource.MustParse(n), corev1.ResourceCPU: resource.MustParse("1")}}}}
}

// A NodeClaim requesting vpc.amazonaws.com/efa launches with one EFA interface per network card
// the type supports, through the SDK against the fake EC2: p4d.24xlarge has 4 network cards
// and MaximumEfaInterfaces 4 (catalog network_cards and Karpenter's efa table), so the
// template holds 4 interfaces of type efa on cards 0..3, device index 0 on card 0 and 1 on the
// others (Karpenter's generateNetworkInterfaces), each with the NodeClass's security group and
// none at instance level; EC2 launches it.
func TestEFALaunchTemplateThroughTheSDK(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	req := request("tok-efa", nodeClass("al2023@latest"), e.anyOffering(t, "p4d.24xlarge"))
	req.NodeClaim = efaClaim("1")
	if _, err := e.p.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	d := template(t, e, fleetInputs(e)[0])
	if len(d.SecurityGroupIds) != 0 {
		t.Errorf("instance-level security groups %v beside network interfaces", d.SecurityGroupIds)
	}
	if len(d.NetworkInterfaces) != 4 {
		t.Fatalf("%d network interfaces, want 4: %+v", len(d.NetworkInterfaces), d.NetworkInterfaces)
	}
	for i, ni := range d.NetworkInterfaces {
		wantDev := int32(1)
		if i == 0 {
			wantDev = 0
		}
		if aws.ToInt32(ni.NetworkCardIndex) != int32(i) || aws.ToInt32(ni.DeviceIndex) != wantDev || aws.ToString(ni.InterfaceType) != "efa" ||
			len(ni.Groups) != 1 || !strings.HasPrefix(ni.Groups[0], "sg-") {
			t.Errorf("interface %d: card %d device %d type %q groups %v; want card %d device %d efa with the NodeClass's group",
				i, aws.ToInt32(ni.NetworkCardIndex), aws.ToInt32(ni.DeviceIndex), aws.ToString(ni.InterfaceType), ni.Groups, i, wantDev)
		}
	}
}

// Without an EFA request the same type launches with the instance-level security groups and no
// network interfaces (Karpenter's efaCount is 0).
func TestNoEFAWithoutRequest(t *testing.T) {
	e := setup(t)
	req := request("tok-noefa", nodeClass("al2023@latest"), e.anyOffering(t, "p4d.24xlarge"))
	req.NodeClaim = &apisv1.NodeClaim{}
	if _, err := e.p.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	d := template(t, e, fleetInputs(e)[0])
	if len(d.NetworkInterfaces) != 0 || len(d.SecurityGroupIds) != 1 {
		t.Fatalf("interfaces %+v groups %v, want none and the one group", d.NetworkInterfaces, d.SecurityGroupIds)
	}
}

// The fake EC2 refuses what EC2 refuses: an EFA interface on a type without EFA (m5.large), a
// card index past the type's cards, and instance-level groups beside interfaces, each as a fleet
// error for the override.
func TestFakeEC2RefusesBadNetworkInterfaces(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	efa := func(card, dev int32) ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
		return ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{NetworkCardIndex: aws.Int32(card), DeviceIndex: aws.Int32(dev),
			InterfaceType: aws.String("efa"), Groups: []string{"sg-1"}}
	}
	img, ok := e.srv.Parameter("/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/x86_64/standard/recommended/image_id")
	if !ok {
		t.Fatal("no AL2023 image parameter")
	}
	for name, tc := range map[string]struct {
		typ  string
		data ec2types.RequestLaunchTemplateData
		code string
	}{
		"efa on m5.large":        {"m5.large", ec2types.RequestLaunchTemplateData{NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{efa(0, 0)}}, "InvalidParameterCombination"},
		"card 1 on c5n.18xlarge": {"c5n.18xlarge", ec2types.RequestLaunchTemplateData{NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{efa(0, 0), efa(1, 1)}}, "InvalidParameterValue"},
		"groups beside interfaces": {"c5n.18xlarge", ec2types.RequestLaunchTemplateData{SecurityGroupIds: []string{"sg-1"},
			NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{efa(0, 0)}}, "InvalidParameterCombination"},
	} {
		name, tc := name, tc
		t.Run(name, func(t *testing.T) {
			d := tc.data
			d.ImageId = aws.String(img)
			ud, err := userdata.Render(userdata.Spec{Family: apisv1.AMIFamilyAL2023, ClusterName: "c", APIServerEndpoint: "https://api.example", CertificateAuthority: "Q0E="})
			if err != nil {
				t.Fatal(err)
			}
			d.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(ud)))
			lt := "efa-" + strings.ReplaceAll(name, " ", "-")
			if _, err := e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(lt), LaunchTemplateData: &d}); err != nil {
				t.Fatal(err)
			}
			o := e.anyOffering(t, tc.typ)
			out, err := e.ec2.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, ClientToken: aws.String(lt),
				TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
					DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
				LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
					LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
					Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceType(tc.typ), AvailabilityZone: aws.String(o.Zone)}}}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != tc.code {
				t.Fatalf("instances %+v errors %+v, want one %s", out.Instances, out.Errors, tc.code)
			}
		})
	}
}
