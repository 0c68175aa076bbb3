package disruption

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// DriftKind says which part of a node no longer matches what its NodePool or NodeClass asks for.
type DriftKind string

// Drift kinds, checked in this order (the first found is reported).
const (
	// DriftNodePoolHash: the NodePool template's shaping fields changed (karpenter.sh/nodepool-hash
	// on the NodeClaim differs from apisv1.NodePoolHash of the pool, same hash version).
	DriftNodePoolHash DriftKind = "NodePoolDrifted"
	// DriftRequirements: the node's labels no longer satisfy the NodePool's requirements or
	// template labels.
	DriftRequirements DriftKind = "RequirementsDrifted"
	// DriftNodeClassRef: the NodeClaim points at another NodeClass than the pool now does.
	DriftNodeClassRef DriftKind = "NodeClassRefDrifted"
	// DriftAMI: status.imageID is not among the NodeClass's resolved AMIs (a new AMI published
	// behind an SSM alias resolves to a new id; the old one leaves the status).
	DriftAMI DriftKind = "AMIDrifted"
	// DriftSubnet: the launch subnet is no longer one of the NodeClass's resolved subnets.
	DriftSubnet DriftKind = "SubnetDrifted"
	// DriftSecurityGroups: the launch security groups differ from the NodeClass's resolved ones.
	DriftSecurityGroups DriftKind = "SecurityGroupDrifted"
	// DriftNodeClassHash: the NodeClass's static fields changed (karpenter.k8s.aws/ec2nodeclass-hash
	// on the NodeClaim differs from apisv1.EC2NodeClassHash of the class, same hash version):
	// Karpenter's NodeClassDrift.
	DriftNodeClassHash DriftKind = "NodeClassDrifted"
	// DriftCapacityReservation: the NodeClaim runs in a capacity reservation its NodeClass no
	// longer selects (not in status.capacityReservations): Karpenter's CapacityReservationDrift.
	DriftCapacityReservation DriftKind = "CapacityReservationDrifted"
)

// Drift is why a NodeClaim drifted, or Kind "" when it has not.
type Drift struct {
	Kind   DriftKind
	Detail string
}

// Drifted reports whether nc (and its node, when registered) drifted from its NodePool np and
// NodeClass class. A field the NodeClaim did not record at launch (no hash, no imageID, no
// subnet annotation) or the NodeClass has not resolved yet (empty status list) is not compared:
// drift needs two known values that differ. node may be nil (labels then come from the NodeClaim);
// the zero NodeClass skips the NodeClass checks.
func Drifted(nc *apisv1.NodeClaim, node *corev1.Node, np *apisv1.NodePool, nodeClass apisv1.NodeClass) Drift {
	if np == nil || nc == nil {
		return Drift{}
	}
	if h, ok := nc.Annotations[apisv1.AnnotationNodePoolHash]; ok && h != "" &&
		nc.Annotations[apisv1.AnnotationNodePoolHashVersion] == apisv1.NodePoolHashVersion {
		if want := apisv1.NodePoolHash(np); h != want {
			return Drift{DriftNodePoolHash, fmt.Sprintf("nodepool-hash %s, NodePool %s now hashes to %s", h, np.Name, want)}
		}
	}
	labels := nc.Labels
	if node != nil {
		labels = node.Labels
	}
	if d := requirementsDrift(np, labels); d != "" {
		return Drift{DriftRequirements, d}
	}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && nc.Spec.NodeClassRef != nil && ref.Name != nc.Spec.NodeClassRef.Name {
		return Drift{DriftNodeClassRef, fmt.Sprintf("NodeClass %s, NodePool %s now uses %s", nc.Spec.NodeClassRef.Name, np.Name, ref.Name)}
	}
	// The NodeClass fields compared below are an EC2NodeClass's resolved status.
	class := nodeClass.EC2
	if class == nil {
		return Drift{}
	}
	if h, ok := nc.Annotations[apisv1.AnnotationEC2NodeClassHash]; ok && h != "" &&
		nc.Annotations[apisv1.AnnotationEC2NodeClassHashVersion] == apisv1.EC2NodeClassHashVersion {
		if want := apisv1.EC2NodeClassHash(class); h != want {
			return Drift{DriftNodeClassHash, fmt.Sprintf("ec2nodeclass-hash %s, EC2NodeClass %s now hashes to %s", h, class.Name, want)}
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
			return Drift{DriftAMI, fmt.Sprintf("image %s is not among NodeClass %s's AMIs [%s]", img, class.Name, strings.Join(ids, ", "))}
		}
	}
	if sn := nc.Annotations[apisv1.AnnotationSubnetID]; sn != "" && len(class.Status.Subnets) > 0 {
		found := false
		for _, s := range class.Status.Subnets {
			found = found || s.ID == sn
		}
		if !found {
			return Drift{DriftSubnet, fmt.Sprintf("subnet %s is no longer selected by NodeClass %s", sn, class.Name)}
		}
	}
	if sgs, ok := nc.Annotations[apisv1.AnnotationSecurityGroupIDs]; ok && sgs != "" && len(class.Status.SecurityGroups) > 0 {
		ids := make([]string, 0, len(class.Status.SecurityGroups))
		for _, sg := range class.Status.SecurityGroups {
			ids = append(ids, sg.ID)
		}
		sort.Strings(ids)
		if want := strings.Join(ids, ","); want != sgs {
			return Drift{DriftSecurityGroups, fmt.Sprintf("security groups [%s], NodeClass %s now selects [%s]", sgs, class.Name, want)}
		}
	}
	// A reservation list is compared once the class's reservations are resolved (an empty list
	// then means none is selected any more).
	if id := nc.Labels[apisv1.LabelCapacityReservationID]; id != "" && meta.IsStatusConditionTrue(class.Status.Conditions, apisv1.ConditionCapacityReservationsReady) {
		if _, ok := nodeClass.FindCapacityReservation(id); !ok {
			return Drift{DriftCapacityReservation, fmt.Sprintf("capacity reservation %s is no longer selected by NodeClass %s", id, class.Name)}
		}
	}
	return Drift{}
}

// ReservationExpiring returns when the capacity block a NodeClaim runs in started expiring
// (apisv1.CapacityBlockExpiryLead before its end) and true when that is at or before now, or its
// status says expiring: Karpenter deletes such NodeClaims so they drain before EC2 reclaims the
// block (karpenter-provider-aws capacityreservation expiration controller).
func ReservationExpiring(nc *apisv1.NodeClaim, nodeClass apisv1.NodeClass, now time.Time) (time.Time, bool) {
	r, ok := nodeClass.FindCapacityReservation(nc.Labels[apisv1.LabelCapacityReservationID])
	if !ok || r.Type() != apisv1.CapacityReservationTypeCapacityBlock || !r.Expiring(now) {
		return time.Time{}, false
	}
	if r.EndTime == nil {
		return now, true
	}
	return r.EndTime.Add(-apisv1.CapacityBlockExpiryLead), true
}

// requirementsDrift returns why labels no longer satisfy the pool's requirements and template
// labels, or "". Keys with minValues are checked as plain requirements (minValues constrains the
// launch's choice, not a single node).
func requirementsDrift(np *apisv1.NodePool, labels map[string]string) string {
	nsrs := make([]corev1.NodeSelectorRequirement, 0, len(np.Spec.Template.Spec.Requirements))
	for _, r := range np.Spec.Template.Spec.Requirements {
		nsrs = append(nsrs, r.NodeSelectorRequirement)
	}
	reqs, err := scheduling.NewRequirements(nsrs...)
	if err != nil {
		return "" // an invalid pool is refused by validation, not treated as drift
	}
	reqs = reqs.Intersect(scheduling.FromLabels(np.Spec.Template.ObjectMeta.Labels))
	if err := reqs.MatchLabels(labels); err != nil {
		return fmt.Sprintf("NodePool %s: %v", np.Name, err)
	}
	return ""
}
