package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkPodRequests computes the requests of 10,000 two-container pods (one with an
// extended resource), as every solver run over a cluster's bound pods does: computed each
// time, and from a RequestMemo that has seen them (the preview's second and later runs).
func BenchmarkPodRequests(b *testing.B) {
	pods := make([]corev1.Pod, 10000)
	for i := range pods {
		pods[i] = corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p-", i)}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}},
			{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), "example.com/dev": resource.MustParse("1")}}},
		}}}
	}
	b.Run("computed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range pods {
				_ = PodRequests(&pods[i])
			}
		}
	})
	b.Run("memo", func(b *testing.B) {
		b.ReportAllocs()
		m := NewRequestMemo()
		for b.Loop() {
			for i := range pods {
				_ = m.Requests(&pods[i])
			}
		}
	})
}
