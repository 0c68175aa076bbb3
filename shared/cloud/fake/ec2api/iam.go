package ec2api

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The IAM face: the instance-profile calls the AWS provider makes for spec.role, in IAM's Query
// protocol (IAM API reference): form-encoded POST with Action and Version=2010-05-08, list
// members flattened as "Tags.member.1.Key"; XML responses <ActionResponse><ActionResult>…
// with PascalCase members and <member> list items; errors as
// <ErrorResponse><Error><Type>Sender</Type><Code>NoSuchEntity</Code>…</Error></ErrorResponse>
// with IAM's codes and HTTP statuses. IAM is a global service; the fake keeps one account's
// roles and instance profiles.

// IAM error codes (IAM API reference, "Common Errors" and each action's "Errors").
const (
	CodeNoSuchEntity        = "NoSuchEntity"        // 404
	CodeEntityAlreadyExists = "EntityAlreadyExists" // 409
	CodeLimitExceeded       = "LimitExceeded"       // 409
	CodeDeleteConflict      = "DeleteConflict"      // 409
	CodeValidationError     = "ValidationError"     // 400
)

const iamVersion = "2010-05-08"

// iamName is IAM's name pattern for roles and instance profiles ([\w+=,.@-]+, 1 to 128).
var iamName = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)

// iamPath is IAM's path pattern: "/" or /segments/ of printable ASCII, at most 512 characters.
var iamPath = regexp.MustCompile(`^(/|/[\x21-\x7E]{0,510}/)$`)

type iamRole struct {
	name, id, path string
	created        time.Time
}

type iamProfile struct {
	name, id, path string
	created        time.Time
	roles          []string
	tags           map[string]string
}

// AddRole creates an IAM role the fake's instance profiles may hold (a node role).
func (s *Server) AddRole(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.roles[name]; !ok {
		s.roles[name] = &iamRole{name: name, id: "AROA" + strings.ToUpper(resourceID("r", name)[3:]), path: "/", created: s.now()}
	}
}

// AddInstanceProfile creates an instance profile holding role (created too when missing), as a
// user who made their own profile for spec.instanceProfile has; path "/", no tags.
func (s *Server) AddInstanceProfile(name, role string) {
	s.AddRole(role)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.profiles[name] = &iamProfile{name: name, path: "/", created: s.now(), roles: []string{role}, tags: map[string]string{},
		id: "AIPA" + strings.ToUpper(resourceID("p", name)[3:])}
}

// InstanceProfile reports an instance profile's roles and tags, for tests.
func (s *Server) InstanceProfile(name string) (roles []string, tags map[string]string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.profiles[name]
	if !ok {
		return nil, nil, false
	}
	t := map[string]string{}
	for k, v := range p.tags {
		t[k] = v
	}
	return append([]string(nil), p.roles...), t, true
}

// InstanceProfileNames lists the instance profiles, sorted.
func (s *Server) InstanceProfileNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.profiles))
	for n := range s.profiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// profileHasRole reports whether the named instance profile exists and holds a role: what an
// instance needs to get credentials and join. Called with s.mu held.
func (s *Server) profileHasRole(name string) (exists, hasRole bool) {
	p, ok := s.profiles[name]
	return ok, ok && len(p.roles) > 0
}

func isIAMAction(action string) bool {
	switch action {
	case "GetInstanceProfile", "CreateInstanceProfile", "AddRoleToInstanceProfile", "RemoveRoleFromInstanceProfile",
		"DeleteInstanceProfile", "ListInstanceProfiles", "ListInstanceProfileTags":
		return true
	}
	return false
}

type iamError struct {
	status        int
	code, message string
}

func (s *Server) serveIAM(ctx context.Context, w http.ResponseWriter, action string, form url.Values, reqID string) {
	s.record(action, form)
	result, e := s.iam(ctx, action, form)
	w.Header().Set("Content-Type", "text/xml")
	if e != nil {
		s.log.Info("iam refused a request", "action", action, "code", e.code, "message", e.message)
		w.WriteHeader(e.status)
		body, _ := xml.Marshal(struct {
			XMLName xml.Name `xml:"ErrorResponse"`
			Xmlns   string   `xml:"xmlns,attr"`
			Error   struct {
				Type    string
				Code    string
				Message string
			}
			RequestID string `xml:"RequestId"`
		}{Xmlns: "https://iam.amazonaws.com/doc/2010-05-08/", Error: struct{ Type, Code, Message string }{"Sender", e.code, e.message}, RequestID: reqID})
		_, _ = w.Write(append([]byte(xml.Header), body...))
		return
	}
	type meta struct {
		RequestID string `xml:"RequestId"`
	}
	var b strings.Builder
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, `<%sResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/">`, action)
	if result != nil {
		inner, err := xml.Marshal(result)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		members := strings.TrimSuffix(strings.TrimPrefix(string(inner), "<r>"), "</r>")
		fmt.Fprintf(&b, "<%sResult>%s</%sResult>", action, members, action)
	}
	m, _ := xml.Marshal(struct {
		XMLName xml.Name `xml:"ResponseMetadata"`
		meta
	}{meta: meta{RequestID: reqID}})
	b.Write(m)
	fmt.Fprintf(&b, "</%sResponse>", action)
	_, _ = w.Write([]byte(b.String()))
}

// XML shapes of IAM's results (IAM API reference, data types InstanceProfile, Role, Tag).
type xmlTag struct {
	Key   string
	Value string
}

type xmlRole struct {
	Path       string
	RoleName   string
	RoleID     string `xml:"RoleId"`
	Arn        string
	CreateDate string
}

type xmlProfile struct {
	Path                string    `xml:"Path"`
	InstanceProfileName string    `xml:"InstanceProfileName"`
	InstanceProfileID   string    `xml:"InstanceProfileId"`
	Arn                 string    `xml:"Arn"`
	CreateDate          string    `xml:"CreateDate"`
	Roles               []xmlRole `xml:"Roles>member"`
	Tags                []xmlTag  `xml:"Tags>member"`
}

// profileResult and listResult are the members of the Get/Create and List results; they are
// written inside <ActionResult> without an element of their own.
type profileResult struct {
	XMLName         xml.Name `xml:"r"`
	InstanceProfile xmlProfile
}

type listResult struct {
	XMLName          xml.Name     `xml:"r"`
	IsTruncated      bool         `xml:"IsTruncated"`
	Marker           string       `xml:"Marker,omitempty"`
	InstanceProfiles []xmlProfile `xml:"InstanceProfiles>member"`
}

// tagsResult is ListInstanceProfileTags' result (IAM API reference, ListInstanceProfileTags:
// Tags sorted by key, IsTruncated, Marker when truncated).
type tagsResult struct {
	XMLName     xml.Name `xml:"r"`
	IsTruncated bool     `xml:"IsTruncated"`
	Marker      string   `xml:"Marker,omitempty"`
	Tags        []xmlTag `xml:"Tags>member"`
}

// iamPage cuts sorted keys by IAM's MaxItems and Marker (IAM API reference, ListInstanceProfiles
// and ListInstanceProfileTags: MaxItems 1 to 1000, 100 when absent; Marker is the value of the
// previous response's Marker, opaque to the caller, at least 1 character). Here it is the first
// key of the next page, and a page starts at the first key not before it, so a profile deleted
// between two pages (as a release does) does not spoil the marker.
func iamPage(keys []string, form url.Values) (page []string, marker string, e *iamError) {
	size := 100
	if v := form.Get("MaxItems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, "", invalid("1 validation error detected: Value '%s' at 'maxItems' failed to satisfy constraint: Member must have value between 1 and 1000", v)
		}
		size = n
	}
	start := 0
	if m, ok := form["Marker"]; ok {
		if m[0] == "" {
			return nil, "", invalid("1 validation error detected: Value '' at 'marker' failed to satisfy constraint: Member must have length greater than or equal to 1")
		}
		start = sort.SearchStrings(keys, m[0])
	}
	end := min(start+size, len(keys))
	if end < len(keys) {
		marker = keys[end]
	}
	return keys[start:end], marker, nil
}

// xmlProfile renders p as Get and Create return it, tags included. List calls drop the tags:
// "IAM resource-listing operations return a subset of the available attributes for the
// resource. For example, this operation does not return tags" (IAM API reference,
// ListInstanceProfiles); tags are read with ListInstanceProfileTags or GetInstanceProfile.
func (s *Server) xmlProfile(p *iamProfile) xmlProfile {
	out := xmlProfile{Path: p.path, InstanceProfileName: p.name, InstanceProfileID: p.id, CreateDate: p.created.UTC().Format(time.RFC3339),
		Arn: "arn:aws:iam::" + s.account + ":instance-profile" + p.path + p.name, Roles: []xmlRole{}, Tags: []xmlTag{}}
	for _, r := range p.roles {
		role := s.roles[r]
		out.Roles = append(out.Roles, xmlRole{Path: role.path, RoleName: role.name, RoleID: role.id,
			Arn: "arn:aws:iam::" + s.account + ":role" + role.path + role.name, CreateDate: role.created.UTC().Format(time.RFC3339)})
	}
	keys := make([]string, 0, len(p.tags))
	for k := range p.tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.Tags = append(out.Tags, xmlTag{Key: k, Value: p.tags[k]})
	}
	return out
}

func notFound(format string, args ...any) *iamError {
	return &iamError{http.StatusNotFound, CodeNoSuchEntity, fmt.Sprintf(format, args...)}
}

func conflict(code, format string, args ...any) *iamError {
	return &iamError{http.StatusConflict, code, fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *iamError {
	return &iamError{http.StatusBadRequest, CodeValidationError, fmt.Sprintf(format, args...)}
}

// CodeAccessDenied is IAM's refusal of a request the caller's policies do not allow (403).
const CodeAccessDenied = "AccessDenied"

// profileARN is an instance profile's ARN: arn:aws:iam::<account>:instance-profile<path><name>
// (IAM User Guide, "IAM identifiers").
func (s *Server) profileARN(path, name string) string {
	return "arn:aws:iam::" + s.account + ":instance-profile" + path + name
}

// authorizeIAM decides an IAM call for the caller in ctx (no caller: allowed) and words a
// refusal as IAM does: 403 AccessDenied, "User: <session> is not authorized to perform:
// <action> on resource: <arn> because ...", without EC2's encoded message.
func (s *Server) authorizeIAM(ctx context.Context, checks ...check) *iamError {
	if denied := s.authorize(ctx, checks...); denied != nil {
		msg := denied.message
		if i := strings.Index(msg, "User: "); i >= 0 {
			msg = msg[i:]
		}
		return &iamError{http.StatusForbidden, CodeAccessDenied, strings.SplitN(msg, ". Encoded", 2)[0]}
	}
	return nil
}

// profileChecks is the authorization of action on the named profile, with its tags as
// aws:ResourceTag/<key> (IAM supports the key for instance profiles: Service Authorization
// Reference, "Actions, resources, and condition keys for AWS Identity and Access Management").
// A profile that does not exist is checked at path "/", as IAM authorizes before it looks.
func (s *Server) profileChecks(action, name string) check {
	p, ok := s.profiles[name]
	if !ok {
		return check{action, s.profileARN("/", name), nil}
	}
	ctx := map[string][]string{}
	for k, v := range p.tags {
		ctx["aws:ResourceTag/"+k] = []string{v}
	}
	return check{action, s.profileARN(p.path, name), ctx}
}

func (s *Server) iam(ctx context.Context, action string, form url.Values) (any, *iamError) {
	if v := form.Get("Version"); v != iamVersion {
		return nil, invalid("Version %q: IAM serves %s", v, iamVersion)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := form.Get("InstanceProfileName")
	needProfile := func() (*iamProfile, *iamError) {
		if !iamName.MatchString(name) {
			return nil, invalid("1 validation error detected: Value '%s' at 'instanceProfileName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", name)
		}
		if e := s.authorizeIAM(ctx, s.profileChecks("iam:"+action, name)); e != nil {
			return nil, e
		}
		p, ok := s.profiles[name]
		if !ok {
			return nil, notFound("Instance Profile %s cannot be found.", name)
		}
		return p, nil
	}
	switch action {
	case "GetInstanceProfile":
		p, e := needProfile()
		if e != nil {
			return nil, e
		}
		return profileResult{InstanceProfile: s.xmlProfile(p)}, nil
	case "CreateInstanceProfile":
		if !iamName.MatchString(name) {
			return nil, invalid("1 validation error detected: Value '%s' at 'instanceProfileName' failed to satisfy constraint: Member must have length less than or equal to 128 and match [\\w+=,.@-]+", name)
		}
		path := form.Get("Path")
		if path == "" {
			path = "/"
		}
		if !iamPath.MatchString(path) {
			return nil, invalid("The specified value for path is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters.")
		}
		tags := map[string]string{}
		for i := 1; ; i++ {
			k, ok := form["Tags.member."+strconv.Itoa(i)+".Key"]
			if !ok {
				break
			}
			tags[k[0]] = form.Get("Tags.member." + strconv.Itoa(i) + ".Value")
		}
		// Creating with tags needs the tagging permission too (IAM User Guide, "Tagging IAM
		// resources": permission to create and to tag), each with the request's tags.
		checks := []check{{"iam:CreateInstanceProfile", s.profileARN(path, name), requestTags(tags)}}
		if len(tags) > 0 {
			checks = append(checks, check{"iam:TagInstanceProfile", s.profileARN(path, name), requestTags(tags)})
		}
		if e := s.authorizeIAM(ctx, checks...); e != nil {
			return nil, e
		}
		if _, ok := s.profiles[name]; ok {
			return nil, conflict(CodeEntityAlreadyExists, "Instance Profile %s already exists.", name)
		}
		if len(tags) > 50 {
			return nil, conflict(CodeLimitExceeded, "The number of tags has reached the maximum limit of 50.")
		}
		p := &iamProfile{name: name, path: path, created: s.now(), tags: tags, id: "AIPA" + strings.ToUpper(resourceID("p", name)[3:])}
		s.profiles[name] = p
		return profileResult{InstanceProfile: s.xmlProfile(p)}, nil
	case "AddRoleToInstanceProfile":
		p, e := needProfile()
		if e != nil {
			return nil, e
		}
		role := form.Get("RoleName")
		r, ok := s.roles[role]
		if !ok {
			return nil, notFound("The role with name %s cannot be found.", role)
		}
		// "The caller of this operation must be granted the PassRole permission on the IAM role"
		// (IAM API reference, AddRoleToInstanceProfile); passed to EC2, the key Karpenter's own
		// controller policy conditions it on (karpenter-provider-aws cloudformation.yaml,
		// AllowPassingInstanceRole: iam:PassedToService ec2.amazonaws.com).
		if e := s.authorizeIAM(ctx, check{"iam:PassRole", "arn:aws:iam::" + s.account + ":role" + r.path + r.name,
			map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}}); e != nil {
			return nil, e
		}
		if len(p.roles) > 0 {
			return nil, conflict(CodeLimitExceeded, "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
		}
		p.roles = []string{role}
		return nil, nil
	case "RemoveRoleFromInstanceProfile":
		p, e := needProfile()
		if e != nil {
			return nil, e
		}
		role := form.Get("RoleName")
		if len(p.roles) == 0 || p.roles[0] != role {
			return nil, notFound("The role with name %s cannot be found in instance profile %s.", role, name)
		}
		p.roles = nil
		return nil, nil
	case "DeleteInstanceProfile":
		p, e := needProfile()
		if e != nil {
			return nil, e
		}
		if len(p.roles) > 0 {
			return nil, conflict(CodeDeleteConflict, "Cannot delete entity, must remove roles from instance profile first.")
		}
		delete(s.profiles, name)
		return nil, nil
	case "ListInstanceProfiles":
		prefix := form.Get("PathPrefix")
		if prefix == "" {
			prefix = "/"
		}
		// PathPrefix: "/" or /.../ of \u0021-\u007F, 1 to 512 (IAM API reference, ListInstanceProfiles).
		if !iamPath.MatchString(prefix) {
			return nil, invalid("1 validation error detected: Value '%s' at 'pathPrefix' failed to satisfy constraint: Member must satisfy regular expression pattern: \\u002F[\\u0021-\\u007F]*", prefix)
		}
		// Checked on the ARN of the path listed (the Service Authorization Reference gives
		// instance-profile as the action's resource type).
		if e := s.authorizeIAM(ctx, check{"iam:ListInstanceProfiles", s.profileARN(prefix, ""), nil}); e != nil {
			return nil, e
		}
		names := make([]string, 0, len(s.profiles))
		for n, p := range s.profiles {
			if strings.HasPrefix(p.path, prefix) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		names, marker, e := iamPage(names, form)
		if e != nil {
			return nil, e
		}
		r := listResult{InstanceProfiles: []xmlProfile{}, IsTruncated: marker != "", Marker: marker}
		for _, n := range names {
			x := s.xmlProfile(s.profiles[n])
			x.Tags = nil // not returned by List (see xmlProfile)
			r.InstanceProfiles = append(r.InstanceProfiles, x)
		}
		return r, nil
	case "ListInstanceProfileTags":
		p, e := needProfile()
		if e != nil {
			return nil, e
		}
		keys := make([]string, 0, len(p.tags))
		for k := range p.tags {
			keys = append(keys, k)
		}
		sort.Strings(keys) // "The returned list of tags is sorted by tag key."
		keys, marker, e := iamPage(keys, form)
		if e != nil {
			return nil, e
		}
		r := tagsResult{Tags: []xmlTag{}, IsTruncated: marker != "", Marker: marker}
		for _, k := range keys {
			r.Tags = append(r.Tags, xmlTag{Key: k, Value: p.tags[k]})
		}
		return r, nil
	}
	return nil, invalid("action %s", action)
}
