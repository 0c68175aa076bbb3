package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// By hand, from the LimitRanger rules: the namespace's LimitRange has, for containers,
// defaultRequest cpu 250m, default (limit) cpu 500m and memory 512Mi, and max memory 1Gi.
//   - a container with nothing set gets requests cpu 250m (defaultRequest) and memory 512Mi (no
//     defaultRequest for memory: the default limit stands in), limits cpu 500m, memory 512Mi;
//   - a container with a memory limit of 256Mi and no request keeps request = its limit (256Mi:
//     the API server defaulted it before admission) and gets cpu 250m;
//   - a container with its own cpu request 100m keeps it.
func TestApplyLimitRangeDefaults(t *testing.T) {
	q := resource.MustParse
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type:           corev1.LimitTypeContainer,
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("250m")},
		Default:        corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("512Mi")},
		Max:            corev1.ResourceList{corev1.ResourceMemory: q("1Gi")},
	}}}}
	spec := corev1.PodSpec{Containers: []corev1.Container{
		{Name: "bare"},
		{Name: "limited", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q("256Mi")}}},
		{Name: "own", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")}}},
	}}
	out := ApplyLimitRangeDefaults(spec, LimitRangesIn([]*corev1.LimitRange{lr}, "ns"))
	want := []struct{ cpu, mem string }{{"250m", "512Mi"}, {"250m", "256Mi"}, {"100m", "512Mi"}}
	for i, w := range want {
		r := out.Containers[i].Resources.Requests
		if c, m := r[corev1.ResourceCPU], r[corev1.ResourceMemory]; c.Cmp(q(w.cpu)) != 0 || m.Cmp(q(w.mem)) != 0 {
			t.Errorf("%s: requests cpu %s memory %s, want %s %s", out.Containers[i].Name, c.String(), m.String(), w.cpu, w.mem)
		}
	}
	if got := PodRequests(&corev1.Pod{Spec: out}); got.MilliCPU != 600 || got.Memory != (512+256+512)<<20 {
		t.Errorf("pod requests %s, want cpu 600m memory 1280Mi", got)
	}
	if len(spec.Containers[0].Resources.Requests) != 0 {
		t.Error("the input spec was modified")
	}
	if len(LimitRangesIn([]*corev1.LimitRange{lr}, "other")) != 0 {
		t.Error("a LimitRange of another namespace applied")
	}
}
