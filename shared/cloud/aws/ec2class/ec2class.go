// Package ec2class holds the EC2NodeClass rules of the AWS cloud that the neutral packages ask
// for through cloud.NodeClassRules: what a launch records on its NodeClaim, when a NodeClaim has
// drifted from its EC2NodeClass, and when its capacity block expires. As in
// karpenter-provider-aws (pkg/cloudprovider/drift.go, the capacity reservation expiration
// controller), these are the provider's, not Karpenter core's. Pure: no SDK, no clock, no I/O.
package ec2class

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Drift reasons of an EC2NodeClass, checked in this order (the first found is reported).
const (
	// DriftNodeClassHash: the NodeClass's static fields changed (karpenter.k8s.aws/ec2nodeclass-hash
	// on the NodeClaim differs from apisv1.EC2NodeClassHash of the class, same hash version):
	// Karpenter's NodeClassDrift.
	DriftNodeClassHash cloud.DriftReason = "NodeClassDrifted"
	// DriftAMI: status.imageID is not among the NodeClass's resolved AMIs (a new AMI published
	// behind an SSM alias resolves to a new id; the old one leaves the status).
	DriftAMI cloud.DriftReason = "AMIDrifted"
	// DriftSubnet: the launch subnet is no longer one of the NodeClass's resolved subnets.
	DriftSubnet cloud.DriftReason = "SubnetDrifted"
	// DriftSecurityGroups: the launch security groups differ from the NodeClass's resolved ones.
	DriftSecurityGroups cloud.DriftReason = "SecurityGroupDrifted"
	// DriftPlacementGroup: the NodeClaim's placement group is not the one its class selects
	// (Karpenter's PlacementGroupDrift; see placementGroupDrift).
	DriftPlacementGroup cloud.DriftReason = "PlacementGroupDrifted"
	// DriftCapacityReservation: the NodeClaim runs in a capacity reservation its NodeClass no
	// longer selects (not in status.capacityReservations): Karpenter's CapacityReservationDrift.
	DriftCapacityReservation cloud.DriftReason = "CapacityReservationDrifted"
)

// Rules are the EC2NodeClass rules; the zero value is ready (they need no configuration).
type Rules struct{}

var _ cloud.NodeClassRules = Rules{}

// RecordLaunch writes on the launched NodeClaim what drift later compares with the NodeClass:
// the hash of its static fields (apisv1.EC2NodeClassHash), and from its then-current status
// status.imageID (the first resolved AMI whose requirements the instance's labels satisfy, e.g.
// the arm64 AMI for a Graviton type), the subnet of the instance's zone (the first by id, as the
// fleet override for that zone uses) and the sorted security group ids. A class of another kind
// records nothing.
func (Rules) RecordLaunch(nc *apisv1.NodeClaim, nodeClass apisv1.NodeClass, inst *cloud.Instance) {
	class := nodeClass.EC2
	if class == nil {
		return
	}
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	recordPlacement(nc, inst)
	nc.Status.ImageID = ImageFor(class, nc.Labels)
	nc.Annotations[apisv1.AnnotationEC2NodeClassHash] = apisv1.EC2NodeClassHash(class)
	nc.Annotations[apisv1.AnnotationEC2NodeClassHashVersion] = apisv1.EC2NodeClassHashVersion
	var subnets []string
	zoneID := map[string]string{} // subnet id → its zone's id
	for _, s := range class.Status.Subnets {
		if s.Zone == nc.Labels[corev1.LabelTopologyZone] {
			subnets = append(subnets, s.ID)
			zoneID[s.ID] = s.ZoneID
		}
	}
	if len(subnets) > 0 {
		sort.Strings(subnets)
		nc.Annotations[apisv1.AnnotationSubnetID] = subnets[0]
		// The zone ID is a NodeClaim label in Karpenter (the offering's zone-id requirement, from
		// the subnet's AvailabilityZoneId); registration copies it onto the Node, which the
		// kubelet does not label with it.
		if id := zoneID[subnets[0]]; id != "" {
			if nc.Labels == nil {
				nc.Labels = map[string]string{}
			}
			nc.Labels[apisv1.LabelTopologyZoneID] = id
		}
	}
	if len(class.Status.SecurityGroups) > 0 {
		nc.Annotations[apisv1.AnnotationSecurityGroupIDs] = SecurityGroupIDs(class)
	}
}

// IsDrifted compares the NodeClaim with its EC2NodeClass: the static hash, the AMI, the subnet,
// the security groups, the placement group and the capacity reservation, in that order (karpenter-provider-aws
// pkg/cloudprovider/drift.go checks the same fields). A class of another kind is not drifted.
func (Rules) IsDrifted(nc *apisv1.NodeClaim, _ *corev1.Node, nodeClass apisv1.NodeClass) cloud.Drift {
	class := nodeClass.EC2
	if class == nil || nc == nil {
		return cloud.Drift{}
	}
	if h, ok := nc.Annotations[apisv1.AnnotationEC2NodeClassHash]; ok && h != "" &&
		nc.Annotations[apisv1.AnnotationEC2NodeClassHashVersion] == apisv1.EC2NodeClassHashVersion {
		if want := apisv1.EC2NodeClassHash(class); h != want {
			return cloud.Drift{Kind: DriftNodeClassHash, Field: "EC2NodeClass spec (karpenter.k8s.aws/ec2nodeclass-hash)",
				Detail: fmt.Sprintf("ec2nodeclass-hash %s, EC2NodeClass %s now hashes to %s", h, class.Name, want)}
		}
	}
	if img := nc.Status.ImageID; img != "" && len(class.Status.AMIs) > 0 {
		found := false
		ids := make([]string, 0, len(class.Status.AMIs))
		for _, a := range class.Status.AMIs {
			ids = append(ids, a.ID)
			found = found || a.ID == img
		}
		if !found {
			return cloud.Drift{Kind: DriftAMI, Field: "NodeClaim status.imageID (against the NodeClass's status.amis)",
				Detail: fmt.Sprintf("image %s is not among NodeClass %s's AMIs [%s]", img, class.Name, strings.Join(ids, ", "))}
		}
	}
	if sn := nc.Annotations[apisv1.AnnotationSubnetID]; sn != "" && len(class.Status.Subnets) > 0 {
		found := false
		for _, s := range class.Status.Subnets {
			found = found || s.ID == sn
		}
		if !found {
			return cloud.Drift{Kind: DriftSubnet, Field: "NodeClaim subnet (against the NodeClass's status.subnets)",
				Detail: fmt.Sprintf("subnet %s is no longer selected by NodeClass %s", sn, class.Name)}
		}
	}
	if sgs, ok := nc.Annotations[apisv1.AnnotationSecurityGroupIDs]; ok && sgs != "" && len(class.Status.SecurityGroups) > 0 {
		if want := SecurityGroupIDs(class); want != sgs {
			return cloud.Drift{Kind: DriftSecurityGroups, Field: "NodeClaim security groups (against the NodeClass's status.securityGroups)",
				Detail: fmt.Sprintf("security groups [%s], NodeClass %s now selects [%s]", sgs, class.Name, want)}
		}
	}
	if d := placementGroupDrift(nc, class); d.Kind != "" {
		return d
	}
	// A reservation list is compared once the class's reservations are resolved (an empty list
	// then means none is selected any more).
	if id := nc.Labels[apisv1.LabelCapacityReservationID]; id != "" && meta.IsStatusConditionTrue(class.Status.Conditions, apisv1.ConditionCapacityReservationsReady) {
		if _, ok := nodeClass.FindCapacityReservation(id); !ok {
			return cloud.Drift{Kind: DriftCapacityReservation, Field: "NodeClaim capacity reservation (against the NodeClass's status.capacityReservations)",
				Detail: fmt.Sprintf("capacity reservation %s is no longer selected by NodeClass %s", id, class.Name)}
		}
	}
	return cloud.Drift{}
}

// ReservationExpiring returns when the capacity block a NodeClaim runs in started expiring
// (apisv1.CapacityBlockExpiryLead before its end) and true when that is at or before now, or its
// status says expiring: Karpenter deletes such NodeClaims so they drain before EC2 reclaims the
// block (karpenter-provider-aws capacityreservation expiration controller).
func (Rules) ReservationExpiring(nc *apisv1.NodeClaim, nodeClass apisv1.NodeClass, now time.Time) (time.Time, bool) {
	r, ok := nodeClass.FindCapacityReservation(nc.Labels[apisv1.LabelCapacityReservationID])
	if !ok || r.Type() != apisv1.CapacityReservationTypeCapacityBlock || !r.Expiring(now) {
		return time.Time{}, false
	}
	if r.EndTime == nil {
		return now, true
	}
	return r.EndTime.Add(-apisv1.CapacityBlockExpiryLead), true
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
