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
	check := func(field string, r corev1.ResourceRequirements) error {
		for _, list := range []struct {
			name string
			l    corev1.ResourceList
		}{{"requests", r.Requests}, {"limits", r.Limits}} {
			for _, name := range sortedNames(list.l) {
				if err := checkQuantity(fmt.Sprintf("%s.resources.%s.%s", field, list.name, name), name, list.l[name]); err != nil {
					return err
				}
			}
		}
		for _, name := range sortedNames(r.Requests) {
			req := r.Requests[name]
			if lim, ok := r.Limits[name]; ok && lim.Cmp(req) < 0 {
				return fmt.Errorf("%s.resources.requests.%s: %s must be less than or equal to the %s limit %s", field, name, short(req), name, short(lim))
			}
		}
		return nil
	}
	for i, c := range spec.InitContainers {
		if err := check(fmt.Sprintf("spec.initContainers[%d]", i), c.Resources); err != nil {
			return err
		}
	}
	for i, c := range spec.Containers {
		if err := check(fmt.Sprintf("spec.containers[%d]", i), c.Resources); err != nil {
			return err
		}
	}
	for _, name := range sortedNames(spec.Overhead) {
		if err := checkQuantity("spec.overhead."+string(name), name, spec.Overhead[name]); err != nil {
			return err
		}
	}
	return nil
}

func checkQuantity(field string, name corev1.ResourceName, q resource.Quantity) error {
	if q.Sign() < 0 {
		return fmt.Errorf("%s: %s must be greater than or equal to 0", field, short(q))
	}
	limit := maxUnits
	if name == corev1.ResourceCPU {
		limit = maxMilli
	}
	if q.Cmp(*limit) > 0 {
		return fmt.Errorf("%s: %s is too large (at most %s)", field, short(q), limit.String())
	}
	return nil
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
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
