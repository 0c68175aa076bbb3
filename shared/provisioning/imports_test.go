package provisioning

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// The core is cloud-neutral: nothing the solver links (its own packages and every module
// package they import, transitively) imports a cloud provider package. Node settings and the
// catalog come in through Input.
func TestCoreImportsNoCloudPackage(t *testing.T) {
	const module = "github.com/dovetail-dev/dovetail/"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(pkg, from string)
	walk = func(pkg, from string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		if strings.HasPrefix(pkg, module+"shared/cloud") {
			t.Errorf("%s imports %s", from, pkg)
			return
		}
		p, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(pkg, module)), 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				walk(imp, pkg)
			}
		}
	}
	for _, pkg := range []string{"shared/provisioning", "shared/provisioning/lowerbound", "shared/planner"} {
		walk(module+pkg, "")
	}
	if !seen[module+"shared/catalog"] || !seen[module+"shared/scheduling"] {
		t.Fatalf("the walk missed the core's own imports: %v", seen)
	}
}
