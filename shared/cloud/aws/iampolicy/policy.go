// Package iampolicy reads IAM policy documents and decides requests against them: a small,
// faithful evaluator of identity-based and trust policies, used by infra/aws's policy tests
// (every statement of the SAM and Terraform stacks against a table of allowed and denied
// requests) and by the fake cloud's EC2 face (shared/cloud/fake/ec2api), which refuses what IAM
// would refuse.
//
// Scope (IAM User Guide, "Policy evaluation logic" and "IAM JSON policy elements"):
//   - One principal's policies, all of one kind: identity-based policies of a role, or a role's
//     trust policy (Principal matched against Request.Principal). Resource-based policies,
//     permissions boundaries, session policies and SCPs are not combined here.
//   - Decision: an explicit Deny in any matching statement wins; else an Allow in any matching
//     statement allows; else the request is implicitly denied.
//   - Elements: Version, Id, Statement (one or a list); Sid, Effect, Principal (Service, AWS,
//     Federated, or "*"), Action / NotAction, Resource / NotResource, Condition. NotPrincipal is
//     refused.
//   - Actions match case-insensitively with the wildcards * and ?; resources match ARN by ARN:
//     each of the first five colon-separated parts on its own, the rest (which may hold colons
//     and slashes) as one, with * and ?; "*" alone matches any resource.
//   - Condition operators: StringEquals, StringNotEquals, StringEqualsIgnoreCase,
//     StringNotEqualsIgnoreCase, StringLike, StringNotLike, ArnEquals, ArnLike, ArnNotEquals,
//     ArnNotLike, Bool and Null; the ...IfExists suffix; the ForAllValues: and ForAnyValue:
//     prefixes. Operators are ANDed, keys within an operator ANDed, values of a key ORed. A key
//     absent from the request fails a positive operator and passes a negated one; IfExists passes
//     when it is absent; ForAllValues passes on an absent or empty key, ForAnyValue fails.
//     Condition key names are case-insensitive, values case-sensitive (but for the IgnoreCase
//     operators). Numeric, Date, IpAddress and Binary operators are refused, as are policy
//     variables (${aws:username}) and a single-valued operator applied to a key the request
//     gives several values: an evaluator that cannot decide says so rather than guess.
package iampolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Policy is an IAM policy document.
type Policy struct {
	Version   string      `json:"Version,omitempty"`
	ID        string      `json:"Id,omitempty"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement. Lists are what IAM accepts as a string or a list of strings.
type Statement struct {
	Sid    string `json:"Sid,omitempty"`
	Effect string `json:"Effect"`
	// Principal maps a principal type (Service, AWS, Federated) to its values; {"*": ["*"]} is
	// the principal "*". Only in trust policies.
	Principal   map[string][]string `json:"Principal,omitempty"`
	Action      []string            `json:"Action,omitempty"`
	NotAction   []string            `json:"NotAction,omitempty"`
	Resource    []string            `json:"Resource,omitempty"`
	NotResource []string            `json:"NotResource,omitempty"`
	// Condition maps an operator (StringEquals, ForAnyValue:StringLike, ...) to keys and values.
	Condition map[string]map[string][]string `json:"Condition,omitempty"`
}

// Parse reads a policy document. Errors name the element that is malformed or not supported.
func Parse(b []byte) (Policy, error) {
	var raw struct {
		Version   string          `json:"Version"`
		ID        string          `json:"Id"`
		Statement json.RawMessage `json:"Statement"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	p := Policy{Version: raw.Version, ID: raw.ID}
	var list []json.RawMessage
	if err := json.Unmarshal(raw.Statement, &list); err != nil {
		list = []json.RawMessage{raw.Statement} // a single statement object
	}
	for i, r := range list {
		s, err := parseStatement(r)
		if err != nil {
			return Policy{}, fmt.Errorf("policy: Statement[%d]: %w", i, err)
		}
		p.Statement = append(p.Statement, s)
	}
	if len(p.Statement) == 0 {
		return Policy{}, fmt.Errorf("policy: no statement")
	}
	return p, nil
}

func parseStatement(b []byte) (Statement, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return Statement{}, err
	}
	var s Statement
	for k, v := range m {
		var err error
		switch k {
		case "Sid":
			err = json.Unmarshal(v, &s.Sid)
		case "Effect":
			err = json.Unmarshal(v, &s.Effect)
		case "Principal":
			s.Principal, err = principal(v)
		case "Action":
			s.Action, err = stringOrList(v)
		case "NotAction":
			s.NotAction, err = stringOrList(v)
		case "Resource":
			s.Resource, err = stringOrList(v)
		case "NotResource":
			s.NotResource, err = stringOrList(v)
		case "Condition":
			s.Condition, err = condition(v)
		default:
			err = fmt.Errorf("element %s is not supported by this evaluator", k)
		}
		if err != nil {
			return Statement{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	return s, s.check()
}

// check refuses statements IAM would refuse and those this evaluator cannot decide.
func (s Statement) check() error {
	switch {
	case s.Effect != "Allow" && s.Effect != "Deny":
		return fmt.Errorf("element Effect %q: must be Allow or Deny", s.Effect)
	case (len(s.Action) == 0) == (len(s.NotAction) == 0):
		return fmt.Errorf("exactly one of Action and NotAction is required")
	case len(s.Principal) == 0 && (len(s.Resource) == 0) == (len(s.NotResource) == 0):
		return fmt.Errorf("exactly one of Resource and NotResource is required in an identity-based statement")
	}
	for _, list := range [][]string{s.Action, s.NotAction, s.Resource, s.NotResource} {
		for _, v := range list {
			if strings.Contains(v, "${") {
				return fmt.Errorf("%q: policy variables are not supported by this evaluator", v)
			}
		}
	}
	for op, kv := range s.Condition {
		if _, err := parseOperator(op); err != nil {
			return err
		}
		for k, vs := range kv {
			for _, v := range vs {
				if strings.Contains(v, "${") {
					return fmt.Errorf("condition %s %s %q: policy variables are not supported by this evaluator", op, k, v)
				}
			}
		}
	}
	return nil
}

// stringOrList reads a string or a list of strings.
func stringOrList(b []byte) ([]string, error) {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("want a string or a list of strings: %s", b)
	}
	return list, nil
}

// scalars reads a condition value: a string, bool or number, or a list of them (IAM compares
// their string forms).
func scalars(b []byte) ([]string, error) {
	var list []any
	if err := json.Unmarshal(b, &list); err != nil {
		var one any
		if err := json.Unmarshal(b, &one); err != nil {
			return nil, err
		}
		list = []any{one}
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case bool:
			out = append(out, strconv.FormatBool(x))
		case float64:
			out = append(out, strconv.FormatFloat(x, 'f', -1, 64))
		default:
			return nil, fmt.Errorf("condition value %v: want a string, boolean or number", v)
		}
	}
	return out, nil
}

func condition(b []byte) (map[string]map[string][]string, error) {
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	out := map[string]map[string][]string{}
	for op, kv := range raw {
		out[op] = map[string][]string{}
		for k, v := range kv {
			vals, err := scalars(v)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", op, k, err)
			}
			out[op][k] = vals
		}
	}
	return out, nil
}

func principal(b []byte) (map[string][]string, error) {
	var star string
	if err := json.Unmarshal(b, &star); err == nil {
		if star != "*" {
			return nil, fmt.Errorf("%q: a string Principal must be \"*\"", star)
		}
		return map[string][]string{"*": {"*"}}, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for typ, v := range raw {
		switch typ {
		case "Service", "AWS", "Federated":
		default:
			return nil, fmt.Errorf("principal type %s is not supported by this evaluator", typ)
		}
		vals, err := stringOrList(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		out[typ] = vals
	}
	return out, nil
}

// MarshalJSON writes the policy with sorted lists (IAM ignores their order), so two documents
// granting the same thing in a different order compare equal as JSON.
func (p Policy) MarshalJSON() ([]byte, error) {
	type plain Policy
	c := plain(p)
	c.Statement = make([]Statement, len(p.Statement))
	for i, s := range p.Statement {
		c.Statement[i] = s.Normalized()
	}
	return json.Marshal(c)
}

// Normalized returns the statement with every list sorted and duplicates removed.
func (s Statement) Normalized() Statement {
	n := s
	n.Action, n.NotAction = uniq(s.Action), uniq(s.NotAction)
	n.Resource, n.NotResource = uniq(s.Resource), uniq(s.NotResource)
	if s.Principal != nil {
		n.Principal = map[string][]string{}
		for k, v := range s.Principal {
			n.Principal[k] = uniq(v)
		}
	}
	if s.Condition != nil {
		n.Condition = map[string]map[string][]string{}
		for op, kv := range s.Condition {
			n.Condition[op] = map[string][]string{}
			for k, v := range kv {
				n.Condition[op][k] = uniq(v)
			}
		}
	}
	return n
}

func uniq(in []string) []string {
	if in == nil {
		return nil
	}
	out := append([]string(nil), in...)
	sort.Strings(out)
	j := 0
	for i, v := range out {
		if i == 0 || v != out[j-1] {
			out[j] = v
			j++
		}
	}
	return out[:j]
}
