package v1

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Capacity reservation labels (karpenter-provider-aws pkg/apis/v1 labels.go): a node launched
// into a reservation carries karpenter.sh/capacity-type=reserved and these two; other nodes carry
// neither. NodePool requirements and pod node affinity may select on them.
const (
	LabelCapacityReservationID   = "karpenter.k8s.aws/capacity-reservation-id"
	LabelCapacityReservationType = "karpenter.k8s.aws/capacity-reservation-type"
)

// Capacity reservation types (EC2's CapacityReservation.ReservationType, Karpenter's
// reservationType status field).
const (
	CapacityReservationTypeDefault       = "default"
	CapacityReservationTypeCapacityBlock = "capacity-block"
)

// Capacity reservation states Karpenter writes in status: active, or expiring once a capacity
// block is within CapacityBlockExpiryLead of its end.
const (
	CapacityReservationStateActive   = "active"
	CapacityReservationStateExpiring = "expiring"
)

// ConditionCapacityReservationsReady says the NodeClass's capacityReservationSelectorTerms were
// resolved (Karpenter's ConditionTypeCapacityReservationsReady); a selector that matches nothing
// is still Ready, with an empty status.capacityReservations.
const ConditionCapacityReservationsReady = "CapacityReservationsReady"

// CapacityBlockExpiryLead is how long before a capacity block's end Karpenter treats it as
// expiring: EC2 starts terminating a block's instances 30 minutes before its end time (EC2 User
// Guide, "Capacity Blocks for ML"), and Karpenter drains them 10 minutes before that
// (karpenter-provider-aws pkg/apis/v1 CapacityReservationFromEC2, 40 minutes): no new launches
// into it, and its nodes are handed to termination.
const CapacityBlockExpiryLead = 40 * time.Minute

// ReservationState is the state Karpenter writes for a reservation at now: expiring for a
// capacity block within CapacityBlockExpiryLead of its end time, else active.
func ReservationState(reservationType string, end *time.Time, now time.Time) string {
	if reservationType != CapacityReservationTypeCapacityBlock || end == nil || now.Before(end.Add(-CapacityBlockExpiryLead)) {
		return CapacityReservationStateActive
	}
	return CapacityReservationStateExpiring
}

// Expiring reports whether the reservation may no longer be launched into at now: its status
// says expiring, or it is a capacity block within CapacityBlockExpiryLead of its end (the status
// is resolved once a minute; the deciding function's clock may be ahead of it).
func (r CapacityReservation) Expiring(now time.Time) bool {
	if r.State == CapacityReservationStateExpiring {
		return true
	}
	var end *time.Time
	if r.EndTime != nil {
		end = &r.EndTime.Time
	}
	return ReservationState(r.Type(), end, now) == CapacityReservationStateExpiring
}

// Type is the reservation's type, default when the status leaves it empty (the CRD's default).
func (r CapacityReservation) Type() string {
	if r.ReservationType == "" {
		return CapacityReservationTypeDefault
	}
	return r.ReservationType
}

// FindCapacityReservation returns the reservation of the NodeClass's status with that id.
func (n NodeClass) FindCapacityReservation(id string) (CapacityReservation, bool) {
	if n.EC2 == nil || id == "" {
		return CapacityReservation{}, false
	}
	for _, r := range n.EC2.Status.CapacityReservations {
		if r.ID == id {
			return r, true
		}
	}
	return CapacityReservation{}, false
}

// AnnotationReservationCounts carries, on an EC2NodeClass read from manifests (`dovetail plan`,
// the scenario suite), what DescribeCapacityReservations would report for the reservations of its
// status: "cr-0123=3,cr-0456=1/4", available instances and optionally /total. Karpenter's status
// has no count (Karpenter keeps it in memory), and the API server prunes fields its CRD lacks, so
// a deployed Dovetail asks EC2 at decision time instead (cloud.ReservationCounter).
const AnnotationReservationCounts = "dovetail.dev/capacity-reservation-counts"

// ReservationCount is what EC2 reports for a capacity reservation: AvailableInstanceCount and
// TotalInstanceCount (0 when not known).
type ReservationCount struct {
	Available int `json:"available"`
	Total     int `json:"total,omitempty"`
}

// ParseReservationCounts reads an AnnotationReservationCounts value. Errors name the entry.
func ParseReservationCounts(s string) (map[string]ReservationCount, error) {
	out := map[string]ReservationCount{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, count, ok := strings.Cut(part, "=")
		if !ok || !strings.HasPrefix(id, "cr-") {
			return nil, fmt.Errorf("%q: want cr-<id>=<available>[/<total>]", part)
		}
		avail, total, hasTotal := strings.Cut(count, "/")
		a, err := strconv.Atoi(avail)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q: available instances must be a whole number >= 0", part)
		}
		c := ReservationCount{Available: a}
		if hasTotal {
			t, err := strconv.Atoi(total)
			if err != nil || t < a {
				return nil, fmt.Errorf("%q: total instances must be a whole number >= available", part)
			}
			c.Total = t
		}
		out[id] = c
	}
	return out, nil
}

// FormatReservationCounts renders counts as an AnnotationReservationCounts value, by id.
func FormatReservationCounts(counts map[string]ReservationCount) string {
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		c := counts[id]
		p := id + "=" + strconv.Itoa(c.Available)
		if c.Total > 0 {
			p += "/" + strconv.Itoa(c.Total)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ",")
}
