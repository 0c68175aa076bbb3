package ec2api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
)

// DescribePlacementGroups through the SDK, as the API reference defines it: GroupNames and
// GroupIds select, and an unknown one fails the whole call with InvalidPlacementGroup.Unknown;
// the strategy and state filters narrow; an unsupported filter name is InvalidParameterValue.
func TestDescribePlacementGroups(t *testing.T) {
	e, _, srv := clients(t)
	ctx := context.Background()
	cl, err := srv.AddPlacementGroup(ec2types.PlacementGroup{GroupName: aws.String("ml"), Strategy: ec2types.PlacementStrategyCluster})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := srv.AddPlacementGroup(ec2types.PlacementGroup{GroupName: aws.String("kafka"), Strategy: ec2types.PlacementStrategyPartition, PartitionCount: aws.Int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := srv.AddPlacementGroup(ec2types.PlacementGroup{GroupName: aws.String("etcd"), Strategy: ec2types.PlacementStrategySpread})
	if err != nil {
		t.Fatal(err)
	}
	if sp.SpreadLevel != ec2types.SpreadLevelRack || cl.State != ec2types.PlacementGroupStateAvailable {
		t.Errorf("spread level %q state %q, want rack and available", sp.SpreadLevel, cl.State)
	}

	out, err := e.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupIds: []string{aws.ToString(pt.GroupId)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.PlacementGroups) != 1 || aws.ToString(out.PlacementGroups[0].GroupName) != "kafka" || aws.ToInt32(out.PlacementGroups[0].PartitionCount) != 5 ||
		out.PlacementGroups[0].Strategy != ec2types.PlacementStrategyPartition {
		t.Errorf("by id: %+v", out.PlacementGroups)
	}
	out, err = e.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{
		{Name: aws.String("strategy"), Values: []string{"cluster", "spread"}}, {Name: aws.String("state"), Values: []string{"available"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.PlacementGroups) != 2 || aws.ToString(out.PlacementGroups[0].GroupName) != "ml" || aws.ToString(out.PlacementGroups[1].GroupName) != "etcd" {
		t.Errorf("strategy cluster|spread: %+v", out.PlacementGroups)
	}
	out, err = e.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{"ml"},
		Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{"deleting"}}}})
	if err != nil || len(out.PlacementGroups) != 0 {
		t.Errorf("ml in state deleting: %+v, %v; want none", out, err)
	}
	for _, in := range []*ec2.DescribePlacementGroupsInput{{GroupNames: []string{"ml", "nope"}}, {GroupIds: []string{"pg-0123456789abcdef0"}}} {
		_, err = e.DescribePlacementGroups(ctx, in)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != ec2api.CodePlacementGroupUnknown {
			t.Errorf("%v %v: %v, want %s", in.GroupNames, in.GroupIds, err, ec2api.CodePlacementGroupUnknown)
		}
	}
	_, err = e.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("zone"), Values: []string{"x"}}}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != ec2api.CodeInvalidParameterValue {
		t.Errorf("filter zone: %v, want InvalidParameterValue", err)
	}
}

// CreatePlacementGroup's rules: a partition group has 1..7 partitions, only it has any; names
// are unique; host-level spread is Outposts only.
func TestAddPlacementGroupRules(t *testing.T) {
	_, _, srv := clients(t)
	for _, g := range []ec2types.PlacementGroup{
		{GroupName: aws.String("p8"), Strategy: ec2types.PlacementStrategyPartition, PartitionCount: aws.Int32(8)},
		{GroupName: aws.String("p0"), Strategy: ec2types.PlacementStrategyPartition},
		{GroupName: aws.String("c2"), Strategy: ec2types.PlacementStrategyCluster, PartitionCount: aws.Int32(2)},
		{GroupName: aws.String("host"), Strategy: ec2types.PlacementStrategySpread, SpreadLevel: ec2types.SpreadLevelHost},
		{GroupName: aws.String(""), Strategy: ec2types.PlacementStrategyCluster},
		{GroupName: aws.String("x"), Strategy: "ring"},
	} {
		if _, err := srv.AddPlacementGroup(g); err == nil {
			t.Errorf("%s %s accepted", aws.ToString(g.GroupName), g.Strategy)
		}
	}
	if _, err := srv.AddPlacementGroup(ec2types.PlacementGroup{GroupName: aws.String("dup"), Strategy: ec2types.PlacementStrategyCluster}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddPlacementGroup(ec2types.PlacementGroup{GroupName: aws.String("dup"), Strategy: ec2types.PlacementStrategySpread}); err == nil {
		t.Error("duplicate name accepted")
	}
}
