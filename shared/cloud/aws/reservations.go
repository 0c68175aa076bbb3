package aws

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

var _ cloud.ReservationCounter = (*Provider)(nil)

func (p *Provider) now() time.Time {
	if p.o.Now != nil {
		return p.o.Now()
	}
	return time.Now()
}

// reservationQuery is one DescribeCapacityReservations call of a selector term, as Karpenter
// builds it (karpenter-provider-aws pkg/providers/capacityreservation): an id term by id, other
// terms by the filters owner-id, tag:<key> (tag-key for "*") and instance-match-criteria; every
// query asks for active reservations only.
func reservationQuery(t apisv1.CapacityReservationSelectorTerm) *ec2.DescribeCapacityReservationsInput {
	filters := []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}}
	if t.ID != "" {
		return &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{t.ID}, Filters: filters}
	}
	if t.OwnerID != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{t.OwnerID}})
	}
	filters = append(filters, tagFilters(t.Tags)...)
	if t.InstanceMatchCriteria != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("instance-match-criteria"), Values: []string{t.InstanceMatchCriteria}})
	}
	return &ec2.DescribeCapacityReservationsInput{Filters: filters, MaxResults: aws.Int32(1000)}
}

// describeReservations runs a query to its last page; an id that does not exist matches nothing.
func (p *Provider) describeReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput) ([]ec2types.CapacityReservation, error) {
	var out []ec2types.CapacityReservation
	pg := ec2.NewDescribeCapacityReservationsPaginator(p.o.EC2, in)
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if isNotFound(err) {
			break // only an id query fails so, on its one page
		}
		if err != nil {
			return nil, err
		}
		out = append(out, page.CapacityReservations...)
	}
	return out, nil
}

// capacityReservations resolves spec.capacityReservationSelectorTerms into status
// capacityReservations, as Karpenter's capacity reservation status controller writes them: each
// active reservation the terms select once, by id, without those past their end date, with the
// state Karpenter gives a capacity block within apisv1.CapacityBlockExpiryLead of its end
// (expiring); a reservation whose instance match criteria or type EC2 reports in a form Karpenter
// does not know is left out. Errors are failed calls.
func (p *Provider) capacityReservations(ctx context.Context, nc *apisv1.EC2NodeClass) ([]apisv1.CapacityReservation, error) {
	now := p.now()
	seen := map[string]bool{}
	var out []apisv1.CapacityReservation
	for i, t := range nc.Spec.CapacityReservationSelectorTerms {
		rs, err := p.describeReservations(ctx, reservationQuery(t))
		if err != nil {
			return nil, fmt.Errorf("spec.capacityReservationSelectorTerms[%d]: DescribeCapacityReservations: %w", i, err)
		}
		for _, r := range rs {
			id := aws.ToString(r.CapacityReservationId)
			if seen[id] || (r.EndDate != nil && !r.EndDate.After(now)) {
				continue
			}
			cr, ok := statusReservation(r, now)
			if !ok {
				continue
			}
			seen[id] = true
			out = append(out, cr)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// statusReservation renders an EC2 reservation as its status entry; false for a match criteria
// other than open or targeted, or a reservation type other than default or capacity-block.
func statusReservation(r ec2types.CapacityReservation, now time.Time) (apisv1.CapacityReservation, bool) {
	switch r.InstanceMatchCriteria {
	case ec2types.InstanceMatchCriteriaOpen, ec2types.InstanceMatchCriteriaTargeted:
	default:
		return apisv1.CapacityReservation{}, false
	}
	typ := string(r.ReservationType)
	switch typ {
	case "":
		typ = apisv1.CapacityReservationTypeDefault
	case apisv1.CapacityReservationTypeDefault, apisv1.CapacityReservationTypeCapacityBlock:
	default:
		return apisv1.CapacityReservation{}, false
	}
	cr := apisv1.CapacityReservation{ID: aws.ToString(r.CapacityReservationId), InstanceType: aws.ToString(r.InstanceType),
		AvailabilityZone: aws.ToString(r.AvailabilityZone), OwnerID: aws.ToString(r.OwnerId),
		InstanceMatchCriteria: string(r.InstanceMatchCriteria), ReservationType: typ, Interruptible: r.Interruptible}
	if r.EndDate != nil {
		cr.EndTime = &metav1.Time{Time: r.EndDate.UTC()}
	}
	cr.State = apisv1.ReservationState(typ, r.EndDate, now)
	return cr, true
}

// ReservationCounts reports AvailableInstanceCount and TotalInstanceCount of the active
// reservations among ids (DescribeCapacityReservations by id, state active); an id that no
// longer exists is left out (cloud.ReservationCounter).
func (p *Provider) ReservationCounts(ctx context.Context, ids []string) (map[string]apisv1.ReservationCount, error) {
	out := map[string]apisv1.ReservationCount{}
	active := []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}}
	rs, err := p.describeReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: ids, Filters: active})
	if err != nil {
		return nil, fmt.Errorf("DescribeCapacityReservations: %w", err)
	}
	if len(rs) == 0 && len(ids) > 1 {
		// One unknown id fails the whole call: ask for each on its own.
		for _, id := range ids {
			one, err := p.describeReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}, Filters: active})
			if err != nil {
				return nil, fmt.Errorf("DescribeCapacityReservations %s: %w", id, err)
			}
			rs = append(rs, one...)
		}
	}
	for _, r := range rs {
		out[aws.ToString(r.CapacityReservationId)] = apisv1.ReservationCount{
			Available: int(aws.ToInt32(r.AvailableInstanceCount)), Total: int(aws.ToInt32(r.TotalInstanceCount))}
	}
	return out, nil
}

// reservedTemplateData targets a launch template at one capacity reservation, as Karpenter's
// launch templates for reserved offerings do: capacity-reservations-only with the reservation as
// target, and the capacity-block market type for a capacity block.
func reservedTemplateData(d *ec2types.RequestLaunchTemplateData, o cloud.OfferingRef) {
	d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
		CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
		CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(o.ReservationID)},
	}
	if o.ReservationType == apisv1.CapacityReservationTypeCapacityBlock {
		d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	}
}
