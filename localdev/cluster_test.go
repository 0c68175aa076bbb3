package localdev

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

// TestApplyCreatesNodeOverlays: `dovetail dev` creates a scenario's NodeOverlays in its cluster
// (at karpenter.sh/v1alpha1 nodeoverlays), where the agent watches them; before, the manifests
// decoded them and the cluster never had them.
func TestApplyCreatesNodeOverlays(t *testing.T) {
	set, err := manifests.LoadReader("overlay.yaml", strings.NewReader(`apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: savings-plan-m
spec:
  priceAdjustment: "-30%"
  requirements:
  - key: karpenter.k8s.aws/instance-family
    operator: In
    values: ["m6i"]
`))
	if err != nil {
		t.Fatal(err)
	}
	c := NewInMemoryCluster()
	if _, err := c.Apply(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	u, err := c.Dynamic.Resource(kube.NodeOverlayGVR).Get(context.Background(), "savings-plan-m", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("NodeOverlay savings-plan-m in the dev cluster: %v", err)
	}
	var o apisv1.NodeOverlay
	if err := kube.FromUnstructured(u, &o); err != nil {
		t.Fatal(err)
	}
	if o.Spec.PriceAdjustment == nil || *o.Spec.PriceAdjustment != "-30%" || u.GetAPIVersion() != "karpenter.sh/v1alpha1" {
		t.Errorf("NodeOverlay %s %+v, want karpenter.sh/v1alpha1 with priceAdjustment -30%%", u.GetAPIVersion(), o.Spec)
	}
}
