package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func memoPod(cpu string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

// TestRequestMemo: a copy of a pod (same container storage) is served from the memo; a pod of
// the same name with a spec of its own is recomputed, so a changed spec is never answered from
// the memo; nil computes.
func TestRequestMemo(t *testing.T) {
	m := NewRequestMemo()
	p := memoPod("250m")
	if got := m.Requests(&p).MilliCPU; got != 250 {
		t.Fatalf("first: %d mCPU, want 250", got)
	}
	moved := p // the preview moves a pod by copying the struct
	moved.Spec.NodeName = "n"
	if got := m.Requests(&moved).MilliCPU; got != 250 {
		t.Fatalf("copy: %d mCPU, want 250", got)
	}
	other := memoPod("1") // same namespace/name, its own containers
	if got := m.Requests(&other).MilliCPU; got != 1000 {
		t.Fatalf("new spec under the same name: %d mCPU, want 1000 (recomputed)", got)
	}
	with := memoPod("100m")
	with.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	if got := m.Requests(&with).MilliCPU; got != 110 {
		t.Fatalf("with overhead: %d mCPU, want 110 (100m + 10m overhead)", got)
	}
	var none *RequestMemo
	if got := none.Requests(&p).MilliCPU; got != 250 {
		t.Fatalf("nil memo: %d mCPU, want 250", got)
	}
}
