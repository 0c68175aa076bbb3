package ec2api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// client is a real SDK EC2 client for a test server.
func client(url string) *ec2.Client {
	return ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", "")})
}

// TestEncoderMatchesSDKDeserializer serves a real DescribeInstanceTypes response (the Karpenter
// fixture, recorded from the EC2 API; provenance in shared/catalog/awsrefresh/testdata/README.md)
// through the XML encoder and reads it back with the SDK's own deserializer: every field must
// survive.
func TestEncoderMatchesSDKDeserializer(t *testing.T) {
	b, err := os.ReadFile("../../../catalog/awsrefresh/testdata/describe_instance_types_karpenter_fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	var want ec2.DescribeInstanceTypesOutput
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := encodeResponse("DescribeInstanceTypes", "req-1", member{"instanceTypeSet", want.InstanceTypes})
		if err != nil {
			t.Error(err)
		}
		_, _ = w.Write(body)
	}))
	defer hs.Close()
	got, err := client(hs.URL).DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.InstanceTypes) != 17 {
		t.Fatalf("%d types", len(got.InstanceTypes))
	}
	for i := range want.InstanceTypes {
		if !reflect.DeepEqual(normalize(got.InstanceTypes[i]), normalize(want.InstanceTypes[i])) {
			g, _ := json.Marshal(got.InstanceTypes[i])
			w, _ := json.Marshal(want.InstanceTypes[i])
			t.Errorf("%s differs after the wire:\n got %s\nwant %s", want.InstanceTypes[i].InstanceType, g, w)
		}
	}
}

// normalize renders a value as JSON and back, so nil and empty lists compare equal.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return prune(out)
}

func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if p := prune(e); p == nil {
				delete(x, k)
			} else {
				x[k] = p
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
		for i := range x {
			x[i] = prune(x[i])
		}
	}
	return v
}

// TestDecoderMatchesSDKSerializer sends a fully populated CreateFleet with the SDK and decodes the
// form the SDK wrote back into the same input type.
func TestDecoderMatchesSDKSerializer(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	want := &ec2.CreateFleetInput{
		Type: types.FleetTypeInstant, ClientToken: aws.String("tok"), ValidFrom: &now,
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeSpot},
		SpotOptions:                 &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyPriceCapacityOptimized, SingleInstanceType: aws.Bool(true)},
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{
			{LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("a/b"), Version: aws.String("$Latest")},
				Overrides: []types.FleetLaunchTemplateOverridesRequest{
					{InstanceType: "m5.large", SubnetId: aws.String("subnet-1"), AvailabilityZone: aws.String("us-east-1a"), Priority: aws.Float64(1.5)},
					{InstanceType: "m6g.large", SubnetId: aws.String("subnet-2"), WeightedCapacity: aws.Float64(2)},
				}},
			{LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String("lt-1")}},
		},
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}},
	}
	var got ec2.CreateFleetInput
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if err := decodeQuery(r.Form, &got); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(encodeError("DryRunOperation", "stop here", "req"))
	}))
	defer hs.Close()
	_, err := client(hs.URL).CreateFleet(context.Background(), want)
	if err == nil {
		t.Fatal("want the DryRunOperation error")
	}
	if !reflect.DeepEqual(&got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("decoded\n%s\nwant\n%s", g, w)
	}
}
