package ec2api

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// Placement group rules of EC2, as the fake enforces them. Sources: EC2 User Guide, "Placement
// strategies" (placement-strategies.html) and "Placement groups"; the CreatePlacementGroup and
// DescribePlacementGroups API references; karpenter-provider-aws designs/placement-groups-support.md
// ("Input/Output for CreateFleet with Placement Groups"), which records what CreateFleet answers.
const (
	// CodePlacementGroupUnknown is EC2's error for a placement group name or id it does not know
	// ("The Placement Group 'x' is unknown."; EC2 API reference, "Error codes").
	CodePlacementGroupUnknown = "InvalidPlacementGroup.Unknown"
	// SpreadLimitPerZone: "a rack spread placement group can have a maximum of seven running
	// instances per Availability Zone per group" (Placement strategies, spread).
	SpreadLimitPerZone = 7
	// MaxPartitions: "a partition placement group can have a maximum of seven partitions per
	// Availability Zone" (Placement strategies, partition; CreatePlacementGroup PartitionCount 1..7).
	MaxPartitions = 7
	// spreadLimitMessage is EC2's message when a spread group is full in a zone, which
	// Karpenter's IsSpreadPlacementGroupLimitError matches ("limit of instances in this spread
	// placement group").
	spreadLimitMessage = "You've reached the limit of instances in this spread placement group. A spread placement group can have up to seven instances per Availability Zone."
)

// placementGroupName is EC2's rule for a name: up to 255 ASCII characters (CreatePlacementGroup
// GroupName).
var placementGroupName = regexp.MustCompile(`^[\x20-\x7e]{1,255}$`)

// AddPlacementGroup creates a placement group as CreatePlacementGroup would and returns it with
// its id ("pg-" and 17 hex digits, as EC2's) and state available. Strategy is cluster, partition
// or spread; PartitionCount is required for partition (1..7) and refused for the others;
// SpreadLevel is rack for spread when not given (host is Outposts only, refused here as this
// endpoint serves a Region), refused for the others. Names are unique in the account.
func (s *Server) AddPlacementGroup(g types.PlacementGroup) (types.PlacementGroup, error) {
	name := aws.ToString(g.GroupName)
	switch {
	case !placementGroupName.MatchString(name):
		return g, fmt.Errorf("placement group: GroupName %q: 1 to 255 ASCII characters", name)
	case g.Strategy != types.PlacementStrategyCluster && g.Strategy != types.PlacementStrategyPartition && g.Strategy != types.PlacementStrategySpread:
		return g, fmt.Errorf("placement group: Strategy %q: cluster, partition or spread", g.Strategy)
	case g.Strategy == types.PlacementStrategyPartition && (aws.ToInt32(g.PartitionCount) < 1 || aws.ToInt32(g.PartitionCount) > MaxPartitions):
		return g, fmt.Errorf("placement group: PartitionCount %d: a partition group has 1 to %d partitions", aws.ToInt32(g.PartitionCount), MaxPartitions)
	case g.Strategy != types.PlacementStrategyPartition && g.PartitionCount != nil:
		return g, errors.New("placement group: PartitionCount: only a partition group has partitions")
	case g.Strategy != types.PlacementStrategySpread && g.SpreadLevel != "":
		return g, errors.New("placement group: SpreadLevel: only a spread group has a spread level")
	case g.SpreadLevel == types.SpreadLevelHost:
		return g, errors.New("placement group: SpreadLevel host: host-level spread groups exist on AWS Outposts only")
	}
	if g.Strategy == types.PlacementStrategySpread {
		g.SpreadLevel = types.SpreadLevelRack
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range s.pgroups {
		if aws.ToString(have.GroupName) == name {
			return g, fmt.Errorf("placement group: InvalidPlacementGroup.Duplicate: the placement Group '%s' already exists", name)
		}
	}
	s.seq++
	id := fmt.Sprintf("pg-%017x", s.seq)
	g.GroupId, g.State = aws.String(id), types.PlacementGroupStateAvailable
	g.GroupArn = aws.String(s.arn("placement-group", name))
	s.pgroups = append(s.pgroups, g)
	return g, nil
}

// describePlacementGroups serves DescribePlacementGroups: GroupNames and GroupIds select (a name
// or id EC2 does not know fails the call with InvalidPlacementGroup.Unknown), then the filters of
// the API reference: group-name, group-arn, spread-level, state, strategy, tag:<key>, tag-key
// (any other filter name is refused). The answer is not paginated (the API has no MaxResults).
func (s *Server) describePlacementGroups(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribePlacementGroupsInput](s, "DescribePlacementGroups", form)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := dryRun(in.DryRun); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	all := append([]types.PlacementGroup(nil), s.pgroups...)
	s.mu.Unlock()
	known := map[string]bool{} // names and ids
	for _, g := range all {
		known["name/"+aws.ToString(g.GroupName)], known["id/"+aws.ToString(g.GroupId)] = true, true
	}
	for _, n := range in.GroupNames {
		if !known["name/"+n] {
			return nil, badRequest(CodePlacementGroupUnknown, "The Placement Group '%s' is unknown.", n)
		}
	}
	for _, id := range in.GroupIds {
		if !known["id/"+id] {
			return nil, badRequest(CodePlacementGroupUnknown, "The Placement Group '%s' is unknown.", id)
		}
	}
	var out []types.PlacementGroup
	for _, g := range all {
		if len(in.GroupNames) > 0 && !contains(in.GroupNames, aws.ToString(g.GroupName)) {
			continue
		}
		if len(in.GroupIds) > 0 && !contains(in.GroupIds, aws.ToString(g.GroupId)) {
			continue
		}
		ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "group-name":
				return []string{aws.ToString(g.GroupName)}, true
			case "group-arn":
				return []string{aws.ToString(g.GroupArn)}, true
			case "spread-level":
				return []string{string(g.SpreadLevel)}, true
			case "state":
				return []string{string(g.State)}, true
			case "strategy":
				return []string{string(g.Strategy)}, true
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
	return respond("DescribePlacementGroups", reqID, member{"placementGroupSet", nonNil(out)})
}

// findPlacementGroup returns the group a template's Placement names (GroupId, else GroupName).
// Called with s.mu held.
func (s *Server) findPlacementGroup(p *types.LaunchTemplatePlacement) (types.PlacementGroup, bool) {
	for _, g := range s.pgroups {
		if (aws.ToString(p.GroupId) != "" && aws.ToString(g.GroupId) == aws.ToString(p.GroupId)) ||
			(aws.ToString(p.GroupId) == "" && aws.ToString(g.GroupName) == aws.ToString(p.GroupName)) {
			return g, true
		}
	}
	return types.PlacementGroup{}, false
}

// placementGroupName returns the name of the group with id, "" if none. Called with s.mu held.
func (s *Server) placementGroupName(id string) string {
	for _, g := range s.pgroups {
		if aws.ToString(g.GroupId) == id {
			return aws.ToString(g.GroupName)
		}
	}
	return ""
}

// members returns, by zone and by partition, the live (pending or running) instances of group
// id. Called with s.mu held.
func (s *Server) members(id string) (byZone map[string]int, byPartition map[int32]int) {
	byZone, byPartition = map[string]int{}, map[int32]int{}
	for _, r := range s.cloud.Records() {
		m := s.instances[r.ID]
		if m.placementGroup != id || (r.State != cloud.StatePending && r.State != cloud.StateRunning) {
			continue
		}
		byZone[r.Zone]++
		byPartition[m.partition]++
	}
	return byZone, byPartition
}

// placementRefusal is why EC2 would not launch ref into the placement group of the template,
// as a fleet error code and message, or "" when it would (or the template names no group):
//   - a group EC2 does not know, or one not available: InvalidPlacementGroup.Unknown;
//   - PartitionNumber outside a partition group, or past its PartitionCount:
//     InvalidParameterValue (LaunchTemplatePlacementRequest PartitionNumber: "valid only if the
//     placement group strategy is set to partition");
//   - a type a cluster group does not take: Unsupported (Placement strategies, cluster: "current
//     generation instances, except for burstable performance instances (for example, T2), Mac1
//     instances, and M7i-flex instances"; the EC2 error codes reference's Unsupported, "the
//     specified request is unsupported", is the code this fake gives it);
//   - a cluster group with live instances in another zone: InsufficientInstanceCapacity ("a
//     cluster placement group can't span multiple Availability Zones"; the Karpenter design's
//     CreateFleet table: overrides for other zones come back as insufficient capacity);
//   - a spread group with SpreadLimitPerZone live instances in the zone:
//     InsufficientInstanceCapacity with EC2's spread limit message.
//
// Called with s.mu held.
func (s *Server) placementRefusal(t *template, ref cloud.OfferingRef) (code, message string) {
	p := t.data.Placement
	if p == nil || (aws.ToString(p.GroupId) == "" && aws.ToString(p.GroupName) == "") {
		if p != nil && p.PartitionNumber != nil {
			return CodeInvalidParameterValue, "PartitionNumber is valid only with a partition placement group"
		}
		return "", ""
	}
	g, ok := s.findPlacementGroup(p)
	if !ok || g.State != types.PlacementGroupStateAvailable {
		named := aws.ToString(p.GroupId)
		if named == "" {
			named = aws.ToString(p.GroupName)
		}
		return CodePlacementGroupUnknown, fmt.Sprintf("The Placement Group '%s' is unknown.", named)
	}
	if n := p.PartitionNumber; n != nil && (g.Strategy != types.PlacementStrategyPartition || *n < 1 || *n > aws.ToInt32(g.PartitionCount)) {
		return CodeInvalidParameterValue, fmt.Sprintf("Partition number %d is not valid for placement group %s (%s strategy, %d partitions)",
			*n, aws.ToString(g.GroupName), g.Strategy, aws.ToInt32(g.PartitionCount))
	}
	byZone, _ := s.members(aws.ToString(g.GroupId))
	switch g.Strategy {
	case types.PlacementStrategyCluster:
		if !clusterTakes(s.cat.Get(ref.InstanceType)) {
			return "Unsupported", fmt.Sprintf("The instance type %s is not supported in cluster placement group %s", ref.InstanceType, aws.ToString(g.GroupName))
		}
		for zone, n := range byZone {
			if n > 0 && zone != ref.Zone {
				return "InsufficientInstanceCapacity", fmt.Sprintf(
					"Insufficient capacity: cluster placement group %s holds instances in %s, not %s", aws.ToString(g.GroupName), zone, ref.Zone)
			}
		}
	case types.PlacementStrategySpread:
		if byZone[ref.Zone] >= SpreadLimitPerZone {
			return "InsufficientInstanceCapacity", spreadLimitMessage
		}
	}
	return "", ""
}

// place records the placement of a launched instance: its group, and in a partition group the
// template's PartitionNumber or, without one, the partition with the fewest live instances
// (lowest number first), as "Amazon EC2 tries to evenly distribute the instances across all
// partitions" (Placement strategies, partition). Called with s.mu held, after the launch.
func (s *Server) place(id string, p *types.LaunchTemplatePlacement) {
	if p == nil {
		return
	}
	g, ok := s.findPlacementGroup(p)
	if !ok {
		return
	}
	m := s.instances[id]
	m.placementGroup = aws.ToString(g.GroupId)
	if g.Strategy == types.PlacementStrategyPartition {
		m.partition = aws.ToInt32(p.PartitionNumber)
		if m.partition == 0 {
			_, byPartition := s.members(m.placementGroup)
			parts := make([]int32, 0, aws.ToInt32(g.PartitionCount))
			for n := int32(1); n <= aws.ToInt32(g.PartitionCount); n++ {
				parts = append(parts, n)
			}
			sort.SliceStable(parts, func(a, b int) bool { return byPartition[parts[a]] < byPartition[parts[b]] })
			m.partition = parts[0]
		}
	}
	s.instances[id] = m
}

// burstableFamily matches the burstable performance families (t1, t2, t3, t3a, t4g).
var burstableFamily = regexp.MustCompile(`^t[0-9]`)

// clusterTakes says whether a cluster placement group takes the type: not the burstable
// families, mac1 or m7i-flex (Placement strategies, cluster). An unknown type is left to the
// fake cloud, which refuses it.
func clusterTakes(it *catalog.InstanceType) bool {
	if it == nil {
		return true
	}
	f := it.Labels[apisv1.LabelInstanceFamily]
	return !burstableFamily.MatchString(f) && f != "mac1" && f != "m7i-flex"
}

// placed reports whether any template of a fleet launches into a placement group.
func placed(sources map[cloud.OfferingRef]offeringSource) bool {
	for _, src := range sources {
		if p := src.template.data.Placement; p != nil && (aws.ToString(p.GroupId) != "" || aws.ToString(p.GroupName) != "") {
			return true
		}
	}
	return false
}
