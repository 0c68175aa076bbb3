package provisioning

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// offeringKeys are decided per offering, not per instance type.
var offeringKeys = map[string]bool{
	corev1.LabelTopologyZone:   true,
	apisv1.LabelCapacityType:   true,
	corev1.LabelTopologyRegion: true,
}

// poolType is one instance type a NodePool may launch, with what the pool's DaemonSets take on it.
type poolType struct {
	it        *catalog.InstanceType
	alloc     scheduling.Resources // allocatable
	capacity  scheduling.Resources
	daemon    scheduling.Resources // DaemonSet overhead on this type under this pool
	avail     scheduling.Resources // alloc − daemon
	offerings []catalog.Offering   // available offerings allowed by the pool, cheapest first
	minPrice  float64
	special   bool // GPU, accelerator or bare metal: used only when needed or nothing else fits
	// daemonPorts are the host ports of the DaemonSets that run on this type under the pool.
	daemonPorts []scheduling.HostPort
	// offers has a bit per (zone, capacity type) of the pool's universe (pool.offerKeys) this
	// type has an offering in; offerBit is each offering's bit (64 when it has none).
	offers   uint64
	offerBit []uint8
	// res is the capacity reservation of a reserved pool's type (its one offering), else "".
	res string
}

// pool is a NodePool compiled for the solver.
type pool struct {
	index  int // position in the solver's pools (weight order)
	np     *apisv1.NodePool
	reqs   scheduling.Requirements // template requirements ∩ template labels
	labels map[string]string
	taints []corev1.Taint
	types  []*poolType // sorted by minPrice, then name
	// limits are the NodePool's limits (nil: none), shared with its reserved pool.
	limits    *limits
	minValues []*scheduling.Requirement
	err       error // why the pool cannot be used at all
	// awaiting names the NodeClass ("EC2NodeClass default") whose status is not written yet when
	// that is err's whole reason: the pool may take pods once the class resolves.
	awaiting string
	// priceCapped: the pool has a price guardrail (ResourcePricePerHour among its limits' keys).
	priceCapped bool
	// scaleUp: the pool's rate policies limit its new nodes and/or their price (scaleup.go).
	scaleUp scaleUp
	// offerKeys are the (zone, capacity type) pairs the pool's types are offered in, in bit
	// order of poolType.offers; more than 64 disable the bit test.
	offerKeys [][2]string
	// reserved marks the NodePool's capacity reservations (see compileReserved): each type is
	// one reservation's instance type with that one reserved offering, and a claim of the pool
	// holds one instance of the reservation its cheapest type belongs to.
	reserved bool
	// committed marks a reserved pool of Reserved Instances / Azure reservations
	// (compileCommitted): its types' offerings are on-demand, priced at 0.
	committed bool
	// What compilePool resolved, for the reserved pool built from it.
	nodeClass apisv1.NodeClass
	// aliases are the labels whose value follows the offering's capacity type on this pool's
	// cloud (capacityAliases); nil: none.
	aliases     map[string]map[string]string
	settings    catalog.NodeSettings
	limitsNodes bool
	// noTypes: err says only that no spot or on-demand offering is left (a pool allowing
	// reserved capacity alone); its reserved pool may still launch.
	noTypes bool
	// allTypes lists every type index in order: the candidates of a new claim (read only);
	// allMax is the most room any of them has (claim.maxAvail).
	allTypes []int
	allMax   scheduling.Resources
	// zoneLabels are the labels the pool's nodes take from their zone (key → zone → value), from
	// its NodeClass's node settings (zonelabels.go).
	zoneLabels map[string]map[string]string
}

// offerMask returns the bits of the (zone, capacity type) pairs the requirements allow, and
// false when the pool has too many pairs for a bit test.
func (p *pool) offerMask(reqs scheduling.Requirements) (uint64, bool) {
	if len(p.offerKeys) > 64 {
		return 0, false
	}
	zr, cr := reqs[corev1.LabelTopologyZone], reqs[apisv1.LabelCapacityType]
	var m uint64
	for i, k := range p.offerKeys {
		if (zr == nil || zr.Has(k[0])) && (cr == nil || cr.Has(k[1])) {
			m |= 1 << i
		}
	}
	return m, true
}

// indexOffers assigns the pool's (zone, capacity type) bits.
func (p *pool) indexOffers() {
	bit := map[[2]string]int{}
	for _, t := range p.types {
		t.offerBit = make([]uint8, len(t.offerings))
		for i, o := range t.offerings {
			k := [2]string{o.Zone, o.CapacityType}
			b, ok := bit[k]
			if !ok {
				b = len(p.offerKeys)
				bit[k] = b
				p.offerKeys = append(p.offerKeys, k)
			}
			t.offerBit[i] = uint8(min(b, 64))
			if b < 64 {
				t.offers |= 1 << b
			}
		}
	}
}

// compilePools compiles the NodePools in weight order, each NodePool's reserved pool (its
// NodeClass's capacity reservations, when it allows capacity type reserved) just ahead of it, so
// a pod takes reserved capacity before the pool's spot and on-demand offerings, as Karpenter
// prices reservations to be chosen first. left counts each reservation's free instances.
func compilePools(in *Input, daemons []daemon, used map[string]scheduling.Resources, left map[string]int) []*pool {
	nps := append([]*apisv1.NodePool(nil), in.NodePools...)
	sort.SliceStable(nps, func(i, j int) bool {
		wi, wj := weight(nps[i]), weight(nps[j])
		if wi != wj {
			return wi > wj
		}
		return nps[i].Name < nps[j].Name
	})
	out := make([]*pool, 0, len(nps))
	for _, np := range nps {
		first := len(out)
		pl := compilePool(in, np, daemons, used[np.Name])
		if np.Spec.Replicas != nil && pl.err == nil {
			// A static NodePool's size is spec.replicas (StaticPlans): pods use its nodes and
			// in-flight NodeClaims like any other, but never open one on it, as Karpenter's
			// provisioner leaves static NodePools out of its scheduler (provisioner.go NewScheduler).
			pl.err = fmt.Errorf("nodepool %q is static (spec.replicas %d): pods do not open NodeClaims on it", np.Name, *np.Spec.Replicas)
		}
		if rp := compileReserved(in, pl, daemons, left); np.Spec.Replicas == nil && rp != nil {
			rp.index = len(out)
			out = append(out, rp)
		}
		if cp := compileCommitted(in, pl, daemons, left); np.Spec.Replicas == nil && cp != nil {
			cp.index = len(out)
			out = append(out, cp)
		}
		pl.index = len(out)
		out = append(out, pl)
		if np.Spec.Replicas == nil { // a static pool's limits bound its scale-up, not pods
			dropUnreachableLimits(out[first:], len(in.Pods))
		}
	}
	return out
}

func weight(np *apisv1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

func compilePool(in *Input, np *apisv1.NodePool, daemons []daemon, used scheduling.Resources) *pool {
	p := &pool{np: np, labels: map[string]string{}, taints: np.Spec.Template.Spec.Taints}
	if np.DeletionTimestamp != nil {
		p.err = fmt.Errorf("nodepool %q is being deleted", np.Name)
		return p
	}
	if bad := apisv1.UnsupportedNodePoolFields(np); len(bad) > 0 {
		p.err = fmt.Errorf("nodepool %q: %s", np.Name, strings.Join(bad, "; "))
		return p
	}
	nsrs := make([]corev1.NodeSelectorRequirement, 0, len(np.Spec.Template.Spec.Requirements))
	for _, r := range np.Spec.Template.Spec.Requirements {
		nsrs = append(nsrs, r.NodeSelectorRequirement)
	}
	reqs, err := scheduling.NewRequirements(nsrs...)
	if err != nil {
		p.err = fmt.Errorf("nodepool %q: spec.template.spec.requirements: %w", np.Name, err)
		return p
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues != nil {
			rq := reqs[scheduling.NormalizeLabelKey(r.Key)]
			mv := *r.MinValues
			rq.MinValues = &mv
			p.minValues = append(p.minValues, rq)
		}
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		p.labels[k] = v
	}
	p.labels[apisv1.LabelNodePool] = np.Name
	reqs = reqs.Intersect(scheduling.FromLabels(p.labels))
	if bad := reqs.Unsatisfiable(); bad != nil {
		p.err = fmt.Errorf("nodepool %q: requirement %s can never be met", np.Name, bad)
		return p
	}
	// A requirement on a capacity-type alias (AKS's scalesetpriority) narrows the capacity type
	// before Karpenter's on-demand default applies: a pool requiring scalesetpriority=spot is spot.
	p.aliases = capacityAliases(apisv1.FindNodeClass(in.NodeClasses, np.Spec.Template.Spec.NodeClassRef))
	reqs = withCapacityAliases(reqs, p.aliases)
	if bad := reqs.Unsatisfiable(); bad != nil {
		p.err = fmt.Errorf("nodepool %q: requirement %s can never be met", np.Name, bad)
		return p
	}
	reqs = withDefaultCapacityType(reqs)
	p.reqs = reqs
	// Single-valued requirements become node labels, as Karpenter labels its nodes.
	for _, k := range reqs.Keys() {
		if v, ok := reqs[k].Single(); ok && !offeringKeys[k] {
			p.labels[k] = v
		}
	}
	// The node settings (AMI family, kubelet block, ephemeral volume) are parsed as the cloud
	// provider parses them when the node boots, so planned allocatable equals what the node reports.
	nodeClass := apisv1.FindNodeClass(in.NodeClasses, np.Spec.Template.Spec.NodeClassRef)
	// A NodeClass the lifecycle function found not Ready (a selector matching nothing, no
	// instance profile) launches nothing, as Karpenter skips a NodePool whose class is not Ready.
	if why := nodeClass.NotReady(); why != "" {
		p.err = fmt.Errorf("nodepool %q: %s", np.Name, why)
		return p
	}
	if in.RequireResolvedNodeClasses && !nodeClass.IsZero() && meta.FindStatusCondition(nodeClass.Conditions(), apisv1.ConditionReady) == nil {
		p.err = fmt.Errorf("nodepool %q: %s %s has no status yet (its subnets, images and instance profile are being resolved)", np.Name, nodeClass.Kind(), nodeClass.Name())
		p.awaiting = nodeClass.Kind() + " " + nodeClass.Name()
		return p
	}
	if nodeClass.EC2 != nil {
		if bad := apisv1.UnsupportedEC2NodeClassFields(nodeClass.EC2); len(bad) > 0 {
			p.err = fmt.Errorf("nodepool %q: EC2NodeClass %s: %s", np.Name, nodeClass.Name(), strings.Join(bad, "; "))
			return p
		}
	}
	settings, err := in.nodeSettings(nodeClass)
	if err != nil {
		p.err = fmt.Errorf("nodepool %q: %s %q: %w", np.Name, strings.ToLower(nodeClass.Kind()), nodeClass.Name(), err)
		return p
	}
	_, limitsNodes := np.Spec.Limits[ResourceNodes]
	p.nodeClass, p.settings, p.limitsNodes = nodeClass, settings, limitsNodes
	maxPrice, priceCapped, err := apisv1.MaxPricePerHour(np)
	if err != nil {
		p.err = fmt.Errorf("nodepool %q: %w", np.Name, err)
		return p
	}
	p.limits, p.priceCapped = newLimits(np.Spec.Limits, used, maxPrice, priceCapped), priceCapped
	if p.limits, p.scaleUp, err = withScaleUpRules(in, np, p.limits); err != nil {
		p.err = fmt.Errorf("nodepool %q: %w", np.Name, err)
		return p
	}
	// A NodePool requirement on a zone label (topology.k8s.aws/zone-id) is the zones it allows.
	p.indexZoneLabels(settings.ZoneLabels)
	reqs = p.withZones(reqs)
	p.reqs = reqs
	zoneReq, ctReq := reqs[corev1.LabelTopologyZone], reqs[apisv1.LabelCapacityType]
	regionReq := reqs[corev1.LabelTopologyRegion]
	if regionReq != nil && in.Catalog.Region != "" && !regionReq.Has(in.Catalog.Region) {
		p.err = fmt.Errorf("nodepool %q: requirement %s excludes region %s", np.Name, regionReq, in.Catalog.Region)
		return p
	}
	boots, err := bootable(settings)
	if err != nil {
		p.err = fmt.Errorf("nodepool %q: %s %q: %w", np.Name, strings.ToLower(nodeClass.Kind()), nodeClass.Name(), err)
		return p
	}
	for _, it := range in.Catalog.Types() {
		// The type as the NodeClass's family offers it (a Windows family: kubernetes.io/os
		// windows and the family's build; no arm64 type).
		if it = it.ForAMIFamily(settings.AMIFamily); it == nil {
			continue
		}
		if !typeMatches(reqs, it) || !boots(it) {
			continue
		}
		// The NodeOverlays' view of the type under this pool: overlaid prices rank its offerings
		// (and so the claim's order, the lower bound and the fleet's priorities), added capacity
		// lets pods requesting it fit.
		it = in.Overlays.Apply(np.Name, it)
		pt := &poolType{it: it}
		for _, o := range it.Offerings {
			if !o.Available || (zoneReq != nil && !zoneReq.Has(o.Zone)) || (ctReq != nil && !ctReq.Has(o.CapacityType)) {
				continue
			}
			if in.Unavailable != nil && in.Unavailable(it.Name, o.Zone, o.CapacityType, settings.CapacityScope) {
				continue
			}
			pt.offerings = append(pt.offerings, o)
		}
		if len(pt.offerings) == 0 {
			continue
		}
		if in.ledger != nil {
			discountOfferings(in, it.Name, pt.offerings)
		}
		sortOfferings(pt.offerings)
		p.addType(pt, daemons)
	}
	p.sortTypes()
	if len(p.types) == 0 {
		p.err = fmt.Errorf("nodepool %q: no instance type with an available offering satisfies its requirements (%s)", np.Name, reqs)
		p.noTypes = true
	}
	p.indexOffers()
	return p
}

// addType completes a type with its offerings set: price, resources with the pool's node
// settings, DaemonSet overhead and host ports under the pool's labels and taints.
func (p *pool) addType(pt *poolType, daemons []daemon) {
	it := pt.it
	pt.minPrice = pt.offerings[0].PricePerHour
	capacity, alloc := it.ResourcesWith(p.settings)
	pt.capacity = scheduling.FromList(capacity.List())
	if p.limitsNodes {
		pt.capacity = pt.capacity.Add(oneNode)
	}
	// The fleet may pick any of the claim's offerings: a price limit counts the dearest.
	dearest := 0.0
	for _, o := range pt.offerings {
		dearest = max(dearest, o.PricePerHour)
	}
	if p.priceCapped {
		pt.capacity = pt.capacity.Add(scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourcePricePerHour: microUSD(dearest)}})
	}
	if p.scaleUp.nodes {
		pt.capacity = pt.capacity.Add(oneScaleUpNode)
	}
	if p.scaleUp.price {
		pt.capacity = pt.capacity.Add(scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourceScaleUpPricePerHour: microUSD(dearest)}})
	}
	pt.alloc = scheduling.FromList(alloc.List())
	if len(it.OverlayCapacity) > 0 {
		pt.capacity, pt.alloc = withOverlayCapacity(pt.capacity, it.OverlayCapacity), withOverlayCapacity(pt.alloc, it.OverlayCapacity)
	}
	// One map per type: the type's labels, the pool's, then the lifecycle labels.
	labels := mergeLabels(it.Labels, p.labels, lifecycleLabels)
	for i := range daemons {
		if daemons[i].runsOn(labels, p.taints, p.reqs) {
			pt.daemon = pt.daemon.Add(daemons[i].requests)
			pt.daemonPorts = append(pt.daemonPorts, daemons[i].ports...)
		}
	}
	if _, ok := pt.alloc.Scalar[ResourceAttachableVolumes]; !ok {
		pt.alloc = pt.alloc.Add(scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourceAttachableVolumes: attachLimit(it.Labels)}})
	}
	pt.avail = pt.alloc.Sub(pt.daemon)
	pt.special = isSpecial(it)
	p.types = append(p.types, pt)
}

// withOverlayCapacity sets each NodeOverlay resource in r to the overlay's quantity (replacing a
// same-named one, as Karpenter's ApplyCapacityOverlay assigns capacity; the kubelet reserves
// nothing of an extended resource, so allocatable takes the same value). r is not modified.
func withOverlayCapacity(r scheduling.Resources, add corev1.ResourceList) scheduling.Resources {
	extra := scheduling.FromList(add)
	out := r
	out.Scalar = make(map[corev1.ResourceName]int64, len(r.Scalar)+len(extra.Scalar))
	for k, v := range r.Scalar {
		out.Scalar[k] = v
	}
	for k, v := range extra.Scalar {
		out.Scalar[k] = v
	}
	return out
}

// sortTypes orders the pool's types by their cheapest offering, then name, then reservation.
func (p *pool) sortTypes() {
	sort.SliceStable(p.types, func(i, j int) bool {
		a, b := p.types[i], p.types[j]
		if a.minPrice != b.minPrice {
			return a.minPrice < b.minPrice
		}
		if a.it.Name != b.it.Name {
			return a.it.Name < b.it.Name
		}
		return a.res < b.res
	})
}

// ResourcePricePerHour is the solver's own limit key for a NodePool's price guardrail
// (apisv1.AnnotationMaxPricePerHour), counted in micro-USD per hour like a resource: existing
// nodes and in-flight NodeClaims at their offering's price, each new NodeClaim at the dearest
// offering it may launch as. Never part of a node's capacity outside the limit accounting.
const ResourcePricePerHour corev1.ResourceName = "dovetail.dev/price-per-hour"

// microUSD converts USD to whole micro-USD, rounding up (a cap is never exceeded by rounding).
func microUSD(usd float64) int64 { return int64(math.Ceil(usd * 1e6)) }

// ResourceNodes is the NodePool limit on the number of nodes (spec.limits.nodes): each node
// and in-flight NodeClaim counts one.
const ResourceNodes corev1.ResourceName = "nodes"

var oneNode = scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourceNodes: 1}}

// mergeLabels returns one new map with every map's labels, a later map's value winning.
func mergeLabels(ms ...map[string]string) map[string]string {
	n := 0
	for _, m := range ms {
		n += len(m)
	}
	out := make(map[string]string, n)
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
