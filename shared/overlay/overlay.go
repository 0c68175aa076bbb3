// Package overlay resolves NodeOverlays (karpenter.sh/v1alpha1) into one overlaid view of the
// catalog per NodePool, as Karpenter v1.14.0's nodeoverlay controller and instance type store do
// (kubernetes-sigs/karpenter pkg/controllers/nodeoverlay/controller.go and store.go): overlays are
// taken in weight order, each is checked against what the overlays before it already set, a
// conflicting one is left out whole, and each overlay's outcome becomes its status conditions.
// The solver ranks offerings, computes its lower bound and hands the launch its offerings from
// this view, so prices and capacity are overlaid once for all of them.
//
// The package is pure: no I/O, no clock, and every iteration over a map is sorted.
package overlay

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Outcome is what resolution decided for one NodeOverlay, the input of its status: Applied, or
// refused with Karpenter's reason (apisv1.ReasonRuntimeValidation with the validation errors,
// apisv1.ReasonConflict with apisv1.MessageOverlayConflict).
type Outcome struct {
	Name    string
	Applied bool
	Reason  string
	Message string
}

// Store is the resolved overlays: per NodePool, the overlaid copy of every instance type an
// applied overlay selects. A nil *Store applies nothing.
type Store struct {
	pools    map[string]map[string]*entry // NodePool name → instance type name → updates
	outcomes []Outcome                    // by overlay name
}

// compiled is an overlay ready to match.
type compiled struct {
	o      *apisv1.NodeOverlay
	weight int32
	reqs   scheduling.Requirements
	change string // spec.price or spec.priceAdjustment; "" for none
}

// offeringKey names an offering of one instance type.
type offeringKey struct{ zone, capacityType, reservation string }

// entry is what the applied overlays set on one instance type of one NodePool, with the
// weights Karpenter's conflict rule compares (store.go: priceUpdate.lowestWeight,
// capacityUpdate.lowestWeight and lowestWeightCapacityResources).
type entry struct {
	base *catalog.InstanceType
	// price is each catalog offering's winning change (the first applied overlay to select it)
	// and the lowest weight of the overlays that selected it since.
	price map[offeringKey]*priceUpdate
	// pricers are the applied price overlays that selected the type, in resolution order: an
	// offering outside the catalog (a capacity reservation's) takes the first that selects it.
	pricers []*compiled
	// capacity is the merged capacity: a resource keeps the first (highest weight) value.
	capacity        corev1.ResourceList
	capWeight       int32
	capLowestWeight corev1.ResourceList
	overlaid        *catalog.InstanceType
}

type priceUpdate struct {
	by     *compiled
	lowest int32
}

// Resolve applies overlays to the catalog's instance types for each NodePool, in Karpenter's
// order: weight descending (unset is 0), then name descending (OrderByWeight). An overlay that
// fails ValidateNodeOverlayRuntime is skipped (RuntimeValidation). An overlay conflicts, and is
// applied nowhere, when for some NodePool and instance type it selects an offering whose price
// an overlay of the same weight already set (price or priceAdjustment), or names a resource an
// overlay of the same weight already added there (capacity). A higher weight wins silently.
//
// An overlay selects an instance type of a NodePool when its requirements hold for the pool's
// template labels, karpenter.sh/nodepool and the type's labels (topology.kubernetes.io/region is
// the catalog's region) — a label neither has satisfies only NotIn and DoesNotExist — and when
// at least one offering has a zone and capacity type the requirements allow; price changes go to
// those offerings, capacity to the type. Capacity reservations' offerings are priced by the
// applied overlays at Apply time (their conflicts are not evaluated).
func Resolve(overlays []*apisv1.NodeOverlay, pools []*apisv1.NodePool, cat *catalog.Catalog) *Store {
	if len(overlays) == 0 {
		return nil
	}
	s := &Store{pools: map[string]map[string]*entry{}}
	ordered := append([]*apisv1.NodeOverlay(nil), overlays...)
	slices.SortStableFunc(ordered, func(a, b *apisv1.NodeOverlay) int {
		if c := cmp.Compare(b.OverlayWeight(), a.OverlayWeight()); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	nps := append([]*apisv1.NodePool(nil), pools...)
	slices.SortStableFunc(nps, func(a, b *apisv1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	region := ""
	var types []*catalog.InstanceType
	if cat != nil {
		region, types = cat.Region, cat.Types()
	}
	for _, o := range ordered {
		c, err := compile(o)
		if err != nil {
			s.outcomes = append(s.outcomes, Outcome{Name: o.Name, Reason: apisv1.ReasonRuntimeValidation, Message: err.Error()})
			continue
		}
		matches := s.matches(c, nps, types, region)
		if s.conflicts(c, matches) {
			s.outcomes = append(s.outcomes, Outcome{Name: o.Name, Reason: apisv1.ReasonConflict, Message: apisv1.MessageOverlayConflict})
			continue
		}
		s.store(c, matches)
		s.outcomes = append(s.outcomes, Outcome{Name: o.Name, Applied: true})
	}
	slices.SortFunc(s.outcomes, func(a, b Outcome) int { return strings.Compare(a.Name, b.Name) })
	for _, byType := range s.pools {
		for _, e := range byType {
			e.overlaid = e.apply(e.base)
		}
	}
	return s
}

// compile validates the overlay as Karpenter's controller does and parses its requirements.
func compile(o *apisv1.NodeOverlay) (*compiled, error) {
	if errs := apis.ValidateNodeOverlayRuntime(o); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	reqs, err := scheduling.NewRequirements(o.Spec.Requirements...)
	if err != nil {
		return nil, fmt.Errorf("spec.requirements: %w", err)
	}
	c := &compiled{o: o, weight: o.OverlayWeight(), reqs: reqs}
	switch {
	case o.Spec.Price != nil:
		c.change = *o.Spec.Price
	case o.Spec.PriceAdjustment != nil:
		c.change = *o.Spec.PriceAdjustment
	}
	return c, nil
}

// match is one (NodePool, instance type) an overlay selects, with the offerings it selects.
type match struct {
	pool      string
	it        *catalog.InstanceType
	offerings []offeringKey
}

func (s *Store) matches(c *compiled, pools []*apisv1.NodePool, types []*catalog.InstanceType, region string) []match {
	var out []match
	for _, np := range pools {
		for _, it := range types {
			if !c.selectsType(np, it, region) {
				continue
			}
			var offs []offeringKey
			for _, o := range it.Offerings {
				if c.selectsOffering(o) {
					offs = append(offs, keyOf(o))
				}
			}
			if len(offs) > 0 {
				out = append(out, match{pool: np.Name, it: it, offerings: offs})
			}
		}
	}
	return out
}

// offeringLabels are matched per offering, not per instance type.
var offeringLabels = map[string]bool{
	corev1.LabelTopologyZone: true, apisv1.LabelCapacityType: true,
	apisv1.LabelCapacityReservationID: true, apisv1.LabelCapacityReservationType: true,
}

// selectsType holds the type-level requirements against the pool's labels and the type's.
func (c *compiled) selectsType(np *apisv1.NodePool, it *catalog.InstanceType, region string) bool {
	for _, k := range c.reqs.Keys() {
		if offeringLabels[k] {
			continue
		}
		r := c.reqs[k]
		v, ok := np.Spec.Template.ObjectMeta.Labels[k]
		switch {
		case ok:
		case k == apisv1.LabelNodePool:
			v, ok = np.Name, true
		case k == corev1.LabelTopologyRegion && region != "":
			v, ok = region, true
		default:
			v, ok = it.Labels[k]
		}
		if ok && !r.Has(v) || !ok && !r.AbsentOK() {
			return false
		}
	}
	return true
}

// selectsOffering holds the offering-level requirements (zone, capacity type, reservation): a
// label the offering does not carry is a well-known one left undefined, which Karpenter allows
// (AllowUndefinedWellKnownLabels).
func (c *compiled) selectsOffering(o catalog.Offering) bool {
	labels := [][2]string{{corev1.LabelTopologyZone, o.Zone}, {apisv1.LabelCapacityType, o.CapacityType},
		{apisv1.LabelCapacityReservationID, o.ReservationID}, {apisv1.LabelCapacityReservationType, o.ReservationType}}
	for _, l := range labels {
		if r := c.reqs[l[0]]; r != nil && l[1] != "" && !r.Has(l[1]) {
			return false
		}
	}
	return true
}

func keyOf(o catalog.Offering) offeringKey {
	return offeringKey{zone: o.Zone, capacityType: o.CapacityType, reservation: o.ReservationID}
}

// conflicts is Karpenter's rule (controller.go validateInstanceTypesOverride with store.go
// isOfferingUpdateConflicting and isCapacityUpdateConflicting), which relies on overlays coming
// in descending weight: an equal weight on the same offering or resource is a conflict.
func (s *Store) conflicts(c *compiled, matches []match) bool {
	for _, m := range matches {
		e := s.pools[m.pool][m.it.Name]
		if e == nil {
			continue
		}
		if c.change != "" {
			for _, k := range m.offerings {
				if u := e.price[k]; u != nil && u.lowest == c.weight {
					return true
				}
			}
		}
		if len(c.o.Spec.Capacity) > 0 && e.capLowestWeight != nil && e.capWeight == c.weight {
			for name := range c.o.Spec.Capacity {
				if _, ok := e.capLowestWeight[name]; ok {
					return true
				}
			}
		}
	}
	return false
}

// store records an applied overlay (store.go updateInstanceTypeOffering and
// updateInstanceTypeCapacity): an offering keeps the first change but takes the new lowest
// weight; a resource keeps its first value; the overlay's own capacity becomes the lowest weight's.
func (s *Store) store(c *compiled, matches []match) {
	if c.change == "" && len(c.o.Spec.Capacity) == 0 {
		return
	}
	for _, m := range matches {
		byType := s.pools[m.pool]
		if byType == nil {
			byType = map[string]*entry{}
			s.pools[m.pool] = byType
		}
		e := byType[m.it.Name]
		if e == nil {
			e = &entry{base: m.it, price: map[offeringKey]*priceUpdate{}}
			byType[m.it.Name] = e
		}
		if c.change != "" {
			e.pricers = append(e.pricers, c)
			for _, k := range m.offerings {
				if u := e.price[k]; u != nil {
					u.lowest = c.weight
				} else {
					e.price[k] = &priceUpdate{by: c, lowest: c.weight}
				}
			}
		}
		if len(c.o.Spec.Capacity) > 0 {
			if e.capacity == nil {
				e.capacity = corev1.ResourceList{}
			}
			for name, q := range c.o.Spec.Capacity {
				if _, ok := e.capacity[name]; !ok {
					e.capacity[name] = q.DeepCopy()
				}
			}
			e.capLowestWeight, e.capWeight = c.o.Spec.Capacity, c.weight
		}
	}
}

// apply returns it with the entry's updates: each selected offering's price changed (and
// named), offerings re-sorted by price, and the merged capacity as OverlayCapacity.
func (e *entry) apply(it *catalog.InstanceType) *catalog.InstanceType {
	out := *it
	out.Offerings = make([]catalog.Offering, len(it.Offerings))
	for i, o := range it.Offerings {
		var by *compiled
		if u := e.price[keyOf(o)]; u != nil && it == e.base {
			by = u.by
		} else if it != e.base {
			for _, c := range e.pricers {
				if c.selectsOffering(o) && c.selectsLabels(it.Labels) {
					by = c
					break
				}
			}
		}
		if by != nil {
			o.PricePerHour = AdjustedPrice(o.PricePerHour, by.change)
			o.PriceOverlay = by.o.Name
		}
		out.Offerings[i] = o
	}
	catalog.SortOfferings(out.Offerings)
	if len(e.capacity) > 0 {
		out.OverlayCapacity = e.capacity
	}
	return &out
}

// selectsLabels holds the requirements on labels a derived type adds (a reservation's id and
// type), which the catalog type the overlay was matched against does not carry.
func (c *compiled) selectsLabels(labels map[string]string) bool {
	for _, k := range []string{apisv1.LabelCapacityReservationID, apisv1.LabelCapacityReservationType} {
		if r := c.reqs[k]; r != nil {
			v, ok := labels[k]
			if ok && !r.Has(v) || !ok && !r.AbsentOK() {
				return false
			}
		}
	}
	return true
}

// Apply returns the instance type as NodePool nodePool sees it under the applied overlays: the
// catalog's type overlaid, or it unchanged when no overlay selects it. A type derived from a
// catalog type of the same name (a capacity reservation's, with its own offerings) is overlaid
// by the overlays that selected the catalog type, each offering priced by the first that
// selects it. Safe on a nil Store.
func (s *Store) Apply(nodePool string, it *catalog.InstanceType) *catalog.InstanceType {
	if s == nil || it == nil {
		return it
	}
	e := s.pools[nodePool][it.Name]
	if e == nil {
		return it
	}
	if it == e.base {
		return e.overlaid
	}
	return e.apply(it)
}

// Outcomes lists every overlay's outcome, by name.
func (s *Store) Outcomes() []Outcome {
	if s == nil {
		return nil
	}
	return s.outcomes
}

// AdjustedPrice applies a price or priceAdjustment to price (USD per hour), as Karpenter's
// cloudprovider.AdjustedPrice does: an unsigned value replaces the price; "+x"/"-x" adds; "+x%" /
// "-x%" scales by 1 + x/100; the result is floored at 0. "" leaves the price. The change must
// have passed apis.ValidateNodeOverlay; a value that does not parse leaves the price.
func AdjustedPrice(price float64, change string) float64 {
	if change == "" {
		return price
	}
	if !strings.HasPrefix(change, "+") && !strings.HasPrefix(change, "-") {
		v, err := strconv.ParseFloat(change, 64)
		if err != nil {
			return price
		}
		return v
	}
	pct := strings.HasSuffix(change, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(change, "%"), 64)
	if err != nil {
		return price
	}
	out := price + v
	if pct {
		out = price * (1 + v/100)
	}
	return max(out, 0)
}

// ResolveSnapshot resolves the snapshot's NodeOverlays against its NodePools and the catalog
// (Resolve); nil when there are none.
func ResolveSnapshot(s *events.Snapshot, cat *catalog.Catalog) *Store {
	if len(s.NodeOverlays) == 0 {
		return nil
	}
	overlays := make([]*apisv1.NodeOverlay, len(s.NodeOverlays))
	for i := range s.NodeOverlays {
		overlays[i] = &s.NodeOverlays[i]
	}
	pools := make([]*apisv1.NodePool, len(s.NodePools))
	for i := range s.NodePools {
		pools[i] = &s.NodePools[i]
	}
	return Resolve(overlays, pools, cat)
}
