package apis

import (
	"strings"
	"testing"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The NodeOverlay rules, case by case from the CRD's patterns and CEL rules (Karpenter v1.14.0
// karpenter.sh_nodeoverlays.yaml) and its controller's RuntimeValidate.
func TestNodeOverlayValidation(t *testing.T) {
	const base = `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: o}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]
`
	cases := []struct {
		name, spec string
		field      string // "" for valid; else the field the error names
	}{
		{"percent decrease", "  priceAdjustment: \"-30%\"\n", ""},
		{"percent increase", "  priceAdjustment: \"+10%\"\n", ""},
		{"amount", "  priceAdjustment: \"-0.5\"\n", ""},
		{"amount without digits before the point", "  priceAdjustment: \"+.5\"\n", ""},
		{"whole decrease", "  priceAdjustment: \"-100%\"\n", ""},
		{"decrease past 100%", "  priceAdjustment: \"-101%\"\n", "spec.priceAdjustment"},
		{"fractional 100% decrease", "  priceAdjustment: \"-100.5%\"\n", "spec.priceAdjustment"},
		{"unsigned adjustment", "  priceAdjustment: \"10\"\n", "spec.priceAdjustment"},
		{"unsigned percent", "  priceAdjustment: \"10%\"\n", "spec.priceAdjustment"},
		{"price", "  price: \"0.25\"\n", ""},
		{"signed price", "  price: \"-1\"\n", "spec.price"},
		{"percent price", "  price: \"5%\"\n", "spec.price"},
		{"price and adjustment", "  price: \"1\"\n  priceAdjustment: \"+1\"\n", "spec"},
		{"extended capacity", "  capacity: {example.com/device: \"4\"}\n", ""},
		{"cpu capacity", "  capacity: {cpu: \"4\"}\n", "spec.capacity[cpu]"},
		{"pods capacity", "  capacity: {pods: \"4\"}\n", "spec.capacity[pods]"},
		{"weight 0", "  weight: 0\n", "spec.weight"},
		{"weight 10001", "  weight: 10001\n", "spec.weight"},
		{"weight 10000", "  weight: 10000\n", ""},
		{"nodepool key", "  requirements: [{key: karpenter.sh/nodepool, operator: In, values: [default]}]\n", ""},
		{"hostname key", "  requirements: [{key: kubernetes.io/hostname, operator: In, values: [a]}]\n", "spec.requirements[0].key"},
		{"restricted domain", "  requirements: [{key: karpenter.sh/foo, operator: Exists}]\n", "spec.requirements[0].key"},
		{"NotIn without values", "  requirements: [{key: example.com/team, operator: NotIn}]\n", "spec.requirements[0].values"},
		{"Gte with two values", "  requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: [\"1\", \"2\"]}]\n", "spec.requirements[0].values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := base + c.spec
			if strings.Contains(c.spec, "requirements:") {
				doc = strings.Replace(base, "  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}]\n", "", 1) + c.spec
			}
			_, err := Load([]byte(doc))
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.field != "" && err == nil:
				t.Fatalf("accepted, want an error on %s", c.field)
			case c.field != "" && !strings.Contains(err.Error(), c.field+":"):
				t.Fatalf("error %q does not name %s", err, c.field)
			}
		})
	}
}

// Karpenter's runtime check refuses a capacity-type requirement none of whose values is a
// capacity type; the API server admits it.
func TestNodeOverlayRuntimeValidation(t *testing.T) {
	obj, err := Load([]byte(`apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: o}
spec:
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [cheap]}]
  priceAdjustment: "-10%"
`))
	if err != nil {
		t.Fatal(err)
	}
	errs := ValidateNodeOverlayRuntime(obj.(*v1.NodeOverlay))
	if len(errs) != 1 || errs[0].Field != "spec.requirements[0].values" {
		t.Fatalf("errors %v, want one on spec.requirements[0].values", errs)
	}
}
