package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeOverlay is Karpenter's karpenter.sh/v1alpha1 NodeOverlay (kubernetes-sigs/karpenter
// pkg/apis/v1alpha1/nodeoverlay.go, v1.14.0): a price change and/or extended resources for the
// instance types (and offerings) its requirements select, applied to the scheduling simulation
// only. It lives in this package with the other plain API types so the snapshot (package
// events, which imports only this package) can carry it.
// +kubebuilder:object:root=true
type NodeOverlay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeOverlaySpec   `json:"spec"`
	Status            NodeOverlayStatus `json:"status,omitempty"`
}

// NodeOverlayList is a list of NodeOverlays.
// +kubebuilder:object:root=true
type NodeOverlayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeOverlay `json:"items"`
}

// NodeOverlaySpec is what an overlay changes and where.
type NodeOverlaySpec struct {
	// Requirements select the instance types and offerings the overlay applies to: well-known
	// labels (instance type, family, zone, capacity type, karpenter.sh/nodepool) and the
	// NodePools' template labels. At most 100; operators In, NotIn, Exists, DoesNotExist, Gt,
	// Lt, Gte, Lte.
	Requirements []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	// PriceAdjustment changes the selected offerings' prices: a signed USD amount ("-0.5",
	// "+1.2") or a signed percentage ("+10%", "-15%", at most -99.99…% or exactly "-100%").
	// The result is floored at 0. Exclusive with Price.
	PriceAdjustment *string `json:"priceAdjustment,omitempty"`
	// Price replaces the selected offerings' prices (USD per hour, an unsigned decimal:
	// "0.25"). Exclusive with PriceAdjustment.
	Price *string `json:"price,omitempty"`
	// Capacity adds extended resources to the selected instance types (a name the type already
	// has is replaced); cpu, memory, ephemeral-storage and pods are refused.
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Weight orders overlays, 1-10000 (unset counts as 0): the higher weight wins an offering or
	// resource both select; equal weights conflict.
	Weight *int32 `json:"weight,omitempty"`
}

// NodeOverlayStatus is what Dovetail observed: Ready and its one dependent,
// ConditionValidationSucceeded (Karpenter v1alpha1 nodeoverlay_status.go).
type NodeOverlayStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

const (
	// NodeOverlayVersion is the version Karpenter v1.14 serves NodeOverlay at (alpha).
	NodeOverlayVersion      = "v1alpha1"
	NodeOverlayGroupVersion = Group + "/" + NodeOverlayVersion
	KindNodeOverlay         = "NodeOverlay"

	// ReasonRuntimeValidation and ReasonConflict are the reasons Karpenter's nodeoverlay
	// controller sets ValidationSucceeded=False with; MessageOverlayConflict is its conflict
	// message (pkg/controllers/nodeoverlay/controller.go, updateOverlayStatuses).
	ReasonRuntimeValidation = "RuntimeValidation"
	ReasonConflict          = "Conflict"
	MessageOverlayConflict  = "conflict with another overlay"

	// AnnotationPriceOverlayApplied and AnnotationCapacityOverlayApplied mark a NodeClaim one of
	// whose instance types had a price (capacity) overlay applied (Karpenter v1alpha1
	// labels.go; nodeclaimtemplate.go sets them). The AWS provider launches such a claim with
	// the prioritized fleet strategies, each override's priority its overlaid price.
	AnnotationPriceOverlayApplied    = Group + "/price-overlay-applied"
	AnnotationCapacityOverlayApplied = Group + "/capacity-overlay-applied"
)

// OverlayWeight is the overlay's weight, 0 when unset (Karpenter's lo.FromPtr).
func (o *NodeOverlay) OverlayWeight() int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}
