package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

type originKey struct{}

// WithOrigin tells the Applier which function decided the command being applied (the event
// source's component: provision, interruption, consolidate, drift, lifecycle), for the reason
// label of karpenter_nodeclaims_created_total.
func WithOrigin(ctx context.Context, component string) context.Context {
	return context.WithValue(ctx, originKey{}, component)
}

// CreatedReason is the reason label of a NodeClaim created for the command in ctx: Karpenter's
// "provisioned" for the provisioner's launches and, for replacements launched by a disruption,
// the disruption reason in Karpenter's spelling (lower case): "underutilized" (consolidation),
// "drifted", "interrupted" (a spot or scheduled interruption's pre-spun replacement).
func CreatedReason(ctx context.Context) string {
	switch c, _ := ctx.Value(originKey{}).(string); c {
	case "consolidate":
		return "underutilized"
	case "drift":
		return "drifted"
	case "interruption":
		return "interrupted"
	default:
		return "provisioned"
	}
}

// MinValuesRelaxed is the min_values_relaxed label of karpenter_nodeclaims_created_total: the
// NodeClaim's karpenter.sh/nodeclaim-min-values-relaxed annotation, "false" when it has none
// (Karpenter's provisioner reads it the same way when it counts a created NodeClaim).
func MinValuesRelaxed(nc *apisv1.NodeClaim) string {
	if v, ok := nc.Annotations[apisv1.AnnotationNodeClaimMinValuesRelaxed]; ok {
		return v
	}
	return "false"
}

// nodeLabels are a Node's nodepool and zone labels (Karpenter's label values of its node
// counters).
func nodeLabels(n *corev1.Node) (pool, zone string) {
	return n.Labels[apisv1.LabelNodePool], n.Labels[corev1.LabelTopologyZone]
}
