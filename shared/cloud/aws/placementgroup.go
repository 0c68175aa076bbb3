package aws

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// placementGroup resolves spec.placementGroupSelector with DescribePlacementGroups, as
// karpenter-provider-aws's placement group provider queries it (pkg/providers/placementgroup
// types.go DescribePlacementGroupsInput): GroupIds for an id, else GroupNames, and the filter
// state=available, so a group being deleted resolves to nothing. A class without a selector
// resolves to nil and no problem. A selector that matches no available group is a problem
// (ReasonPlacementGroupNotFound) naming it: the empty answer, and EC2's
// InvalidPlacementGroup.Unknown, which EC2 returns for a name or id it does not know (EC2 API
// reference, "Error codes"); Karpenter reports that error as PlacementGroupResolutionFailed and
// retries, Dovetail as not found, which is what it means. Other errors are returned, to retry.
func (p *Provider) placementGroup(ctx context.Context, nc *apisv1.EC2NodeClass) (*apisv1.PlacementGroup, *problem, error) {
	sel := nc.Spec.PlacementGroupSelector
	if sel == nil {
		return nil, nil, nil
	}
	in := &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{
		{Name: aws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}}}}
	if sel.ID != "" {
		in.GroupIds = []string{sel.ID}
	} else {
		in.GroupNames = []string{sel.Name}
	}
	notFound := &problem{reason: apisv1.ReasonPlacementGroupNotFound,
		message: fmt.Sprintf("spec.placementGroupSelector: no available placement group has %s", sel.Describe())}
	out, err := p.o.EC2.DescribePlacementGroups(ctx, in)
	if hasCode(err, "InvalidPlacementGroup.Unknown") {
		return nil, notFound, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("DescribePlacementGroups %s: %w", sel.Describe(), err)
	}
	if len(out.PlacementGroups) == 0 {
		return nil, notFound, nil
	}
	g := out.PlacementGroups[0]
	return &apisv1.PlacementGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Strategy: string(g.Strategy),
		PartitionCount: aws.ToInt32(g.PartitionCount), SpreadLevel: string(g.SpreadLevel)}, nil, nil
}

// withPlacement puts the launch into the placement group, as Karpenter's launch template
// builder does (launchtemplate/types.go buildPlacement: Placement.GroupId, and PartitionNumber
// when not 0). part is the partition number, 0 for EC2's choice.
func withPlacement(d *ec2types.RequestLaunchTemplateData, pg *apisv1.PlacementGroup, part int32) {
	if pg == nil {
		return
	}
	d.Placement = &ec2types.LaunchTemplatePlacementRequest{GroupId: aws.String(pg.ID)}
	if part != 0 {
		d.Placement.PartitionNumber = aws.Int32(part)
	}
}

// partitionOf is the partition a NodeClaim targets in a partition group: the lowest number its
// karpenter.k8s.aws/placement-group-partition requirement allows (EC2 takes one number;
// Karpenter's launch template provider picks the lowest, sorted as strings), 0 when the group is
// not a partition group or the NodeClaim has no In requirement on it (EC2 then picks the
// partition and spreads the instances evenly). A value that is not a partition of the group is an error
// naming the requirement.
func partitionOf(pg *apisv1.PlacementGroup, reqs []apisv1.NodeSelectorRequirementWithMinValues) (int32, error) {
	if pg == nil || pg.Strategy != apisv1.PlacementStrategyPartition {
		return 0, nil
	}
	for _, r := range reqs {
		if r.Key != apisv1.LabelPlacementGroupPartition || r.Operator != corev1.NodeSelectorOpIn || len(r.Values) == 0 {
			continue
		}
		values := append([]string(nil), r.Values...)
		sort.Strings(values)
		n, err := strconv.ParseInt(values[0], 10, 32)
		if err != nil || n < 1 || int32(n) > pg.PartitionCount {
			return 0, fmt.Errorf("nodeClaim requirement %s: %q is not a partition of placement group %s (1..%d)",
				r.Key, values[0], pg.ID, pg.PartitionCount)
		}
		return int32(n), nil
	}
	return 0, nil
}

// isSpreadLimit reports a fleet error that says a spread placement group is full in the zone
// (EC2's message, which Karpenter's IsSpreadPlacementGroupLimitError matches: "limit of
// instances in this spread placement group").
func isSpreadLimit(fe ec2types.CreateFleetError) bool {
	return strings.Contains(aws.ToString(fe.ErrorMessage), "limit of instances in this spread placement group")
}

// spreadZone marks every offering of the request in zone with capacity type ct that is not yet
// in seen: a full spread group refuses the whole zone, whatever the type, so Karpenter marks all
// the NodeClaim's instance types there (instance.go updateUnavailableOfferingsCache), not only
// the overrides the fleet carried.
func spreadZone(req cloud.LaunchRequest, ct, zone, code string, seen map[cloud.OfferingRef]bool) []cloud.UnavailableOffering {
	var out []cloud.UnavailableOffering
	for _, o := range req.Offerings {
		if o.Zone != zone || o.CapacityType != ct || seen[o] {
			continue
		}
		seen[o] = true
		out = append(out, cloud.UnavailableOffering{Offering: o, Code: code})
	}
	return out
}
