package launch

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// ReservationCounts asks the provider, when it counts capacity reservations
// (cloud.ReservationCounter), for the free instances of every reservation the NodeClasses'
// status lists; nil when there are none or the provider does not count (the solver then offers
// no reserved capacity, or the counts a NodeClass's annotation states). The error is a failed
// call: the decision is retried.
func ReservationCounts(ctx context.Context, p cloud.Provider, ncs []apisv1.NodeClass) (map[string]apisv1.ReservationCount, error) {
	rc, ok := cloud.As[cloud.ReservationCounter](p)
	if !ok {
		return nil, nil
	}
	seen := map[string]bool{}
	var ids []string
	for _, nc := range ncs {
		if nc.EC2 == nil {
			continue
		}
		for _, r := range nc.EC2.Status.CapacityReservations {
			if !seen[r.ID] {
				seen[r.ID] = true
				ids = append(ids, r.ID)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	sort.Strings(ids)
	counts, err := rc.ReservationCounts(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("counting the free instances of capacity reservations %s: %w", strings.Join(ids, ", "), err)
	}
	return counts, nil
}
