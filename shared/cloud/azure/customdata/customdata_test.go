package customdata

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRoundTrip(t *testing.T) {
	in := Spec{APIServer: "https://x.hcp.eastus.azmk8s.io:443", CA: "Y2E=", BootstrapToken: "abcdef.0123456789abcdef", MaxPods: 110,
		Labels: map[string]string{"karpenter.sh/nodepool": "default", "kubernetes.azure.com/role": "agent"},
		Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}, {Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	data, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if n.MaxPods != 110 || len(n.Labels) != 2 || n.Labels["karpenter.sh/nodepool"] != "default" || len(n.Taints) != 2 ||
		n.Taints[0].Key != "karpenter.sh/unregistered" || n.Taints[0].Effect != corev1.TaintEffectNoExecute || n.Taints[1].Value != "true" {
		t.Fatalf("parsed %+v", n)
	}
}

func TestRefusals(t *testing.T) {
	if _, err := Render(Spec{APIServer: "https://x", Labels: map[string]string{"a": "b,c=d"}}); err == nil || !strings.Contains(err.Error(), "label") {
		t.Errorf("label with a comma: %v", err)
	}
	if _, err := Render(Spec{}); err == nil {
		t.Error("no API server accepted")
	}
	if _, err := Parse("not base64!"); err == nil {
		t.Error("garbage parsed")
	}
}
