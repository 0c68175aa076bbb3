package aws

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// liveStates are the instance states List reports: everything but terminated.
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// Get returns one instance by providerID, or an error wrapping cloud.ErrNotFound.
func (p *Provider) Get(ctx context.Context, providerID string) (*cloud.Instance, error) {
	_, id, err := cloud.ParseAWSProviderID(providerID)
	if err != nil {
		return nil, err
	}
	return p.describe(ctx, id)
}

// describe reads one instance with DescribeInstances.
func (p *Provider) describe(ctx context.Context, id string) (*cloud.Instance, error) {
	out, err := p.o.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if hasCode(err, "InvalidInstanceID.NotFound") {
		return nil, fmt.Errorf("%s: %w", id, cloud.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("DescribeInstances %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if aws.ToString(inst.InstanceId) == id {
				ci := p.toInstance(inst)
				return &ci, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: %w", id, cloud.ErrNotFound)
}

// List returns the instances tagged apisv1.TagCluster=cluster that are not terminated, sorted by
// ID (DescribeInstances with a tag filter and a state filter, all pages).
func (p *Provider) List(ctx context.Context, cluster string) ([]cloud.Instance, error) {
	pg := ec2.NewDescribeInstancesPaginator(p.o.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + apisv1.TagCluster), Values: []string{cluster}},
		{Name: aws.String("instance-state-name"), Values: liveStates},
	}})
	out := []cloud.Instance{}
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstances tag:%s=%s: %w", apisv1.TagCluster, cluster, err)
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				out = append(out, p.toInstance(inst))
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// Delete terminates an instance tagged for this provider's cluster. It reads the instance first
// and refuses, naming the instance and the tag, one that is untagged or tagged for another
// cluster; an instance already shutting down or terminated is not an error; an unknown one wraps
// cloud.ErrNotFound.
func (p *Provider) Delete(ctx context.Context, providerID string) error {
	_, id, err := cloud.ParseAWSProviderID(providerID)
	if err != nil {
		return err
	}
	inst, err := p.describe(ctx, id)
	if err != nil {
		return err
	}
	switch tag, ok := inst.Tags[apisv1.TagCluster]; {
	case !ok || tag == "":
		return fmt.Errorf("%w: refusing to terminate %s: it has no %q tag (not launched for cluster %q)", cloud.ErrNotOwned, id, apisv1.TagCluster, p.o.Cluster)
	case tag != p.o.Cluster:
		return fmt.Errorf("%w: refusing to terminate %s: its %q tag is %q, not this cluster %q", cloud.ErrNotOwned, id, apisv1.TagCluster, tag, p.o.Cluster)
	}
	if inst.State == cloud.StateShuttingDown || inst.State == cloud.StateTerminated {
		return nil
	}
	if _, err := p.o.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		if hasCode(err, "InvalidInstanceID.NotFound") {
			return fmt.Errorf("%s: %w", id, cloud.ErrNotFound)
		}
		return fmt.Errorf("TerminateInstances %s: %w", id, err)
	}
	return nil
}

// toInstance converts an EC2 instance; the price is the catalog's for its offering (0 when the
// catalog does not sell it).
func (p *Provider) toInstance(in ec2types.Instance) cloud.Instance {
	out := cloud.Instance{ID: aws.ToString(in.InstanceId), InstanceType: string(in.InstanceType), CapacityType: apisv1.CapacityTypeOnDemand,
		Tags: map[string]string{}}
	if in.Placement != nil {
		out.Zone = aws.ToString(in.Placement.AvailabilityZone)
		out.PlacementGroupID = aws.ToString(in.Placement.GroupId)
		out.PlacementPartition = aws.ToInt32(in.Placement.PartitionNumber)
	}
	out.ProviderID = cloud.AWSProviderID(out.Zone, out.ID)
	if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		out.CapacityType = apisv1.CapacityTypeSpot
	}
	// Reserved: launched into a reservation it targeted (Karpenter's capacityTypeFromInstance); an
	// instance that only matched an open reservation stays on-demand.
	if spec := in.CapacityReservationSpecification; in.CapacityReservationId != nil && spec != nil &&
		spec.CapacityReservationPreference == ec2types.CapacityReservationPreferenceCapacityReservationsOnly {
		out.CapacityType = apisv1.CapacityTypeReserved
		out.CapacityReservationID = aws.ToString(in.CapacityReservationId)
		out.CapacityReservationType = apisv1.CapacityReservationTypeDefault
		if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeCapacityBlock {
			out.CapacityReservationType = apisv1.CapacityReservationTypeCapacityBlock
		}
	}
	if in.State != nil {
		out.State = string(in.State.Name)
	}
	if in.LaunchTime != nil {
		out.LaunchTime = *in.LaunchTime
	}
	for _, t := range in.Tags {
		out.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	if it := p.o.Catalog.Get(out.InstanceType); it != nil && out.CapacityType == apisv1.CapacityTypeReserved {
		price, _ := it.OnDemandPrice()
		out.PricePerHour = price / catalog.ReservedPriceDivisor
	} else if it != nil {
		for _, o := range it.Offerings {
			if o.Zone == out.Zone && o.CapacityType == out.CapacityType {
				out.PricePerHour = o.PricePerHour
			}
		}
	}
	return out
}
