package provisioning

import corev1 "k8s.io/api/core/v1"

// RefusalKind classifies why a NodePool turned a pending pod away. The kinds are the stages of
// the solver's compatibility and fit checks (compatibility, whyNot); a new stage adds a kind.
type RefusalKind string

// Refusal kinds, in the order the solver checks them.
const (
	// RefusalPod: the pod itself cannot be planned (an invalid spec, a volume with no topology);
	// NodePool is empty.
	RefusalPod RefusalKind = "Pod"
	// RefusalNoNodePool: the cluster has no NodePool at all; NodePool is empty.
	RefusalNoNodePool RefusalKind = "NoNodePool"
	// RefusalNodePool: the NodePool cannot launch anything (being deleted, static, invalid
	// requirements, its NodeClass missing or not resolved).
	RefusalNodePool RefusalKind = "NodePool"
	// RefusalTaint: a taint of the NodePool's template the pod does not tolerate.
	RefusalTaint RefusalKind = "Taint"
	// RefusalRequirement: the pod's node selector or node affinity conflicts with the NodePool's
	// requirements or labels, or no instance type of the pool satisfies them.
	RefusalRequirement RefusalKind = "Requirement"
	// RefusalCapacity: no compatible instance type is large enough for the pod's requests after
	// DaemonSet overhead.
	RefusalCapacity RefusalKind = "Capacity"
	// RefusalHostPort: a DaemonSet takes one of the pod's host ports on every instance type.
	RefusalHostPort RefusalKind = "HostPort"
	// RefusalTopology: a topology spread or pod (anti-)affinity constraint leaves a new node no
	// domain.
	RefusalTopology RefusalKind = "Topology"
	// RefusalLimit: the NodePool's spec.limits have no room left for any type the pod fits.
	RefusalLimit RefusalKind = "Limit"
	// RefusalGuardrail: the NodePool's price guardrail (apisv1.AnnotationMaxPricePerHour) or a
	// scale-up rate policy (guardrails.AnnotationScaleUpPolicies) has no room left (with or
	// without other limits).
	RefusalGuardrail RefusalKind = "Guardrail"
	// RefusalScaleUpHeld: the NodePool's anomaly hold (guardrails.AnnotationAnomalyHold) keeps
	// back the NodeClaims the plan would add to it (HoldAnomalies), or its annotation is invalid.
	RefusalScaleUpHeld RefusalKind = "ScaleUpHeld"
	// RefusalMinValues: the instance types that fit the pod cannot meet the pool's minValues.
	RefusalMinValues RefusalKind = "MinValues"
	// RefusalOther: the requirements and topology together leave no type.
	RefusalOther RefusalKind = "Other"
)

// Refusal is one NodePool's answer to a pending pod: the kind and the solver's message (which
// names the NodePool and the requirement, taint, limit or type that refused). Unschedulable.Reason
// is the Refusals' messages joined.
type Refusal struct {
	NodePool string      `json:"nodePool,omitempty"`
	Kind     RefusalKind `json:"kind"`
	Message  string      `json:"message"`
}

// limitKind is RefusalGuardrail when the price guardrail or a scale-up rate policy
// (guardrails.AnnotationScaleUpPolicies) is among the limits that refused, else RefusalLimit.
func limitKind(exceeded []corev1.ResourceName) RefusalKind {
	for _, r := range exceeded {
		if r == ResourcePricePerHour || r == ResourceScaleUpNodes || r == ResourceScaleUpPricePerHour {
			return RefusalGuardrail
		}
	}
	return RefusalLimit
}
