package telemetry

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreImportsNoTelemetry walks the imports of the pure core (scheduling, provisioning and
// its lower bound, disruption, catalog, lifecycle decisions, planner) and fails on any telemetry
// package or metrics library: the core decides and returns what it decided; the edges record it.
func TestCoreImportsNoTelemetry(t *testing.T) {
	const module = "github.com/dovetail-dev/dovetail/"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{module + "shared/telemetry", "github.com/prometheus/", "go.opentelemetry.io/"}
	seen := map[string]bool{}
	var walk func(pkg, from string)
	walk = func(pkg, from string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("%s imports %s", from, pkg)
				return
			}
		}
		if !strings.HasPrefix(pkg, module) {
			return
		}
		p, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(pkg, module)), 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, imp := range p.Imports {
			walk(imp, pkg)
		}
	}
	core := []string{"shared/scheduling", "shared/provisioning", "shared/provisioning/lowerbound", "shared/disruption",
		"shared/catalog", "shared/lifecycle", "shared/planner"}
	for _, pkg := range core {
		walk(module+pkg, "")
	}
	if !seen[module+"shared/apis/v1"] {
		t.Fatalf("the walk missed the core's own imports: %d packages seen", len(seen))
	}
}
