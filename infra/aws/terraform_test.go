package awsinfra

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/dovetail-dev/dovetail/shared/cloud/aws/iampolicy"
)

// terraformRoles reads the Terraform module (its files by path, tfDoc) the way Terraform would
// plan it for one set of variables, as far as the IAM roles go: every expression is evaluated
// by hashicorp/hcl (the library Terraform parses with) with the functions the stack calls (cty's standard library:
// concat, merge, join, length, toset); aws_iam_policy_document data sources are rendered as the
// AWS provider renders them (statement and condition blocks, dynamic blocks, for_each, and
// conditions of one test merged into one operator); roles collect their inline policies and the
// aws_iam_policy documents attached to them. Resources' attributes are their names and the ARNs
// AWS derives from them; a name Terraform generates (the bucket) is StandInName, as in the SAM
// reader, so both stacks' policies compare.
func terraformRoles(files map[string][]byte, st Stack, vars map[string]any) (map[string]Role, error) {
	e, err := newTFEval(files, st, vars)
	if err != nil {
		return nil, err
	}
	return e.roles()
}

// newTFEval reads the module and evaluates its variables (vars over the defaults), resources'
// names and ARNs, locals and policy documents.
func newTFEval(files map[string][]byte, st Stack, vars map[string]any) (*tfEval, error) {
	tf, err := tfDoc(files)
	if err != nil {
		return nil, err
	}
	e := &tfEval{st: st, tf: tf, vals: map[string]cty.Value{}}
	if err := e.variables(vars); err != nil {
		return nil, err
	}
	e.vals["data"] = cty.ObjectVal(map[string]cty.Value{
		"aws_partition":       obj("current", obj("partition", cty.StringVal(st.Partition))),
		"aws_region":          obj("current", obj("region", cty.StringVal(st.Region))),
		"aws_caller_identity": obj("current", obj("account_id", cty.StringVal(st.Account))),
	})
	e.vals["path"] = cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(tfModuleDir), "root": cty.StringVal("."), "cwd": cty.StringVal(".")})
	e.resources()
	if err := e.locals(); err != nil {
		return nil, err
	}
	if err := e.policyDocuments(); err != nil {
		return nil, err
	}
	return e, nil
}

type tfEval struct {
	st   Stack
	tf   map[string]any
	vals map[string]cty.Value
}

func obj(k string, v cty.Value) cty.Value { return cty.ObjectVal(map[string]cty.Value{k: v}) }

func (e *tfEval) section(path ...string) map[string]any {
	var v any = e.tf
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	m, _ := v.(map[string]any)
	return m
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (e *tfEval) ctx(extra map[string]cty.Value) *hcl.EvalContext {
	vars := map[string]cty.Value{}
	for k, v := range e.vals {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	return &hcl.EvalContext{Variables: vars, Functions: map[string]function.Function{
		"concat": stdlib.ConcatFunc, "slice": stdlib.SliceFunc, "merge": stdlib.MergeFunc, "join": stdlib.JoinFunc, "length": stdlib.LengthFunc,
		"toset": stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)), "tolist": stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
	}}
}

// eval evaluates a value of tfDoc's JSON-syntax shape as Terraform does: strings are templates
// (a lone "${expr}" yields expr's value unconverted), arrays tuples, objects objects.
func (e *tfEval) eval(v any, extra map[string]cty.Value) (cty.Value, error) {
	switch x := v.(type) {
	case string:
		expr, diags := hclsyntax.ParseTemplate([]byte(x), tfModuleDir, hcl.InitialPos)
		if diags.HasErrors() {
			return cty.NilVal, fmt.Errorf("%q: %s", x, diags.Error())
		}
		val, diags := expr.Value(e.ctx(extra))
		if diags.HasErrors() {
			return cty.NilVal, fmt.Errorf("%q: %s", x, diags.Error())
		}
		return val, nil
	case []any:
		var out []cty.Value
		for _, el := range x {
			ev, err := e.eval(el, extra)
			if err != nil {
				return cty.NilVal, err
			}
			out = append(out, ev)
		}
		if len(out) == 0 {
			return cty.EmptyTupleVal, nil
		}
		return cty.TupleVal(out), nil
	case map[string]any:
		out := map[string]cty.Value{}
		for k, el := range x {
			ev, err := e.eval(el, extra)
			if err != nil {
				return cty.NilVal, err
			}
			out[k] = ev
		}
		return cty.ObjectVal(out), nil
	case bool:
		return cty.BoolVal(x), nil
	case float64:
		return cty.NumberFloatVal(x), nil
	}
	return cty.NilVal, fmt.Errorf("unsupported JSON value %v", v)
}

func ctyStrings(v cty.Value) ([]string, error) {
	if v.Type() == cty.String {
		return []string{v.AsString()}, nil
	}
	if !v.CanIterateElements() {
		return nil, fmt.Errorf("%s is not a string or a list of strings", v.GoString())
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, el := it.Element()
		if el.Type() != cty.String {
			return nil, fmt.Errorf("element %s is not a string", el.GoString())
		}
		out = append(out, el.AsString())
	}
	return out, nil
}

func (e *tfEval) strs(v any, extra map[string]cty.Value) ([]string, error) {
	val, err := e.eval(v, extra)
	if err != nil {
		return nil, err
	}
	return ctyStrings(val)
}

func (e *tfEval) str(v any, extra map[string]cty.Value) (string, error) {
	s, err := e.strs(v, extra)
	if err != nil || len(s) != 1 {
		return "", fmt.Errorf("%v: want one string (%v)", v, err)
	}
	return s[0], nil
}

func (e *tfEval) variables(over map[string]any) error {
	vars := map[string]cty.Value{}
	for name, raw := range e.section("variable") {
		spec := raw.(map[string]any)
		v, ok := over[name]
		if !ok {
			if v, ok = spec["default"]; !ok {
				return fmt.Errorf("variable %s: no value and no default", name)
			}
		}
		switch x := v.(type) {
		case string:
			vars[name] = cty.StringVal(x)
		case bool:
			vars[name] = cty.BoolVal(x)
		case []string:
			vars[name] = ctyList(x)
		case []any:
			var l []string
			for _, el := range x {
				l = append(l, fmt.Sprint(el))
			}
			vars[name] = ctyList(l)
		default:
			return fmt.Errorf("variable %s: unsupported value %v", name, v)
		}
		if spec["type"] == "list(string)" && vars[name].Type() == cty.String {
			return fmt.Errorf("variable %s: want a list", name)
		}
	}
	e.vals["var"] = cty.ObjectVal(vars)
	return nil
}

func ctyList(l []string) cty.Value {
	if len(l) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	out := make([]cty.Value, len(l))
	for i, s := range l {
		out[i] = cty.StringVal(s)
	}
	return cty.ListVal(out)
}

// tfStandIns are the resources whose names Terraform generates, by the SAM logical ID of their
// counterpart (StandInName).
var tfStandIns = map[string]string{"aws_s3_bucket.claim_check": "ClaimCheckBucket"}

// resources gives each resource its name, id and ARN (and a queue its URL).
func (e *tfEval) resources() {
	p, r, a := e.st.Partition, e.st.Region, e.st.Account
	types := map[string]cty.Value{}
	for _, typ := range sortedKeys(e.section("resource")) {
		insts := map[string]cty.Value{}
		for _, n := range sortedKeys(e.section("resource", typ)) {
			attrs := e.section("resource", typ, n)
			name := StandInName(tfStandIns[typ+"."+n])
			for _, k := range []string{"name", "function_name"} {
				if raw, ok := attrs[k]; ok {
					if s, err := e.str(raw, nil); err == nil {
						name = s
					}
				}
			}
			arn := map[string]string{
				"aws_sqs_queue":             fmt.Sprintf("arn:%s:sqs:%s:%s:%s", p, r, a, name),
				"aws_s3_bucket":             fmt.Sprintf("arn:%s:s3:::%s", p, name),
				"aws_iam_role":              fmt.Sprintf("arn:%s:iam::%s:role/%s", p, a, name),
				"aws_iam_policy":            fmt.Sprintf("arn:%s:iam::%s:policy/%s", p, a, name),
				"aws_cloudwatch_event_rule": fmt.Sprintf("arn:%s:events:%s:%s:rule/%s", p, r, a, name),
				"aws_lambda_function":       fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", p, r, a, name),
				"aws_cloudwatch_log_group":  fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s", p, r, a, name),
			}[typ]
			insts[n] = cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(name), "id": cty.StringVal(name), "bucket": cty.StringVal(name),
				"arn": cty.StringVal(arn), "url": cty.StringVal(fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", r, a, name))})
		}
		types[typ] = cty.ObjectVal(insts)
	}
	for k, v := range types {
		e.vals[k] = v
	}
}

// locals are evaluated in as many passes as their references to each other need.
func (e *tfEval) locals() error {
	pending := e.section("locals")
	done := map[string]cty.Value{}
	for len(done) < len(pending) {
		progress := false
		var last error
		for _, k := range sortedKeys(pending) {
			if _, ok := done[k]; ok {
				continue
			}
			e.vals["local"] = cty.ObjectVal(done)
			v, err := e.eval(pending[k], nil)
			if err != nil {
				last = fmt.Errorf("local.%s: %w", k, err)
				continue
			}
			done[k], progress = v, true
		}
		if !progress {
			return last
		}
	}
	e.vals["local"] = cty.ObjectVal(done)
	return nil
}

// policyDocuments renders every aws_iam_policy_document (each for_each instance) into .json.
func (e *tfEval) policyDocuments() error {
	docs := map[string]cty.Value{}
	for _, n := range sortedKeys(e.section("data", "aws_iam_policy_document")) {
		spec := e.section("data", "aws_iam_policy_document", n)
		if fe, ok := spec["for_each"]; ok {
			set, err := e.eval(fe, nil)
			if err != nil {
				return fmt.Errorf("%s.for_each: %w", n, err)
			}
			insts := map[string]cty.Value{}
			for it := set.ElementIterator(); it.Next(); {
				k, v := it.Element()
				if set.Type().IsSetType() {
					k = v
				}
				doc, err := e.renderDocument(spec, map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": k, "value": v})})
				if err != nil {
					return fmt.Errorf("%s[%s]: %w", n, k.AsString(), err)
				}
				insts[k.AsString()] = doc
			}
			docs[n] = cty.ObjectVal(insts)
			continue
		}
		doc, err := e.renderDocument(spec, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		docs[n] = doc
	}
	data := e.vals["data"].AsValueMap()
	data["aws_iam_policy_document"] = cty.ObjectVal(docs)
	e.vals["data"] = cty.ObjectVal(data)
	return nil
}

// blocks expands the blocks of one type: the static ones, then those of a dynamic block of that
// type (for_each, with the iterator named after the block type).
func (e *tfEval) blocks(spec map[string]any, typ string, extra map[string]cty.Value) ([]map[string]any, []map[string]cty.Value, error) {
	var bodies []map[string]any
	var scopes []map[string]cty.Value
	switch x := spec[typ].(type) {
	case map[string]any:
		bodies, scopes = append(bodies, x), append(scopes, extra)
	case []any:
		for _, b := range x {
			bodies, scopes = append(bodies, b.(map[string]any)), append(scopes, extra)
		}
	}
	dyn, _ := spec["dynamic"].(map[string]any)
	var dyns []any
	switch x := dyn[typ].(type) {
	case map[string]any:
		dyns = []any{x}
	case []any:
		dyns = x
	}
	for _, d := range dyns {
		dm := d.(map[string]any)
		coll, err := e.eval(dm["for_each"], extra)
		if err != nil {
			return nil, nil, fmt.Errorf("dynamic %s for_each: %w", typ, err)
		}
		for it := coll.ElementIterator(); it.Next(); {
			k, v := it.Element()
			scope := map[string]cty.Value{}
			for kk, vv := range extra {
				scope[kk] = vv
			}
			scope[typ] = cty.ObjectVal(map[string]cty.Value{"key": k, "value": v})
			bodies, scopes = append(bodies, dm["content"].(map[string]any)), append(scopes, scope)
		}
	}
	return bodies, scopes, nil
}

func (e *tfEval) renderDocument(spec map[string]any, extra map[string]cty.Value) (cty.Value, error) {
	stmts, scopes, err := e.blocks(spec, "statement", extra)
	if err != nil {
		return cty.NilVal, err
	}
	p := iampolicy.Policy{Version: "2012-10-17"}
	for i, s := range stmts {
		st, err := e.renderStatement(s, scopes[i])
		if err != nil {
			return cty.NilVal, fmt.Errorf("statement %d: %w", i, err)
		}
		p.Statement = append(p.Statement, st)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return cty.NilVal, err
	}
	return obj("json", cty.StringVal(string(b))), nil
}

func (e *tfEval) renderStatement(s map[string]any, scope map[string]cty.Value) (iampolicy.Statement, error) {
	st := iampolicy.Statement{Effect: "Allow"}
	var err error
	for k, ptr := range map[string]*[]string{"actions": &st.Action, "not_actions": &st.NotAction, "resources": &st.Resource, "not_resources": &st.NotResource} {
		if raw, ok := s[k]; ok {
			if *ptr, err = e.strs(raw, scope); err != nil {
				return st, fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	for k, ptr := range map[string]*string{"sid": &st.Sid, "effect": &st.Effect} {
		if raw, ok := s[k]; ok {
			if *ptr, err = e.str(raw, scope); err != nil {
				return st, fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	if ps, ok := s["principals"].([]any); ok {
		st.Principal = map[string][]string{}
		for _, raw := range ps {
			pm := raw.(map[string]any)
			ids, err := e.strs(pm["identifiers"], scope)
			if err != nil {
				return st, err
			}
			typ := fmt.Sprint(pm["type"])
			st.Principal[typ] = append(st.Principal[typ], ids...)
		}
	}
	conds, cscopes, err := e.blocks(s, "condition", scope)
	if err != nil {
		return st, err
	}
	for i, c := range conds {
		test, err := e.str(c["test"], cscopes[i])
		if err != nil {
			return st, err
		}
		variable, err := e.str(c["variable"], cscopes[i])
		if err != nil {
			return st, err
		}
		values, err := e.strs(c["values"], cscopes[i])
		if err != nil {
			return st, err
		}
		if st.Condition == nil {
			st.Condition = map[string]map[string][]string{}
		}
		if st.Condition[test] == nil {
			st.Condition[test] = map[string][]string{}
		}
		st.Condition[test][variable] = append(st.Condition[test][variable], values...)
	}
	for k := range s {
		switch k {
		case "sid", "effect", "actions", "not_actions", "resources", "not_resources", "principals", "condition", "dynamic":
		default:
			return st, fmt.Errorf("statement argument %s is not rendered by this reader", k)
		}
	}
	return st, nil
}

// roles collects each aws_iam_role with its trust policy, inline policies and attachments.
func (e *tfEval) roles() (map[string]Role, error) {
	roles := map[string]Role{}
	for _, n := range sortedKeys(e.section("resource", "aws_iam_role")) {
		spec := e.section("resource", "aws_iam_role", n)
		name, err := e.str(spec["name"], nil)
		if err != nil {
			return nil, fmt.Errorf("aws_iam_role.%s: %w", n, err)
		}
		trust, err := e.document(spec["assume_role_policy"], nil)
		if err != nil {
			return nil, fmt.Errorf("aws_iam_role.%s.assume_role_policy: %w", n, err)
		}
		roles[name] = Role{Name: name, Trust: trust}
	}
	add := func(role string, doc iampolicy.Policy, where string) error {
		r, ok := roles[role]
		if !ok {
			return fmt.Errorf("%s: role %q is no role of this stack", where, role)
		}
		r.Policies = append(r.Policies, doc)
		roles[role] = r
		return nil
	}
	for _, n := range sortedKeys(e.section("resource", "aws_iam_role_policy")) {
		spec := e.section("resource", "aws_iam_role_policy", n)
		role, err := e.str(spec["role"], nil)
		if err != nil {
			return nil, err
		}
		doc, err := e.document(spec["policy"], nil)
		if err != nil {
			return nil, fmt.Errorf("aws_iam_role_policy.%s: %w", n, err)
		}
		if err := add(role, doc, "aws_iam_role_policy."+n); err != nil {
			return nil, err
		}
	}
	policies := map[string]iampolicy.Policy{} // by ARN
	for _, n := range sortedKeys(e.section("resource", "aws_iam_policy")) {
		doc, err := e.document(e.section("resource", "aws_iam_policy", n)["policy"], nil)
		if err != nil {
			return nil, fmt.Errorf("aws_iam_policy.%s: %w", n, err)
		}
		arn := e.vals["aws_iam_policy"].GetAttr(n).GetAttr("arn").AsString()
		policies[arn] = doc
	}
	for _, n := range sortedKeys(e.section("resource", "aws_iam_role_policy_attachment")) {
		spec := e.section("resource", "aws_iam_role_policy_attachment", n)
		each := []map[string]cty.Value{nil}
		if fe, ok := spec["for_each"]; ok {
			coll, err := e.eval(fe, nil)
			if err != nil {
				return nil, err
			}
			each = nil
			for it := coll.ElementIterator(); it.Next(); {
				k, v := it.Element()
				each = append(each, map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": k, "value": v})})
			}
		}
		for _, scope := range each {
			role, err := e.str(spec["role"], scope)
			if err != nil {
				return nil, err
			}
			arn, err := e.str(spec["policy_arn"], scope)
			if err != nil {
				return nil, err
			}
			doc, ok := policies[arn]
			if !ok {
				return nil, fmt.Errorf("aws_iam_role_policy_attachment.%s: %s is no policy of this stack", n, arn)
			}
			if err := add(role, doc, "aws_iam_role_policy_attachment."+n); err != nil {
				return nil, err
			}
		}
	}
	return roles, nil
}

func (e *tfEval) document(v any, scope map[string]cty.Value) (iampolicy.Policy, error) {
	s, err := e.str(v, scope)
	if err != nil {
		return iampolicy.Policy{}, err
	}
	if !strings.HasPrefix(strings.TrimSpace(s), "{") {
		return iampolicy.Policy{}, fmt.Errorf("%q is not a policy document", s)
	}
	return iampolicy.Parse([]byte(s))
}
