package v1beta1

import (
	"testing"
	"time"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// With no disruption block the v1beta1 CRD defaults apply before conversion
// ({consolidationPolicy: WhenUnderutilized, expireAfter: 720h}, budgets [{nodes: 10%}]), so the v1
// result is WhenEmptyOrUnderutilized, consolidateAfter 0s, expireAfter 720h (Karpenter
// nodepool_conversion.go). A stale kubelet annotation is removed when there is no kubelet.
func TestConvertNodePoolDefaults(t *testing.T) {
	in := &NodePool{}
	in.Name = "a"
	in.Annotations = map[string]string{v1.AnnotationKubeletCompatibility: `{"maxPods":1}`}
	in.Spec.Template.Spec.NodeClassRef = &NodeClassReference{Name: "default", APIVersion: "example.com/v2", Kind: "OtherNodeClass"}
	out, errs := ConvertNodePool(in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	d := out.Spec.Disruption
	if d.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmptyOrUnderutilized || *d.ConsolidateAfter.Duration != 0 ||
		len(d.Budgets) != 1 || d.Budgets[0].Nodes != "10%" || *out.Spec.Template.Spec.ExpireAfter.Duration != 720*time.Hour {
		t.Errorf("disruption %+v expireAfter %v", d, out.Spec.Template.Spec.ExpireAfter)
	}
	if out.Annotations != nil {
		t.Errorf("annotations = %v, want none", out.Annotations)
	}
	if r := out.Spec.Template.Spec.NodeClassRef; *r != (v1.NodeClassReference{Group: "example.com", Kind: "OtherNodeClass", Name: "default"}) {
		t.Errorf("nodeClassRef = %+v", *r)
	}
	// The input is not modified.
	if in.Annotations[v1.AnnotationKubeletCompatibility] == "" || in.Spec.Disruption != nil {
		t.Error("input modified")
	}
}

// "Never" survives the move from disruption.expireAfter to template.spec.expireAfter.
func TestConvertNodePoolNever(t *testing.T) {
	never := v1.MustParseNillableDuration("Never")
	in := &NodePool{Spec: NodePoolSpec{Disruption: &Disruption{ExpireAfter: &never}, Template: NodeClaimTemplate{Spec: NodeClaimSpec{NodeClassRef: &NodeClassReference{Name: "d"}}}}}
	out, errs := ConvertNodePool(in)
	if len(errs) > 0 || !out.Spec.Template.Spec.ExpireAfter.IsNever() {
		t.Errorf("expireAfter = %+v, %v", out.Spec.Template.Spec.ExpireAfter, errs)
	}
}
