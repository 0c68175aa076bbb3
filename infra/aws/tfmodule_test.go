package awsinfra

// The Terraform module (terraform/*.tf, HCL native syntax) read with hashicorp/hcl, the parser
// Terraform itself uses, into the shape of Terraform's JSON syntax ("resource" → type → name →
// arguments; nested blocks as lists of objects; every expression as the "${...}" template that
// spells it), so the structural tests compare the module's expressions as written and
// terraformRoles evaluates them.

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// tfModuleDir is the module: infra/aws/terraform.
const tfModuleDir = "terraform"

// readTFModule reads the module's .tf files, by path.
func readTFModule(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(tfModuleDir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no .tf files in %s: %v", tfModuleDir, err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		files[p] = readFile(t, p)
	}
	return files
}

// loadTF is the module in JSON-syntax shape.
func loadTF(t *testing.T) doc {
	t.Helper()
	d, err := tfDoc(readTFModule(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// tfDoc parses every file and merges their top-level blocks as Terraform merges a module's files;
// a second definition of one object is an error, as in Terraform.
func tfDoc(files map[string][]byte) (doc, error) {
	out := doc{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		src := files[name]
		f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		if diags.HasErrors() {
			return nil, diags
		}
		body := f.Body.(*hclsyntax.Body)
		if len(body.Attributes) > 0 {
			return nil, fmt.Errorf("%s: top-level attributes are not Terraform", name)
		}
		for _, b := range body.Blocks {
			if err := topBlock(out, b, src); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, b.DefRange().Start.Line, err)
			}
		}
	}
	return out, nil
}

func topBlock(out doc, b *hclsyntax.Block, src []byte) error {
	want := map[string]int{"terraform": 0, "locals": 0, "variable": 1, "output": 1, "data": 2, "resource": 2}
	n, ok := want[b.Type]
	if !ok {
		return fmt.Errorf("block %s is not expected in this module (no provider or module blocks: the caller configures the provider)", b.Type)
	}
	if len(b.Labels) != n {
		return fmt.Errorf("%s block with %d labels", b.Type, len(b.Labels))
	}
	body, err := bodyDoc(b.Body, src, b.Type == "variable")
	if err != nil {
		return err
	}
	if b.Type == "locals" || b.Type == "terraform" {
		m, _ := out[b.Type].(map[string]any)
		if m == nil {
			m = map[string]any{}
			out[b.Type] = m
		}
		for k, v := range body {
			if _, dup := m[k]; dup {
				return fmt.Errorf("%s.%s defined twice", b.Type, k)
			}
			m[k] = v
		}
		return nil
	}
	m, _ := out[b.Type].(map[string]any)
	if m == nil {
		m = map[string]any{}
		out[b.Type] = m
	}
	for _, l := range b.Labels[:n-1] {
		next, _ := m[l].(map[string]any)
		if next == nil {
			next = map[string]any{}
			m[l] = next
		}
		m = next
	}
	last := b.Labels[n-1]
	if _, dup := m[last]; dup {
		return fmt.Errorf("%s %s defined twice", b.Type, strings.Join(b.Labels, "."))
	}
	m[last] = body
	return nil
}

// bodyDoc converts a block body: attributes by name, nested blocks as lists of objects by type
// (JSON syntax's array form), dynamic blocks under "dynamic" → type → {for_each, content}, and
// required_providers as the object it is. In a variable block, type is a type expression,
// spelled as written.
func bodyDoc(b *hclsyntax.Body, src []byte, variable bool) (map[string]any, error) {
	out := map[string]any{}
	for name, a := range b.Attributes {
		if variable && name == "type" {
			out[name] = string(a.Expr.Range().SliceBytes(src))
			continue
		}
		v, err := exprDoc(a.Expr, src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = v
	}
	for _, nb := range b.Blocks {
		body, err := bodyDoc(nb.Body, src, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", nb.Type, err)
		}
		switch {
		case nb.Type == "dynamic" && len(nb.Labels) == 1:
			content, ok := body["content"].([]any)
			if !ok || len(content) != 1 || body["for_each"] == nil {
				return nil, fmt.Errorf("dynamic %q needs for_each and one content block", nb.Labels[0])
			}
			dyn, _ := out["dynamic"].(map[string]any)
			if dyn == nil {
				dyn = map[string]any{}
				out["dynamic"] = dyn
			}
			spec := map[string]any{"for_each": body["for_each"], "content": content[0]}
			switch prev := dyn[nb.Labels[0]].(type) {
			case nil:
				dyn[nb.Labels[0]] = spec
			case map[string]any:
				dyn[nb.Labels[0]] = []any{prev, spec}
			case []any:
				dyn[nb.Labels[0]] = append(prev, spec)
			}
		case len(nb.Labels) > 0:
			return nil, fmt.Errorf("labelled block %s %v is not read by this reader", nb.Type, nb.Labels)
		case nb.Type == "required_providers":
			out[nb.Type] = body
		default:
			l, _ := out[nb.Type].([]any)
			out[nb.Type] = append(l, body)
		}
	}
	return out, nil
}

// exprDoc spells an expression as Terraform's JSON syntax would: literals as JSON values, tuples
// as arrays, objects with literal keys as objects, a quoted template as its text between the
// quotes, and anything else (references, function calls, for expressions, conditionals) as
// "${<expression as written>}".
func exprDoc(e hclsyntax.Expression, src []byte) (any, error) {
	text := string(e.Range().SliceBytes(src))
	switch x := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		switch {
		case x.Val.IsNull():
			return nil, nil
		case x.Val.Type() == cty.Bool:
			return x.Val.True(), nil
		case x.Val.Type() == cty.Number:
			f, _ := x.Val.AsBigFloat().Float64()
			return f, nil
		}
	case *hclsyntax.TemplateExpr, *hclsyntax.TemplateWrapExpr:
		if len(text) < 2 || text[0] != '"' || text[len(text)-1] != '"' {
			return nil, fmt.Errorf("template %s: only quoted templates are read (no heredocs)", text)
		}
		if len(e.Variables()) == 0 {
			if v, diags := e.Value(nil); !diags.HasErrors() && v.Type() == cty.String {
				// A literal: escape what JSON syntax would read as a template.
				return strings.NewReplacer("${", "$${", "%{", "%%{").Replace(v.AsString()), nil
			}
		}
		inner := text[1 : len(text)-1]
		if strings.Contains(inner, `\`) {
			return nil, fmt.Errorf("template %s: escape sequences beside interpolations are not read", text)
		}
		return inner, nil
	case *hclsyntax.TupleConsExpr:
		out := make([]any, 0, len(x.Exprs))
		for _, el := range x.Exprs {
			v, err := exprDoc(el, src)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case *hclsyntax.ObjectConsExpr:
		out := map[string]any{}
		literal := true
		for _, it := range x.Items {
			k, diags := it.KeyExpr.Value(nil)
			if diags.HasErrors() || k.Type() != cty.String {
				literal = false
				break
			}
			v, err := exprDoc(it.ValueExpr, src)
			if err != nil {
				return nil, err
			}
			out[k.AsString()] = v
		}
		if literal {
			return out, nil
		}
	}
	return "${" + text + "}", nil
}

// tfEvalString evaluates a JSON-syntax value of the module that refers to nothing (jsonencode of
// a literal, say) to the string Terraform would give the provider.
func tfEvalString(t *testing.T, v any) string {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%v is not a template", v)
	}
	expr, diags := hclsyntax.ParseTemplate([]byte(s), "module", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", s, diags.Error())
	}
	val, diags := expr.Value(&hcl.EvalContext{Functions: map[string]function.Function{"jsonencode": stdlib.JSONEncodeFunc}})
	if diags.HasErrors() || val.Type() != cty.String {
		t.Fatalf("%s: %s", s, diags.Error())
	}
	return val.AsString()
}

// The reader refuses what it cannot spell faithfully rather than mis-read it.
func TestTFDocReader(t *testing.T) {
	d, err := tfDoc(map[string][]byte{"a.tf": []byte(`
variable "v" {
  type = list(string)
}
resource "x" "y" {
  name  = "n-${var.v[0]}"
  plain = "a$${b}"
  n     = 3
  ok    = true
  tags  = { "k.io/x" = var.v[0], other = "o" }
  list  = [aws_x.y.arn, "s"]
  call  = jsonencode({ a = 1 })
  rule {
    days = 1
  }
  dynamic "condition" {
    for_each = var.v
    content {
      test = condition.value
    }
  }
}
`)})
	if err != nil {
		t.Fatal(err)
	}
	r := d["resource"].(map[string]any)["x"].(map[string]any)["y"].(map[string]any)
	want := map[string]any{"name": "n-${var.v[0]}", "plain": "a$${b}", "n": 3.0, "ok": true, "call": "${jsonencode({ a = 1 })}"}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s = %#v, want %#v", k, r[k], v)
		}
	}
	if tags := r["tags"].(map[string]any); tags["k.io/x"] != "${var.v[0]}" || tags["other"] != "o" {
		t.Errorf("tags %v", tags)
	}
	if l := r["list"].([]any); len(l) != 2 || l[0] != "${aws_x.y.arn}" || l[1] != "s" {
		t.Errorf("list %v", l)
	}
	if rule := r["rule"].([]any); len(rule) != 1 || rule[0].(map[string]any)["days"] != 1.0 {
		t.Errorf("rule %v", rule)
	}
	if dyn := r["dynamic"].(map[string]any)["condition"].(map[string]any); dyn["for_each"] != "${var.v}" ||
		dyn["content"].(map[string]any)["test"] != "${condition.value}" {
		t.Errorf("dynamic %v", dyn)
	}
	if d["variable"].(map[string]any)["v"].(map[string]any)["type"] != "list(string)" {
		t.Errorf("variable type %v", d["variable"])
	}
	if got := tfEvalString(t, r["call"]); got != `{"a":1}` {
		t.Errorf("jsonencode evaluated to %s", got)
	}
	for name, bad := range map[string]string{
		"provider block":       `provider "aws" {}`,
		"duplicate":            "resource \"x\" \"y\" {}\nresource \"x\" \"y\" {}",
		"heredoc":              "locals {\n  a = <<EOT\nx\nEOT\n}",
		"escape in a template": `locals { a = "\"${var.x}\"" }`,
	} {
		if _, err := tfDoc(map[string][]byte{"b.tf": []byte(bad)}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
