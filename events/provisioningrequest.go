package events

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// ValidateProvisioningRequest checks one ProvisioningRequest as a snapshot's is checked
// (validateProvisioningRequest), its fields named from the object ("spec.podSets[0].count"):
// `dovetail plan` and `explain` read them from a dump or a live cluster.
func ValidateProvisioningRequest(pr *apisv1.ProvisioningRequest) error {
	var errs fieldErrs
	validateProvisioningRequest("", pr, &errs)
	for _, e := range errs.errs {
		if fe, ok := e.(*FieldError); ok {
			fe.Path = strings.TrimPrefix(fe.Path, ".")
		}
	}
	return errs.err()
}

// validateProvisioningRequest checks a snapshot's ProvisioningRequest against the CRD's schema
// (infra/crds autoscaling.x-k8s.io_provisioningrequests.yaml), as the API server would have:
// 1 to 32 pod sets, each a DNS-subdomain PodTemplate name and a count of at least 1; a class
// name of at most 253 characters; at most 100 parameters of at most 255 characters each.
func validateProvisioningRequest(q string, pr *apisv1.ProvisioningRequest, errs *fieldErrs) {
	checkNamespaced(q, pr.Name, pr.Namespace, errs)
	metaValues(q, &pr.ObjectMeta, errs)
	if n := len(pr.Spec.PodSets); n < 1 || n > 32 {
		errs.add(q+".spec.podSets", "%d pod sets: must be 1 to 32", n)
	}
	for j, ps := range pr.Spec.PodSets {
		sp := fmt.Sprintf("%s.spec.podSets[%d]", q, j)
		if ps.Count < 1 {
			errs.add(sp+".count", "%d: must be at least 1", ps.Count)
		}
		for _, msg := range validation.IsDNS1123Subdomain(ps.PodTemplateRef.Name) {
			errs.add(sp+".podTemplateRef.name", "%q: %s", ps.PodTemplateRef.Name, msg)
		}
	}
	if c := pr.Spec.ProvisioningClassName; c == "" || len(c) > 253 {
		errs.add(q+".spec.provisioningClassName", "%d characters: must be 1 to 253", len(c))
	}
	if len(pr.Spec.Parameters) > 100 {
		errs.add(q+".spec.parameters", "%d parameters: at most 100", len(pr.Spec.Parameters))
	}
	for _, k := range slices.Sorted(maps.Keys(pr.Spec.Parameters)) {
		if v := pr.Spec.Parameters[k]; len(v) > 255 {
			errs.add(q+".spec.parameters."+k, "%d characters: at most 255", len(v))
		}
	}
	validateConditions(q+".status.conditions", pr.Status.Conditions, errs)
}
