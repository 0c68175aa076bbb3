package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// MaxOverrides is the most overrides one CreateFleet carries: the cheapest 60 offerings, as
// Karpenter caps a launch at 60 instance types (its MaxInstanceTypes) to keep fleet requests
// small and fast.
const MaxOverrides = 60

// maxClientToken is EC2's ClientToken limit: 64 ASCII characters.
const maxClientToken = 64

// Codes that mean "this offering cannot be had now" (EC2 API reference, "Error codes" and
// CreateFleet errors); each refusal becomes an unavailable-offering mark. Others are errors.
var unavailableCodes = map[string]bool{
	"InsufficientInstanceCapacity":         true,
	"InsufficientFreeAddressesInSubnet":    true,
	"MaxSpotInstanceCountExceeded":         true,
	"UnfulfillableCapacity":                true,
	"SpotMaxPriceTooLow":                   true,
	"VcpuLimitExceeded":                    true,
	"Unsupported":                          true,
	"InsufficientCapacity":                 true,
	"InsufficientHostCapacity":             true,
	"InsufficientReservedInstanceCapacity": true,
	"InsufficientCapacityOnHost":           true,
	"ReservationCapacityExceeded":          true,
}

// Codes the provider gives offerings it could not even put in a fleet request.
const (
	CodeNoSubnetInZone = "NoSubnetInZone"         // no subnet of the NodeClass in the offering's zone
	CodeNoImageForArch = "NoImageForArchitecture" // no AMI of the NodeClass serves the type (architecture, GPU, Neuron)
	CodeUnknownType    = "Unsupported"            // the catalog does not know the type
)

// candidate is an offering ready for a fleet override.
type candidate struct {
	ref      cloud.OfferingRef
	template string
	subnet   string
	index    int
}

// Create launches one instance for the request with CreateFleet (type instant, target capacity
// 1). Offerings are tried cheapest first, at most MaxOverrides per fleet: spot offerings in one
// fleet with the price-capacity-optimized strategy, then, if no spot instance launched, the
// on-demand offerings in a second fleet with lowest-price; a NodeClaim annotated
// karpenter.sh/price-overlay-applied uses capacity-optimized-prioritized and prioritized instead,
// each override's priority its (overlaid) price. The first fleet carries
// req.ClientToken, so a redelivered request is answered with the instance of the first delivery;
// the on-demand fallback carries a token derived from it. When nothing launches the error is a
// *cloud.InsufficientCapacityError listing every offering refused, with EC2's code.
func (p *Provider) Create(ctx context.Context, req cloud.LaunchRequest) (*cloud.Instance, error) {
	if err := p.validate(req); err != nil {
		return nil, err
	}
	var refused []cloud.UnavailableOffering
	res, err := p.resources(ctx, req.NodeClass.EC2)
	if err != nil {
		return nil, err
	}
	// The placement group is resolved at every launch: the CRD keeps no resolved group in the
	// status (Karpenter holds it in memory), and a launch must not go outside the group.
	pg, pgProblem, err := p.placementGroup(ctx, req.NodeClass.EC2)
	if err != nil {
		return nil, err
	}
	if pgProblem != nil {
		return nil, fmt.Errorf("%s %s: %s", apisv1.KindEC2NodeClass, req.NodeClass.Name(), pgProblem.message)
	}
	var part int32
	if req.NodeClaim != nil {
		if part, err = partitionOf(pg, req.NodeClaim.Spec.Requirements); err != nil {
			return nil, err
		}
	}
	templates := map[string]string{} // AMI id (and reservation) → launch template name
	var reserved, spot, onDemand []candidate
	for i, o := range req.Offerings {
		it := p.o.Catalog.Get(o.InstanceType)
		if it == nil {
			refused = append(refused, cloud.UnavailableOffering{Offering: o, Code: CodeUnknownType})
			continue
		}
		// The type as the family offers it: a Windows family's images serve os=windows types,
		// and no arm64 type at all (catalog InstanceType.ForAMIFamily).
		if it = it.ForAMIFamily(res.family); it == nil {
			refused = append(refused, cloud.UnavailableOffering{Offering: o, Code: CodeNoImageForArch})
			continue
		}
		ami := res.imageFor(it.Labels)
		subnets := res.subnetsByZone[o.Zone]
		switch {
		case ami == nil:
			refused = append(refused, cloud.UnavailableOffering{Offering: o, Code: CodeNoImageForArch})
			continue
		case len(subnets) == 0:
			refused = append(refused, cloud.UnavailableOffering{Offering: o, Code: CodeNoSubnetInZone})
			continue
		}
		if o.CapacityType == apisv1.CapacityTypeReserved && o.ReservationID == "" {
			return nil, fmt.Errorf("offerings[%d].reservationID: required for capacity type reserved", i)
		}
		efa := efaCount(req, it)
		key := fmt.Sprintf("%s/%s/efa=%d", ami.ID, o.ReservationID, efa)
		if templates[key] == "" {
			d, err := p.TemplateData(req, res.family, ami.ID, res.groups, res.profile)
			if err != nil {
				return nil, err
			}
			nc := req.NodeClass.EC2
			withEFA(d, efa, res.groups, nc.Spec.AssociatePublicIPAddress, nc.Spec.IPPrefixCount, p.clusterFacts(req.ClusterFacts).IPFamily)
			withPlacement(d, pg, part)
			if o.CapacityType == apisv1.CapacityTypeReserved {
				reservedTemplateData(d, o) // one template per reservation, as Karpenter's
			}
			if templates[key], err = p.ensureTemplate(ctx, req, d); err != nil {
				return nil, err
			}
		}
		c := candidate{ref: o, template: templates[key], subnet: subnets[0], index: i}
		switch o.CapacityType {
		case apisv1.CapacityTypeReserved:
			reserved = append(reserved, c)
		case apisv1.CapacityTypeSpot:
			spot = append(spot, c)
		case apisv1.CapacityTypeOnDemand:
			onDemand = append(onDemand, c)
		default:
			refused = append(refused, cloud.UnavailableOffering{Offering: o, Code: CodeUnknownType})
		}
	}
	token := req.ClientToken
	for _, batch := range []struct {
		ct    string
		cands []candidate
	}{{apisv1.CapacityTypeReserved, oneReservationType(reserved)}, {apisv1.CapacityTypeSpot, spot}, {apisv1.CapacityTypeOnDemand, onDemand}} {
		if len(batch.cands) == 0 {
			continue
		}
		inst, unavailable, err := p.fleet(ctx, req, batch.ct, batch.cands, token)
		if err != nil {
			return nil, err
		}
		if inst != nil {
			if pg != nil && inst.PlacementGroupID == "" {
				inst.PlacementGroupID = pg.ID // answered from the fleet, not yet described
			}
			return inst, nil
		}
		// A capacity error inside a placement group holds for that group only (Karpenter's
		// WithPlacementGroup cache scope): other NodeClasses may still launch the offering.
		for i := range unavailable {
			unavailable[i].Scope = req.NodeClass.CapacityScope()
		}
		refused = append(refused, unavailable...)
		token = FallbackToken(req.ClientToken)
	}
	return nil, &cloud.InsufficientCapacityError{Unavailable: refused}
}

// oneReservationType keeps the reserved candidates of the cheapest one's reservation type: one
// fleet launches either on-demand reservations or capacity blocks (its
// DefaultTargetCapacityType), as Karpenter's capacity reservation type filter partitions them.
func oneReservationType(cands []candidate) []candidate {
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].ref.PricePerHour < cands[b].ref.PricePerHour })
	out := cands[:0:0]
	for _, c := range cands {
		if c.ref.ReservationType == cands[0].ref.ReservationType {
			out = append(out, c)
		}
	}
	return out
}

// FallbackToken derives the ClientToken of the on-demand fallback fleet from the request's:
// "od-" and 48 hex digits of sha256(token), within EC2's 64 characters.
func FallbackToken(token string) string {
	sum := sha256.Sum256([]byte("on-demand/" + token))
	return "od-" + hex.EncodeToString(sum[:24])
}

// fleetContext is the CreateFleet Context of a launch: the EC2NodeClass's spec.context, except
// for a NodeClaim whose minValues were relaxed, as Karpenter's instance provider decides
// (pkg/providers/instance/instance.go: WithContextID unless the relaxed annotation is "true").
// EC2 documents the parameter as "Reserved" with no format (CreateFleet API reference), so the
// value is passed as written.
func fleetContext(req cloud.LaunchRequest) *string {
	nc := req.NodeClass.EC2
	if nc == nil || nc.Spec.Context == nil {
		return nil
	}
	if req.NodeClaim != nil && req.NodeClaim.Annotations[apisv1.AnnotationNodeClaimMinValuesRelaxed] == "true" {
		return nil
	}
	return aws.String(*nc.Spec.Context)
}

func (p *Provider) validate(req cloud.LaunchRequest) error {
	switch {
	case req.ClientToken == "":
		return errors.New("clientToken: required (launches must be idempotent)")
	case len(req.ClientToken) > maxClientToken:
		return fmt.Errorf("clientToken: %d characters, EC2 allows at most %d", len(req.ClientToken), maxClientToken)
	case req.NodeClass.IsZero():
		return errors.New("nodeClass: required to launch on AWS (AMI, subnets, security groups)")
	case req.NodeClass.EC2 == nil:
		return fmt.Errorf("nodeClass: %s %q is not an EC2NodeClass; the aws provider launches only from EC2NodeClasses", req.NodeClass.Kind(), req.NodeClass.Name())
	case len(req.Offerings) == 0:
		return errors.New("offerings: empty, nothing to launch")
	case req.Tags[apisv1.TagCluster] != p.o.Cluster:
		return fmt.Errorf("tags[%q]: %q is not this provider's cluster %q (only tagged instances can be found and terminated)",
			apisv1.TagCluster, req.Tags[apisv1.TagCluster], p.o.Cluster)
	}
	if g := p.governance(); len(g.missingTags(req.Tags)) > 0 {
		return fmt.Errorf("%s %s: %s", apisv1.KindEC2NodeClass, req.NodeClass.Name(), g.mandatoryTagsMessage(g.missingTags(req.Tags)))
	}
	return nil
}

// fleet sends one instant fleet for one capacity type.
func (p *Provider) fleet(ctx context.Context, req cloud.LaunchRequest, ct string, cands []candidate, token string) (*cloud.Instance, []cloud.UnavailableOffering, error) {
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].ref.PricePerHour < cands[b].ref.PricePerHour })
	if len(cands) > MaxOverrides {
		cands = cands[:MaxOverrides]
	}
	// A NodeClaim priced by NodeOverlays launches with the prioritized strategies, so EC2 follows
	// the overlaid prices instead of its own (karpenter-provider-aws CreateFleetInputBuilder
	// WithOverlay, on karpenter.sh/price-overlay-applied).
	overlaid := req.NodeClaim != nil && req.NodeClaim.Annotations[apisv1.AnnotationPriceOverlayApplied] == "true"
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	at := map[string]int{}
	for _, c := range cands {
		i, ok := at[c.template]
		if !ok {
			i = len(configs)
			at[c.template] = i
			configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: aws.String(c.template), Version: aws.String("$Latest")}})
		}
		ov := ec2types.FleetLaunchTemplateOverridesRequest{
			InstanceType: ec2types.InstanceType(c.ref.InstanceType), SubnetId: aws.String(c.subnet), AvailabilityZone: aws.String(c.ref.Zone)}
		if overlaid {
			// EC2 launches the lowest priority number first: the overlaid price (Karpenter's
			// getOverrides sets Priority to the offering's price).
			ov.Priority = aws.Float64(c.ref.PricePerHour)
		}
		configs[i].Overrides = append(configs[i].Overrides, ov)
	}
	tags := ec2Tags(req.Tags)
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant, ClientToken: aws.String(token), LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1)},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags},
		},
	}
	in.Context = fleetContext(req)
	switch {
	case ct == apisv1.CapacityTypeSpot:
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeSpot
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
		if overlaid {
			in.SpotOptions.AllocationStrategy = ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized
		}
	case ct == apisv1.CapacityTypeReserved && cands[0].ref.ReservationType == apisv1.CapacityReservationTypeCapacityBlock:
		// Capacity blocks launch as their own capacity type, without on-demand options (Karpenter's
		// CreateFleetInputBuilder).
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeCapacityBlock
	default: // on-demand, and reserved on-demand capacity: the templates target the reservations
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeOnDemand
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
		if overlaid {
			in.OnDemandOptions.AllocationStrategy = ec2types.FleetOnDemandAllocationStrategyPrioritized
		}
	}
	out, err := p.o.EC2.CreateFleet(ctx, in)
	if err != nil {
		return nil, nil, fmt.Errorf("CreateFleet (%s, %d overrides): %w", ct, len(cands), err)
	}
	zoneOf := map[string]string{}
	for _, c := range cands {
		zoneOf[c.subnet] = c.ref.Zone
	}
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 {
			continue
		}
		id := fi.InstanceIds[0]
		inst, err := p.describe(ctx, id)
		if errors.Is(err, cloud.ErrNotFound) {
			// EC2 is eventually consistent: a just-launched instance may not be described yet.
			// The fleet's answer says enough to record it; its state is pending by definition.
			return p.fromFleet(req, ct, id, fi, zoneOf), nil, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("CreateFleet launched %s: %w", id, err)
		}
		return inst, nil, nil
	}
	var unavailable []cloud.UnavailableOffering
	var other []string
	seen := map[cloud.OfferingRef]bool{}
	for _, fe := range out.Errors {
		code := aws.ToString(fe.ErrorCode)
		// Any refusal of a reserved override makes its reservation unavailable (full, expired,
		// gone), as Karpenter marks the reservation of every error of a reserved fleet, except a
		// full spread placement group: the reservation still has room, and a slot freed in the
		// group makes it launchable again (Karpenter skips that error for reservations).
		if (!unavailableCodes[code] && ct != apisv1.CapacityTypeReserved) || (ct == apisv1.CapacityTypeReserved && isSpreadLimit(fe)) {
			other = append(other, code+": "+aws.ToString(fe.ErrorMessage))
			continue
		}
		ref := cloud.OfferingRef{CapacityType: ct}
		if lo := fe.LaunchTemplateAndOverrides; lo != nil && lo.Overrides != nil {
			ref.InstanceType = string(lo.Overrides.InstanceType)
			ref.Zone = aws.ToString(lo.Overrides.AvailabilityZone)
			if ref.Zone == "" {
				ref.Zone = zoneOf[aws.ToString(lo.Overrides.SubnetId)]
			}
		}
		for _, c := range cands {
			if c.ref.InstanceType == ref.InstanceType && c.ref.Zone == ref.Zone {
				ref.PricePerHour, ref.ReservationID, ref.ReservationType = c.ref.PricePerHour, c.ref.ReservationID, c.ref.ReservationType
			}
		}
		if seen[ref] {
			continue
		}
		seen[ref] = true
		unavailable = append(unavailable, cloud.UnavailableOffering{Offering: ref, Code: code})
		if isSpreadLimit(fe) {
			unavailable = append(unavailable, spreadZone(req, ct, ref.Zone, code, seen)...)
		}
	}
	if len(unavailable) == 0 {
		if len(other) == 0 {
			other = append(other, "no instance and no error")
		}
		return nil, nil, fmt.Errorf("CreateFleet (%s) launched nothing: %s", ct, strings.Join(other, "; "))
	}
	return nil, unavailable, nil
}

// fromFleet records an instance from the CreateFleet answer alone.
func (p *Provider) fromFleet(req cloud.LaunchRequest, ct, id string, fi ec2types.CreateFleetInstance, zoneOf map[string]string) *cloud.Instance {
	inst := &cloud.Instance{ID: id, InstanceType: string(fi.InstanceType), CapacityType: ct, State: cloud.StatePending, Tags: map[string]string{}}
	if lo := fi.LaunchTemplateAndOverrides; lo != nil && lo.Overrides != nil {
		inst.Zone = aws.ToString(lo.Overrides.AvailabilityZone)
		if inst.Zone == "" {
			inst.Zone = zoneOf[aws.ToString(lo.Overrides.SubnetId)]
		}
	}
	inst.ProviderID = cloud.AWSProviderID(inst.Zone, id)
	for k, v := range req.Tags {
		inst.Tags[k] = v
	}
	for _, o := range req.Offerings {
		if o.InstanceType == inst.InstanceType && o.Zone == inst.Zone && o.CapacityType == ct {
			inst.PricePerHour = o.PricePerHour
			inst.CapacityReservationID, inst.CapacityReservationType = o.ReservationID, o.ReservationType
		}
	}
	return inst
}
