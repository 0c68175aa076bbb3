package provisioning

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Capacity reservations (Karpenter v1.15's reserved capacity, karpenter-provider-aws
// pkg/providers/instancetype/offering and sigs.k8s.io/karpenter pkg/controllers/provisioning/
// scheduling): a reservation of a NodePool's NodeClass (status.capacityReservations) is an
// offering of capacity type "reserved" of its instance type in its zone, priced at the on-demand
// price / catalog.ReservedPriceDivisor, for NodePools that allow capacity type reserved. The
// solver gives each NodePool a reserved pool ahead of it: a pod takes reserved capacity before
// spot and on-demand, a NodeClaim of the reserved pool holds exactly one instance of one
// reservation (the one of its cheapest type, its only offering at launch), and a reservation's
// free instances are counted down as NodeClaims take them, so none is booked twice in a plan.
// Like Karpenter's strict mode, a pod that would push a reserved NodeClaim off every reservation
// goes to another NodeClaim instead; unlike Karpenter, a pod left over when the reservations are
// all taken falls back to spot or on-demand in the same plan (Karpenter waits for its next
// scheduling round, after its launches have counted the reservation down).

// reservationsLeft returns each reservation's free instances for this plan: the cloud's count
// (Input.ReservationCounts), and when the total is known at most the total less the instances
// this cluster already runs or launches in it (NodeClaims labelled with it, and labelled Nodes
// no NodeClaim names), so NodeClaims in flight are never booked over even if the count predates
// them. A reservation without a count is not offered.
func reservationsLeft(in *Input) map[string]int {
	if len(in.ReservationCounts) == 0 {
		return nil
	}
	ours := map[string]int{}
	claimed := map[string]bool{}
	for _, nc := range in.NodeClaims {
		if id := nc.Labels[apisv1.LabelCapacityReservationID]; id != "" {
			ours[id]++
		}
		if nc.Status.ProviderID != "" {
			claimed[nc.Status.ProviderID] = true
		}
	}
	for _, n := range in.Nodes {
		if id := n.Labels[apisv1.LabelCapacityReservationID]; id != "" && !claimed[n.Spec.ProviderID] {
			ours[id]++
		}
	}
	left := make(map[string]int, len(in.ReservationCounts))
	for id, c := range in.ReservationCounts {
		n := c.Available
		if c.Total > 0 {
			n = min(n, c.Total-ours[id])
		}
		left[id] = max(n, 0)
	}
	return left
}

// compileReserved builds the reserved pool of a compiled NodePool pool: one type per usable
// reservation of its NodeClass, or nil when there is none (the pool does not allow capacity type
// reserved, or no reservation has a free instance, is active at Input.Time, lies in a zone the
// pool allows and is not marked unavailable).
func compileReserved(in *Input, p *pool, daemons []daemon, left map[string]int) *pool {
	if (p.err != nil && !p.noTypes) || p.nodeClass.EC2 == nil || len(p.nodeClass.EC2.Status.CapacityReservations) == 0 {
		return nil
	}
	if ct := p.reqs[apisv1.LabelCapacityType]; ct != nil && !ct.Has(apisv1.CapacityTypeReserved) {
		return nil
	}
	rp := &pool{np: p.np, labels: p.labels, taints: p.taints, limits: p.limits,
		minValues: p.minValues, zoneLabels: p.zoneLabels, reserved: true, nodeClass: p.nodeClass, settings: p.settings, limitsNodes: p.limitsNodes, priceCapped: p.priceCapped,
		scaleUp: p.scaleUp}
	rp.reqs = p.reqs.Intersect(scheduling.Requirements{apisv1.LabelCapacityType: scheduling.MustRequirement(
		apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeReserved)})
	zoneReq := rp.reqs[corev1.LabelTopologyZone]
	rs := append([]apisv1.CapacityReservation(nil), p.nodeClass.EC2.Status.CapacityReservations...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].ID < rs[j].ID })
	for _, r := range rs {
		base := in.Catalog.Get(r.InstanceType).ForAMIFamily(p.settings.AMIFamily)
		switch {
		case base == nil, left[r.ID] <= 0, r.Expiring(in.Time), zoneReq != nil && !zoneReq.Has(r.AvailabilityZone),
			in.Unavailable != nil && in.Unavailable(r.InstanceType, r.AvailabilityZone, apisv1.CapacityTypeReserved, p.settings.CapacityScope):
			continue
		}
		it := in.Overlays.Apply(p.np.Name, reservedType(base, r))
		if !typeMatches(rp.reqs, it) {
			continue
		}
		rp.addType(&poolType{it: it, offerings: it.Offerings, res: r.ID}, daemons)
	}
	if len(rp.types) == 0 {
		return nil
	}
	rp.sortTypes()
	rp.indexOffers()
	return rp
}

// reservedType is the instance type as launched into reservation r: the catalog type with the
// reservation's labels and its one reserved offering.
func reservedType(base *catalog.InstanceType, r apisv1.CapacityReservation) *catalog.InstanceType {
	it := *base
	it.Labels = make(map[string]string, len(base.Labels)+2)
	for k, v := range base.Labels {
		it.Labels[k] = v
	}
	it.Labels[apisv1.LabelCapacityReservationID] = r.ID
	it.Labels[apisv1.LabelCapacityReservationType] = r.Type()
	price, _ := base.OnDemandPrice()
	it.Offerings = []catalog.Offering{{Zone: r.AvailabilityZone, CapacityType: apisv1.CapacityTypeReserved,
		PricePerHour: price / catalog.ReservedPriceDivisor, PriceSource: catalog.PriceSourceReservation, Available: true,
		ReservationID: r.ID, ReservationType: r.Type()}}
	return &it
}

// usable reports whether a claim may take candidate type ti: any type of a pool without
// reservations; a reservation's type when it is the one the claim holds or has a free instance.
func (s *solver) usable(c *claim, ti int) bool {
	r := c.pool.types[ti].res
	return r == "" || r == c.held || s.left[r] > 0
}

// reservedRoom reports whether some candidate type of the reserved claim c is still usable
// (usable) and holds c's pods and p: what tryAdd's type loop needs to keep a type, checked
// first because it is cheap and refuses most tries once the reservations run low.
func (s *solver) reservedRoom(c *claim, p *podInfo) bool {
	for _, ti := range c.types {
		if p.requests.FitsAfter(c.requests, c.pool.types[ti].avail) && s.usable(c, ti) {
			return true
		}
	}
	return false
}

// hold moves a reserved claim's hold to the reservation of its cheapest type, returning the
// instance it held before.
func (s *solver) hold(c *claim) {
	if !c.pool.reserved || len(c.types) == 0 {
		return
	}
	r := c.pool.types[c.types[0]].res
	if r == c.held {
		return
	}
	if c.held != "" {
		s.left[c.held]++
	}
	s.left[r]--
	c.held = r
}

// reservedPlan renders a reserved claim: its one offering is the reservation it holds, and its
// requirements and labels name it, as Karpenter tightens a NodeClaim to the reservations it
// reserved (capacity type reserved, karpenter.k8s.aws/capacity-reservation-id).
func (s *solver) reservedPlan(c *claim) *NodeClaimPlan {
	t := c.pool.types[c.types[0]]
	o := t.offerings[0]
	reqs := c.reqs.Intersect(scheduling.Requirements{
		apisv1.LabelCapacityReservationID:   scheduling.MustRequirement(apisv1.LabelCapacityReservationID, corev1.NodeSelectorOpIn, o.ReservationID),
		apisv1.LabelCapacityReservationType: scheduling.MustRequirement(apisv1.LabelCapacityReservationType, corev1.NodeSelectorOpIn, o.ReservationType),
	})
	saved := c.reqs
	c.reqs = reqs
	plan := s.claimPlan(c, []Offering{{InstanceType: t.it, Offering: o, DaemonOverhead: t.daemon}})
	c.reqs = saved
	plan.Labels[apisv1.LabelCapacityReservationID] = o.ReservationID
	plan.Labels[apisv1.LabelCapacityReservationType] = o.ReservationType
	return plan
}

// ReservationCountsFromAnnotations reads apisv1.AnnotationReservationCounts of the
// EC2NodeClasses (manifests for `dovetail plan` and the scenario suite), keeping only the
// reservations their status lists. Error: a malformed annotation, naming the NodeClass.
func ReservationCountsFromAnnotations(ncs []apisv1.NodeClass) (map[string]apisv1.ReservationCount, error) {
	var out map[string]apisv1.ReservationCount
	for _, nc := range ncs {
		if nc.EC2 == nil || nc.EC2.Annotations[apisv1.AnnotationReservationCounts] == "" {
			continue
		}
		counts, err := apisv1.ParseReservationCounts(nc.EC2.Annotations[apisv1.AnnotationReservationCounts])
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: metadata.annotations[%s]: %w", nc.Name(), apisv1.AnnotationReservationCounts, err)
		}
		for id, c := range counts {
			if _, ok := nc.FindCapacityReservation(id); !ok {
				continue
			}
			if out == nil {
				out = map[string]apisv1.ReservationCount{}
			}
			out[id] = c
		}
	}
	return out, nil
}
