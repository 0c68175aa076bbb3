// Package ec2api is the EC2- and SSM-compatible HTTP face of the fake cloud: the real
// aws-sdk-go-v2 clients (service/ec2, service/ssm, service/pricing) pointed at it with a
// BaseEndpoint and static test credentials talk to a *fake.Cloud over the real wire protocols,
// so the AWS provider is tested end to end offline.
//
// Protocols (AWS API references):
//   - EC2 Query: form-encoded POST with Action=..., XML responses in the EC2 shapes, errors as
//     <Response><Errors><Error><Code>…</Code><Message>…</Message></Error></Errors></Response>
//     with EC2's error codes, so SDK errors arrive as smithy.APIError with the real codes.
//   - AWS JSON 1.1 (X-Amz-Target: AmazonSSM.GetParameter, AWSPriceListService.GetProducts).
//
// Served: CreateFleet (type instant, one instance, ClientToken idempotency, capacity errors as
// fleet errors), CreateLaunchTemplate, DescribeLaunchTemplates, DescribeLaunchTemplateVersions,
// DescribeInstances, TerminateInstances, DescribeSubnets, DescribeSecurityGroups, DescribeImages,
// DescribeInstanceTypes, DescribeInstanceTypeOfferings, DescribeSpotPriceHistory (the last three
// from the catalog), SSM GetParameter (the public EKS AMI parameters) and Pricing GetProducts
// (on-demand prices of the catalog). Signatures are not checked.
//
// The fake VPC has one node subnet per catalog zone (10.0.(32·z).0/19, the fake cloud's address
// plan) and one node security group, all tagged with Options.DiscoveryTags, and, untagged for
// discovery, one public subnet per zone and the default security group; EKS-optimized AL2023,
// AL2 and Bottlerocket images (owned by Amazon) exist for x86_64 and arm64 with their SSM
// parameters.
package ec2api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
)

// DefaultAccountID is the account that owns the fake's resources: the placeholder AWS uses in its
// documentation.
const DefaultAccountID = "123456789012"

// AmazonImageAccount owns the seeded EKS-optimized and Bottlerocket images, as Amazon's
// publishing account owns the real ones (602401143452 publishes the EKS-optimized AMIs in most
// commercial regions); DescribeImages reports them with the owner alias "amazon", which is also
// their ec2:Owner. They are not the caller's ("self").
const AmazonImageAccount = "602401143452"

// EC2 error codes the endpoint answers with (EC2 API reference, "Error codes").
const (
	CodeInvalidParameterValue       = "InvalidParameterValue"
	CodeInvalidParameterCombination = "InvalidParameterCombination"
	CodeMissingParameter            = "MissingParameter"
	CodeInvalidAction               = "InvalidAction"
	CodeRequestLimitExceeded        = "RequestLimitExceeded"
	CodeIdempotentParameterMismatch = "IdempotentParameterMismatch"
	CodeInvalidInstanceIDNotFound   = "InvalidInstanceID.NotFound"
	CodeInvalidSubnetIDNotFound     = "InvalidSubnetID.NotFound"
	CodeInvalidGroupNotFound        = "InvalidGroup.NotFound"
	CodeInvalidAMIIDNotFound        = "InvalidAMIID.NotFound"
	CodeLaunchTemplateNameNotFound  = "InvalidLaunchTemplateName.NotFoundException"
	CodeLaunchTemplateIDNotFound    = "InvalidLaunchTemplateId.NotFound"
	CodeLaunchTemplateNameExists    = "InvalidLaunchTemplateName.AlreadyExistsException"
	CodeDryRunOperation             = "DryRunOperation"
)

// Options configure the endpoint.
type Options struct {
	// Cloud is the fake cloud behind the endpoint. Required.
	Cloud *fake.Cloud
	// DiscoveryTags are put on the fake VPC's subnets and security group, so NodeClass selector
	// terms can find them. Default: {"karpenter.sh/discovery": <the cloud's cluster>}.
	DiscoveryTags map[string]string
	// KubernetesVersion ("1.37") names the SSM parameters of the EKS-optimized images. Default:
	// the major.minor of fake.DefaultKubeletVersion.
	KubernetesVersion string
	// AccountID owns the fake's resources (default DefaultAccountID).
	AccountID string
	// Now is the clock for launch-template and spot-price timestamps (default time.Now).
	Now func() time.Time
	// Log receives one line per refused request (default: discarded).
	Log *slog.Logger
	// Roles are the IAM roles that exist (node roles an EC2NodeClass's spec.role may name).
	Roles []string
	// Identities, when set, are the only credentials accepted (by access key ID), and each
	// request is authorized against its caller's policies as IAM would (EC2, SSM and IAM
	// actions; see authz.go and iam.go): a refused request is answered UnauthorizedOperation as
	// EC2 answers it (IAM: AccessDenied), and a fleet's offering whose launch IAM refuses
	// becomes a fleet error with that code. Nil: every request is allowed.
	Identities map[string]Identity
}

// Request is one decoded request, for tests: Action and the SDK input struct it decoded to
// (*ec2.CreateFleetInput, ...), or the JSON target and body for SSM and Pricing.
type Request struct {
	Action string
	Input  any
}

// maxLoggedRequests bounds the request log (local dev runs for minutes).
const maxLoggedRequests = 2000

// Server serves the endpoint. Safe for concurrent use.
type Server struct {
	cloud     *fake.Cloud
	cat       *catalog.Catalog
	region    string
	account   string
	k8s       string
	now       func() time.Time
	log       *slog.Logger
	vpcID     string
	discovery map[string]string

	mu        sync.Mutex
	subnets   []types.Subnet
	groups    []types.SecurityGroup
	images    []image
	params    map[string]string
	templates []*template
	fleets    map[string]fleetRecord // by ClientToken
	instances map[string]instanceMeta
	throttle  map[string]int
	requests  []Request
	seq       int
	roles     map[string]*iamRole
	profiles  map[string]*iamProfile
	pgroups   []types.PlacementGroup
	// placeMu serializes the fleets that launch into placement groups (the placement refusals of fleetRefusals to
	// place), so a group's rules hold under concurrent launches.
	placeMu sync.Mutex

	identities map[string]Identity
}

// image is an AMI with the family whose user data it boots.
type image struct {
	types.Image
	family string
}

// template is a stored launch template (one version).
type template struct {
	types.LaunchTemplate
	data types.ResponseLaunchTemplateData
}

// fleetRecord is what a ClientToken's CreateFleet answered, for idempotent replays.
type fleetRecord struct {
	digest string
	body   []byte
}

// instanceMeta is what the endpoint knows of an instance beyond the fake cloud's record.
type instanceMeta struct {
	imageID, subnetID, templateID, templateName, clientToken string
	groups                                                   []types.GroupIdentifier
	metadata                                                 *types.LaunchTemplateInstanceMetadataOptions
	// placementGroup and partition: the placement group id the instance launched into, its
	// partition (partition groups), "" and 0 otherwise.
	placementGroup string
	partition      int32
}

// New builds the endpoint over a fake cloud.
func New(o Options) (*Server, error) {
	if o.Cloud == nil {
		return nil, errors.New("ec2api: Options.Cloud is required")
	}
	s := &Server{
		cloud: o.Cloud, cat: o.Cloud.Catalog(), region: o.Cloud.Region(), account: o.AccountID,
		k8s: o.KubernetesVersion, now: o.Now, log: o.Log,
		params: map[string]string{}, fleets: map[string]fleetRecord{}, instances: map[string]instanceMeta{}, throttle: map[string]int{},
		roles: map[string]*iamRole{}, profiles: map[string]*iamProfile{}, identities: o.Identities,
	}
	if s.account == "" {
		s.account = DefaultAccountID
	}
	if s.k8s == "" {
		s.k8s = majorMinor(fake.DefaultKubeletVersion)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.discovery = o.DiscoveryTags
	if s.discovery == nil {
		s.discovery = map[string]string{"karpenter.sh/discovery": o.Cloud.Cluster()}
	}
	s.vpcID = resourceID("vpc", s.region)
	for _, r := range o.Roles {
		s.roles[r] = &iamRole{name: r, id: "AROA" + strings.ToUpper(resourceID("r", r)[3:]), path: "/", created: s.now()}
	}
	s.seedNetwork()
	s.seedImages()
	return s, nil
}

// majorMinor turns "v1.37.2" into "1.37".
func majorMinor(v string) string {
	v = strings.TrimPrefix(v, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// resourceID derives a stable EC2-style ID: prefix-0 followed by 16 hex digits (17 in all, the
// current EC2 ID length).
func resourceID(prefix, seed string) string {
	sum := sha256.Sum256([]byte(prefix + "/" + seed))
	return prefix + "-0" + hex.EncodeToString(sum[:8])
}

// zones lists the catalog's zones, sorted.
func (s *Server) zones() []string {
	set := map[string]bool{}
	for _, it := range s.cat.Types() {
		for _, o := range it.Offerings {
			set[o.Zone] = true
		}
	}
	out := make([]string, 0, len(set))
	for z := range set {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}

func (s *Server) tags(extra map[string]string) []types.Tag {
	m := map[string]string{}
	for k, v := range s.discovery {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return tagList(m)
}

func tagList(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func tagMap(tags []types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// seedNetwork lays out one /19 subnet per zone, at the addresses the fake cloud allocates from.
func (s *Server) seedNetwork() {
	for _, z := range s.zones() {
		idx := 0
		if n := len(z); n > 0 && z[n-1] >= 'a' && z[n-1] <= 'z' {
			idx = int(z[n-1]-'a') % 8
		}
		s.subnets = append(s.subnets, types.Subnet{
			SubnetId: aws.String(resourceID("subnet", z)), VpcId: aws.String(s.vpcID), AvailabilityZone: aws.String(z),
			AvailabilityZoneId: aws.String(fmt.Sprintf("use1-az%d", idx+1)),
			CidrBlock:          aws.String(fmt.Sprintf("10.0.%d.0/19", 32*idx)),
			// A /19 has 8,192 addresses; AWS reserves 5 in every subnet (VPC User Guide).
			AvailableIpAddressCount: aws.Int32(8192 - 5), State: types.SubnetStateAvailable, OwnerId: aws.String(s.account),
			Tags: s.tags(map[string]string{"Name": "dovetail-fake-" + z}),
		})
	}
	s.groups = append(s.groups, types.SecurityGroup{
		GroupId: aws.String(resourceID("sg", s.region+"/nodes")), GroupName: aws.String("dovetail-fake-nodes"),
		Description: aws.String("nodes of the fake cloud"), VpcId: aws.String(s.vpcID), OwnerId: aws.String(s.account),
		Tags: s.tags(map[string]string{"Name": "dovetail-fake-nodes"}),
	})
	// What a real VPC has besides the nodes' network, none of it carrying the discovery tag: a
	// public subnet per zone (tagged for load balancers, as the EKS User Guide's VPC template
	// tags them) and the VPC's default security group, untagged as AWS creates it.
	for i, z := range s.zones() {
		idx := i % 8
		s.subnets = append(s.subnets, types.Subnet{
			SubnetId: aws.String(resourceID("subnet", "public/"+z)), VpcId: aws.String(s.vpcID), AvailabilityZone: aws.String(z),
			AvailabilityZoneId: aws.String(fmt.Sprintf("use1-az%d", idx+1)), CidrBlock: aws.String(fmt.Sprintf("10.1.%d.0/24", idx)),
			AvailableIpAddressCount: aws.Int32(256 - 5), State: types.SubnetStateAvailable, OwnerId: aws.String(s.account),
			MapPublicIpOnLaunch: aws.Bool(true),
			Tags:                tagList(map[string]string{"Name": PublicSubnetName(z), "kubernetes.io/role/elb": "1"}),
		})
	}
	s.groups = append(s.groups, types.SecurityGroup{
		GroupId: aws.String(resourceID("sg", s.region+"/default")), GroupName: aws.String("default"),
		Description: aws.String("default VPC security group"), VpcId: aws.String(s.vpcID), OwnerId: aws.String(s.account),
	})
}

// PublicSubnetName is the Name tag of the fake VPC's public subnet in a zone: a subnet without
// the discovery tag, which governance refuses to launch into.
func PublicSubnetName(zone string) string { return "dovetail-fake-public-" + zone }

// SSM parameter names of the EKS-optimized images (Amazon EKS User Guide, "Retrieve recommended
// Amazon Linux AMI IDs" and "Retrieve recommended Bottlerocket AMI IDs").
func AL2023Parameter(k8s, arch string) string {
	return "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/" + arch + "/standard/recommended/image_id"
}

// BottlerocketParameter is the SSM parameter of the latest Bottlerocket aws-k8s image.
func BottlerocketParameter(k8s, arch string) string {
	return "/aws/service/bottlerocket/aws-k8s-" + k8s + "/" + arch + "/latest/image_id"
}

// AL2Parameter is the SSM parameter of the recommended EKS-optimized Amazon Linux 2 image.
func AL2Parameter(k8s, arch string) string {
	suffix := ""
	if arch == "arm64" {
		suffix = "-arm64"
	}
	return "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2" + suffix + "/recommended/image_id"
}

// fakeImageDate is the creation date of the seeded images.
const fakeImageDate = "2026-11-01T00:00:00.000Z"

func (s *Server) seedImages() {
	for _, arch := range []string{"x86_64", "arm64"} {
		for _, f := range []struct{ family, name, param string }{
			{apisv1.AMIFamilyAL2023, "amazon-eks-node-al2023-" + arch + "-standard-" + s.k8s + "-v20261101", AL2023Parameter(s.k8s, arch)},
			{apisv1.AMIFamilyBottlerocket, "bottlerocket-aws-k8s-" + s.k8s + "-" + arch + "-v1.50.0-fake", BottlerocketParameter(s.k8s, arch)},
			{apisv1.AMIFamilyAL2, "amazon-eks-node-" + s.k8s + "-v20261101" + map[bool]string{true: "-arm64"}[arch == "arm64"], AL2Parameter(s.k8s, arch)},
		} {
			img := s.addImage(types.Image{Name: aws.String(f.name), Architecture: types.ArchitectureValues(arch),
				ImageOwnerAlias: aws.String("amazon"), OwnerId: aws.String(AmazonImageAccount), CreationDate: aws.String(fakeImageDate)}, f.family)
			s.params[f.param] = aws.ToString(img.ImageId)
		}
	}
	// The accelerated variants (Amazon EKS User Guide, "Amazon EKS optimized accelerated Amazon
	// Linux AMIs" and Bottlerocket's "aws-k8s-<version>-nvidia" variant): AL2023 nvidia images
	// for both architectures and a neuron image for x86_64, Bottlerocket nvidia images, and
	// the AL2 GPU image.
	for _, f := range []struct{ family, arch, name, param string }{
		{apisv1.AMIFamilyAL2023, "x86_64", "amazon-eks-node-al2023-x86_64-nvidia-" + s.k8s + "-v20261101",
			"/aws/service/eks/optimized-ami/" + s.k8s + "/amazon-linux-2023/x86_64/nvidia/recommended/image_id"},
		{apisv1.AMIFamilyAL2023, "arm64", "amazon-eks-node-al2023-arm64-nvidia-" + s.k8s + "-v20261101",
			"/aws/service/eks/optimized-ami/" + s.k8s + "/amazon-linux-2023/arm64/nvidia/recommended/image_id"},
		{apisv1.AMIFamilyAL2023, "x86_64", "amazon-eks-node-al2023-x86_64-neuron-" + s.k8s + "-v20261101",
			"/aws/service/eks/optimized-ami/" + s.k8s + "/amazon-linux-2023/x86_64/neuron/recommended/image_id"},
		{apisv1.AMIFamilyBottlerocket, "x86_64", "bottlerocket-aws-k8s-" + s.k8s + "-nvidia-x86_64-v1.50.0-fake",
			"/aws/service/bottlerocket/aws-k8s-" + s.k8s + "-nvidia/x86_64/latest/image_id"},
		{apisv1.AMIFamilyBottlerocket, "arm64", "bottlerocket-aws-k8s-" + s.k8s + "-nvidia-arm64-v1.50.0-fake",
			"/aws/service/bottlerocket/aws-k8s-" + s.k8s + "-nvidia/arm64/latest/image_id"},
		{apisv1.AMIFamilyAL2, "x86_64", "amazon-eks-gpu-node-" + s.k8s + "-v20261101",
			"/aws/service/eks/optimized-ami/" + s.k8s + "/amazon-linux-2-gpu/recommended/image_id"},
	} {
		img := s.addImage(types.Image{Name: aws.String(f.name), Architecture: types.ArchitectureValues(f.arch),
			ImageOwnerAlias: aws.String("amazon"), OwnerId: aws.String(AmazonImageAccount), CreationDate: aws.String(fakeImageDate)}, f.family)
		s.params[f.param] = aws.ToString(img.ImageId)
	}
	// The EKS-optimized Windows Server Core images, x86_64 only (Amazon EKS User Guide,
	// "Retrieve recommended Microsoft Windows AMI IDs"); DescribeImages reports them with
	// Platform "windows" and PlatformDetails "Windows" (EC2 API reference, Image).
	for _, family := range []string{apisv1.AMIFamilyWindows2019, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyWindows2025} {
		rel, _ := apisv1.WindowsReleaseOf(family)
		img := s.addImage(types.Image{Name: aws.String("Windows_Server-" + rel.Version + "-English-Core-EKS_Optimized-" + s.k8s + "-2026.11.01"),
			Architecture: types.ArchitectureValuesX8664, Platform: types.PlatformValuesWindows, PlatformDetails: aws.String("Windows"),
			ImageOwnerAlias: aws.String("amazon"), OwnerId: aws.String(AmazonImageAccount), CreationDate: aws.String(fakeImageDate)}, family)
		s.params[WindowsParameter(rel.Version, s.k8s)] = aws.ToString(img.ImageId)
	}
}

// WindowsParameter is the SSM parameter of the latest EKS-optimized Windows Server Core image
// of a Windows Server version ("2022") (Amazon EKS User Guide, "Retrieve recommended Microsoft
// Windows AMI IDs"): /aws/service/ami-windows-latest/Windows_Server-<version>-English-Core-EKS_Optimized-<k8s>/image_id.
func WindowsParameter(version, k8s string) string {
	return "/aws/service/ami-windows-latest/Windows_Server-" + version + "-English-Core-EKS_Optimized-" + k8s + "/image_id"
}

// addImage stores an image, filling in what EC2 always reports. Called with s.mu held or before use.
func (s *Server) addImage(img types.Image, family string) types.Image {
	if img.ImageId == nil {
		img.ImageId = aws.String(resourceID("ami", aws.ToString(img.Name)+"/"+string(img.Architecture)))
	}
	if img.State == "" {
		img.State = types.ImageStateAvailable
	}
	if img.RootDeviceName == nil {
		img.RootDeviceName = aws.String("/dev/xvda")
	}
	img.RootDeviceType = types.DeviceTypeEbs
	img.VirtualizationType = types.VirtualizationTypeHvm
	img.ImageType = types.ImageTypeValuesMachine
	img.Hypervisor = types.HypervisorTypeXen // EC2 reports "xen" for every HVM image, Nitro included
	if family == "" {
		family = familyOfName(aws.ToString(img.Name))
	}
	s.images = append(s.images, image{Image: img, family: family})
	return img
}

// familyOfName guesses an image's AMI family from the EKS naming conventions.
func familyOfName(name string) string {
	switch {
	case strings.HasPrefix(name, "bottlerocket-"):
		return apisv1.AMIFamilyBottlerocket
	case strings.HasPrefix(name, "amazon-eks-node-al2023-"):
		return apisv1.AMIFamilyAL2023
	case strings.HasPrefix(name, "amazon-eks-node-"):
		return apisv1.AMIFamilyAL2
	}
	for _, family := range []string{apisv1.AMIFamilyWindows2019, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyWindows2025} {
		if rel, _ := apisv1.WindowsReleaseOf(family); strings.HasPrefix(name, "Windows_Server-"+rel.Version+"-") && strings.Contains(name, "-EKS_Optimized-") {
			return family
		}
	}
	return apisv1.AMIFamilyCustom
}

// AddImage registers an image (e.g. a custom AMI found by name/owner or tags). ImageId is derived
// when empty; the family is guessed from the EKS naming conventions ("bottlerocket-…",
// "amazon-eks-node-al2023-…", "amazon-eks-node-…"), else Custom. Returns the stored image.
func (s *Server) AddImage(img types.Image) types.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addImage(img, "")
}

// AddSubnet registers a subnet; SubnetId and AvailabilityZone are required.
func (s *Server) AddSubnet(sn types.Subnet) error {
	if sn.SubnetId == nil || sn.AvailabilityZone == nil {
		return errors.New("subnet: SubnetId and AvailabilityZone are required")
	}
	if sn.VpcId == nil {
		sn.VpcId = aws.String(s.vpcID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subnets = append(s.subnets, sn)
	return nil
}

// PutParameter sets an SSM parameter (e.g. an AMI alias target).
func (s *Server) PutParameter(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params[name] = value
}

// Parameter returns an SSM parameter's value.
func (s *Server) Parameter(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.params[name]
	return v, ok
}

// InjectThrottle makes the next n requests of action (an EC2 Action or a JSON target such as
// "AmazonSSM.GetParameter") fail with HTTP 503 RequestLimitExceeded, as EC2 throttles.
func (s *Server) InjectThrottle(action string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle[action] = n
}

// Requests returns the decoded requests received so far (the last maxLoggedRequests), oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestsOf returns the decoded inputs of one action, oldest first.
func (s *Server) RequestsOf(action string) []any {
	var out []any
	for _, r := range s.Requests() {
		if r.Action == action {
			out = append(out, r.Input)
		}
	}
	return out
}

// apiError is an error answered to the client.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := s.requestID()
	id, aerr := s.caller(r)
	if aerr != nil {
		s.writeError(w, "", aerr, reqID)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, id))
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		s.serveJSON(w, r, target, reqID)
		return
	}
	if err := r.ParseForm(); err != nil {
		s.writeError(w, "", badRequest(CodeInvalidParameterValue, "malformed form body: %v", err), reqID)
		return
	}
	action := r.Form.Get("Action")
	if isIAMAction(action) {
		s.serveIAM(r.Context(), w, action, r.Form, reqID)
		return
	}
	if s.throttled(action) {
		s.writeError(w, action, &apiError{status: http.StatusServiceUnavailable, code: CodeRequestLimitExceeded, message: "Request limit exceeded."}, reqID)
		return
	}
	h, ok := s.handlers()[action]
	if !ok {
		s.writeError(w, action, badRequest(CodeInvalidAction, "The action %s is not valid for this web service.", action), reqID)
		return
	}
	if strings.HasPrefix(action, "Describe") {
		// Describe calls have no resource-level permissions: "*" in the region asked.
		if aerr := s.authorize(r.Context(), check{"ec2:" + action, "*", map[string][]string{"aws:RequestedRegion": {s.region}}}); aerr != nil {
			s.writeError(w, action, aerr, reqID)
			return
		}
	}
	body, aerr := h(r.Context(), r.Form, reqID)
	if aerr != nil {
		s.writeError(w, action, aerr, reqID)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write(body)
}

func (s *Server) requestID() string {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	sum := sha256.Sum256([]byte("request/" + strconv.Itoa(n)))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (s *Server) throttled(action string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttle[action] > 0 {
		s.throttle[action]--
		return true
	}
	return false
}

func (s *Server) record(action string, input any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Action: action, Input: input})
	if len(s.requests) > maxLoggedRequests {
		s.requests = append([]Request(nil), s.requests[len(s.requests)-maxLoggedRequests:]...)
	}
}

func (s *Server) writeError(w http.ResponseWriter, action string, e *apiError, reqID string) {
	s.log.Info("ec2api refused a request", "action", action, "code", e.code, "message", e.message)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write(encodeError(e.code, e.message, reqID))
}

// ListenLoopback serves on 127.0.0.1 at a free port and returns the base URL
// ("http://127.0.0.1:PORT") and a stop function.
func (s *Server) ListenLoopback() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	// Bounded like the product's servers: the SDK sends small requests whole, and even the
	// largest Describe page is written in well under a minute on loopback.
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 90 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// ---- filters and paging ----

// wildcard compiles an EC2 filter value: * matches any run of characters, ? one character.
func wildcard(pattern string) *regexp.Regexp {
	q := regexp.QuoteMeta(pattern)
	q = strings.ReplaceAll(q, `\*`, ".*")
	q = strings.ReplaceAll(q, `\?`, ".")
	return regexp.MustCompile("^" + q + "$")
}

// matches applies EC2 filter semantics: every filter must match (AND); within a filter any value
// may match (OR). values returns the resource's values for a filter name; ok=false means the
// filter name is not supported for this resource, answered as EC2 does.
func matches(filters []types.Filter, values func(name string) ([]string, bool)) (bool, *apiError) {
	for _, f := range filters {
		name := aws.ToString(f.Name)
		have, ok := values(name)
		if !ok {
			return false, badRequest(CodeInvalidParameterValue, "The filter '%s' is invalid", name)
		}
		hit := false
		for _, want := range f.Values {
			re := wildcard(want)
			for _, h := range have {
				if re.MatchString(h) {
					hit = true
				}
			}
		}
		if !hit {
			return false, nil
		}
	}
	return true, nil
}

// tagValues answers "tag:<key>" and "tag-key" filters.
func tagValues(name string, tags []types.Tag) ([]string, bool) {
	if k, ok := strings.CutPrefix(name, "tag:"); ok {
		for _, t := range tags {
			if aws.ToString(t.Key) == k {
				return []string{aws.ToString(t.Value)}, true
			}
		}
		return nil, true
	}
	if name == "tag-key" {
		var out []string
		for _, t := range tags {
			out = append(out, aws.ToString(t.Key))
		}
		return out, true
	}
	return nil, false
}

// page cuts items by MaxResults and a NextToken that is the decimal offset.
func page[T any](items []T, maxResults *int32, nextToken *string, limit int) ([]T, *string, *apiError) {
	start := 0
	if t := aws.ToString(nextToken); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > len(items) {
			return nil, nil, badRequest(CodeInvalidParameterValue, "Invalid value '%s' for nextToken", t)
		}
		start = n
	}
	size := limit
	if maxResults != nil {
		if *maxResults < 5 || int(*maxResults) > limit {
			return nil, nil, badRequest(CodeInvalidParameterValue, "Value ( %d ) for parameter maxResults is invalid. Expecting a value between 5 and %d.", *maxResults, limit)
		}
		size = int(*maxResults)
	}
	end := min(start+size, len(items))
	var next *string
	if end < len(items) {
		next = aws.String(strconv.Itoa(end))
	}
	return items[start:end], next, nil
}

// decode reads the form into an SDK input and records it.
func decode[T any](s *Server, action string, form url.Values) (*T, *apiError) {
	in := new(T)
	if err := decodeQuery(form, in); err != nil {
		return nil, badRequest(CodeInvalidParameterValue, "%v", err)
	}
	s.record(action, in)
	return in, nil
}

// Images returns the registered images, in registration order.
func (s *Server) Images() []types.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]types.Image, 0, len(s.images))
	for _, img := range s.images {
		out = append(out, img.Image)
	}
	return out
}
