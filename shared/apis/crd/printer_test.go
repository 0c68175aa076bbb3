package crd

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Every condition column of Karpenter's CRDs (used unchanged, so `kubectl get nodeclaims -o wide`
// prints exactly Karpenter's columns: Ready, and Drifted at priority 1; `kubectl get nodepools`:
// Ready) reads a condition type Dovetail writes under the same name. ConsistentStateFound,
// Consolidatable and NodeRegistrationHealthy have no column in Karpenter's CRDs either; they
// show in -o yaml and kubectl describe (docs/operations.md).
func TestPrinterColumnsReadConditionsDovetailWrites(t *testing.T) {
	written := map[string]bool{v1.ConditionReady: true, v1.ConditionDrifted: true}
	cond := regexp.MustCompile(`^\.status\.conditions\[\?\(@\.type=="([A-Za-z]+)"\)\]\.status$`)
	want := map[string][]string{"karpenter.sh_nodeclaims.yaml": {"Ready", "Drifted"}, "karpenter.sh_nodepools.yaml": {"Ready"}}
	for file, types := range want {
		b, err := os.ReadFile(filepath.Join(crdDir, file))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Spec struct {
				Versions []struct {
					Name    string `json:"name"`
					Columns []struct {
						Name     string `json:"name"`
						JSONPath string `json:"jsonPath"`
					} `json:"additionalPrinterColumns"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var got []string
		for _, ver := range doc.Spec.Versions {
			for _, c := range ver.Columns {
				if m := cond.FindStringSubmatch(c.JSONPath); m != nil {
					got = append(got, m[1])
					if !written[m[1]] {
						t.Errorf("%s %s: column %s reads condition %s, which Dovetail does not write", file, ver.Name, c.Name, m[1])
					}
				}
			}
		}
		if len(got) != len(types) {
			t.Errorf("%s: condition columns %v, want %v", file, got, types)
			continue
		}
		for i := range got {
			if got[i] != types[i] {
				t.Errorf("%s: condition columns %v, want %v", file, got, types)
			}
		}
	}
}
