package fake

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// EC2's answers to a launch into a capacity reservation that cannot take it (EC2 API reference,
// "Error codes": ReservationCapacityExceeded; the InvalidCapacityReservationId family for a
// reservation that does not exist or cannot be used).
const (
	CodeReservationCapacityExceeded = "ReservationCapacityExceeded"
	CodeReservationNotFound         = "InvalidCapacityReservationId.NotFound"
	CodeReservationUnavailable      = "InvalidCapacityReservationId.Unavailable"
	CodeReservationMismatch         = "InvalidParameterValue"
)

// CapacityReservation is a capacity reservation of the fake's account, as DescribeCapacityReservations
// shows it. Its free instances are Total less the instances launched into it that are not
// terminated (EC2 releases a reservation's instance when it terminates).
type CapacityReservation struct {
	ID           string
	InstanceType string
	Zone         string
	OwnerID      string
	// Type is default or capacity-block; MatchCriteria open or targeted.
	Type          string
	MatchCriteria string
	Total         int
	// State is EC2's: active, expired, cancelled, pending, failed, scheduled...; End, when set,
	// ends an active reservation (it then counts as expired).
	State         string
	End           *time.Time
	Tags          map[string]string
	Interruptible bool
	// Available is computed by CapacityReservations (ignored by AddCapacityReservation).
	Available int
}

// AddCapacityReservation adds (or replaces) a reservation. Errors name the field.
func (c *Cloud) AddCapacityReservation(r CapacityReservation) error {
	switch {
	case !strings.HasPrefix(r.ID, "cr-"):
		return fmt.Errorf("id: %q is not cr-<hex>", r.ID)
	case c.catalog.Get(r.InstanceType) == nil:
		return fmt.Errorf("instanceType: %q is not in the %s catalog", r.InstanceType, c.region)
	case r.Zone == "":
		return errors.New("zone: required")
	case r.Total < 1:
		return errors.New("total: at least 1 instance")
	}
	if r.Type == "" {
		r.Type = apisv1.CapacityReservationTypeDefault
	}
	if r.MatchCriteria == "" {
		r.MatchCriteria = "targeted"
	}
	if r.State == "" {
		r.State = apisv1.CapacityReservationStateActive
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reservations == nil {
		c.reservations = map[string]*CapacityReservation{}
	}
	c.reservations[r.ID] = &r
	return nil
}

// CapacityReservations returns every reservation with its free instances now, by id.
func (c *Cloud) CapacityReservations() []CapacityReservation {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]CapacityReservation, 0, len(c.reservations))
	for _, r := range c.reservations {
		cp := *r
		cp.State = c.reservationState(r)
		cp.Available = c.available(r)
		out = append(out, cp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ReservationCounts reports the free and total instances of the active reservations among ids
// (cloud.ReservationCounter).
func (c *Cloud) ReservationCounts(ctx context.Context, ids []string) (map[string]apisv1.ReservationCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]apisv1.ReservationCount{}
	for _, id := range ids {
		if r := c.reservations[id]; r != nil && c.reservationState(r) == apisv1.CapacityReservationStateActive {
			out[id] = apisv1.ReservationCount{Available: c.available(r), Total: r.Total}
		}
	}
	return out, nil
}

var _ cloud.ReservationCounter = (*Cloud)(nil)

// reservationState is r's state now: an active reservation past its end is expired. Called with
// c.mu held.
func (c *Cloud) reservationState(r *CapacityReservation) string {
	if r.State == apisv1.CapacityReservationStateActive && r.End != nil && !c.clock.Now().Before(*r.End) {
		return "expired"
	}
	return r.State
}

// available is r's free instances. Called with c.mu held.
func (c *Cloud) available(r *CapacityReservation) int {
	used := 0
	for _, inst := range c.instances {
		if inst.CapacityReservationID == r.ID && inst.State != cloud.StateTerminated {
			used++
		}
	}
	return max(r.Total-used, 0)
}

// reservedCandidate checks a reserved offering as EC2 checks a launch targeting a reservation:
// the reservation exists, is active (not past its end), holds the offering's instance type in
// its zone, and has a free instance. It returns the candidate (priced at the type's on-demand
// price / catalog.ReservedPriceDivisor) or EC2's error code. Called with c.mu held.
func (c *Cloud) reservedCandidate(ref cloud.OfferingRef, it *catalog.InstanceType) (cloud.OfferingRef, string) {
	r := c.reservations[ref.ReservationID]
	switch {
	case r == nil:
		return ref, CodeReservationNotFound
	case c.reservationState(r) != apisv1.CapacityReservationStateActive:
		return ref, CodeReservationUnavailable
	case r.InstanceType != ref.InstanceType || r.Zone != ref.Zone:
		return ref, CodeReservationMismatch
	case ref.ReservationType != "" && ref.ReservationType != r.Type:
		return ref, CodeReservationMismatch
	case c.available(r) == 0:
		return ref, CodeReservationCapacityExceeded
	}
	price, _ := it.OnDemandPrice()
	ref.PricePerHour = price / catalog.ReservedPriceDivisor
	ref.ReservationType = r.Type
	return ref, ""
}
