package crd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/shared/apis"
)

func validatorFor(t *testing.T, kind string) *validate.SchemaValidator {
	t.Helper()
	for _, f := range Files {
		if f.Kind != kind {
			continue
		}
		b, err := os.ReadFile(filepath.Join(crdDir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		s := &spec.Schema{}
		if err := json.Unmarshal(doc.Spec.Versions[0].Schema.OpenAPIV3Schema, s); err != nil {
			t.Fatal(err)
		}
		return validate.NewSchemaValidator(s, nil, "", strfmt.Default)
	}
	t.Fatalf("no CRD for %s", kind)
	return nil
}

// The documented manifests of shared/apis/testdata pass Karpenter's CRD schema as written, and
// again after Dovetail decoded, converted (v1beta1) and defaulted them: what Dovetail writes back
// to a cluster is accepted by Karpenter's CRDs. (kube-openapi's validator is the OpenAPI v3
// validator the API server uses for CRDs; their CEL rules run in the e2e suite's real API server
// and, in Go, in shared/apis validation.)
func TestTestdataPassesCRDSchema(t *testing.T) {
	files, err := filepath.Glob("../testdata/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("testdata: %v %d", err, len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		kind := m["kind"].(string)
		v := validatorFor(t, kind)
		if !strings.Contains(m["apiVersion"].(string), "v1beta1") {
			if r := v.Validate(m); !r.IsValid() {
				t.Errorf("%s as written: %v", f, r.Errors)
			}
		}
		obj, err := apis.Load(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		if r := v.Validate(back); !r.IsValid() {
			t.Errorf("%s after Load: %v", f, r.Errors)
		}
	}
}

// The schema refuses, with the field named.
func TestCRDSchemaRefuses(t *testing.T) {
	v := validatorFor(t, "NodePool")
	bad := map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "a"},
		"spec": map[string]any{"weight": 0, "template": map[string]any{"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
			"requirements": []any{map[string]any{"key": "a", "operator": "Like"}},
		}}}}
	r := v.Validate(bad)
	msg := ""
	for _, e := range r.Errors {
		msg += e.Error() + "\n"
	}
	for _, want := range []string{"spec.weight", "spec.template.spec.requirements[0].operator"} {
		if !strings.Contains(msg, want) {
			t.Errorf("schema errors %q lack %s", msg, want)
		}
	}
}
