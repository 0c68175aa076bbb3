package scheduling

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounds of the numbers the resource math uses: CPU in int64 millicores, everything else in
// int64 units. A quantity beyond them (cpu: 1e30, 9223372036854776) would wrap to 0 or a negative
// number and plan the pod onto the smallest node.
var (
	maxMilli = resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	maxUnits = resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
)

// ValidatePodResources checks what the API server checks of a pod's resources, and what
// Dovetail's arithmetic needs: every request and limit of every container, init container and
// the pod overhead is non-negative and fits int64 (millicores for CPU), and no limit is below
// its request. The error names the field ("spec.containers[1].resources.requests.cpu") and the
// value, truncated.
func ValidatePodResources(spec *corev1.PodSpec) error {
	// Field paths are spelled only for an error: a valid pod (the common case) costs no string.
	check := func(list string, i int, r corev1.ResourceRequirements) error {
		if resourcesOK(r) {
			return nil
		}
		for _, l := range []struct {
			name string
			l    corev1.ResourceList
		}{{"requests", r.Requests}, {"limits", r.Limits}} {
			for _, name := range sortedNames(l.l) {
				if why := checkQuantity(name, l.l[name]); why != "" {
					return fmt.Errorf("spec.%s[%d].resources.%s.%s: %s", list, i, l.name, name, why)
				}
			}
		}
		for _, name := range sortedNames(r.Requests) {
			req := r.Requests[name]
			if lim, ok := r.Limits[name]; ok && lim.Cmp(req) < 0 {
				return fmt.Errorf("spec.%s[%d].resources.requests.%s: %s must be less than or equal to the %s limit %s", list, i, name, short(req), name, short(lim))
			}
		}
		return nil
	}
	for i, c := range spec.InitContainers {
		if err := check("initContainers", i, c.Resources); err != nil {
			return err
		}
	}
	for i, c := range spec.Containers {
		if err := check("containers", i, c.Resources); err != nil {
			return err
		}
	}
	for _, name := range sortedNames(spec.Overhead) {
		if why := checkQuantity(name, spec.Overhead[name]); why != "" {
			return fmt.Errorf("spec.overhead.%s: %s", name, why)
		}
	}
	return nil
}

// resourcesOK is the check of ValidatePodResources without the names: a valid container (the
// common case) is passed in map order, and only a bad one is walked again in name order, so the
// first error reported does not depend on map order.
func resourcesOK(r corev1.ResourceRequirements) bool {
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		for name, q := range l {
			if checkQuantity(name, q) != "" {
				return false
			}
		}
	}
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && lim.Cmp(req) < 0 {
			return false
		}
	}
	return true
}

// checkQuantity says what is wrong with a quantity ("" when nothing is).
func checkQuantity(name corev1.ResourceName, q resource.Quantity) string {
	if q.Sign() < 0 {
		return short(q) + " must be greater than or equal to 0"
	}
	limit := maxUnits
	if name == corev1.ResourceCPU {
		limit = maxMilli
	}
	if q.Cmp(*limit) > 0 {
		return fmt.Sprintf("%s is too large (at most %s)", short(q), limit.String())
	}
	return ""
}

// short renders a quantity for an error, at most 32 characters.
func short(q resource.Quantity) string {
	s := q.String()
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	if len(l) == 0 {
		return nil
	}
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
