package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The min_values_relaxed label is the NodeClaim's annotation, "false" without one (Karpenter's
// provisioner labels karpenter_nodeclaims_created_total the same way).
func TestMinValuesRelaxedLabel(t *testing.T) {
	for _, c := range []struct {
		ann  map[string]string
		want string
	}{
		{nil, "false"},
		{map[string]string{apisv1.AnnotationNodeClaimMinValuesRelaxed: "false"}, "false"},
		{map[string]string{apisv1.AnnotationNodeClaimMinValuesRelaxed: "true"}, "true"},
	} {
		nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: c.ann}}
		if got := MinValuesRelaxed(nc); got != c.want {
			t.Errorf("annotations %v: label %q, want %q", c.ann, got, c.want)
		}
	}
}
