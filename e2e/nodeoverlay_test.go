//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

const overlaidPool = "overlaid"

// checkNodeOverlay applies a NodeOverlay to the real API server (its CRD from infra/crds) and
// follows it through the deployed path: the agent watches it, the lifecycle function decides
// its conditions and the agent writes them (Ready True), and the provision function plans with
// it. The pool "overlaid" allows c5.large (0.085 USD/h on demand in the embedded us-east-1
// catalog) and m5.large (0.096); the overlay prices m5.large at 0.01 in that pool only, so the
// pod, which fits either, is launched on m5.large, and its NodeClaim says a price overlay
// applied. No other pool's prices change.
func checkNodeOverlay(ctx context.Context, t *testing.T, env *localdev.Env) {
	dyn := env.Cluster.Dynamic
	req := func(key string, values ...string) map[string]any {
		vs := make([]any, len(values))
		for i, v := range values {
			vs[i] = v
		}
		return map[string]any{"key": key, "operator": "In", "values": vs}
	}
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": overlaidPool},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{poolLabel: overlaidPool}},
			"spec": map[string]any{
				"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
				"requirements": []any{req(corev1.LabelInstanceTypeStable, "c5.large", "m5.large"), req(apisv1.LabelCapacityType, "on-demand")},
			}}}}}
	if _, err := dyn.Resource(kube.NodePoolGVR).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	overlay := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apisv1.NodeOverlayGroupVersion, "kind": apisv1.KindNodeOverlay, "metadata": map[string]any{"name": "m5-large-cheap"},
		"spec": map[string]any{"price": "0.01",
			"requirements": []any{req(apisv1.LabelNodePool, overlaidPool), req(corev1.LabelInstanceTypeStable, "m5.large")}}}}
	if _, err := dyn.Resource(kube.NodeOverlayGVR).Create(ctx, overlay, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var conds []metav1.Condition
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(kube.NodeOverlayGVR).Get(ctx, "m5-large-cheap", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var o apisv1.NodeOverlay
		if err := kube.FromUnstructured(u, &o); err != nil {
			return false, err
		}
		conds = o.Status.Conditions
		return meta.IsStatusConditionTrue(conds, apisv1.ConditionReady), nil
	}); err != nil {
		t.Fatalf("NodeOverlay m5-large-cheap not Ready: %v; conditions %+v", err, conds)
	}
	if vs := meta.FindStatusCondition(conds, apisv1.ConditionValidationSucceeded); vs == nil || vs.Status != metav1.ConditionTrue ||
		vs.ObservedGeneration != 1 || vs.LastTransitionTime.IsZero() {
		t.Errorf("ValidationSucceeded %+v, want True at generation 1 with a transition time", vs)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "overlaid", Namespace: "default"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{poolLabel: overlaidPool},
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
	if _, err := env.Cluster.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var claim *apisv1.NodeClaim
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, c := range nodeClaims(ctx, t, env) {
			if c.Labels[apisv1.LabelNodePool] == overlaidPool {
				claim = &c
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no NodeClaim of pool %s: %v", overlaidPool, err)
	}
	if it := claim.Labels[corev1.LabelInstanceTypeStable]; it != "m5.large" || claim.Annotations[apisv1.AnnotationPriceOverlayApplied] != "true" {
		t.Errorf("NodeClaim %s: instance type %q, %s=%q; want m5.large (0.01 USD/h overlaid, under c5.large's 0.085) and \"true\"",
			claim.Name, it, apisv1.AnnotationPriceOverlayApplied, claim.Annotations[apisv1.AnnotationPriceOverlayApplied])
	}
}
