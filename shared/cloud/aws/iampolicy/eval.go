package iampolicy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Request is what a policy decides: an action on a resource, with the request context's
// condition keys (aws:RequestTag/K, aws:ResourceTag/K, ec2:Vpc, aws:TagKeys, ...). A key with
// several values is multivalued (aws:TagKeys). For a trust policy, Principal is who asks.
type Request struct {
	Action   string
	Resource string
	// Principal is the caller of a trust policy's action: its type (Service, AWS, Federated)
	// and identifier (lambda.amazonaws.com, an ARN).
	Principal *Principal
	Context   map[string][]string
}

// Principal identifies a caller.
type Principal struct{ Type, ID string }

// Decision is the outcome of an evaluation.
type Decision struct {
	Allowed bool
	// ExplicitDeny is true when a Deny statement matched (it wins over every Allow).
	ExplicitDeny bool
	// Matched are the Sids (or statement indexes, "#3") of the matching statements.
	Matched []string
}

// Evaluate decides req against the policies: an explicit Deny wins, else any matching Allow
// allows, else the request is implicitly denied. Error: a statement this evaluator cannot
// decide for this request (see the package doc).
func Evaluate(req Request, policies ...Policy) (Decision, error) {
	ctx := map[string][]string{}
	for k, v := range req.Context {
		ctx[strings.ToLower(k)] = v
	}
	var d Decision
	allowed := false
	for _, p := range policies {
		for i, s := range p.Statement {
			ok, err := s.matches(req, ctx)
			if err != nil {
				return Decision{}, fmt.Errorf("statement %s: %w", name(s, i), err)
			}
			if !ok {
				continue
			}
			d.Matched = append(d.Matched, name(s, i))
			if s.Effect == "Deny" {
				d.ExplicitDeny = true
			} else {
				allowed = true
			}
		}
	}
	d.Allowed = allowed && !d.ExplicitDeny
	return d, nil
}

func name(s Statement, i int) string {
	if s.Sid != "" {
		return s.Sid
	}
	return fmt.Sprintf("#%d", i)
}

func (s Statement) matches(req Request, ctx map[string][]string) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if len(s.Principal) > 0 || req.Principal != nil {
		if !principalMatches(s.Principal, req.Principal) {
			return false, nil
		}
	}
	if len(s.Action) > 0 && !anyMatch(s.Action, req.Action, actionMatch) {
		return false, nil
	}
	if len(s.NotAction) > 0 && anyMatch(s.NotAction, req.Action, actionMatch) {
		return false, nil
	}
	if len(s.Resource) > 0 && !anyMatch(s.Resource, req.Resource, resourceMatch) {
		return false, nil
	}
	if len(s.NotResource) > 0 && anyMatch(s.NotResource, req.Resource, resourceMatch) {
		return false, nil
	}
	ops := make([]string, 0, len(s.Condition))
	for op := range s.Condition {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		o, err := parseOperator(op)
		if err != nil {
			return false, err
		}
		keys := make([]string, 0, len(s.Condition[op]))
		for k := range s.Condition[op] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			vals, present := ctx[strings.ToLower(k)]
			ok, err := o.test(k, s.Condition[op][k], vals, present)
			if err != nil {
				return false, fmt.Errorf("condition %s %s: %w", op, k, err)
			}
			if !ok {
				return false, nil
			}
		}
	}
	return true, nil
}

func principalMatches(want map[string][]string, got *Principal) bool {
	if got == nil || len(want) == 0 {
		return false
	}
	if _, star := want["*"]; star {
		return true
	}
	for _, v := range want[got.Type] {
		if v == "*" || v == got.ID {
			return true
		}
	}
	return false
}

func anyMatch(patterns []string, v string, match func(p, v string) bool) bool {
	for _, p := range patterns {
		if match(p, v) {
			return true
		}
	}
	return false
}

// patterns caches compiled wildcard patterns (the fake cloud decides every launch with them).
var patterns sync.Map // string → *regexp.Regexp

// wildcard matches v against a pattern with * (any run) and ? (one character).
func wildcard(pattern, v string, foldCase bool) bool {
	if !strings.ContainsAny(pattern, "*?") {
		if foldCase {
			return strings.EqualFold(pattern, v)
		}
		return pattern == v
	}
	key := pattern
	if foldCase {
		key = "(?i)" + pattern
	}
	re, ok := patterns.Load(key)
	if !ok {
		q := regexp.QuoteMeta(pattern)
		q = strings.ReplaceAll(q, `\*`, ".*")
		q = strings.ReplaceAll(q, `\?`, ".")
		prefix := "(?s)"
		if foldCase {
			prefix = "(?is)"
		}
		re, _ = patterns.LoadOrStore(key, regexp.MustCompile(prefix+"^"+q+"$"))
	}
	return re.(*regexp.Regexp).MatchString(v)
}

func actionMatch(p, v string) bool { return wildcard(p, v, true) }

// resourceMatch matches an ARN pattern part by part (arn:partition:service:region:account:rest).
func resourceMatch(p, v string) bool {
	if p == "*" {
		return true
	}
	return arnLike(p, v)
}

// arnLike compares the six parts of two ARNs separately, each with * and ? (the last part, the
// resource, keeps its colons and slashes).
func arnLike(pattern, v string) bool {
	pp, vp := strings.SplitN(pattern, ":", 6), strings.SplitN(v, ":", 6)
	if len(pp) != 6 || len(vp) != 6 {
		return wildcard(pattern, v, false)
	}
	for i := range pp {
		if !wildcard(pp[i], vp[i], false) {
			return false
		}
	}
	return true
}

// operator is a parsed condition operator.
type operator struct {
	base             string
	ifExists, negate bool
	set              string // "", "ForAllValues", "ForAnyValue"
}

var baseOperators = map[string]struct {
	negate bool
	match  func(policy, request string) bool
}{
	"StringEquals":              {false, func(p, r string) bool { return p == r }},
	"StringNotEquals":           {true, func(p, r string) bool { return p == r }},
	"StringEqualsIgnoreCase":    {false, strings.EqualFold},
	"StringNotEqualsIgnoreCase": {true, strings.EqualFold},
	"StringLike":                {false, func(p, r string) bool { return wildcard(p, r, false) }},
	"StringNotLike":             {true, func(p, r string) bool { return wildcard(p, r, false) }},
	"ArnEquals":                 {false, arnLike},
	"ArnLike":                   {false, arnLike},
	"ArnNotEquals":              {true, arnLike},
	"ArnNotLike":                {true, arnLike},
	"Bool":                      {false, func(p, r string) bool { return strings.EqualFold(p, r) }},
	"Null":                      {false, nil},
}

func parseOperator(op string) (operator, error) {
	o := operator{base: op}
	if set, rest, ok := strings.Cut(op, ":"); ok {
		if set != "ForAllValues" && set != "ForAnyValue" {
			return o, fmt.Errorf("condition operator %s: unknown set qualifier %s", op, set)
		}
		o.set, o.base = set, rest
	}
	if b, ok := strings.CutSuffix(o.base, "IfExists"); ok {
		o.base, o.ifExists = b, true
	}
	spec, ok := baseOperators[o.base]
	if !ok {
		return o, fmt.Errorf("condition operator %s is not supported by this evaluator", op)
	}
	if o.base == "Null" && (o.set != "" || o.ifExists) {
		return o, fmt.Errorf("condition operator %s: Null takes no qualifier", op)
	}
	o.negate = spec.negate
	return o, nil
}

// test decides one key: policy values want, request values got (present says the key is in
// the request context at all).
func (o operator) test(key string, want, got []string, present bool) (bool, error) {
	if o.base == "Null" {
		if len(want) != 1 || (want[0] != "true" && want[0] != "false") {
			return false, fmt.Errorf("operator Null wants \"true\" or \"false\", got %v", want)
		}
		absent := !present || len(got) == 0
		return absent == (want[0] == "true"), nil
	}
	match := baseOperators[o.base].match
	one := func(v string) bool { // does one request value satisfy the operator?
		hit := false
		for _, w := range want {
			if match(w, v) {
				hit = true
				break
			}
		}
		return hit != o.negate
	}
	switch o.set {
	case "ForAllValues":
		for _, v := range got {
			if !one(v) {
				return false, nil
			}
		}
		return true, nil
	case "ForAnyValue":
		for _, v := range got {
			if one(v) {
				return true, nil
			}
		}
		return false, nil
	}
	if !present || len(got) == 0 {
		// A key not in the request fails a positive operator and passes a negated one;
		// ...IfExists passes (IAM User Guide, "Condition operators").
		return o.ifExists || o.negate, nil
	}
	if len(got) > 1 {
		return false, fmt.Errorf("the request gives %s %d values: use ForAllValues or ForAnyValue", key, len(got))
	}
	return one(got[0]), nil
}
