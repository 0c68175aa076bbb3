package apis

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// The NodeOverlay rules are Karpenter v1.14.0's: the OpenAPI patterns and CEL rules of the
// karpenter.sh_nodeoverlays.yaml CRD (what the API server refuses) in ValidateNodeOverlay, and
// the controller's RuntimeValidate (pkg/apis/v1alpha1/nodeoverlay_validation.go, reported as
// ValidationSucceeded=False, reason RuntimeValidation) in ValidateNodeOverlayRuntime.

var (
	// overlayPriceRe and overlayPriceAdjustmentRe are the CRD's patterns for spec.price and
	// spec.priceAdjustment: an unsigned decimal; a signed amount, a "+" percentage, a "-"
	// percentage of at most two integer digits, or exactly "-100%".
	overlayPriceRe           = regexp.MustCompile(`^\d+(\.\d+)?$`)
	overlayPriceAdjustmentRe = regexp.MustCompile(`^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$`)
)

const (
	maxOverlayWeight = 10000 // spec.weight maximum (minimum 1)
)

// overlayRestrictedResources are the resources spec.capacity may not name (the CRD's CEL rule and
// Karpenter's WellKnownResources).
var overlayRestrictedResources = map[corev1.ResourceName]bool{
	corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true, corev1.ResourcePods: true,
}

// ValidateNodeOverlay checks what the API server checks of a NodeOverlay: name, requirements (at
// most 100; qualified keys outside the restricted label domains, karpenter.sh/nodepool and
// karpenter.sh/capacity-type allowed; In and NotIn with values; Gt/Lt/Gte/Lte with one
// non-negative integer; label values), price and priceAdjustment formats and exclusivity,
// capacity (valid quantities, no cpu/memory/ephemeral-storage/pods) and weight 1-10000.
func ValidateNodeOverlay(o *v1.NodeOverlay) field.ErrorList {
	if o == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no NodeOverlay")}
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	errs = append(errs, validateName(o.Name)...)
	rp := spec.Child("requirements")
	if len(o.Spec.Requirements) > maxRequirements {
		errs = append(errs, field.TooMany(rp, len(o.Spec.Requirements), maxRequirements))
	}
	for i, r := range o.Spec.Requirements {
		p := rp.Index(i)
		// The overlay CRD allows karpenter.sh/nodepool, which a NodePool may not require.
		errs = append(errs, validateRequirement(v1.NodeSelectorRequirementWithMinValues{NodeSelectorRequirement: r}, p, r.Key != v1.LabelNodePool)...)
		if r.Operator == corev1.NodeSelectorOpNotIn && len(r.Values) == 0 {
			errs = append(errs, field.Required(p.Child("values"), "requirements with operator 'NotIn' must have a value defined"))
		}
	}
	if o.Spec.Price != nil && o.Spec.PriceAdjustment != nil {
		errs = append(errs, field.Forbidden(spec, "cannot set both 'price' and 'priceAdjustment'"))
	}
	if p := o.Spec.Price; p != nil && !overlayPriceRe.MatchString(*p) {
		errs = append(errs, field.Invalid(spec.Child("price"), *p, "must be an unsigned decimal USD price per hour (\"0.25\")"))
	}
	if p := o.Spec.PriceAdjustment; p != nil && !overlayPriceAdjustmentRe.MatchString(*p) {
		errs = append(errs, field.Invalid(spec.Child("priceAdjustment"), *p,
			"must be a signed amount (\"-0.5\", \"+1.2\") or a signed percentage (\"+10%\", \"-15%\"; a decrease of at most 100%)"))
	}
	cp := spec.Child("capacity")
	for _, name := range sortedResourceNames(o.Spec.Capacity) {
		if overlayRestrictedResources[name] {
			errs = append(errs, field.Forbidden(cp.Key(string(name)), "invalid resource restricted: a NodeOverlay adds extended resources only, never cpu, memory, ephemeral-storage or pods"))
		}
	}
	errs = append(errs, validate.ResourceList(o.Spec.Capacity, cp)...)
	if w := o.Spec.Weight; w != nil && (*w < 1 || *w > maxOverlayWeight) {
		errs = append(errs, field.Invalid(spec.Child("weight"), *w, fmt.Sprintf("must be between 1 and %d", maxOverlayWeight)))
	}
	return errs
}

// wellKnownValues are the labels whose values Karpenter knows, for the runtime check that an In
// requirement names at least one of them (Karpenter v1 WellKnownValuesForRequirements).
var wellKnownValues = map[string][]string{
	v1.LabelCapacityType: {v1.CapacityTypeOnDemand, v1.CapacityTypeReserved, v1.CapacityTypeSpot},
}

// ValidateNodeOverlayRuntime is Karpenter's NodeOverlay RuntimeValidate: the checks its
// controller runs before applying an overlay, whose failure it reports as
// ValidationSucceeded=False with reason RuntimeValidation instead of a refusal. Beyond the
// admission rules it refuses an In requirement on a label with known values (capacity type)
// none of whose values is known. Each error names its field.
func ValidateNodeOverlayRuntime(o *v1.NodeOverlay) field.ErrorList {
	errs := ValidateNodeOverlay(o)
	if o == nil {
		return errs
	}
	rp := field.NewPath("spec", "requirements")
	for i, r := range o.Spec.Requirements {
		known, ok := wellKnownValues[scheduling.NormalizeLabelKey(r.Key)]
		if !ok || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		valid := false
		for _, v := range r.Values {
			for _, k := range known {
				valid = valid || v == k
			}
		}
		if !valid {
			errs = append(errs, field.Invalid(rp.Index(i).Child("values"), r.Values,
				fmt.Sprintf("no valid values found for %s, expected one of: %s", r.Key, strings.Join(known, ", "))))
		}
	}
	return errs
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
