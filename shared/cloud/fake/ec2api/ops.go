package ec2api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/userdata"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
)

type handler func(ctx context.Context, form url.Values, reqID string) ([]byte, *apiError)

func (s *Server) handlers() map[string]handler {
	return map[string]handler{
		"CreateFleet":                    s.createFleet,
		"CreateLaunchTemplate":           s.createLaunchTemplate,
		"DescribeLaunchTemplates":        s.describeLaunchTemplates,
		"DescribeLaunchTemplateVersions": s.describeLaunchTemplateVersions,
		"DescribeInstances":              s.describeInstances,
		"TerminateInstances":             s.terminateInstances,
		"DescribeSubnets":                s.describeSubnets,
		"DescribeSecurityGroups":         s.describeSecurityGroups,
		"DescribeImages":                 s.describeImages,
		"DescribeInstanceTypes":          s.describeInstanceTypes,
		"DescribeInstanceTypeOfferings":  s.describeInstanceTypeOfferings,
		"DescribeSpotPriceHistory":       s.describeSpotPriceHistory,
		"DescribeCapacityReservations":   s.describeCapacityReservations,
		"DescribePlacementGroups":        s.describePlacementGroups,
	}
}

func dryRun(dry *bool) *apiError {
	if aws.ToBool(dry) {
		return &apiError{status: http.StatusPreconditionFailed, code: CodeDryRunOperation, message: "Request would have succeeded, but DryRun flag is set."}
	}
	return nil
}

func respond(action, reqID string, members ...member) ([]byte, *apiError) {
	b, err := encodeResponse(action, reqID, members...)
	if err != nil {
		return nil, &apiError{status: http.StatusInternalServerError, code: "InternalError", message: err.Error()}
	}
	return b, nil
}

// ---- launch templates ----

// launchTemplateName is EC2's rule for launch template names: 3 to 128 characters of
// letters, digits, ( ) . / _ and - (CreateLaunchTemplate reference).
var launchTemplateName = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

func (s *Server) createLaunchTemplate(ctx context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.CreateLaunchTemplateInput](s, "CreateLaunchTemplate", form)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := dryRun(in.DryRun); aerr != nil {
		return nil, aerr
	}
	name := aws.ToString(in.LaunchTemplateName)
	if !launchTemplateName.MatchString(name) {
		return nil, badRequest(CodeInvalidParameterValue, "Launch template name %q must be 3-128 characters of letters, digits and ( ) . / _ -", name)
	}
	if in.LaunchTemplateData == nil {
		return nil, badRequest(CodeMissingParameter, "The request must contain the parameter LaunchTemplateData")
	}
	data := responseData(in.LaunchTemplateData)
	if ud := aws.ToString(data.UserData); ud != "" {
		if _, err := base64.StdEncoding.DecodeString(ud); err != nil {
			return nil, badRequest(CodeInvalidParameterValue, "Invalid BASE64 encoding of user data.")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.templates {
		if aws.ToString(t.LaunchTemplateName) == name {
			return nil, badRequest(CodeLaunchTemplateNameExists, "Launch template name already in use.")
		}
	}
	var tags []types.Tag
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType == types.ResourceTypeLaunchTemplate {
			tags = append(tags, ts.Tags...)
		}
	}
	if aerr := s.authorize(ctx, created("ec2:CreateLaunchTemplate", s.arn("launch-template", resourceID("lt", name)), tagMap(tags))...); aerr != nil {
		return nil, aerr
	}
	now := s.now().UTC()
	t := &template{LaunchTemplate: types.LaunchTemplate{
		LaunchTemplateId: aws.String(resourceID("lt", name)), LaunchTemplateName: aws.String(name),
		CreateTime: &now, CreatedBy: aws.String("arn:aws:iam::" + s.account + ":root"),
		DefaultVersionNumber: aws.Int64(1), LatestVersionNumber: aws.Int64(1), Tags: tags,
	}, data: data}
	s.templates = append(s.templates, t)
	return respond("CreateLaunchTemplate", reqID, member{"launchTemplate", t.LaunchTemplate})
}

// responseData converts the request shape of launch template data into the response shape for
// the members the provider sets.
func responseData(d *types.RequestLaunchTemplateData) types.ResponseLaunchTemplateData {
	out := types.ResponseLaunchTemplateData{
		ImageId: d.ImageId, UserData: d.UserData, InstanceType: d.InstanceType, KeyName: d.KeyName,
		SecurityGroupIds: d.SecurityGroupIds, SecurityGroups: d.SecurityGroups, EbsOptimized: d.EbsOptimized,
	}
	if m := d.MetadataOptions; m != nil {
		out.MetadataOptions = &types.LaunchTemplateInstanceMetadataOptions{
			HttpEndpoint: m.HttpEndpoint, HttpProtocolIpv6: m.HttpProtocolIpv6, HttpPutResponseHopLimit: m.HttpPutResponseHopLimit,
			HttpTokens: m.HttpTokens, InstanceMetadataTags: m.InstanceMetadataTags, State: types.LaunchTemplateInstanceMetadataOptionsStateApplied,
		}
	}
	if p := d.IamInstanceProfile; p != nil {
		out.IamInstanceProfile = &types.LaunchTemplateIamInstanceProfileSpecification{Arn: p.Arn, Name: p.Name}
	}
	if m := d.Monitoring; m != nil {
		out.Monitoring = &types.LaunchTemplatesMonitoring{Enabled: m.Enabled}
	}
	if e := d.EnclaveOptions; e != nil {
		out.EnclaveOptions = &types.LaunchTemplateEnclaveOptions{Enabled: e.Enabled}
	}
	for _, b := range d.BlockDeviceMappings {
		m := types.LaunchTemplateBlockDeviceMapping{DeviceName: b.DeviceName, NoDevice: b.NoDevice, VirtualName: b.VirtualName}
		if e := b.Ebs; e != nil {
			m.Ebs = &types.LaunchTemplateEbsBlockDevice{DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, Iops: e.Iops,
				KmsKeyId: e.KmsKeyId, SnapshotId: e.SnapshotId, Throughput: e.Throughput, VolumeSize: e.VolumeSize, VolumeType: e.VolumeType,
				VolumeInitializationRate: e.VolumeInitializationRate}
		}
		out.BlockDeviceMappings = append(out.BlockDeviceMappings, m)
	}
	for _, n := range d.NetworkInterfaces {
		out.NetworkInterfaces = append(out.NetworkInterfaces, types.LaunchTemplateInstanceNetworkInterfaceSpecification{
			AssociatePublicIpAddress: n.AssociatePublicIpAddress, DeviceIndex: n.DeviceIndex, Groups: n.Groups,
			Ipv4PrefixCount: n.Ipv4PrefixCount, NetworkCardIndex: n.NetworkCardIndex, InterfaceType: n.InterfaceType,
			Ipv6PrefixCount: n.Ipv6PrefixCount, PrimaryIpv6: n.PrimaryIpv6, Ipv6AddressCount: n.Ipv6AddressCount, SubnetId: n.SubnetId,
		})
	}
	for _, ts := range d.TagSpecifications {
		out.TagSpecifications = append(out.TagSpecifications, types.LaunchTemplateTagSpecification{ResourceType: ts.ResourceType, Tags: ts.Tags})
	}
	if c := d.CapacityReservationSpecification; c != nil {
		out.CapacityReservationSpecification = &types.LaunchTemplateCapacityReservationSpecificationResponse{CapacityReservationPreference: c.CapacityReservationPreference}
		if t := c.CapacityReservationTarget; t != nil {
			out.CapacityReservationSpecification.CapacityReservationTarget = &types.CapacityReservationTargetResponse{CapacityReservationId: t.CapacityReservationId}
		}
	}
	if m := d.InstanceMarketOptions; m != nil {
		out.InstanceMarketOptions = &types.LaunchTemplateInstanceMarketOptions{MarketType: m.MarketType}
	}
	if p := d.Placement; p != nil {
		out.Placement = &types.LaunchTemplatePlacement{GroupId: p.GroupId, GroupName: p.GroupName, PartitionNumber: p.PartitionNumber,
			AvailabilityZone: p.AvailabilityZone, Tenancy: p.Tenancy}
	}
	return out
}

// findTemplate resolves a template by ID or name. Called with s.mu held.
func (s *Server) findTemplate(id, name string) (*template, *apiError) {
	for _, t := range s.templates {
		if (id != "" && aws.ToString(t.LaunchTemplateId) == id) || (id == "" && aws.ToString(t.LaunchTemplateName) == name) {
			return t, nil
		}
	}
	if id != "" {
		return nil, badRequest(CodeLaunchTemplateIDNotFound, "The specified launch template, with template ID %s, does not exist.", id)
	}
	return nil, badRequest(CodeLaunchTemplateNameNotFound, "The specified launch template, with template name %s, does not exist.", name)
}

func (s *Server) describeLaunchTemplates(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeLaunchTemplatesInput](s, "DescribeLaunchTemplates", form)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []types.LaunchTemplate
	switch {
	case len(in.LaunchTemplateIds) > 0 || len(in.LaunchTemplateNames) > 0:
		for _, id := range in.LaunchTemplateIds {
			t, aerr := s.findTemplate(id, "")
			if aerr != nil {
				return nil, aerr
			}
			out = append(out, t.LaunchTemplate)
		}
		for _, n := range in.LaunchTemplateNames {
			t, aerr := s.findTemplate("", n)
			if aerr != nil {
				return nil, aerr
			}
			out = append(out, t.LaunchTemplate)
		}
	default:
		for _, t := range s.templates {
			ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
				switch name {
				case "launch-template-name":
					return []string{aws.ToString(t.LaunchTemplateName)}, true
				}
				return tagValues(name, t.Tags)
			})
			if aerr != nil {
				return nil, aerr
			}
			if ok {
				out = append(out, t.LaunchTemplate)
			}
		}
	}
	items, next, aerr := page(out, in.MaxResults, in.NextToken, 200)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeLaunchTemplates", reqID, member{"launchTemplates", nonNil(items)}, member{"nextToken", next})
}

func (s *Server) describeLaunchTemplateVersions(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeLaunchTemplateVersionsInput](s, "DescribeLaunchTemplateVersions", form)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, aerr := s.findTemplate(aws.ToString(in.LaunchTemplateId), aws.ToString(in.LaunchTemplateName))
	if aerr != nil {
		return nil, aerr
	}
	for _, v := range in.Versions {
		if v != "$Latest" && v != "$Default" && v != "1" {
			return nil, badRequest("InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s", v)
		}
	}
	data := t.data
	v := types.LaunchTemplateVersion{LaunchTemplateId: t.LaunchTemplateId, LaunchTemplateName: t.LaunchTemplateName,
		VersionNumber: aws.Int64(1), DefaultVersion: aws.Bool(true), CreateTime: t.CreateTime, CreatedBy: t.CreatedBy, LaunchTemplateData: &data}
	return respond("DescribeLaunchTemplateVersions", reqID, member{"launchTemplateVersionSet", []types.LaunchTemplateVersion{v}})
}

// ---- fleets ----

// offeringSource is where an offering of a fleet request came from.
// bootGroup is the node configuration some of a fleet's launch templates boot: what the
// kubelet reads from the user data, the AMI family that reads it, the instance profile and the
// block devices; template is the first template of the fleet that boots it, tags its instance
// tags.
type bootGroup struct {
	node     *userdata.Node
	family   string
	profile  string // the instance profile that gives the instance credentials, "" for none
	template *template
	tags     []types.Tag
}

// launchRequest is the fake cloud's request for the group's offerings: the template's instance
// tags under the fleet's, and a NodeClass holding what the instance boots with.
func (g *bootGroup) launchRequest(token string, fleetTags map[string]string) cloud.LaunchRequest {
	tags := tagMap(g.tags)
	for k, v := range fleetTags {
		tags[k] = v
	}
	nodeClass := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: tags[apisv1.LabelEC2NodeClass]},
		Spec: apisv1.EC2NodeClassSpec{AMIFamily: aws.String(g.family), Kubelet: g.node.Kubelet, BlockDeviceMappings: nodeClassBDMs(g.template.data.BlockDeviceMappings)}}
	if g.profile != "" {
		nodeClass.Spec.InstanceProfile = aws.String(g.profile)
	}
	// The boot agent put ephemeral storage on the instance store's RAID0 array (nodeadm
	// localStorage RAID0, bootstrap.sh --local-disks raid0, Bottlerocket's ephemeral-storage
	// init), so the kubelet reports its size (Karpenter's ephemeralStorage rule, which the node
	// settings apply). RAID10 and Mount leave ephemeral storage on the root volume here: RAID10's
	// halved array is not modelled, Mount keeps the kubelet's directory on the root volume.
	if g.node.LocalStorage == userdata.LocalStorageRAID0 {
		nodeClass.Spec.InstanceStorePolicy = aws.String(apisv1.InstanceStorePolicyRAID0)
	}
	return cloud.LaunchRequest{ClientToken: token, Cluster: tags[apisv1.TagCluster], NodeClass: apisv1.NodeClass{EC2: nodeClass},
		Labels: g.node.Labels, Taints: g.node.Taints, Tags: tags}
}

type offeringSource struct {
	template  *template
	spec      types.FleetLaunchTemplateSpecification
	overrides types.FleetLaunchTemplateOverrides
	subnet    types.Subnet
}

// createFleet serves an instant fleet of one instance through the fake cloud's Create, which
// picks the cheapest offering with capacity among the overrides (the price-capacity-optimized,
// capacity-optimized and lowest-price strategies all come down to that in the fake, whose
// capacity is either there or not). The prioritized strategies (on-demand prioritized, spot
// capacity-optimized-prioritized) launch the override with the lowest Priority number that has
// capacity instead (fake.Cloud.CreatePrioritized).
func (s *Server) createFleet(ctx context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.CreateFleetInput](s, "CreateFleet", form)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := dryRun(in.DryRun); aerr != nil {
		return nil, aerr
	}
	token := aws.ToString(in.ClientToken)
	if token == "" {
		return nil, badRequest(CodeMissingParameter, "ClientToken: this endpoint requires every fleet to be idempotent")
	}
	digest := formDigest(form)
	s.mu.Lock()
	if rec, ok := s.fleets[token]; ok {
		s.mu.Unlock()
		if rec.digest != digest {
			return nil, badRequest(CodeIdempotentParameterMismatch, "The client token %s was used by an earlier request with different parameters.", token)
		}
		return rec.body, nil
	}
	s.mu.Unlock()

	if in.Type != types.FleetTypeInstant {
		return nil, badRequest(CodeInvalidParameterValue, "Type %q: this endpoint serves instant fleets only", in.Type)
	}
	// Context (an EC2NodeClass's spec.context) is kept with the request (Requests) and refused
	// in no form: the CreateFleet API reference documents it as "Reserved", a string with no
	// length or pattern, so any refusal here would be stricter than EC2.
	tcs := in.TargetCapacitySpecification
	if tcs == nil || aws.ToInt32(tcs.TotalTargetCapacity) != 1 {
		return nil, badRequest(CodeInvalidParameterValue, "TargetCapacitySpecification.TotalTargetCapacity: this endpoint launches exactly 1 instance per fleet")
	}
	var capacityType, lifecycle string
	prioritized := false
	switch tcs.DefaultTargetCapacityType {
	case types.DefaultTargetCapacityTypeSpot:
		capacityType, lifecycle = apisv1.CapacityTypeSpot, "spot"
		// capacity-optimized-prioritized honours priorities where capacity allows; the fake's
		// capacity is there or not, so it launches the highest priority with capacity. Any other
		// prioritized name is not a spot strategy.
		if o := in.SpotOptions; o != nil && o.AllocationStrategy == types.SpotAllocationStrategyCapacityOptimizedPrioritized {
			prioritized = true
		} else if o != nil && strings.Contains(string(o.AllocationStrategy), "prioritized") {
			return nil, badRequest(CodeInvalidParameterValue, "SpotOptions.AllocationStrategy %q is not a valid spot allocation strategy", o.AllocationStrategy)
		}
	case types.DefaultTargetCapacityTypeOnDemand:
		capacityType, lifecycle = apisv1.CapacityTypeOnDemand, "on-demand"
		prioritized = in.OnDemandOptions != nil && in.OnDemandOptions.AllocationStrategy == types.FleetOnDemandAllocationStrategyPrioritized
	case types.DefaultTargetCapacityTypeCapacityBlock:
		// Capacity blocks launch only into a capacity block the templates target (EC2 User
		// Guide, "Launch instances into Capacity Blocks using EC2 Fleet").
		capacityType, lifecycle = apisv1.CapacityTypeReserved, "capacity-block"
	default:
		return nil, badRequest(CodeInvalidParameterValue, "TargetCapacitySpecification.DefaultTargetCapacityType %q is not spot, on-demand or capacity-block", tcs.DefaultTargetCapacityType)
	}
	if len(in.LaunchTemplateConfigs) == 0 {
		return nil, badRequest(CodeMissingParameter, "The request must contain the parameter LaunchTemplateConfigs")
	}

	s.mu.Lock()
	var offerings []cloud.OfferingRef
	sources := map[cloud.OfferingRef]offeringSource{}
	priority := map[cloud.OfferingRef]float64{} // overrides' Priority, honoured by prioritized strategies
	// EC2 accepts templates with different images and user data in one fleet (Karpenter sends
	// one per AMI); the instance boots with its own template's. Offerings are grouped by the
	// node configuration their template boots.
	var groups []*bootGroup
	groupOf := map[*template]*bootGroup{}
	for i, cfg := range in.LaunchTemplateConfigs {
		spec := cfg.LaunchTemplateSpecification
		if spec == nil {
			s.mu.Unlock()
			return nil, badRequest(CodeMissingParameter, "LaunchTemplateConfigs.%d.LaunchTemplateSpecification is required", i+1)
		}
		t, aerr := s.findTemplate(aws.ToString(spec.LaunchTemplateId), aws.ToString(spec.LaunchTemplateName))
		if aerr != nil {
			s.mu.Unlock()
			return nil, aerr
		}
		n, fam, aerr := s.bootConfig(t)
		if aerr != nil {
			s.mu.Unlock()
			return nil, aerr
		}
		// An instance gets credentials only from an instance profile that exists and holds a
		// role; without them its kubelet cannot authenticate and the node never joins. A
		// profile name that does not exist fails the launch, as EC2 does.
		profile := "" // the instance profile that gives the instance credentials, "" for none
		if ip := t.data.IamInstanceProfile; ip != nil && aws.ToString(ip.Name) != "" {
			exists, withRole := s.profileHasRole(aws.ToString(ip.Name))
			if !exists {
				s.mu.Unlock()
				return nil, badRequest(CodeInvalidParameterValue, "Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", aws.ToString(ip.Name))
			}
			if withRole {
				profile = aws.ToString(ip.Name)
			}
		}
		var g *bootGroup
		for _, have := range groups {
			if reflect.DeepEqual(have.node, n) && have.family == fam && have.profile == profile &&
				reflect.DeepEqual(have.template.data.BlockDeviceMappings, t.data.BlockDeviceMappings) {
				g = have
				break
			}
		}
		if g == nil {
			g = &bootGroup{node: n, family: fam, profile: profile, template: t}
			for _, ts := range t.data.TagSpecifications {
				if ts.ResourceType == types.ResourceTypeInstance {
					g.tags = append(g.tags, ts.Tags...)
				}
			}
			groups = append(groups, g)
		}
		groupOf[t] = g
		for j, o := range cfg.Overrides {
			if o.InstanceType == "" {
				s.mu.Unlock()
				return nil, badRequest(CodeInvalidParameterValue, "LaunchTemplateConfigs.%d.Overrides.%d.InstanceType: required on this endpoint (InstanceRequirements are not served)", i+1, j+1)
			}
			sn, aerr := s.subnetFor(o)
			if aerr != nil {
				s.mu.Unlock()
				return nil, aerr
			}
			ref := cloud.OfferingRef{InstanceType: string(o.InstanceType), Zone: aws.ToString(sn.AvailabilityZone), CapacityType: capacityType}
			if aerr := targetReservation(&ref, t.data, tcs.DefaultTargetCapacityType); aerr != nil {
				s.mu.Unlock()
				return nil, aerr
			}
			if _, dup := sources[ref]; dup {
				continue
			}
			if o.Priority != nil {
				if p := aws.ToFloat64(o.Priority); p < 0 {
					s.mu.Unlock()
					return nil, badRequest(CodeInvalidParameterValue, "LaunchTemplateConfigs.%d.Overrides.%d.Priority: %v is negative", i+1, j+1, p)
				}
				priority[cloud.OfferingRef{InstanceType: ref.InstanceType, Zone: ref.Zone, CapacityType: ref.CapacityType, ReservationID: ref.ReservationID}] = aws.ToFloat64(o.Priority)
			}
			resp := types.FleetLaunchTemplateOverrides{InstanceType: o.InstanceType, AvailabilityZone: sn.AvailabilityZone,
				SubnetId: sn.SubnetId, Priority: o.Priority, MaxPrice: o.MaxPrice, WeightedCapacity: o.WeightedCapacity, ImageId: o.ImageId}
			sources[ref] = offeringSource{template: t, spec: types.FleetLaunchTemplateSpecification{LaunchTemplateId: t.LaunchTemplateId,
				LaunchTemplateName: spec.LaunchTemplateName, Version: spec.Version}, overrides: resp, subnet: sn}
			offerings = append(offerings, ref)
		}
	}
	s.mu.Unlock()
	if len(offerings) == 0 {
		return nil, badRequest(CodeInvalidParameterValue, "LaunchTemplateConfigs: no overrides")
	}

	fleetTags := map[string]string{}
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType == types.ResourceTypeInstance {
			for k, v := range tagMap(ts.Tags) {
				fleetTags[k] = v
			}
		}
	}
	offerings, unauthorized, aerr := s.authorizeFleet(ctx, in, token, lifecycle, offerings, sources)
	if aerr != nil {
		return nil, aerr
	}
	offerings, unlaunchable := s.fleetRefusals(offerings, sources, lifecycle, func(t *template, ref cloud.OfferingRef) (string, string) {
		return s.networkRefusal(t, ref.InstanceType)
	})
	unauthorized = append(unauthorized, unlaunchable...)
	// EC2 counts a group's members and places the new one atomically: concurrent fleets into
	// one group must not both pass the spread limit or pin a cluster group to two zones.
	if placed(sources) {
		s.placeMu.Lock()
		defer s.placeMu.Unlock()
	}
	offerings, unplaceable := s.fleetRefusals(offerings, sources, lifecycle, s.placementRefusal)
	unauthorized = append(unauthorized, unplaceable...)
	if len(offerings) == 0 { // IAM refused every offering's launch: the fleet answers with the errors
		return s.fleetAnswer(token, digest, reqID, []member{{"fleetId", aws.String(fleetID(token))}, {"errorSet", unauthorized},
			{"fleetInstanceSet", []types.CreateFleetInstance{}}})
	}
	// One launch request per node configuration, in the order the fleet names them; the fake
	// cloud picks the cheapest offering with capacity across all of them.
	var reqs []cloud.LaunchRequest
	at := map[*bootGroup]int{}
	for _, ref := range offerings {
		g := groupOf[sources[ref].template]
		i, ok := at[g]
		if !ok {
			i = len(reqs)
			at[g] = i
			reqs = append(reqs, g.launchRequest(token, fleetTags))
		}
		reqs[i].Offerings = append(reqs[i].Offerings, ref)
	}
	var inst *cloud.Instance
	var err error
	if prioritized {
		inst, err = s.cloud.CreatePrioritized(ctx, reqs, priority)
	} else {
		inst, err = s.cloud.CreateMixed(ctx, reqs)
	}
	var members []member
	var ice *cloud.InsufficientCapacityError
	switch {
	case errors.As(err, &ice):
		errs := unauthorized
		for _, u := range ice.Unavailable {
			src := sources[cloud.OfferingRef{InstanceType: u.Offering.InstanceType, Zone: u.Offering.Zone, CapacityType: u.Offering.CapacityType,
				ReservationID: u.Offering.ReservationID, ReservationType: u.Offering.ReservationType}]
			spec, ov := src.spec, src.overrides
			errs = append(errs, types.CreateFleetError{ErrorCode: aws.String(u.Code), ErrorMessage: aws.String(iceMessage(u)),
				Lifecycle: types.InstanceLifecycle(lifecycle), LaunchTemplateAndOverrides: &types.LaunchTemplateAndOverridesResponse{
					LaunchTemplateSpecification: &spec, Overrides: &ov}})
		}
		members = []member{{"fleetId", aws.String(fleetID(token))}, {"errorSet", errs}, {"fleetInstanceSet", []types.CreateFleetInstance{}}}
	case errors.Is(err, cloud.ErrIdempotentParameterMismatch):
		return nil, badRequest(CodeIdempotentParameterMismatch, "%v", err)
	case err != nil:
		return nil, badRequest(CodeInvalidParameterValue, "%v", err)
	default:
		src := sources[cloud.OfferingRef{InstanceType: inst.InstanceType, Zone: inst.Zone, CapacityType: inst.CapacityType,
			ReservationID: inst.CapacityReservationID, ReservationType: inst.CapacityReservationType}]
		spec, ov := src.spec, src.overrides
		imageID := aws.ToString(src.template.data.ImageId)
		if ov.ImageId != nil {
			imageID = aws.ToString(ov.ImageId)
		}
		s.mu.Lock()
		var groups []types.GroupIdentifier
		for _, id := range src.template.data.SecurityGroupIds {
			groups = append(groups, s.groupIdentifier(id))
		}
		s.instances[inst.ID] = instanceMeta{imageID: imageID, subnetID: aws.ToString(src.subnet.SubnetId),
			templateID: aws.ToString(src.template.LaunchTemplateId), templateName: aws.ToString(src.template.LaunchTemplateName),
			clientToken: token, groups: groups, metadata: src.template.data.MetadataOptions}
		s.place(inst.ID, src.template.data.Placement)
		s.mu.Unlock()
		members = []member{{"fleetId", aws.String(fleetID(token))}, {"errorSet", nonNil(unauthorized)},
			{"fleetInstanceSet", []types.CreateFleetInstance{{InstanceIds: []string{inst.ID}, InstanceType: types.InstanceType(inst.InstanceType),
				Lifecycle: types.InstanceLifecycle(lifecycle), LaunchTemplateAndOverrides: &types.LaunchTemplateAndOverridesResponse{
					LaunchTemplateSpecification: &spec, Overrides: &ov}}}}}
	}
	return s.fleetAnswer(token, digest, reqID, members)
}

// fleetAnswer encodes a CreateFleet answer and keeps it for the token's replays.
func (s *Server) fleetAnswer(token, digest, reqID string, members []member) ([]byte, *apiError) {
	body, aerr := respond("CreateFleet", reqID, members...)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	s.fleets[token] = fleetRecord{digest: digest, body: body}
	s.mu.Unlock()
	return body, nil
}

// authorizeFleet decides a fleet as IAM would for the caller: ec2:CreateFleet on the fleet (with
// its tags) and on each launch template, and iam:PassRole of each instance profile's role to
// EC2 (a refusal fails the call: 403 UnauthorizedOperation); then each offering's launch
// (launchChecks), a refused one becoming a fleet error with EC2's code and message, as EC2
// reports a RunInstances refusal within a fleet. Returns the offerings IAM allows.
func (s *Server) authorizeFleet(ctx context.Context, in *ec2.CreateFleetInput, token, lifecycle string, offerings []cloud.OfferingRef,
	sources map[cloud.OfferingRef]offeringSource) ([]cloud.OfferingRef, []types.CreateFleetError, *apiError) {
	if callerOf(ctx) == nil {
		return offerings, nil, nil
	}
	fleetTags := map[types.ResourceType]map[string]string{}
	for _, ts := range in.TagSpecifications {
		if fleetTags[ts.ResourceType] == nil {
			fleetTags[ts.ResourceType] = map[string]string{}
		}
		for k, v := range tagMap(ts.Tags) {
			fleetTags[ts.ResourceType][k] = v
		}
	}
	merged := func(t *template, rt types.ResourceType) map[string]string {
		out := templateTags(t, rt)
		for k, v := range fleetTags[rt] {
			out[k] = v
		}
		return out
	}
	checks := created("ec2:CreateFleet", s.arn("fleet", fleetID(token)), fleetTags[types.ResourceTypeFleet])
	s.mu.Lock()
	seen := map[*template]bool{}
	for _, ref := range offerings {
		t := sources[ref].template
		if seen[t] {
			continue
		}
		seen[t] = true
		checks = append(checks, check{"ec2:CreateFleet", s.arn("launch-template", aws.ToString(t.LaunchTemplateId)), resourceTags(t.Tags)})
		if ip := t.data.IamInstanceProfile; ip != nil && s.profiles[aws.ToString(ip.Name)] != nil {
			for _, role := range s.profiles[aws.ToString(ip.Name)].roles {
				checks = append(checks, check{"iam:PassRole", "arn:aws:iam::" + s.account + ":role/" + role,
					map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}})
			}
		}
	}
	s.mu.Unlock()
	if aerr := s.authorize(ctx, checks...); aerr != nil {
		return nil, nil, aerr
	}
	var allowed []cloud.OfferingRef
	var refused []types.CreateFleetError
	for _, ref := range offerings {
		src := sources[ref]
		s.mu.Lock()
		launch := s.launchChecks(src.template, src.subnet, merged(src.template, types.ResourceTypeInstance),
			merged(src.template, types.ResourceTypeVolume), merged(src.template, types.ResourceTypeNetworkInterface))
		if ref.ReservationID != "" {
			// A launch into a capacity reservation uses it as a resource of the RunInstances.
			launch = append(launch, check{"ec2:RunInstances", s.arn("capacity-reservation", ref.ReservationID), nil})
		}
		if pl := src.template.data.Placement; pl != nil {
			// A launch into a placement group uses it as a resource of the RunInstances, named
			// by the group's name (Service Authorization Reference, RunInstances: placement-group,
			// arn:...:placement-group/${PlacementGroupName}).
			if g, ok := s.findPlacementGroup(pl); ok {
				launch = append(launch, check{"ec2:RunInstances", s.arn("placement-group", aws.ToString(g.GroupName)), resourceTags(g.Tags)})
			}
		}
		s.mu.Unlock()
		if aerr := s.authorize(ctx, launch...); aerr != nil {
			if aerr.code != CodeUnauthorizedOperation {
				return nil, nil, aerr
			}
			spec, ov := src.spec, src.overrides
			refused = append(refused, types.CreateFleetError{ErrorCode: aws.String(aerr.code), ErrorMessage: aws.String(aerr.message),
				Lifecycle: types.InstanceLifecycle(lifecycle), LaunchTemplateAndOverrides: &types.LaunchTemplateAndOverridesResponse{
					LaunchTemplateSpecification: &spec, Overrides: &ov}})
			continue
		}
		allowed = append(allowed, ref)
	}
	return allowed, refused, nil
}

// iceMessage is the message EC2 gives with each fleet error code (wording after EC2's own).
func iceMessage(u cloud.UnavailableOffering) string {
	switch u.Code {
	case "InsufficientInstanceCapacity":
		return fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s).", u.Offering.InstanceType, u.Offering.Zone)
	case "Unsupported":
		return fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", u.Offering.InstanceType, u.Offering.Zone)
	case "InsufficientFreeAddressesInSubnet":
		return "There are not enough free addresses in the subnet to satisfy the request."
	case "MaxSpotInstanceCountExceeded":
		return "Max spot instance count exceeded"
	}
	return u.Code
}

func fleetID(token string) string {
	sum := sha256.Sum256([]byte("fleet/" + token))
	h := hex.EncodeToString(sum[:16])
	return "fleet-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// formDigest fingerprints a request's parameters (url.Values.Encode sorts by key).
func formDigest(form url.Values) string {
	sum := sha256.Sum256([]byte(form.Encode()))
	return hex.EncodeToString(sum[:])
}

// bootConfig reads the node configuration a template's instances boot with. Called with s.mu held.
func (s *Server) bootConfig(t *template) (*userdata.Node, string, *apiError) {
	imageID := aws.ToString(t.data.ImageId)
	family := ""
	for _, img := range s.images {
		if aws.ToString(img.ImageId) == imageID {
			family = img.family
		}
	}
	if family == "" {
		return nil, "", badRequest(CodeInvalidAMIIDNotFound, "The image id '[%s]' does not exist (launch template %s)", imageID, aws.ToString(t.LaunchTemplateName))
	}
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(t.data.UserData))
	if err != nil {
		return nil, "", badRequest(CodeInvalidParameterValue, "launch template %s: user data is not base64", aws.ToString(t.LaunchTemplateName))
	}
	n, err := userdata.Parse(family, string(raw))
	if err != nil {
		return nil, "", badRequest(CodeInvalidParameterValue, "launch template %s: the node could not read its %s user data: %v", aws.ToString(t.LaunchTemplateName), family, err)
	}
	return n, family, nil
}

// subnetFor resolves an override's subnet (or the zone's first subnet). Called with s.mu held.
func (s *Server) subnetFor(o types.FleetLaunchTemplateOverridesRequest) (types.Subnet, *apiError) {
	if id := aws.ToString(o.SubnetId); id != "" {
		for _, sn := range s.subnets {
			if aws.ToString(sn.SubnetId) == id {
				if az := aws.ToString(o.AvailabilityZone); az != "" && az != aws.ToString(sn.AvailabilityZone) {
					return types.Subnet{}, badRequest(CodeInvalidParameterValue, "Subnet %s is in %s, not %s", id, aws.ToString(sn.AvailabilityZone), az)
				}
				return sn, nil
			}
		}
		return types.Subnet{}, badRequest(CodeInvalidSubnetIDNotFound, "The subnet ID '%s' does not exist", id)
	}
	az := aws.ToString(o.AvailabilityZone)
	for _, sn := range s.subnets {
		if aws.ToString(sn.AvailabilityZone) == az {
			return sn, nil
		}
	}
	return types.Subnet{}, badRequest(CodeInvalidParameterValue, "override for %s names neither a subnet nor a zone with one (%q)", o.InstanceType, az)
}

// nodeClassBDMs turns launch template block devices into NodeClass ones (for the node's
// ephemeral-storage capacity).
func nodeClassBDMs(bdms []types.LaunchTemplateBlockDeviceMapping) []apisv1.BlockDeviceMapping {
	var out []apisv1.BlockDeviceMapping
	for _, b := range bdms {
		m := apisv1.BlockDeviceMapping{DeviceName: b.DeviceName}
		if b.Ebs != nil && b.Ebs.VolumeSize != nil {
			q := resource.MustParse(strconv.Itoa(int(*b.Ebs.VolumeSize)) + "Gi")
			m.EBS = &apisv1.BlockDevice{VolumeSize: &q}
		}
		out = append(out, m)
	}
	return out
}

// groupIdentifier names a security group. Called with s.mu held.
func (s *Server) groupIdentifier(id string) types.GroupIdentifier {
	for _, g := range s.groups {
		if aws.ToString(g.GroupId) == id {
			return types.GroupIdentifier{GroupId: g.GroupId, GroupName: g.GroupName}
		}
	}
	return types.GroupIdentifier{GroupId: aws.String(id)}
}

// ---- instances ----

// stateCodes are EC2's instance state codes (InstanceState reference).
var stateCodes = map[string]int32{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func (s *Server) ec2Instance(r fake.InstanceRecord) types.Instance {
	s.mu.Lock()
	meta := s.instances[r.ID]
	s.mu.Unlock()
	lt := r.LaunchTime.UTC()
	inst := types.Instance{
		InstanceId: aws.String(r.ID), InstanceType: types.InstanceType(r.InstanceType), LaunchTime: &lt,
		Placement: &types.Placement{AvailabilityZone: aws.String(r.Zone), Tenancy: types.TenancyDefault},
		State:     &types.InstanceState{Code: aws.Int32(stateCodes[r.State]), Name: types.InstanceStateName(r.State)},
		Tags:      tagList(r.Tags), Architecture: types.ArchitectureValuesX8664,
		Hypervisor: types.HypervisorTypeXen, RootDeviceType: types.DeviceTypeEbs, VirtualizationType: types.VirtualizationTypeHvm,
	}
	if it := s.cat.Get(r.InstanceType); it != nil && it.Labels[corev1.LabelArchStable] == "arm64" {
		inst.Architecture = types.ArchitectureValuesArm64
	}
	if r.CapacityType == apisv1.CapacityTypeSpot {
		inst.InstanceLifecycle = types.InstanceLifecycleTypeSpot
	}
	if r.CapacityReservationID != "" {
		// EC2 shows the reservation and the preference the launch targeted it with.
		inst.CapacityReservationId = aws.String(r.CapacityReservationID)
		inst.CapacityReservationSpecification = &types.CapacityReservationSpecificationResponse{
			CapacityReservationPreference: types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &types.CapacityReservationTargetResponse{CapacityReservationId: aws.String(r.CapacityReservationID)}}
		if r.CapacityReservationType == apisv1.CapacityReservationTypeCapacityBlock {
			inst.InstanceLifecycle = types.InstanceLifecycleTypeCapacityBlock
		}
	}
	if r.PrivateIP != "" && r.State != "terminated" {
		inst.PrivateIpAddress = aws.String(r.PrivateIP)
		inst.PrivateDnsName = aws.String(r.PrivateDNSName)
	}
	if meta.placementGroup != "" {
		inst.Placement.GroupId = aws.String(meta.placementGroup)
		inst.Placement.GroupName = aws.String(s.placementGroupName(meta.placementGroup))
		if meta.partition > 0 {
			inst.Placement.PartitionNumber = aws.Int32(meta.partition)
		}
	}
	if meta.imageID != "" {
		inst.ImageId = aws.String(meta.imageID)
		inst.SubnetId = aws.String(meta.subnetID)
		inst.VpcId = aws.String(s.vpcID)
		inst.ClientToken = aws.String(meta.clientToken)
		inst.SecurityGroups = meta.groups
		if m := meta.metadata; m != nil {
			inst.MetadataOptions = &types.InstanceMetadataOptionsResponse{HttpEndpoint: types.InstanceMetadataEndpointState(m.HttpEndpoint),
				HttpPutResponseHopLimit: m.HttpPutResponseHopLimit, HttpTokens: types.HttpTokensState(m.HttpTokens), State: types.InstanceMetadataOptionsStateApplied}
		}
	}
	return inst
}

func (s *Server) describeInstances(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeInstancesInput](s, "DescribeInstances", form)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := dryRun(in.DryRun); aerr != nil {
		return nil, aerr
	}
	// "You cannot specify this parameter [MaxResults] and the instance IDs parameter in the same
	// request" (EC2 API reference, DescribeInstances).
	if len(in.InstanceIds) > 0 && in.MaxResults != nil {
		return nil, badRequest(CodeInvalidParameterCombination, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	recs := listed(s.cloud.Records())
	byID := map[string]fake.InstanceRecord{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	if len(in.InstanceIds) > 0 {
		var missing []string
		var picked []fake.InstanceRecord
		for _, id := range in.InstanceIds {
			r, ok := byID[id]
			if !ok {
				missing = append(missing, id)
				continue
			}
			picked = append(picked, r)
		}
		if len(missing) > 0 {
			return nil, badRequest(CodeInvalidInstanceIDNotFound, "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
		}
		recs = picked
	}
	var reservations []types.Reservation
	for _, r := range recs {
		inst := s.ec2Instance(r)
		ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "instance-state-name":
				return []string{r.State}, true
			case "instance-state-code":
				return []string{strconv.Itoa(int(stateCodes[r.State]))}, true
			case "instance-id":
				return []string{r.ID}, true
			case "instance-type":
				return []string{r.InstanceType}, true
			case "availability-zone":
				return []string{r.Zone}, true
			case "instance-lifecycle":
				return []string{string(inst.InstanceLifecycle)}, true
			case "client-token":
				return []string{aws.ToString(inst.ClientToken)}, true
			}
			return tagValues(name, inst.Tags)
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			reservations = append(reservations, types.Reservation{ReservationId: aws.String(resourceID("r", r.ID)),
				OwnerId: aws.String(s.account), Instances: []types.Instance{inst}})
		}
	}
	items, next, aerr := page(reservations, in.MaxResults, in.NextToken, 1000)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeInstances", reqID, member{"reservationSet", nonNil(items)}, member{"nextToken", next})
}

func (s *Server) terminateInstances(ctx context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.TerminateInstancesInput](s, "TerminateInstances", form)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := dryRun(in.DryRun); aerr != nil {
		return nil, aerr
	}
	if len(in.InstanceIds) == 0 {
		return nil, badRequest(CodeMissingParameter, "The request must contain the parameter InstanceId")
	}
	zones := map[string]string{}
	for _, r := range listed(s.cloud.Records()) {
		zones[r.ID] = r.Zone
	}
	var missing []string
	for _, id := range in.InstanceIds {
		if _, ok := zones[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, badRequest(CodeInvalidInstanceIDNotFound, "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
	tagsOf := map[string]map[string]string{}
	for _, r := range s.cloud.Records() {
		tagsOf[r.ID] = r.Tags
	}
	for _, id := range in.InstanceIds {
		if aerr := s.authorize(ctx, check{"ec2:TerminateInstances", s.arn("instance", id), resourceTags(tagList(tagsOf[id]))}); aerr != nil {
			return nil, aerr
		}
	}
	var changes []types.InstanceStateChange
	for _, id := range in.InstanceIds {
		prev, err := s.cloud.Terminate(ctx, cloud.AWSProviderID(zones[id], id))
		if err != nil {
			return nil, badRequest(CodeInvalidParameterValue, "%v", err)
		}
		cur := "shutting-down"
		if prev == "terminated" {
			cur = prev
		}
		changes = append(changes, types.InstanceStateChange{InstanceId: aws.String(id),
			PreviousState: &types.InstanceState{Code: aws.Int32(stateCodes[prev]), Name: types.InstanceStateName(prev)},
			CurrentState:  &types.InstanceState{Code: aws.Int32(stateCodes[cur]), Name: types.InstanceStateName(cur)}})
	}
	return respond("TerminateInstances", reqID, member{"instancesSet", changes})
}

// ---- network and images ----

func (s *Server) describeSubnets(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeSubnetsInput](s, "DescribeSubnets", form)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	all := append([]types.Subnet(nil), s.subnets...)
	s.mu.Unlock()
	if aerr := requireIDs(in.SubnetIds, all, func(sn types.Subnet) string { return aws.ToString(sn.SubnetId) }, CodeInvalidSubnetIDNotFound, "subnet ID"); aerr != nil {
		return nil, aerr
	}
	var out []types.Subnet
	for _, sn := range all {
		if len(in.SubnetIds) > 0 && !contains(in.SubnetIds, aws.ToString(sn.SubnetId)) {
			continue
		}
		ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "subnet-id":
				return []string{aws.ToString(sn.SubnetId)}, true
			case "vpc-id":
				return []string{aws.ToString(sn.VpcId)}, true
			case "availability-zone":
				return []string{aws.ToString(sn.AvailabilityZone)}, true
			case "cidr-block", "cidr", "cidrBlock":
				return []string{aws.ToString(sn.CidrBlock)}, true
			case "state":
				return []string{string(sn.State)}, true
			}
			return tagValues(name, sn.Tags)
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out = append(out, sn)
		}
	}
	items, next, aerr := page(out, in.MaxResults, in.NextToken, 1000)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeSubnets", reqID, member{"subnetSet", nonNil(items)}, member{"nextToken", next})
}

func (s *Server) describeSecurityGroups(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeSecurityGroupsInput](s, "DescribeSecurityGroups", form)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	all := append([]types.SecurityGroup(nil), s.groups...)
	s.mu.Unlock()
	if aerr := requireIDs(in.GroupIds, all, func(g types.SecurityGroup) string { return aws.ToString(g.GroupId) }, CodeInvalidGroupNotFound, "security group"); aerr != nil {
		return nil, aerr
	}
	var out []types.SecurityGroup
	for _, g := range all {
		if len(in.GroupIds) > 0 && !contains(in.GroupIds, aws.ToString(g.GroupId)) {
			continue
		}
		if len(in.GroupNames) > 0 && !contains(in.GroupNames, aws.ToString(g.GroupName)) {
			continue
		}
		ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "group-id":
				return []string{aws.ToString(g.GroupId)}, true
			case "group-name":
				return []string{aws.ToString(g.GroupName)}, true
			case "vpc-id":
				return []string{aws.ToString(g.VpcId)}, true
			}
			return tagValues(name, g.Tags)
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out = append(out, g)
		}
	}
	items, next, aerr := page(out, in.MaxResults, in.NextToken, 1000)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeSecurityGroups", reqID, member{"securityGroupInfo", nonNil(items)}, member{"nextToken", next})
}

func (s *Server) describeImages(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeImagesInput](s, "DescribeImages", form)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	all := make([]types.Image, 0, len(s.images))
	for _, img := range s.images {
		all = append(all, img.Image)
	}
	s.mu.Unlock()
	if aerr := requireIDs(in.ImageIds, all, func(i types.Image) string { return aws.ToString(i.ImageId) }, CodeInvalidAMIIDNotFound, "image id"); aerr != nil {
		return nil, aerr
	}
	var out []types.Image
	for _, img := range all {
		if len(in.ImageIds) > 0 && !contains(in.ImageIds, aws.ToString(img.ImageId)) {
			continue
		}
		if len(in.Owners) > 0 && !ownedBy(img, in.Owners, s.account) {
			continue
		}
		ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "image-id":
				return []string{aws.ToString(img.ImageId)}, true
			case "name":
				return []string{aws.ToString(img.Name)}, true
			case "architecture":
				return []string{string(img.Architecture)}, true
			case "owner-id":
				return []string{aws.ToString(img.OwnerId)}, true
			case "owner-alias":
				return []string{aws.ToString(img.ImageOwnerAlias)}, true
			case "state":
				return []string{string(img.State)}, true
			}
			return tagValues(name, img.Tags)
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out = append(out, img)
		}
	}
	items, next, aerr := page(out, in.MaxResults, in.NextToken, 1000)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeImages", reqID, member{"imagesSet", nonNil(items)}, member{"nextToken", next})
}

// ownedBy applies DescribeImages Owners: account IDs, the alias "amazon", or "self".
func ownedBy(img types.Image, owners []string, self string) bool {
	for _, o := range owners {
		switch {
		case o == "self" && aws.ToString(img.OwnerId) == self,
			o == aws.ToString(img.OwnerId),
			o == aws.ToString(img.ImageOwnerAlias):
			return true
		}
	}
	return false
}

// listed keeps the instances EC2 still shows: a terminated one disappears about an hour after
// (fake.TerminatedVisibility), and its ID is then unknown to every call.
func listed(recs []fake.InstanceRecord) []fake.InstanceRecord {
	out := recs[:0]
	for _, r := range recs {
		if r.Listed {
			out = append(out, r)
		}
	}
	return out
}

// requireIDs refuses IDs that do not exist, as EC2 does for an explicit ID list.
func requireIDs[T any](ids []string, all []T, idOf func(T) string, code, what string) *apiError {
	have := map[string]bool{}
	for _, x := range all {
		have[idOf(x)] = true
	}
	var missing []string
	for _, id := range ids {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return badRequest(code, "The %s '%s' does not exist", what, strings.Join(missing, ", "))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// nonNil makes an empty result an empty list element rather than none.
func nonNil[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}
