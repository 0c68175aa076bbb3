package iampolicy

import (
	"strings"
	"testing"
)

func mustParse(t *testing.T, s string) Policy {
	t.Helper()
	p, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The cases follow the IAM User Guide's rules ("Policy evaluation logic", "Condition operators",
// "Single-valued vs. multivalued condition keys"), each worked by hand.
func TestEvaluate(t *testing.T) {
	const subnet = "arn:aws:ec2:us-east-1:111122223333:subnet/subnet-0a"
	p := mustParse(t, `{"Version":"2012-10-17","Statement":[
	 {"Sid":"Tagged","Effect":"Allow","Action":["ec2:RunInstances","ec2:CreateFleet"],"Resource":"arn:aws:ec2:us-east-1:111122223333:subnet/*",
	  "Condition":{"StringEquals":{"ec2:ResourceTag/karpenter.sh/discovery":"prod"}}},
	 {"Sid":"Images","Effect":"Allow","Action":"ec2:RunInstances","Resource":"arn:aws:ec2:us-east-1::image/*",
	  "Condition":{"StringEquals":{"ec2:Owner":["amazon","444455556666"]}}},
	 {"Sid":"Mandatory","Effect":"Allow","Action":"ec2:RunInstances","Resource":"arn:aws:ec2:us-east-1:111122223333:instance/*",
	  "Condition":{"Null":{"aws:RequestTag/Environment":"false","aws:RequestTag/CostCenter":"false"},
	               "ForAllValues:StringLike":{"aws:TagKeys":["Environment","CostCenter","dovetail.dev/*"]}}},
	 {"Sid":"NoProd","Effect":"Deny","Action":"ec2:*","Resource":"*","Condition":{"StringEquals":{"aws:RequestTag/Environment":"forbidden"}}},
	 {"Sid":"Describe","Effect":"Allow","Action":"ec2:Describe*","Resource":"*"},
	 {"Sid":"Vpc","Effect":"Allow","Action":"ec2:RunInstances","Resource":"arn:aws:ec2:us-east-1:111122223333:security-group/*",
	  "Condition":{"ArnEquals":{"ec2:Vpc":"arn:aws:ec2:us-east-1:111122223333:vpc/vpc-1"}}},
	 {"Sid":"NotAct","Effect":"Allow","NotAction":["iam:*","ec2:*"],"NotResource":"arn:aws:s3:::secret/*"}
	]}`)
	tags := func(kv ...string) map[string][]string {
		m := map[string][]string{}
		var keys []string
		for i := 0; i < len(kv); i += 2 {
			m["aws:RequestTag/"+kv[i]] = []string{kv[i+1]}
			keys = append(keys, kv[i])
		}
		if len(keys) > 0 {
			m["aws:TagKeys"] = keys
		}
		return m
	}
	for _, c := range []struct {
		name    string
		req     Request
		allowed bool
		deny    bool
	}{
		{"right tag", Request{Action: "ec2:RunInstances", Resource: subnet, Context: map[string][]string{"ec2:ResourceTag/karpenter.sh/discovery": {"prod"}}}, true, false},
		{"key names are case-insensitive", Request{Action: "EC2:runinstances", Resource: subnet, Context: map[string][]string{"EC2:RESOURCETAG/karpenter.sh/discovery": {"prod"}}}, true, false},
		{"values are case-sensitive", Request{Action: "ec2:RunInstances", Resource: subnet, Context: map[string][]string{"ec2:ResourceTag/karpenter.sh/discovery": {"Prod"}}}, false, false},
		{"wrong tag", Request{Action: "ec2:RunInstances", Resource: subnet, Context: map[string][]string{"ec2:ResourceTag/karpenter.sh/discovery": {"dev"}}}, false, false},
		{"no tag", Request{Action: "ec2:RunInstances", Resource: subnet}, false, false},
		{"other account's subnet", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1:999999999999:subnet/subnet-0a", Context: map[string][]string{"ec2:ResourceTag/karpenter.sh/discovery": {"prod"}}}, false, false},
		{"other region", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:eu-west-1:111122223333:subnet/subnet-0a", Context: map[string][]string{"ec2:ResourceTag/karpenter.sh/discovery": {"prod"}}}, false, false},
		{"Amazon image", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1::image/ami-1", Context: map[string][]string{"ec2:Owner": {"amazon"}}}, true, false},
		{"approved account image", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1::image/ami-1", Context: map[string][]string{"ec2:Owner": {"444455556666"}}}, true, false},
		{"community image", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1::image/ami-1", Context: map[string][]string{"ec2:Owner": {"777788889999"}}}, false, false},
		{"both mandatory tags", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1:111122223333:instance/*", Context: tags("Environment", "prod", "CostCenter", "42", "dovetail.dev/cluster", "prod")}, true, false},
		{"missing mandatory tag", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1:111122223333:instance/*", Context: tags("Environment", "prod", "dovetail.dev/cluster", "prod")}, false, false},
		{"a tag key outside the allowed set (ForAllValues)", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1:111122223333:instance/*", Context: tags("Environment", "prod", "CostCenter", "42", "Owner", "me")}, false, false},
		{"explicit deny wins over an allow", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1:111122223333:instance/*", Context: tags("Environment", "forbidden", "CostCenter", "42")}, false, true},
		{"absent key: the Deny's positive condition does not match", Request{Action: "ec2:DescribeSubnets", Resource: "*"}, true, false},
		{"ArnEquals on the VPC", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1:111122223333:security-group/sg-1", Context: map[string][]string{"ec2:Vpc": {"arn:aws:ec2:us-east-1:111122223333:vpc/vpc-1"}}}, true, false},
		{"foreign VPC", Request{Action: "ec2:RunInstances", Resource: "arn:aws:ec2:us-east-1:111122223333:security-group/sg-1", Context: map[string][]string{"ec2:Vpc": {"arn:aws:ec2:us-east-1:111122223333:vpc/vpc-2"}}}, false, false},
		{"NotAction/NotResource allow", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::public/x"}, true, false},
		{"NotResource excludes", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::secret/x"}, false, false},
		{"NotAction excludes", Request{Action: "iam:PassRole", Resource: "arn:aws:iam::111122223333:role/x"}, false, false},
		{"implicit deny", Request{Action: "ec2:TerminateInstances", Resource: "arn:aws:ec2:us-east-1:111122223333:instance/i-1"}, false, false},
	} {
		d, err := Evaluate(c.req, p)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if d.Allowed != c.allowed || d.ExplicitDeny != c.deny {
			t.Errorf("%s: allowed %v deny %v (matched %v), want allowed %v deny %v", c.name, d.Allowed, d.ExplicitDeny, d.Matched, c.allowed, c.deny)
		}
	}
}

// Negated operators pass on an absent key; set operators on empty sets (IAM User Guide,
// "Condition operators" and "Multivalued context keys").
func TestAbsentKeysAndSets(t *testing.T) {
	for _, c := range []struct {
		op   string
		want []string
		got  []string
		ok   bool
	}{
		{"StringEquals", []string{"a"}, nil, false},
		{"StringNotEquals", []string{"a"}, nil, true},
		{"StringNotEquals", []string{"a", "b"}, []string{"b"}, false},
		{"StringEqualsIfExists", []string{"a"}, nil, true},
		{"StringLike", []string{"ab*"}, []string{"abc"}, true},
		{"StringNotLike", []string{"ab*"}, []string{"abc"}, false},
		{"StringEqualsIgnoreCase", []string{"ABC"}, []string{"abc"}, true},
		{"ForAllValues:StringEquals", []string{"a", "b"}, nil, true},
		{"ForAllValues:StringEquals", []string{"a", "b"}, []string{"a", "c"}, false},
		{"ForAnyValue:StringEquals", []string{"a"}, nil, false},
		{"ForAnyValue:StringEquals", []string{"a"}, []string{"c", "a"}, true},
		{"ForAllValues:StringNotEquals", []string{"a"}, []string{"b", "c"}, true},
		{"ForAnyValue:StringNotEquals", []string{"a"}, []string{"a"}, false},
		{"Null", []string{"true"}, nil, true},
		{"Null", []string{"false"}, nil, false},
		{"Null", []string{"false"}, []string{"x"}, true},
		{"ArnLike", []string{"arn:aws:lambda:*:111122223333:function:dovetail-*"}, []string{"arn:aws:lambda:us-east-1:111122223333:function:dovetail-prod-provision"}, true},
		{"ArnLike", []string{"arn:aws:lambda:*:111122223333:function:dovetail-*"}, []string{"arn:aws:lambda:us-east-1:999999999999:function:dovetail-x"}, false},
		{"ArnNotEquals", []string{"arn:aws:iam::1:role/a"}, nil, true},
		{"Bool", []string{"true"}, []string{"true"}, true},
	} {
		o, err := parseOperator(c.op)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.test("k", c.want, c.got, c.got != nil)
		if err != nil || got != c.ok {
			t.Errorf("%s %v against %v: %v, %v; want %v", c.op, c.want, c.got, got, err, c.ok)
		}
	}
}

func TestTrustPolicyPrincipal(t *testing.T) {
	p := mustParse(t, `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole",
	 "Condition":{"StringEquals":{"aws:SourceAccount":"111122223333"},"ArnLike":{"aws:SourceArn":"arn:aws:lambda:us-east-1:111122223333:function:dovetail-prod-provision"}}}}`)
	ok := Request{Action: "sts:AssumeRole", Principal: &Principal{"Service", "lambda.amazonaws.com"},
		Context: map[string][]string{"aws:SourceAccount": {"111122223333"}, "aws:SourceArn": {"arn:aws:lambda:us-east-1:111122223333:function:dovetail-prod-provision"}}}
	if d, err := Evaluate(ok, p); err != nil || !d.Allowed {
		t.Fatalf("the function itself: %+v %v", d, err)
	}
	for name, mutate := range map[string]func(*Request){
		"other service": func(r *Request) { r.Principal = &Principal{"Service", "ec2.amazonaws.com"} },
		"other account": func(r *Request) { r.Context["aws:SourceAccount"] = []string{"999999999999"} },
		"other function": func(r *Request) {
			r.Context["aws:SourceArn"] = []string{"arn:aws:lambda:us-east-1:111122223333:function:other"}
		},
		"no source arn": func(r *Request) { delete(r.Context, "aws:SourceArn") },
	} {
		r := ok
		r.Context = map[string][]string{}
		for k, v := range ok.Context {
			r.Context[k] = v
		}
		mutate(&r)
		if d, err := Evaluate(r, p); err != nil || d.Allowed {
			t.Errorf("%s: %+v %v, want denied", name, d, err)
		}
	}
}

func TestRefusals(t *testing.T) {
	for _, doc := range []string{
		`{"Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"NumericLessThan":{"ec2:VolumeSize":"10"}}}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::${aws:username}/*"}]}`,
		`{"Statement":[{"Effect":"Allow","NotPrincipal":{"AWS":"x"},"Action":"s3:*","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Permit","Action":"s3:*","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"s3:*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}],"Extra":1}`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s parsed, want a refusal", doc)
		}
	}
	p := mustParse(t, `{"Statement":[{"Effect":"Allow","Action":"ec2:RunInstances","Resource":"*","Condition":{"StringEquals":{"aws:TagKeys":"a"}}}]}`)
	_, err := Evaluate(Request{Action: "ec2:RunInstances", Resource: "x", Context: map[string][]string{"aws:TagKeys": {"a", "b"}}}, p)
	if err == nil || !strings.Contains(err.Error(), "ForAllValues or ForAnyValue") {
		t.Errorf("single-valued operator on a multivalued key: %v", err)
	}
}
