package kube

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// provisioningRequests returns the watched ProvisioningRequests of the classes Dovetail serves
// (another controller's class is not ours to read or answer), sorted by namespace/name, and the
// PodTemplates their pod sets name (only those: a cluster's other PodTemplates are no decision's
// business). A request that does not convert is left out and logged, like a NodePool.
func provisioningRequests(log *slog.Logger, st stores) ([]apisv1.ProvisioningRequest, []corev1.PodTemplate) {
	all, _ := convertAll[apisv1.ProvisioningRequest](log, st.provReqs, KindProvisioningRequest, true)
	var prs []apisv1.ProvisioningRequest
	named := map[string]bool{}
	for _, pr := range all {
		switch pr.Spec.ProvisioningClassName {
		case apisv1.ProvisioningClassCheckCapacity, apisv1.ProvisioningClassBestEffortAtomicScaleUp:
		default:
			continue
		}
		prs = append(prs, pr)
		for _, ps := range pr.Spec.PodSets {
			named[pr.Namespace+"/"+ps.PodTemplateRef.Name] = true
		}
	}
	var pts []corev1.PodTemplate
	for _, pt := range listTyped[corev1.PodTemplate](st.podTemplates) {
		if named[pt.Namespace+"/"+pt.Name] {
			pts = append(pts, *pt.DeepCopy())
		}
	}
	return prs, pts
}
