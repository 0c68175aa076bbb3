// Package awsinfra reads infra/aws's SAM template the way CloudFormation would for one set of
// parameters, and hands out its IAM roles as policy documents (shared/cloud/aws/iampolicy): the
// policy tests decide a table of requests against them (and against the Terraform stack's, in
// the tests), and local dev has the fake cloud's EC2 face enforce the launch role's policy, so
// a launch the stack would refuse is refused there too.
package awsinfra

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/shared/cloud/aws/iampolicy"
)

//go:embed template.yaml
var samTemplate []byte

// Stack is where and how a stack is deployed: the pseudo parameters and the template's
// parameters (a CommaDelimitedList as "a,b"; missing ones take their Default).
type Stack struct {
	Partition, Region, Account string
	Params                     map[string]string
}

// Role is one IAM role of a stack: its name, trust policy, and every policy it holds (inline
// and attached managed policies), resolved.
type Role struct {
	Name     string
	Trust    iampolicy.Policy
	Policies []iampolicy.Policy
}

// Roles resolves the SAM template's IAM roles for st, by role name. Errors name the resource
// and the value CloudFormation could not resolve either.
func Roles(st Stack) (map[string]Role, error) { return SAMRoles(samTemplate, st) }

// SAMRoles is Roles for the given template text (tests resolve mutated copies).
func SAMRoles(template []byte, st Stack) (map[string]Role, error) {
	r, err := newCFN(template, st)
	if err != nil {
		return nil, err
	}
	return r.roles()
}

// ResolvedProperties is the Properties of every resource of type typ (AWS::SQS::Queue), by
// logical id, with the intrinsic functions resolved for st's parameters as CloudFormation would
// (a property that resolves to AWS::NoValue is absent).
func ResolvedProperties(template []byte, st Stack, typ string) (map[string]map[string]any, error) {
	r, err := newCFN(template, st)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for name, res := range r.resources {
		if res.typ != typ {
			continue
		}
		v, err := r.resolve(res.props)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name], _ = v.(map[string]any)
	}
	return out, nil
}

// newCFN reads the template and binds its parameters (st.Params, else their defaults).
func newCFN(template []byte, st Stack) (*cfn, error) {
	var t struct {
		Parameters map[string]map[string]any
		Conditions map[string]any
		Resources  map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := yaml.Unmarshal(template, &t); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	r := &cfn{st: st, params: map[string]any{}, conds: t.Conditions, resources: map[string]resource{}}
	for name, p := range t.Parameters {
		v, ok := st.Params[name]
		if !ok {
			d, has := p["Default"]
			if !has {
				return nil, fmt.Errorf("parameter %s: no value and no Default", name)
			}
			v = fmt.Sprint(d)
		}
		if p["Type"] == "CommaDelimitedList" {
			var list []any
			for _, e := range strings.Split(v, ",") {
				list = append(list, strings.TrimSpace(e))
			}
			r.params[name] = list
		} else {
			r.params[name] = v
		}
	}
	for name, res := range t.Resources {
		r.resources[name] = resource{typ: res.Type, props: res.Properties}
	}
	return r, nil
}

// roles resolves every AWS::IAM::Role with its inline policies and the managed policies that
// name it.
func (r *cfn) roles() (map[string]Role, error) {
	roles := map[string]Role{}
	byLogical := map[string]string{}
	names := make([]string, 0, len(r.resources))
	for name := range r.resources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		res := r.resources[name]
		if res.typ != "AWS::IAM::Role" {
			continue
		}
		role, err := r.role(name, res)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		roles[role.Name] = role
		byLogical[name] = role.Name
	}
	for _, name := range names {
		res := r.resources[name]
		if res.typ != "AWS::IAM::ManagedPolicy" {
			continue
		}
		doc, err := r.policy(res.props["PolicyDocument"])
		if err != nil {
			return nil, fmt.Errorf("%s.PolicyDocument: %w", name, err)
		}
		attached, err := r.resolve(res.props["Roles"])
		if err != nil {
			return nil, fmt.Errorf("%s.Roles: %w", name, err)
		}
		list, _ := attached.([]any)
		for _, a := range list {
			role, ok := roles[fmt.Sprint(a)]
			if !ok {
				return nil, fmt.Errorf("%s.Roles: %v is no role of this template", name, a)
			}
			role.Policies = append(role.Policies, doc)
			roles[role.Name] = role
		}
	}
	return roles, nil
}

type resource struct {
	typ   string
	props map[string]any
}

// cfn resolves CloudFormation intrinsic functions: Ref, Fn::Sub, Fn::GetAtt (Arn), Fn::Join,
// Fn::Split, Fn::Select, Fn::If with the template's Conditions (Fn::Equals, Fn::Not, Fn::And,
// Fn::Or, Condition), and AWS::NoValue. Anything else is an error.
type cfn struct {
	st        Stack
	params    map[string]any
	conds     map[string]any
	resources map[string]resource
}

// noValue is AWS::NoValue: the property or list item it stands for is removed.
type noValue struct{}

func (r *cfn) role(logical string, res resource) (Role, error) {
	name, err := r.resolve(res.props["RoleName"])
	if err != nil {
		return Role{}, fmt.Errorf("RoleName: %w", err)
	}
	trust, err := r.policy(res.props["AssumeRolePolicyDocument"])
	if err != nil {
		return Role{}, fmt.Errorf("AssumeRolePolicyDocument: %w", err)
	}
	role := Role{Name: fmt.Sprint(name), Trust: trust}
	if role.Name == "" || role.Name == "<nil>" {
		return Role{}, fmt.Errorf("no RoleName")
	}
	inline, _ := res.props["Policies"].([]any)
	for i, p := range inline {
		m, _ := p.(map[string]any)
		doc, err := r.policy(m["PolicyDocument"])
		if err != nil {
			return Role{}, fmt.Errorf("property Policies[%d]: %w", i, err)
		}
		role.Policies = append(role.Policies, doc)
	}
	return role, nil
}

// policy resolves a policy document, given as YAML or as a JSON string, and parses it.
func (r *cfn) policy(v any) (iampolicy.Policy, error) {
	doc, err := r.resolve(v)
	if err != nil {
		return iampolicy.Policy{}, err
	}
	var b []byte
	if s, ok := doc.(string); ok {
		b = []byte(s)
	} else if b, err = json.Marshal(doc); err != nil {
		return iampolicy.Policy{}, err
	}
	return iampolicy.Parse(b)
}

func (r *cfn) resolve(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for i, e := range x {
			rv, err := r.resolve(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if _, skip := rv.(noValue); !skip {
				out = append(out, rv)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return r.intrinsic(k, arg)
				}
			}
		}
		out := map[string]any{}
		for k, e := range x {
			rv, err := r.resolve(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if _, skip := rv.(noValue); !skip {
				out[k] = rv
			}
		}
		return out, nil
	}
	return v, nil
}

func (r *cfn) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		return r.ref(fmt.Sprint(arg))
	case "Fn::GetAtt":
		l, _ := arg.([]any)
		if len(l) != 2 || l[1] != "Arn" {
			return nil, fmt.Errorf("Fn::GetAtt %v: only [Resource, Arn] is resolved", arg)
		}
		return r.arn(fmt.Sprint(l[0]))
	case "Fn::Sub":
		return r.sub(arg)
	case "Fn::Join":
		l, _ := arg.([]any)
		if len(l) != 2 {
			return nil, fmt.Errorf("Fn::Join wants [delimiter, list]")
		}
		delim, ok := l[0].(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Join: the delimiter must be a string literal")
		}
		list, err := r.list(l[1])
		if err != nil {
			return nil, fmt.Errorf("Fn::Join: %w", err)
		}
		return strings.Join(list, delim), nil
	case "Fn::Split":
		l, _ := arg.([]any)
		if len(l) != 2 {
			return nil, fmt.Errorf("Fn::Split wants [delimiter, string]")
		}
		s, err := r.resolve(l[1])
		if err != nil {
			return nil, err
		}
		var out []any
		for _, e := range strings.Split(fmt.Sprint(s), fmt.Sprint(l[0])) {
			out = append(out, e)
		}
		return out, nil
	case "Fn::Select":
		l, _ := arg.([]any)
		if len(l) != 2 {
			return nil, fmt.Errorf("Fn::Select wants [index, list]")
		}
		idx, ok := l[0].(float64)
		list, err := r.list(l[1])
		if err != nil {
			return nil, err
		}
		if !ok || int(idx) < 0 || int(idx) >= len(list) {
			return nil, fmt.Errorf("Fn::Select: index %v out of range of %d items", l[0], len(list))
		}
		return list[int(idx)], nil
	case "Fn::If":
		l, _ := arg.([]any)
		if len(l) != 3 {
			return nil, fmt.Errorf("Fn::If wants [condition, then, else]")
		}
		ok, err := r.condition(fmt.Sprint(l[0]))
		if err != nil {
			return nil, err
		}
		if ok {
			return r.resolve(l[1])
		}
		return r.resolve(l[2])
	}
	return nil, fmt.Errorf("%s is not resolved by this reader", fn)
}

func (r *cfn) list(v any) ([]string, error) {
	rv, err := r.resolve(v)
	if err != nil {
		return nil, err
	}
	l, ok := rv.([]any)
	if !ok {
		return nil, fmt.Errorf("%v is not a list", rv)
	}
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = fmt.Sprint(e)
	}
	return out, nil
}

func (r *cfn) condition(name string) (bool, error) {
	c, ok := r.conds[name]
	if !ok {
		return false, fmt.Errorf("condition %s is not defined", name)
	}
	return r.test(c)
}

func (r *cfn) test(v any) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false, fmt.Errorf("condition %v: want one condition function", v)
	}
	for fn, arg := range m {
		l, _ := arg.([]any)
		switch fn {
		case "Condition":
			return r.condition(fmt.Sprint(arg))
		case "Fn::Equals":
			if len(l) != 2 {
				return false, fmt.Errorf("Fn::Equals wants two values")
			}
			a, err := r.resolve(l[0])
			if err != nil {
				return false, err
			}
			b, err := r.resolve(l[1])
			if err != nil {
				return false, err
			}
			return fmt.Sprint(a) == fmt.Sprint(b), nil
		case "Fn::Not":
			if len(l) != 1 {
				return false, fmt.Errorf("Fn::Not wants one condition")
			}
			ok, err := r.test(l[0])
			return !ok, err
		case "Fn::And", "Fn::Or":
			and := fn == "Fn::And"
			for _, c := range l {
				ok, err := r.test(c)
				if err != nil {
					return false, err
				}
				if ok != and {
					return ok, nil
				}
			}
			return and, nil
		}
		return false, fmt.Errorf("condition function %s is not resolved by this reader", fn)
	}
	return false, nil
}

func (r *cfn) ref(name string) (any, error) {
	switch name {
	case "AWS::Partition":
		return r.st.Partition, nil
	case "AWS::Region":
		return r.st.Region, nil
	case "AWS::AccountId":
		return r.st.Account, nil
	case "AWS::NoValue":
		return noValue{}, nil
	}
	if v, ok := r.params[name]; ok {
		return v, nil
	}
	res, ok := r.resources[name]
	if !ok {
		return nil, fmt.Errorf("intrinsic Ref %s: no such parameter or resource", name)
	}
	switch res.typ {
	case "AWS::IAM::Role", "AWS::S3::Bucket":
		return r.physicalName(name)
	case "AWS::SQS::Queue":
		n, err := r.physicalName(name)
		return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", r.st.Region, r.st.Account, n), err
	}
	return r.arn(name)
}

// physicalName is a resource's name property, or a stand-in for a name CloudFormation generates.
func (r *cfn) physicalName(logical string) (string, error) {
	res := r.resources[logical]
	for _, p := range []string{"RoleName", "ManagedPolicyName", "QueueName", "BucketName", "FunctionName", "LogGroupName", "Name"} {
		if v, ok := res.props[p]; ok {
			s, err := r.resolve(v)
			return fmt.Sprint(s), err
		}
	}
	return StandInName(logical), nil
}

// StandInName names a resource whose physical name CloudFormation or Terraform generates
// (the claim-check bucket): the same stand-in on both sides, so their policies compare.
func StandInName(logical string) string { return strings.ToLower(logical) + "-generated-name" }

// arn is what Fn::GetAtt Resource.Arn returns, after the resource type's ARN format.
func (r *cfn) arn(logical string) (string, error) {
	res, ok := r.resources[logical]
	if !ok {
		return "", fmt.Errorf("Fn::GetAtt %s: no such resource", logical)
	}
	n, err := r.physicalName(logical)
	if err != nil {
		return "", err
	}
	p, reg, a := r.st.Partition, r.st.Region, r.st.Account
	switch res.typ {
	case "AWS::SQS::Queue":
		return fmt.Sprintf("arn:%s:sqs:%s:%s:%s", p, reg, a, n), nil
	case "AWS::S3::Bucket":
		return fmt.Sprintf("arn:%s:s3:::%s", p, n), nil
	case "AWS::IAM::Role":
		return fmt.Sprintf("arn:%s:iam::%s:role/%s", p, a, n), nil
	case "AWS::IAM::ManagedPolicy":
		return fmt.Sprintf("arn:%s:iam::%s:policy/%s", p, a, n), nil
	case "AWS::Events::Rule":
		return fmt.Sprintf("arn:%s:events:%s:%s:rule/%s", p, reg, a, n), nil
	case "AWS::Serverless::Function", "AWS::Lambda::Function":
		return fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", p, reg, a, n), nil
	case "AWS::Logs::LogGroup":
		return fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s:*", p, reg, a, n), nil
	}
	return "", fmt.Errorf("Fn::GetAtt %s.Arn: type %s is not resolved by this reader", logical, res.typ)
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub resolves Fn::Sub: a string, or [string, {name: value}].
func (r *cfn) sub(arg any) (any, error) {
	tmpl, vars := "", map[string]any{}
	switch x := arg.(type) {
	case string:
		tmpl = x
	case []any:
		if len(x) != 2 {
			return nil, fmt.Errorf("Fn::Sub wants a string or [string, variables]")
		}
		tmpl, _ = x[0].(string)
		m, _ := x[1].(map[string]any)
		for k, v := range m {
			rv, err := r.resolve(v)
			if err != nil {
				return nil, fmt.Errorf("Fn::Sub variable %s: %w", k, err)
			}
			vars[k] = rv
		}
	}
	var ferr error
	out := subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		var v any
		var err error
		switch {
		case vars[name] != nil:
			v = vars[name]
		case strings.HasSuffix(name, ".Arn"):
			v, err = r.arn(strings.TrimSuffix(name, ".Arn"))
		default:
			v, err = r.ref(name)
		}
		if err != nil {
			ferr = err
			return ""
		}
		if _, isList := v.([]any); isList {
			ferr = fmt.Errorf("Fn::Sub ${%s}: a list cannot be substituted", name)
		}
		return fmt.Sprint(v)
	})
	return out, ferr
}
