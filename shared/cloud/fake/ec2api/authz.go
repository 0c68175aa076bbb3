package ec2api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dovetail-dev/dovetail/shared/cloud/aws/iampolicy"
)

// Identity is a caller of the endpoint, known by the access key ID its requests are signed
// with: the role those credentials are a session of, and the role's identity-based policies.
type Identity struct {
	// RoleARN is arn:aws:iam::<account>:role/<name>.
	RoleARN  string
	Policies []iampolicy.Policy
}

// CodeUnauthorizedOperation is EC2's refusal of a request IAM does not allow.
const CodeUnauthorizedOperation = "UnauthorizedOperation"

type callerKey struct{}

var sigV4Credential = regexp.MustCompile(`Credential=([^/]+)/`)

// caller finds the identity of a request: nil (unrestricted, an administrator's) when the
// endpoint was given no identities. With identities, an unknown key is refused as EC2 refuses
// credentials it cannot validate.
func (s *Server) caller(r *http.Request) (*Identity, *apiError) {
	if s.identities == nil {
		return nil, nil
	}
	m := sigV4Credential.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return nil, &apiError{status: http.StatusUnauthorized, code: "AuthFailure", message: "AWS was not able to validate the provided access credentials"}
	}
	id, ok := s.identities[m[1]]
	if !ok {
		return nil, &apiError{status: http.StatusUnauthorized, code: "AuthFailure", message: "AWS was not able to validate the provided access credentials"}
	}
	return &id, nil
}

func callerOf(ctx context.Context) *Identity {
	id, _ := ctx.Value(callerKey{}).(*Identity)
	return id
}

// check is one authorization: an action on a resource with the request context's keys.
type check struct {
	action, resource string
	context          map[string][]string
}

// authorize decides checks for the caller in ctx, as IAM would: the first refused one is
// returned as EC2 words it (403 UnauthorizedOperation; see unauthorizedMessage). No caller:
// allowed.
func (s *Server) authorize(ctx context.Context, checks ...check) *apiError {
	id := callerOf(ctx)
	if id == nil {
		return nil
	}
	for _, c := range checks {
		d, err := iampolicy.Evaluate(iampolicy.Request{Action: c.action, Resource: c.resource, Context: c.context}, id.Policies...)
		if err != nil {
			return &apiError{status: http.StatusInternalServerError, code: "InternalError", message: err.Error()}
		}
		if !d.Allowed {
			return &apiError{status: http.StatusForbidden, code: CodeUnauthorizedOperation, message: s.unauthorizedMessage(id, c, d.ExplicitDeny)}
		}
	}
	return nil
}

// unauthorizedMessage words a refusal as EC2 does ("You are not authorized to perform this
// operation. User: <session> is not authorized to perform: <action> on resource: <arn> because
// no identity-based policy allows the <action> action. Encoded authorization failure message:
// ..."). Real encoded messages are encrypted for sts:DecodeAuthorizationMessage; this one is the
// base64url of what that call would return (allowed, explicitDeny, and the context: principal,
// action, resource, condition keys), so tests can read it.
func (s *Server) unauthorizedMessage(id *Identity, c check, explicit bool) string {
	session := id.RoleARN
	if i := strings.LastIndex(id.RoleARN, ":role/"); i >= 0 {
		name := id.RoleARN[i+len(":role/"):]
		name = name[strings.LastIndex(name, "/")+1:]
		session = strings.Replace(id.RoleARN[:i], ":iam:", ":sts:", 1) + ":assumed-role/" + name + "/" + name
	}
	why := "because no identity-based policy allows the " + c.action + " action"
	if explicit {
		why = "with an explicit deny in an identity-based policy"
	}
	keys := make([]string, 0, len(c.context))
	for k := range c.context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	type value struct {
		Value string `json:"value"`
	}
	type item struct {
		Key    string `json:"key"`
		Values struct {
			Items []value `json:"items"`
		} `json:"values"`
	}
	var items []item
	for _, k := range keys {
		it := item{Key: k}
		for _, v := range c.context[k] {
			it.Values.Items = append(it.Values.Items, value{v})
		}
		items = append(items, it)
	}
	decoded := map[string]any{"allowed": false, "explicitDeny": explicit,
		"matchedStatements": map[string]any{"items": []any{}}, "failures": map[string]any{"items": []any{}},
		"context": map[string]any{"principal": map[string]string{"arn": session}, "action": c.action, "resource": c.resource,
			"conditions": map[string]any{"items": items}}}
	b, _ := json.Marshal(decoded)
	return fmt.Sprintf("You are not authorized to perform this operation. User: %s is not authorized to perform: %s on resource: %s %s. Encoded authorization failure message: %s",
		session, c.action, c.resource, why, base64.RawURLEncoding.EncodeToString(b))
}

// DecodeAuthorizationMessage reads back the encoded part of an UnauthorizedOperation message
// (what sts:DecodeAuthorizationMessage returns for a real one).
func DecodeAuthorizationMessage(message string) (map[string]any, error) {
	const marker = "Encoded authorization failure message: "
	i := strings.Index(message, marker)
	if i < 0 {
		return nil, fmt.Errorf("no encoded authorization failure message in %q", message)
	}
	enc := strings.Fields(message[i+len(marker):])
	if len(enc) == 0 {
		return nil, fmt.Errorf("empty encoded message")
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc[0], ".;\"'"))
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(b, &out)
}

// ARNs and condition keys of the fake's resources (Service Authorization Reference, "Resource
// types defined by Amazon EC2": images and snapshots carry no account).
func (s *Server) arn(kind, id string) string {
	account := s.account
	if kind == "image" || kind == "snapshot" {
		account = ""
	}
	return "arn:aws:ec2:" + s.region + ":" + account + ":" + kind + "/" + id
}

// resourceTags is the context of an existing resource: ec2:ResourceTag/K and aws:ResourceTag/K.
func resourceTags(tags []types.Tag) map[string][]string {
	m := map[string][]string{}
	for _, t := range tags {
		m["ec2:ResourceTag/"+aws.ToString(t.Key)] = []string{aws.ToString(t.Value)}
		m["aws:ResourceTag/"+aws.ToString(t.Key)] = []string{aws.ToString(t.Value)}
	}
	return m
}

// requestTags is the context of a resource created with tags: aws:RequestTag/K and aws:TagKeys.
func requestTags(tags map[string]string) map[string][]string {
	m := map[string][]string{}
	keys := make([]string, 0, len(tags))
	for k, v := range tags {
		m["aws:RequestTag/"+k] = []string{v}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		m["aws:TagKeys"] = keys
	}
	return m
}

// created returns the checks of creating a resource with tags: the action with the request
// tags, and ec2:CreateTags on it with ec2:CreateAction when tags are given (EC2 User Guide,
// "Grant permission to tag resources during creation").
func created(action, arn string, tags map[string]string) []check {
	out := []check{{action, arn, requestTags(tags)}}
	if len(tags) > 0 {
		ctx := requestTags(tags)
		ctx["ec2:CreateAction"] = []string{strings.TrimPrefix(action, "ec2:")}
		out = append(out, check{"ec2:CreateTags", arn, ctx})
	}
	return out
}

// launchChecks are what RunInstances authorizes for one offering of a fleet (Service
// Authorization Reference, RunInstances): the instance, its volumes and network interface as
// created with their tags (the fleet's and the template's), the subnet and security groups
// (their tags and VPC), the image (its owner) and the launch template (its tags). Called with
// s.mu held.
func (s *Server) launchChecks(t *template, sn types.Subnet, instanceTags, volumeTags, eniTags map[string]string) []check {
	var out []check
	for _, c := range [][]check{created("ec2:RunInstances", s.arn("instance", "*"), instanceTags),
		created("ec2:RunInstances", s.arn("volume", "*"), volumeTags), created("ec2:RunInstances", s.arn("network-interface", "*"), eniTags)} {
		for _, x := range c {
			if x.action == "ec2:CreateTags" {
				x.context["ec2:CreateAction"] = []string{"CreateFleet"}
			}
			out = append(out, x)
		}
	}
	vpcARN := func(vpc *string) []string { return []string{s.arn("vpc", aws.ToString(vpc))} }
	sctx := resourceTags(sn.Tags)
	sctx["ec2:Vpc"] = vpcARN(sn.VpcId)
	out = append(out, check{"ec2:RunInstances", s.arn("subnet", aws.ToString(sn.SubnetId)), sctx})
	groups := append([]string(nil), t.data.SecurityGroupIds...)
	for _, ni := range t.data.NetworkInterfaces {
		groups = append(groups, ni.Groups...)
	}
	for _, id := range groups {
		for _, g := range s.groups {
			if aws.ToString(g.GroupId) == id {
				gctx := resourceTags(g.Tags)
				gctx["ec2:Vpc"] = vpcARN(g.VpcId)
				out = append(out, check{"ec2:RunInstances", s.arn("security-group", id), gctx})
			}
		}
	}
	for _, img := range s.images {
		if aws.ToString(img.ImageId) == aws.ToString(t.data.ImageId) {
			ictx := resourceTags(img.Tags)
			ictx["ec2:Owner"] = []string{imageOwner(img.Image)}
			out = append(out, check{"ec2:RunInstances", s.arn("image", aws.ToString(img.ImageId)), ictx})
		}
	}
	out = append(out, check{"ec2:RunInstances", s.arn("launch-template", aws.ToString(t.LaunchTemplateId)), resourceTags(t.Tags)})
	return out
}

// imageOwner is an image's ec2:Owner: its owner alias (amazon, aws-marketplace) or account.
func imageOwner(img types.Image) string {
	if a := aws.ToString(img.ImageOwnerAlias); a != "" {
		return a
	}
	return aws.ToString(img.OwnerId)
}

// templateTags are the tags a launch template gives the resources of one type.
func templateTags(t *template, rt types.ResourceType) map[string]string {
	out := map[string]string{}
	for _, ts := range t.data.TagSpecifications {
		if ts.ResourceType == rt {
			for k, v := range tagMap(ts.Tags) {
				out[k] = v
			}
		}
	}
	return out
}
