package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func specWith(req, lim corev1.ResourceList) *corev1.PodSpec {
	return &corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}}}
}

// Quantities the int64 arithmetic cannot hold wrapped to 0 or negative and planned the pod onto
// the smallest node; negative requests and limits below requests were accepted. The API server
// refuses the latter two, and the former must be refused before any sum.
func TestValidatePodResources(t *testing.T) {
	q := resource.MustParse
	for name, c := range map[string]struct {
		spec *corev1.PodSpec
		want string
	}{
		"cpu 1e30":             {specWith(corev1.ResourceList{corev1.ResourceCPU: q("1e30")}, nil), "spec.containers[1].resources.requests.cpu: 1e30 is too large"},
		"cpu 1e19":             {specWith(corev1.ResourceList{corev1.ResourceCPU: q("1e19")}, nil), "requests.cpu: 10e18 is too large"},
		"cpu 9223372036854776": {specWith(corev1.ResourceList{corev1.ResourceCPU: q("9223372036854776")}, nil), "requests.cpu: 9223372036854776 is too large"},
		"memory 1e19":          {specWith(corev1.ResourceList{corev1.ResourceMemory: q("1e19")}, nil), "requests.memory: 10e18 is too large"},
		"negative":             {specWith(corev1.ResourceList{corev1.ResourceMemory: q("-1Gi")}, nil), "requests.memory: -1Gi must be greater than or equal to 0"},
		"limit below request": {specWith(corev1.ResourceList{corev1.ResourceCPU: q("2")}, corev1.ResourceList{corev1.ResourceCPU: q("1")}),
			"spec.containers[1].resources.requests.cpu: 2 must be less than or equal to the cpu limit 1"},
		"overhead": {&corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}, Overhead: corev1.ResourceList{corev1.ResourceCPU: q("1e25")}}, "spec.overhead.cpu"},
	} {
		err := ValidatePodResources(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	// The largest CPU the math holds, and ordinary pods, pass.
	for _, s := range []*corev1.PodSpec{
		specWith(corev1.ResourceList{corev1.ResourceCPU: q("9223372036854775")}, nil),
		specWith(corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("1Gi")}, corev1.ResourceList{corev1.ResourceCPU: q("1")}),
	} {
		if err := ValidatePodResources(s); err != nil {
			t.Errorf("%v: %v", s.Containers[1].Resources, err)
		}
	}
}
