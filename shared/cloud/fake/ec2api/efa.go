package ec2api

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// networkRefusal is why EC2 would not launch the type with the template's network interfaces,
// as an error code and message, or "" when it would:
//   - an instance-level security group list beside network interfaces: InvalidParameterCombination
//     (RunInstances: "Network interfaces and an instance-level security groups may not be
//     specified on the same request"; the groups belong in each interface);
//   - an "efa" or "efa-only" interface on a type without EFA support, or more EFA interfaces than
//     the type's NetworkInfo.EfaInfo.MaximumEfaInterfaces: InvalidParameterCombination (EC2 User
//     Guide, "Elastic Fabric Adapter": EFA is available on the supported instance types only,
//     with at most MaximumEfaInterfaces per instance);
//   - a NetworkCardIndex at or past the type's MaximumNetworkCards, or two interfaces on one card
//     with the same device index: InvalidParameterValue (EC2 User Guide, "Network cards": each
//     card index must exist on the type; device indexes are per card);
//   - no interface with device index 0 on card 0 (the primary interface): InvalidParameterValue.
//
// An interface type other than interface, efa or efa-only is InvalidParameterValue
// (LaunchTemplateInstanceNetworkInterfaceSpecificationRequest InterfaceType). Called with s.mu
// held or on a template that is never changed.
func (s *Server) networkRefusal(t *template, instanceType string) (code, message string) {
	nis := t.data.NetworkInterfaces
	if len(nis) == 0 {
		return "", ""
	}
	if len(t.data.SecurityGroupIds) > 0 || len(t.data.SecurityGroups) > 0 {
		return CodeInvalidParameterCombination, "Network interfaces and an instance-level security groups may not be specified on the same request"
	}
	it := s.cat.Get(instanceType)
	if it == nil || it.Spec == nil {
		return "", "" // an unknown type is refused by the fake cloud with Unsupported
	}
	cards := it.Spec.NetworkCards
	if cards == 0 {
		cards = 1
	}
	efa, primary := int64(0), false
	seen := map[[2]int32]bool{}
	for i, ni := range nis {
		card, dev := aws.ToInt32(ni.NetworkCardIndex), aws.ToInt32(ni.DeviceIndex)
		switch typ := aws.ToString(ni.InterfaceType); typ {
		case "", "interface":
		case string(types.NetworkInterfaceTypeEfa), "efa-only":
			efa++
		default:
			return CodeInvalidParameterValue, fmt.Sprintf("NetworkInterface.%d.InterfaceType %q is not interface, efa or efa-only", i+1, typ)
		}
		if int64(card) >= cards || card < 0 {
			return CodeInvalidParameterValue, fmt.Sprintf("Network card index %d is not valid for instance type %s, which has %d network card(s)", card, instanceType, cards)
		}
		if seen[[2]int32{card, dev}] {
			return CodeInvalidParameterValue, fmt.Sprintf("Two network interfaces have device index %d on network card %d", dev, card)
		}
		seen[[2]int32{card, dev}] = true
		primary = primary || (card == 0 && dev == 0)
	}
	if !primary {
		return CodeInvalidParameterValue, "A network interface with device index 0 on network card 0 (the primary network interface) is required"
	}
	if efa > 0 && it.Spec.EFA == 0 {
		return CodeInvalidParameterCombination, fmt.Sprintf("EFA interfaces are not supported on %s", instanceType)
	}
	if efa > it.Spec.EFA {
		return CodeInvalidParameterCombination, fmt.Sprintf("%d EFA interfaces requested, %s supports at most %d", efa, instanceType, it.Spec.EFA)
	}
	return "", ""
}

// fleetRefusals keeps the offerings EC2 would launch and turns the others into fleet errors, as
// EC2 reports a launch a fleet could not make for one override (CreateFleet errorSet) rather than
// failing the call. refusal names why an offering's template cannot launch it ("" when it can):
// its network interfaces (networkRefusal) or its placement group (placementRefusal).
func (s *Server) fleetRefusals(offerings []cloud.OfferingRef, sources map[cloud.OfferingRef]offeringSource, lifecycle string,
	refusal func(*template, cloud.OfferingRef) (code, message string)) ([]cloud.OfferingRef, []types.CreateFleetError) {
	var keep []cloud.OfferingRef
	var refused []types.CreateFleetError
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range offerings {
		src := sources[ref]
		code, msg := refusal(src.template, ref)
		if code == "" {
			keep = append(keep, ref)
			continue
		}
		spec, ov := src.spec, src.overrides
		refused = append(refused, types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String(msg),
			Lifecycle: types.InstanceLifecycle(lifecycle), LaunchTemplateAndOverrides: &types.LaunchTemplateAndOverridesResponse{
				LaunchTemplateSpecification: &spec, Overrides: &ov}})
	}
	return keep, refused
}
