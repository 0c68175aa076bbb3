// Package infra holds the gates every Terraform module under infra/ passes, whatever the cloud:
// the formatting a platform team's CI checks (terraform fmt -check -recursive) and the module
// interface terraform validate would check if the providers could be downloaded (every variable
// declared, typed, documented and used; every output documented and with a value).
//
// Both run on the HashiCorp HCL libraries Terraform itself is built on, so a machine without the
// terraform binary or network access for its providers still runs them.
package infra

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"sigs.k8s.io/yaml"
)

// modules is every directory under infra/ holding .tf files, each file's source by path.
func modules(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	out := map[string]map[string][]byte{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir // .terraform/ holds downloaded providers and modules, not ours
		}
		if d.IsDir() || filepath.Ext(path) != ".tf" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if out[dir] == nil {
			out[dir] = map[string][]byte{}
		}
		out[dir][path] = src
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 2 {
		t.Fatalf("found Terraform modules %v under infra/, want at least the AWS and the Azure module", sortedKeys(out))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestTerraformFormatted is `terraform fmt -check -recursive infra`. terraform fmt
// (hashicorp/terraform internal/command/fmt.go) writes the file through hclwrite, whose output
// is hclwrite.Format's, after three rewrites of its own that fmtRewrites finds: an attribute
// that is one interpolation ("${x}") is unwrapped, a variable's legacy or bare collection type
// ("string" in quotes, list) is spelled out, a block label is quoted. When the terraform binary
// is on PATH the test runs it as well, so the two can never disagree unnoticed.
func TestTerraformFormatted(t *testing.T) {
	for _, dir := range sortedKeys(modules(t)) {
		files := modules(t)[dir]
		for _, path := range sortedKeys(files) {
			src := files[path]
			if _, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos); diags.HasErrors() {
				t.Errorf("%s does not parse: %s", path, diags.Error())
				continue
			}
			for _, r := range fmtRewrites(src, path) {
				t.Errorf("%s; run: terraform fmt -recursive infra", r)
			}
			if got := hclwrite.Format(src); !bytes.Equal(got, src) {
				t.Errorf("%s is not formatted as terraform fmt formats it (first difference at line %d); run: terraform fmt -recursive infra",
					path, firstDiffLine(src, got))
			}
		}
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Log("terraform is not on PATH; checked with hclwrite.Format only")
		return
	}
	cmd := exec.Command(tf, "fmt", "-check", "-recursive", ".")
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("terraform fmt -check -recursive infra: %v; files it would rewrite:\n%s", err, out)
	}
}

// fmtRewrites lists what terraform fmt rewrites in src beyond hclwrite's layout, each with its
// place (src must parse).
func fmtRewrites(src []byte, path string) []string {
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil
	}
	var out []string
	var walk func(b *hclsyntax.Body, in string)
	walk = func(b *hclsyntax.Body, in string) {
		for name, a := range b.Attributes {
			at := a.SrcRange.String()
			if _, ok := a.Expr.(*hclsyntax.TemplateWrapExpr); ok {
				out = append(out, fmt.Sprintf("%s: %s is one interpolation, which terraform fmt unwraps", at, name))
			}
			if in == "variable" && name == "type" {
				switch e := a.Expr.(type) {
				case *hclsyntax.TemplateExpr:
					out = append(out, fmt.Sprintf("%s: a quoted type, which terraform fmt spells as a type keyword", at))
				case *hclsyntax.ScopeTraversalExpr:
					if k := e.Traversal.RootName(); len(e.Traversal) == 1 && (k == "list" || k == "map" || k == "set") {
						out = append(out, fmt.Sprintf("%s: type %s, which terraform fmt spells %s(any)", at, k, k))
					}
				}
			}
		}
		for _, blk := range b.Blocks {
			for i, r := range blk.LabelRanges {
				if src[r.Start.Byte] != '"' {
					out = append(out, fmt.Sprintf("%s: label %s is not quoted, which terraform fmt quotes", r.String(), blk.Labels[i]))
				}
			}
			walk(blk.Body, blk.Type)
		}
	}
	walk(f.Body.(*hclsyntax.Body), "")
	sort.Strings(out)
	return out
}

func firstDiffLine(a, b []byte) int {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(al), len(bl)) {
		if !bytes.Equal(al[i], bl[i]) {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

// TestTerraformModuleInterfaces checks what terraform validate checks of a module's interface
// without its providers: every var.X a module reads is declared, every declared variable has a
// type and a description and is read somewhere (an unused input is a setting that silently does
// nothing), every output has a description and a value, and no name is declared twice
// (Terraform's "Duplicate variable declaration" / "Duplicate output definition").
func TestTerraformModuleInterfaces(t *testing.T) {
	for dir, files := range modules(t) {
		for _, problem := range moduleProblems(files) {
			t.Errorf("%s: %s", dir, problem)
		}
	}
}

// moduleProblems lists what is wrong with one module's interface, each naming the file, line and
// fix; files is source by path.
func moduleProblems(files map[string][]byte) []string {
	var problems []string
	declared := map[string]string{} // variable name -> where
	outputs := map[string]string{}
	used := map[string]bool{}
	for _, path := range sortedKeys(files) {
		f, diags := hclsyntax.ParseConfig(files[path], path, hcl.InitialPos)
		if diags.HasErrors() {
			problems = append(problems, diags.Error())
			continue
		}
		body := f.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			at := fmt.Sprintf("%s:%d", path, b.DefRange().Start.Line)
			switch {
			case b.Type == "variable" && len(b.Labels) == 1:
				name := b.Labels[0]
				if prev, dup := declared[name]; dup {
					problems = append(problems, fmt.Sprintf("%s: variable %q is declared again (first at %s)", at, name, prev))
				}
				declared[name] = at
				for _, attr := range []string{"type", "description"} {
					if _, ok := b.Body.Attributes[attr]; !ok {
						problems = append(problems, fmt.Sprintf("%s: variable %q has no %s; add one", at, name, attr))
					}
				}
			case b.Type == "output" && len(b.Labels) == 1:
				name := b.Labels[0]
				if prev, dup := outputs[name]; dup {
					problems = append(problems, fmt.Sprintf("%s: output %q is defined again (first at %s)", at, name, prev))
				}
				outputs[name] = at
				for _, attr := range []string{"value", "description"} {
					if _, ok := b.Body.Attributes[attr]; !ok {
						problems = append(problems, fmt.Sprintf("%s: output %q has no %s; add one", at, name, attr))
					}
				}
			}
		}
		hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			e, ok := n.(hclsyntax.Expression)
			if !ok {
				return nil
			}
			for _, tr := range e.Variables() {
				if tr.RootName() != "var" || len(tr) < 2 {
					continue
				}
				if a, ok := tr[1].(hcl.TraverseAttr); ok {
					used[a.Name] = true
					if _, ok := declared[a.Name]; !ok && !declaredLater(files, a.Name) {
						problems = append(problems, fmt.Sprintf("%s: var.%s is read but no variable %q is declared",
							tr.SourceRange().String(), a.Name, a.Name))
					}
				}
			}
			return nil
		})
	}
	for _, name := range sortedKeys(declared) {
		if !used[name] {
			problems = append(problems, fmt.Sprintf("%s: variable %q is declared but never read; use it or remove it", declared[name], name))
		}
	}
	return dedupe(problems)
}

// declaredLater reports whether any of the module's files declares the variable: a module's files
// form one namespace, so a read may come before the file that declares it.
func declaredLater(files map[string][]byte, name string) bool {
	for path, src := range files {
		f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
		if diags.HasErrors() {
			continue
		}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "variable" && len(b.Labels) == 1 && b.Labels[0] == name {
				return true
			}
		}
	}
	return false
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// TestModuleProblemsCatchEachDefect feeds moduleProblems one small module per defect, so a gate
// that passes is a gate that would have failed.
func TestModuleProblemsCatchEachDefect(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"clean", `
variable "a" {
  type        = string
  description = "A."
}
output "o" {
  description = "O."
  value       = var.a
}
`, ""},
		{"undeclared", `
output "o" {
  description = "O."
  value       = var.missing
}
`, `var.missing is read but no variable "missing" is declared`},
		{"untyped", `
variable "a" {
  description = "A."
}
output "o" {
  description = "O."
  value       = var.a
}
`, `variable "a" has no type`},
		{"undocumented", `
variable "a" {
  type = string
}
output "o" {
  description = "O."
  value       = var.a
}
`, `variable "a" has no description`},
		{"unused", `
variable "a" {
  type        = string
  description = "A."
}
`, `variable "a" is declared but never read`},
		{"output without description", `
variable "a" {
  type        = string
  description = "A."
}
output "o" {
  value = var.a
}
`, `output "o" has no description`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(moduleProblems(map[string][]byte{"m/main.tf": []byte(c.src)}), "\n")
			if c.want == "" && got != "" || !strings.Contains(got, c.want) {
				t.Errorf("problems:\n%s\nwant one containing %q", got, c.want)
			}
		})
	}
}

// TestFmtRewritesCatchTerraformsOwnRewrites: what terraform fmt changes beyond the layout
// (internal/command/fmt.go: formatValueExpr, formatTypeExpr, SetLabels) is found; what it leaves
// alone is not.
func TestFmtRewritesCatchTerraformsOwnRewrites(t *testing.T) {
	src := []byte(`variable "a" {
  type = "string"
}
variable "b" {
  type = list
}
variable "c" {
  type    = list(string)
  default = ["${var.x}-y"]
}
output o {
  value = "${var.a}"
}
`)
	got := strings.Join(fmtRewrites(src, "m.tf"), "\n")
	for _, want := range []string{
		"m.tf:2,3-18: a quoted type",
		"m.tf:5,3-14: type list, which terraform fmt spells list(any)",
		"m.tf:11,8-9: label o is not quoted",
		"m.tf:12,3-21: value is one interpolation",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rewrites:\n%s\nwant one containing %q", got, want)
		}
	}
	if n := len(fmtRewrites(src, "m.tf")); n != 4 {
		t.Errorf("%d rewrites, want 4 (variable c is as terraform fmt writes it):\n%s", n, got)
	}
}

// TestFormatCheckCatchesMisalignment: terraform fmt aligns the equals signs of consecutive
// attributes (the rewrite the AWS module once needed in 7 of its files); the check sees it.
func TestFormatCheckCatchesMisalignment(t *testing.T) {
	src := []byte("variable \"a\" {\n  type = string\n  description = \"A.\"\n}\n")
	want := []byte("variable \"a\" {\n  type        = string\n  description = \"A.\"\n}\n")
	if got := hclwrite.Format(src); !bytes.Equal(got, want) {
		t.Errorf("hclwrite.Format:\n%s\nwant:\n%s", got, want)
	}
}

// TestOneAgentNamespace: every module that binds the agent's identity to a ServiceAccount
// defaults to the one agent/rbac.yaml creates (dovetail-system), so the deployment guides, the
// RBAC and the cloud identity agree without an override (Azure once said "dovetail").
func TestOneAgentNamespace(t *testing.T) {
	wantNS, wantSA := rbacServiceAccount(t)
	for _, dir := range sortedKeys(modules(t)) {
		files := modules(t)[dir]
		defaults := map[string]string{}
		for _, path := range sortedKeys(files) {
			f, diags := hclsyntax.ParseConfig(files[path], path, hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			for _, b := range f.Body.(*hclsyntax.Body).Blocks {
				if b.Type != "variable" || len(b.Labels) != 1 || b.Body.Attributes["default"] == nil {
					continue
				}
				v, diags := b.Body.Attributes["default"].Expr.Value(nil)
				if !diags.HasErrors() && v.Type() == cty.String {
					defaults[b.Labels[0]] = v.AsString()
				}
			}
		}
		ns, ok := defaults["agent_namespace"]
		if !ok {
			continue
		}
		if ns != wantNS {
			t.Errorf("%s: agent_namespace defaults to %q, want agent/rbac.yaml's %q", dir, ns, wantNS)
		}
		if sa := defaults["agent_service_account"]; sa != wantSA {
			t.Errorf("%s: agent_service_account defaults to %q, want agent/rbac.yaml's %q", dir, sa, wantSA)
		}
	}
}

// rbacServiceAccount is the namespace and name of the ServiceAccount agent/rbac.yaml creates.
func rbacServiceAccount(t *testing.T) (namespace, name string) {
	t.Helper()
	src, err := os.ReadFile("../agent/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range bytes.Split(src, []byte("\n---")) {
		var obj struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal(d, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "ServiceAccount" {
			return obj.Metadata.Namespace, obj.Metadata.Name
		}
	}
	t.Fatal("agent/rbac.yaml has no ServiceAccount")
	return "", ""
}
