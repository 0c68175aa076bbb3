package v1

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass status condition types, Karpenter's (karpenter-provider-aws pkg/apis/v1
// ec2nodeclass_status.go): each says one part of the class resolved; Ready is their conjunction.
const (
	ConditionSubnetsReady         = "SubnetsReady"
	ConditionSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionAMIsReady            = "AMIsReady"
	ConditionInstanceProfileReady = "InstanceProfileReady"
	ConditionValidationSucceeded  = "ValidationSucceeded"
)

// NodePool status condition types (Karpenter's, sigs.k8s.io/karpenter pkg/apis/v1
// nodepool_status.go): the pool is Ready when it validates and its NodeClass is Ready.
const (
	ConditionNodeClassReady = "NodeClassReady"
)

// NodePoolReadyDependents are the conditions a NodePool's Ready is the conjunction of.
var NodePoolReadyDependents = []string{ConditionValidationSucceeded, ConditionNodeClassReady}

// Condition reasons of the NodeClass status, Karpenter's where it has one (its nodeclass status
// controllers and operatorpkg's root condition).
const (
	ReasonSubnetsNotFound         = "SubnetsNotFound"
	ReasonSecurityGroupsNotFound  = "SecurityGroupsNotFound"
	ReasonAMINotFound             = "AMINotFound"
	ReasonUnsupportedAlias        = "UnsupportedAlias"
	ReasonInstanceProfileNotFound = "InstanceProfileNotFound"
	ReasonInstanceProfileError    = "InstanceProfileReconcileFailed"
	// Governance refusals (Dovetail's own, no Karpenter counterpart): the deployment's IAM
	// would refuse a launch with what the selectors resolved (an untagged or foreign subnet or
	// security group, an image of an unapproved owner, a parameter outside the approved paths)
	// or without the mandatory tags.
	ReasonSubnetsNotAllowed        = "SubnetsNotAllowed"
	ReasonSecurityGroupsNotAllowed = "SecurityGroupsNotAllowed"
	ReasonAMINotAllowed            = "AMINotAllowed"
	ReasonMandatoryTagsMissing     = "MandatoryTagsMissing"
	// ReasonUnhealthyDependents is the Ready=False reason when a dependent condition is False;
	// the message lists them ("SubnetsReady=False, AMIsReady=False").
	ReasonUnhealthyDependents = "UnhealthyDependents"
	// ReasonNotSupported marks a field Dovetail does not implement (ValidationSucceeded=False).
	ReasonNotSupported = "NotSupported"
	// ReasonNodeClassNotFound is NodeClassReady=False for a NodePool whose NodeClass does not exist.
	ReasonNodeClassNotFound = "NodeClassNotFound"
	// ReasonNodeClassNotReady is NodeClassReady=False for a NodePool whose NodeClass is not Ready.
	ReasonNodeClassNotReady = "NodeClassNotReady"
	// ReasonValidationFailed is ValidationSucceeded=False for a NodePool that does not validate.
	ReasonValidationFailed = "ValidationFailed"
)

// EC2NodeClassReadyDependents are the conditions an EC2NodeClass's Ready is the conjunction of.
var EC2NodeClassReadyDependents = []string{
	ConditionSubnetsReady, ConditionSecurityGroupsReady, ConditionAMIsReady, ConditionInstanceProfileReady,
	ConditionCapacityReservationsReady, ConditionPlacementGroupReady, ConditionValidationSucceeded,
}

// AKSNodeClass status condition types, the Azure provider's (karpenter-provider-azure
// pkg/apis/v1beta1 aksnodeclass_status.go); SubnetsReady and ValidationSucceeded are shared with
// EC2NodeClass. Ready is their conjunction.
const (
	ConditionImagesReady            = "ImagesReady"
	ConditionKubernetesVersionReady = "KubernetesVersionReady"
)

// AKSNodeClassReadyDependents are the conditions an AKSNodeClass's Ready is the conjunction of.
var AKSNodeClassReadyDependents = []string{
	ConditionImagesReady, ConditionKubernetesVersionReady, ConditionSubnetsReady, ConditionValidationSucceeded,
}

// Conditions returns the member's status conditions (nil for the zero NodeClass).
func (n NodeClass) Conditions() []metav1.Condition {
	switch {
	case n.EC2 != nil:
		return n.EC2.Status.Conditions
	case n.AKS != nil:
		return n.AKS.Status.Conditions
	}
	return nil
}

// NotReady says why a NodeClass may not launch: "" when it may. A NodeClass whose status has no
// Ready condition has not been resolved by Dovetail yet (a manifest read by `dovetail plan`, a
// class created a moment ago) and may launch: the launch resolves its selectors itself and fails
// loudly. Ready=False or Unknown is refused with the condition's reason and message, as
// Karpenter refuses a NodePool whose NodeClass is not Ready.
func (n NodeClass) NotReady() string {
	c := meta.FindStatusCondition(n.Conditions(), ConditionReady)
	if c == nil || c.Status == metav1.ConditionTrue {
		return ""
	}
	why := fmt.Sprintf("%s %s is not ready (Ready=%s, %s", n.Kind(), n.Name(), c.Status, c.Reason)
	if c.Message != "" {
		why += ": " + c.Message
	}
	// The failing dependents' own messages say what to fix (e.g. which selector matched nothing).
	var details []string
	for _, d := range n.Conditions() {
		if d.Type != ConditionReady && d.Status != metav1.ConditionTrue && d.Message != "" {
			details = append(details, d.Type+": "+d.Message)
		}
	}
	sort.Strings(details)
	if len(details) > 0 {
		why += "; " + strings.Join(details, "; ")
	}
	return why + ")"
}

// SetReadyFromDependents sets conds' Ready condition from the dependents: True when every one
// is True, else False with ReasonUnhealthyDependents and the unhealthy ones in the message
// (Unknown when none is False), as operatorpkg computes a root condition. A dependent that is
// missing counts as Unknown.
func SetReadyFromDependents(conds *[]metav1.Condition, generation int64, dependents []string) {
	var bad []string
	status := metav1.ConditionUnknown
	for _, d := range dependents {
		c := meta.FindStatusCondition(*conds, d)
		switch {
		case c == nil:
			bad = append(bad, d+"="+string(metav1.ConditionUnknown))
		case c.Status != metav1.ConditionTrue:
			bad = append(bad, d+"="+string(c.Status))
			if c.Status == metav1.ConditionFalse {
				status = metav1.ConditionFalse
			}
		}
	}
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ConditionReady, ObservedGeneration: generation}
	if len(bad) > 0 {
		ready.Status, ready.Reason, ready.Message = status, ReasonUnhealthyDependents, strings.Join(bad, ", ")
		if status == metav1.ConditionUnknown {
			ready.Reason = "ReconcilingDependents"
		}
	}
	SetCondition(conds, ready)
}

// SetCondition replaces the condition of c's type in conds (or appends c), leaving
// lastTransitionTime as c has it: unlike meta.SetStatusCondition it reads no clock, so the core
// stays deterministic; the agent keeps the old time when the status did not change and stamps
// its own when it did.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			(*conds)[i] = c
			return
		}
	}
	*conds = append(*conds, c)
}

// UnsupportedEC2NodeClassFields lists the fields of the NodeClass that a user set and Dovetail
// does not implement, each with why ("spec.connectionTracking: ..."). They make
// ValidationSucceeded (and so Ready) False, so the class launches nothing rather than launching
// something other than what was asked.
func UnsupportedEC2NodeClassFields(nc *EC2NodeClass) []string {
	var out []string
	s := nc.Spec
	if len(s.NetworkInterfaces) > 0 {
		out = append(out, "spec.networkInterfaces: Dovetail does not launch multi-card / EFA network interfaces yet")
	}
	if s.ConnectionTracking != nil {
		out = append(out, "spec.connectionTracking: Dovetail does not set connection tracking timeouts yet")
	}
	if s.CPUOptions != nil && s.CPUOptions.NestedVirtualization != nil {
		out = append(out, "spec.cpuOptions.nestedVirtualization: Dovetail does not set CPU options yet")
	}
	return out
}

// UnsupportedNodePoolFields lists the NodePool fields a user set that Dovetail does not
// implement, each with why. They make the pool's ValidationSucceeded (and Ready) False and the
// solver refuses the pool with the same words.
// Every field of Karpenter v1.14's NodePool is implemented now (spec.replicas, the last one,
// by shared/static), so the list is empty; it stays the one place a field is refused.
func UnsupportedNodePoolFields(*NodePool) []string { return nil }
