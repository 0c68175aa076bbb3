package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProvisioningRequest is Cluster Autoscaler's autoscaling.x-k8s.io/v1 ProvisioningRequest
// (kubernetes/autoscaler cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1
// types.go), the API Kueue's ProvisioningRequest admission check creates: "capacity for these
// pods, all of it or none". Dovetail serves its two Kubernetes classes, check-capacity and
// best-effort-atomic-scale-up (shared/provreq). The CRD is infra/crds'
// autoscaling.x-k8s.io_provisioningrequests.yaml. It lives in this package with the other
// plain API types so the snapshot (package events, which imports only this package) can carry
// it.
// +kubebuilder:object:root=true
type ProvisioningRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is immutable (the CRD's x-kubernetes-validations: self == oldSelf).
	Spec   ProvisioningRequestSpec   `json:"spec"`
	Status ProvisioningRequestStatus `json:"status,omitempty"`
}

// ProvisioningRequestList is a list of ProvisioningRequests.
// +kubebuilder:object:root=true
type ProvisioningRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProvisioningRequest `json:"items"`
}

// ProvisioningRequestSpec names the pods to find or make room for.
type ProvisioningRequestSpec struct {
	// PodSets are 1 to 32 groups of pods, each a PodTemplate of the request's namespace and a
	// count.
	PodSets []PodSet `json:"podSets"`
	// ProvisioningClassName picks the class (ProvisioningClassCheckCapacity,
	// ProvisioningClassBestEffortAtomicScaleUp, or another controller's, which Dovetail leaves
	// alone).
	ProvisioningClassName string `json:"provisioningClassName"`
	// Parameters are the class's parameters (at most 100, each at most 255 characters):
	// ParameterValidUntilSeconds and ParameterNoRetry are read.
	Parameters map[string]Parameter `json:"parameters,omitempty"`
}

// Parameter is a class parameter's value (at most 255 characters).
type Parameter string

// PodSet is Count pods of the PodTemplate PodTemplateRef.Name.
type PodSet struct {
	PodTemplateRef Reference `json:"podTemplateRef"`
	// Count is at least 1.
	Count int32 `json:"count"`
}

// Reference names an object of the request's namespace.
type Reference struct {
	Name string `json:"name,omitempty"`
}

// ProvisioningRequestStatus is what the autoscaler answered.
type ProvisioningRequestStatus struct {
	// Conditions are keyed by type (Accepted, Provisioned, Failed, BookingExpired,
	// CapacityRevoked).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningClassDetails are the class's other answers (at most 64; each at most 32768
	// characters).
	ProvisioningClassDetails map[string]Detail `json:"provisioningClassDetails,omitempty"`
}

// Detail is one value of ProvisioningClassDetails.
type Detail string

// Cluster Autoscaler's names (autoscaling.x-k8s.io/v1 types.go): condition types, classes and
// the pod annotations.
const (
	// ProvisioningRequestAccepted: the autoscaler took the request on.
	ProvisioningRequestAccepted = "Accepted"
	// ProvisioningRequestProvisioned: the capacity is there (True) or not yet (False).
	ProvisioningRequestProvisioned = "Provisioned"
	// ProvisioningRequestFailed: the request will not be served (terminal).
	ProvisioningRequestFailed = "Failed"
	// ProvisioningRequestBookingExpired: the booking window after Provisioned ran out.
	ProvisioningRequestBookingExpired = "BookingExpired"
	// ProvisioningRequestCapacityRevoked: capacity once provisioned is gone before its pods used it.
	ProvisioningRequestCapacityRevoked = "CapacityRevoked"

	// ProvisioningClassCheckCapacity books capacity the cluster has (or has in flight) without
	// launching.
	ProvisioningClassCheckCapacity = "check-capacity.autoscaling.x-k8s.io"
	// ProvisioningClassBestEffortAtomicScaleUp launches every node the pods need, or none.
	ProvisioningClassBestEffortAtomicScaleUp = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

	// AnnotationConsumeProvisioningRequest, on a pod, names the ProvisioningRequest (same
	// namespace) whose capacity it is to use.
	AnnotationConsumeProvisioningRequest = "autoscaling.x-k8s.io/consume-provisioning-request"
	// AnnotationConsumeProvisioningRequestLegacy is the older key Cluster Autoscaler still
	// reads (cluster-autoscaler.kubernetes.io/consume-provisioning-request).
	AnnotationConsumeProvisioningRequestLegacy = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
	// AnnotationProvisioningClass, on a consuming pod, names its request's class (Kueue sets it
	// with the consume annotation from the pod set's update; Cluster Autoscaler's
	// ProvisioningClassPodAnnotationKey); AnnotationProvisioningClassLegacy is the older key.
	AnnotationProvisioningClass       = "autoscaling.x-k8s.io/provisioning-class-name"
	AnnotationProvisioningClassLegacy = "cluster-autoscaler.kubernetes.io/provisioning-class-name"

	// ParameterValidUntilSeconds (best-effort-atomic-scale-up): how long after its creation a
	// request is retried before it fails, in seconds.
	ParameterValidUntilSeconds = "ValidUntilSeconds"
	// ParameterNoRetry (check-capacity): "true" fails the request the first time capacity is
	// not found instead of retrying.
	ParameterNoRetry = "noRetry"
)

// ConsumesProvisioningRequest reports whether a pod with these annotations carries a consume
// annotation (the current key, else the legacy one) and the request it names. Present counts,
// even empty: Cluster Autoscaler's ProvisioningRequestPodsFilter (processors/provreq
// pods_filter.go, provisioningRequestName) tests the key's presence.
func ConsumesProvisioningRequest(annotations map[string]string) (name string, ok bool) {
	if n, ok := annotations[AnnotationConsumeProvisioningRequest]; ok {
		return n, true
	}
	n, ok := annotations[AnnotationConsumeProvisioningRequestLegacy]
	return n, ok
}

// ProvisioningClassOfPod is the class a consuming pod's annotations name (the current key, else
// the legacy one), or "".
func ProvisioningClassOfPod(annotations map[string]string) string {
	if c := annotations[AnnotationProvisioningClass]; c != "" {
		return c
	}
	return annotations[AnnotationProvisioningClassLegacy]
}

// IsProvisioningRequestCondition reports whether typ is one of Cluster Autoscaler's
// ProvisioningRequest condition types, the only ones Dovetail writes.
func IsProvisioningRequestCondition(typ string) bool {
	switch typ {
	case ProvisioningRequestAccepted, ProvisioningRequestProvisioned, ProvisioningRequestFailed,
		ProvisioningRequestBookingExpired, ProvisioningRequestCapacityRevoked:
		return true
	}
	return false
}
