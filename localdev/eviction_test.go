package localdev

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The in-memory API server's Eviction API holds PodDisruptionBudgets as the real one does, and
// the pod's controller makes it again: three healthy web pods under maxUnavailable 1 give one
// eviction (the pod recreated pending under a new name), then 429 Too Many Requests until the
// new pod is healthy; a StatefulSet's pod comes back under its own name.
func TestInMemoryEvictionHoldsPDBsAndRecreatesPods(t *testing.T) {
	c := NewInMemoryCluster()
	// Bounded, so a wait that never ends fails naming what it waited for instead of hanging the package.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	yes := true
	pod := func(name, kind string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "web", Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	for _, p := range []*corev1.Pod{pod("web-0", "Deployment"), pod("web-1", "Deployment"), pod("db-0", "StatefulSet")} {
		if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	one := intstr.FromInt32(1)
	if _, err := c.Kube.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	evict := func(name string) error {
		return c.Kube.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	if err := evict("web-0"); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	if err := evict("web-1"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction: %v, want 429 (the new pod is not healthy yet)", err)
	}
	if err := evict("db-0"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("db-0 (selected by the same budget): %v, want 429", err)
	}
	pods, err := c.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for _, p := range pods.Items {
		if p.Name == "web-0" {
			t.Fatal("web-0 still there after its eviction")
		}
		if p.Spec.NodeName == "" && p.Status.Phase == corev1.PodPending {
			pending = append(pending, p.Name)
		}
	}
	if len(pods.Items) != 3 || len(pending) != 1 || pending[0] == "web-0" {
		t.Fatalf("%d pods, pending %v: want web-0 recreated pending under a new name", len(pods.Items), pending)
	}
	if err := c.Kube.CoreV1().Pods("default").Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	db, err := c.Kube.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil || db.Spec.NodeName != "" || db.Status.Phase != corev1.PodPending {
		t.Fatalf("db-0 after deletion: %+v, %v; want it made again, pending", db, err)
	}
}
