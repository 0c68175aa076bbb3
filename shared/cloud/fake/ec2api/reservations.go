package ec2api

import (
	"context"
	"net/url"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
)

// describeCapacityReservations serves DescribeCapacityReservations over the fake cloud's
// reservations: by id (an unknown id fails the call with InvalidCapacityReservationId.NotFound,
// as EC2 does) and by the filters Karpenter's selectors use (state, owner-id, tag:<key>, tag-key,
// instance-match-criteria, instance-type, availability-zone, reservation-type), paginated.
func (s *Server) describeCapacityReservations(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeCapacityReservationsInput](s, "DescribeCapacityReservations", form)
	if aerr != nil {
		return nil, aerr
	}
	all := s.cloud.CapacityReservations()
	if aerr := requireIDs(in.CapacityReservationIds, all, func(r fake.CapacityReservation) string { return r.ID },
		fake.CodeReservationNotFound, "capacity reservation ID"); aerr != nil {
		return nil, aerr
	}
	var out []types.CapacityReservation
	for _, r := range all {
		if len(in.CapacityReservationIds) > 0 && !contains(in.CapacityReservationIds, r.ID) {
			continue
		}
		cr := s.ec2Reservation(r)
		ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "state":
				return []string{string(cr.State)}, true
			case "owner-id":
				return []string{aws.ToString(cr.OwnerId)}, true
			case "instance-match-criteria":
				return []string{string(cr.InstanceMatchCriteria)}, true
			case "instance-type":
				return []string{aws.ToString(cr.InstanceType)}, true
			case "availability-zone":
				return []string{aws.ToString(cr.AvailabilityZone)}, true
			case "reservation-type":
				return []string{string(cr.ReservationType)}, true
			case "capacity-reservation-id":
				return []string{r.ID}, true
			}
			return tagValues(name, cr.Tags)
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out = append(out, cr)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return aws.ToString(out[i].CapacityReservationId) < aws.ToString(out[j].CapacityReservationId)
	})
	items, next, aerr := page(out, in.MaxResults, in.NextToken, 1000)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeCapacityReservations", reqID, member{"capacityReservationSet", nonNil(items)}, member{"nextToken", next})
}

// ec2Reservation renders a reservation as EC2 describes it.
func (s *Server) ec2Reservation(r fake.CapacityReservation) types.CapacityReservation {
	owner := r.OwnerID
	if owner == "" {
		owner = s.account
	}
	cr := types.CapacityReservation{
		CapacityReservationId: aws.String(r.ID), OwnerId: aws.String(owner), InstanceType: aws.String(r.InstanceType),
		AvailabilityZone: aws.String(r.Zone), AvailableInstanceCount: aws.Int32(int32(r.Available)), TotalInstanceCount: aws.Int32(int32(r.Total)),
		State: types.CapacityReservationState(r.State), InstanceMatchCriteria: types.InstanceMatchCriteria(r.MatchCriteria),
		ReservationType: types.CapacityReservationType(r.Type), InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix,
		Tenancy: types.CapacityReservationTenancyDefault, EndDateType: types.EndDateTypeUnlimited, Tags: tagList(r.Tags),
		CapacityReservationArn: aws.String(s.arn("capacity-reservation", r.ID)),
	}
	if r.End != nil {
		end := r.End.UTC()
		cr.EndDate, cr.EndDateType = &end, types.EndDateTypeLimited
	}
	if r.Interruptible {
		cr.Interruptible = aws.Bool(true)
	}
	return cr
}

// reservationTarget reads the capacity reservation a launch template targets: its id and type
// (capacity-block when the template's market type is, else default), or "" when it targets none.
// A target without the capacity-reservations-only preference, or a preference naming none, is
// refused as EC2 refuses an invalid combination.
func reservationTarget(d types.ResponseLaunchTemplateData) (id, typ string, aerr *apiError) {
	spec := d.CapacityReservationSpecification
	if spec == nil || spec.CapacityReservationTarget == nil || aws.ToString(spec.CapacityReservationTarget.CapacityReservationId) == "" {
		if spec != nil && spec.CapacityReservationPreference == types.CapacityReservationPreferenceCapacityReservationsOnly {
			return "", "", badRequest(CodeInvalidParameterCombination, "CapacityReservationPreference capacity-reservations-only needs a CapacityReservationTarget")
		}
		return "", "", nil
	}
	typ = apisv1.CapacityReservationTypeDefault
	if m := d.InstanceMarketOptions; m != nil && m.MarketType == types.MarketTypeCapacityBlock {
		typ = apisv1.CapacityReservationTypeCapacityBlock
	}
	return aws.ToString(spec.CapacityReservationTarget.CapacityReservationId), typ, nil
}

// targetReservation makes ref the reserved offering of the reservation the template targets, as
// EC2 launches an on-demand or capacity-block fleet's instance into it; a spot fleet cannot
// target one, a capacity-block fleet must target a capacity block and a capacity-block market
// type needs a capacity-block fleet (EC2 refuses each combination).
func targetReservation(ref *cloud.OfferingRef, d types.ResponseLaunchTemplateData, fleetType types.DefaultTargetCapacityType) *apiError {
	id, typ, aerr := reservationTarget(d)
	switch {
	case aerr != nil:
		return aerr
	case id == "" && fleetType == types.DefaultTargetCapacityTypeCapacityBlock:
		return badRequest(CodeInvalidParameterCombination, "a capacity-block fleet needs launch templates that target a capacity block")
	case id == "":
		return nil
	case fleetType == types.DefaultTargetCapacityTypeSpot:
		return badRequest(CodeInvalidParameterCombination, "a spot fleet cannot launch into capacity reservation %s", id)
	case (typ == apisv1.CapacityReservationTypeCapacityBlock) != (fleetType == types.DefaultTargetCapacityTypeCapacityBlock):
		return badRequest(CodeInvalidParameterCombination, "capacity reservation %s: market type capacity-block goes with DefaultTargetCapacityType capacity-block", id)
	}
	ref.CapacityType, ref.ReservationID, ref.ReservationType = apisv1.CapacityTypeReserved, id, typ
	return nil
}
