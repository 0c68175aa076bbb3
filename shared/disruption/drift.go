package disruption

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// DriftKind says which part of a node no longer matches what its NodePool or NodeClass asks for:
// the NodePool's kinds below, or a reason of the cloud's NodeClass rules (cloud.NodeClassRules,
// e.g. shared/cloud/aws/ec2class, shared/cloud/azure/aksclass).
type DriftKind = cloud.DriftReason

// NodePool drift kinds, checked in this order (the first found is reported) before the cloud's
// NodeClass rules, as Karpenter core checks the NodePool before asking CloudProvider.IsDrifted.
const (
	// DriftNodePoolHash: the NodePool template's shaping fields changed (karpenter.sh/nodepool-hash
	// on the NodeClaim differs from apisv1.NodePoolHash of the pool, same hash version).
	DriftNodePoolHash DriftKind = "NodePoolDrifted"
	// DriftRequirements: the node's labels no longer satisfy the NodePool's requirements or
	// template labels.
	DriftRequirements DriftKind = "RequirementsDrifted"
	// DriftNodeClassRef: the NodeClaim points at another NodeClass than the pool now does.
	DriftNodeClassRef DriftKind = "NodeClassRefDrifted"
)

// Drift is why a NodeClaim drifted, or Kind "" when it has not.
type Drift = cloud.Drift

// Drifted reports whether nc (and its node, when registered) drifted from its NodePool np and,
// through the cloud's rules, from its NodeClass class. A field the NodeClaim did not record at
// launch (no hash) is not compared: drift needs two known values that differ. node may be nil
// (labels then come from the NodeClaim); nil rules or the zero NodeClass skip the NodeClass
// checks.
func Drifted(nc *apisv1.NodeClaim, node *corev1.Node, np *apisv1.NodePool, class apisv1.NodeClass, rules cloud.NodeClassRules) Drift {
	if np == nil || nc == nil {
		return Drift{}
	}
	if h, ok := nc.Annotations[apisv1.AnnotationNodePoolHash]; ok && h != "" &&
		nc.Annotations[apisv1.AnnotationNodePoolHashVersion] == apisv1.NodePoolHashVersion {
		if want := apisv1.NodePoolHash(np); h != want {
			return Drift{Kind: DriftNodePoolHash, Field: "NodePool spec.template (karpenter.sh/nodepool-hash)",
				Detail: fmt.Sprintf("nodepool-hash %s, NodePool %s now hashes to %s", h, np.Name, want)}
		}
	}
	labels := nc.Labels
	if node != nil {
		labels = node.Labels
	}
	if d := requirementsDrift(np, labels); d != "" {
		return Drift{Kind: DriftRequirements, Field: "NodePool spec.template.spec.requirements (against the node's labels)", Detail: d}
	}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && nc.Spec.NodeClassRef != nil && ref.Name != nc.Spec.NodeClassRef.Name {
		return Drift{Kind: DriftNodeClassRef, Field: "NodePool spec.template.spec.nodeClassRef",
			Detail: fmt.Sprintf("NodeClass %s, NodePool %s now uses %s", nc.Spec.NodeClassRef.Name, np.Name, ref.Name)}
	}
	if rules == nil || class.IsZero() {
		return Drift{}
	}
	return rules.IsDrifted(nc, node, class)
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
