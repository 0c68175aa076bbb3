package launch

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// recordNodeClass writes on the launched NodeClaim what drift later compares with the NodeClass:
// the hash of its static fields (apisv1.EC2NodeClassHash), and from its then-current status status.imageID (the first resolved AMI whose requirements the instance's
// labels satisfy, e.g. the arm64 AMI for a Graviton type), the subnet of the instance's zone
// (the first by id, as the fleet override for that zone uses) and the sorted security group ids.
// A NodeClass whose status is not resolved yet leaves them empty, and drift then has nothing to
// compare for that field.
func recordNodeClass(nc *apisv1.NodeClaim, class *apisv1.EC2NodeClass) {
	if class == nil {
		return
	}
	nc.Status.ImageID = ImageFor(class, nc.Labels)
	nc.Annotations[apisv1.AnnotationEC2NodeClassHash] = apisv1.EC2NodeClassHash(class)
	nc.Annotations[apisv1.AnnotationEC2NodeClassHashVersion] = apisv1.EC2NodeClassHashVersion
	var subnets []string
	zoneID := map[string]string{} // subnet id → its zone's id
	for _, s := range class.Status.Subnets {
		if s.Zone == nc.Labels["topology.kubernetes.io/zone"] {
			subnets = append(subnets, s.ID)
			zoneID[s.ID] = s.ZoneID
		}
	}
	if len(subnets) > 0 {
		sort.Strings(subnets)
		nc.Annotations[apisv1.AnnotationSubnetID] = subnets[0]
		// The zone ID is a NodeClaim label in Karpenter (the offering's zone-id requirement,
		// from the subnet's AvailabilityZoneId); registration copies it onto the Node, which the
		// kubelet does not label with it.
		if id := zoneID[subnets[0]]; id != "" {
			nc.Labels[apisv1.LabelTopologyZoneID] = id
		}
	}
	if len(class.Status.SecurityGroups) > 0 {
		nc.Annotations[apisv1.AnnotationSecurityGroupIDs] = SecurityGroupIDs(class)
	}
}

// ImageFor returns the id of the first AMI in the NodeClass status whose requirements (arch,
// GPU...) the node labels satisfy, or "" when none does or the status is not resolved.
func ImageFor(class *apisv1.EC2NodeClass, labels map[string]string) string {
	for _, ami := range class.Status.AMIs {
		reqs, err := scheduling.NewRequirements(ami.Requirements...)
		if err != nil {
			continue
		}
		if reqs.MatchLabels(labels) == nil {
			return ami.ID
		}
	}
	return ""
}

// SecurityGroupIDs returns the NodeClass's resolved security group ids, sorted and joined by ",".
func SecurityGroupIDs(class *apisv1.EC2NodeClass) string {
	ids := make([]string, 0, len(class.Status.SecurityGroups))
	for _, sg := range class.Status.SecurityGroups {
		ids = append(ids, sg.ID)
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// ReservationCounts asks the provider, when it counts capacity reservations
// (cloud.ReservationCounter), for the free instances of every reservation the NodeClasses'
// status lists; nil when there are none or the provider does not count (the solver then offers
// no reserved capacity, or the counts a NodeClass's annotation states). The error is a failed
// call: the decision is retried.
func ReservationCounts(ctx context.Context, p cloud.Provider, ncs []apisv1.NodeClass) (map[string]apisv1.ReservationCount, error) {
	rc, ok := p.(cloud.ReservationCounter)
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
