// Package commitments prices on-demand capacity at its effective rate under the cluster's
// billing commitments (apisv1.Commitments): Reserved Instances and Azure reservations first, at
// 0 USD per hour (already paid), then Savings Plans at their discounted rate up to the committed
// USD per hour, the list price beyond. A Ledger is consumed by the nodes the cluster runs first,
// then by a plan's new nodes, so a plan sees only what its cluster leaves of each commitment.
//
// The rules follow AWS's billing of commitments (AWS Savings Plans User Guide, "How Savings Plans
// apply to your AWS usage": Reserved Instances apply before Savings Plans, and a Savings Plan
// applies to the usage with the highest discount first; EC2 User Guide, "How Reserved Instances
// are applied": a zonal Reserved Instance covers its zone, a regional one any zone of its
// region). Azure reservations apply like regional Reserved Instances.
//
// The package is pure: no I/O, no clock; every order is the input's or sorted.
package commitments

import (
	"fmt"
	"io"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/commitments/utilisation"
)

// Usage is one node (running, in flight or planned) as billing sees it.
type Usage struct {
	InstanceType string
	Zone         string
	Region       string
	CapacityType string
	// ListPricePerHour is what the node costs without commitments, USD per hour (the catalog's
	// on-demand price, or a NodeOverlay's).
	ListPricePerHour float64
}

// Ledger is what is left of each commitment as usages consume it. The zero value and a nil
// *Ledger hold no commitment.
type Ledger struct {
	c *apisv1.Commitments
	// riLeft is each reservation's instances left; spLeft each Savings Plan's commitment left,
	// USD per hour at its discounted rates.
	riLeft []int
	spLeft []float64
	// riSaved and spSaved are what each commitment took off the list price of the usage it
	// covered so far, USD per hour.
	riSaved []float64
	spSaved []float64
	// riOrder lists reservations zonal first (AWS applies zonal Reserved Instances before
	// regional ones), then in input order.
	riOrder []int
}

// NewLedger starts a ledger with every commitment whole; nil when c is nil or empty.
func NewLedger(c *apisv1.Commitments) *Ledger {
	if c == nil || len(c.SavingsPlans)+len(c.Reservations) == 0 {
		return nil
	}
	l := &Ledger{c: c, riLeft: make([]int, len(c.Reservations)), spLeft: make([]float64, len(c.SavingsPlans)),
		riSaved: make([]float64, len(c.Reservations)), spSaved: make([]float64, len(c.SavingsPlans))}
	for i, r := range c.Reservations {
		l.riLeft[i] = r.Count
		l.riOrder = append(l.riOrder, i)
	}
	sort.SliceStable(l.riOrder, func(a, b int) bool {
		return c.Reservations[l.riOrder[a]].Zone != "" && c.Reservations[l.riOrder[b]].Zone == ""
	})
	for i, sp := range c.SavingsPlans {
		l.spLeft[i] = sp.CommitmentPerHour
	}
	return l
}

// Clone copies the ledger's state (nil stays nil).
func (l *Ledger) Clone() *Ledger {
	if l == nil {
		return nil
	}
	return &Ledger{c: l.c, riLeft: append([]int(nil), l.riLeft...), spLeft: append([]float64(nil), l.spLeft...), riOrder: l.riOrder,
		riSaved: append([]float64(nil), l.riSaved...), spSaved: append([]float64(nil), l.spSaved...)}
}

// Commitments are the ledger's commitments (nil for a nil ledger).
func (l *Ledger) Commitments() *apisv1.Commitments {
	if l == nil {
		return nil
	}
	return l.c
}

// Consume applies the commitments to a batch of usages and returns each one's effective price,
// USD per hour: Reserved Instances first, each usage in order taking the first reservation
// (zonal before regional) that covers it and has an instance left, at 0; then each Savings Plan
// in order over the usages left, highest discount rate first (ties in input order), covering
// each at its discounted rate while commitment is left (the last one partly: its covered share
// at the discount, the rest at list). Only on-demand usages are covered. With a nil ledger every
// usage costs its list price.
func (l *Ledger) Consume(us []Usage) []float64 {
	out := make([]float64, len(us))
	for i, u := range us {
		out[i] = u.ListPricePerHour
	}
	if l == nil {
		return out
	}
	open := make([]int, 0, len(us))
	for i, u := range us {
		if u.CapacityType != apisv1.CapacityTypeOnDemand {
			continue
		}
		if ri := l.reservationFor(u); ri >= 0 {
			l.riLeft[ri]--
			l.riSaved[ri] += u.ListPricePerHour
			out[i] = 0
			continue
		}
		open = append(open, i)
	}
	// share[i] is the fraction of usage i no Savings Plan has covered yet.
	share := make([]float64, len(us))
	for _, i := range open {
		share[i] = 1
	}
	for p := range l.c.SavingsPlans {
		sp := &l.c.SavingsPlans[p]
		type cand struct {
			i    int
			rate float64
		}
		var cs []cand
		for _, i := range open {
			if r, ok := sp.Rate(us[i].InstanceType, us[i].Region); ok && share[i] > 0 && us[i].ListPricePerHour > 0 {
				cs = append(cs, cand{i, r})
			}
		}
		sort.SliceStable(cs, func(a, b int) bool { return cs[a].rate > cs[b].rate })
		for _, c := range cs {
			if l.spLeft[p] <= 0 {
				break
			}
			u := us[c.i]
			want := share[c.i] * u.ListPricePerHour * (1 - c.rate) // the rest of it, discounted
			take := math.Min(want, l.spLeft[p])
			l.spLeft[p] -= take
			covered := take / (u.ListPricePerHour * (1 - c.rate)) // share of the usage covered
			share[c.i] -= covered
			out[c.i] -= covered * u.ListPricePerHour * c.rate
			l.spSaved[p] += covered * u.ListPricePerHour * c.rate
		}
	}
	return out
}

// Quote is what Consume would charge u alone now, USD per hour, without consuming anything: 0
// under a reservation with an instance left, else list less each Savings Plan's discount (in
// order) on the share its commitment left still covers. A plan that adds NodeClaims one by one
// quotes each offering so (its effective price follows what the NodeClaims before it used),
// then Consumes the one it picks. List price with a nil ledger or for a usage not on-demand.
func (l *Ledger) Quote(u Usage) float64 {
	if l == nil || u.CapacityType != apisv1.CapacityTypeOnDemand {
		return u.ListPricePerHour
	}
	if l.reservationFor(u) >= 0 {
		return 0
	}
	price, share := u.ListPricePerHour, 1.0
	if u.ListPricePerHour <= 0 {
		return price
	}
	for p := range l.c.SavingsPlans {
		r, ok := l.c.SavingsPlans[p].Rate(u.InstanceType, u.Region)
		if !ok || share <= 0 || l.spLeft[p] <= 0 {
			continue
		}
		take := math.Min(share*u.ListPricePerHour*(1-r), l.spLeft[p])
		covered := take / (u.ListPricePerHour * (1 - r))
		share -= covered
		price -= covered * u.ListPricePerHour * r
	}
	return price
}

// reservationFor returns the index of the reservation that covers u with an instance left, or -1.
func (l *Ledger) reservationFor(u Usage) int {
	for _, ri := range l.riOrder {
		if l.riLeft[ri] > 0 && l.c.Reservations[ri].Covers(u.InstanceType, u.Zone, u.Region) {
			return ri
		}
	}
	return -1
}

// ReservationLeft is the instances reservation i (of Commitments().Reservations) has left.
func (l *Ledger) ReservationLeft(i int) int {
	if l == nil {
		return 0
	}
	return l.riLeft[i]
}

// Reserve takes n instances of reservation i (a plan's NodeClaims that hold it).
func (l *Ledger) Reserve(i, n int) { l.riLeft[i] -= n }

// PlanningRate is the discount rate the solver plans an on-demand offering of the type in the
// region at: the highest rate of the Savings Plans covering it that have commitment left; 0
// when none does. It never exceeds the rate Consume later applies to such an offering while
// commitment is left, and once none is left Consume charges list, so a price planned at
// list × (1 − PlanningRate) is at most the effective price.
func (l *Ledger) PlanningRate(instanceType, region string) float64 {
	if l == nil {
		return 0
	}
	best := 0.0
	for p := range l.c.SavingsPlans {
		if l.spLeft[p] <= 0 {
			continue
		}
		if r, ok := l.c.SavingsPlans[p].Rate(instanceType, region); ok && r > best {
			best = r
		}
	}
	return best
}

// HasSavingsPlanLeft reports whether some Savings Plan has commitment left.
func (l *Ledger) HasSavingsPlanLeft() bool {
	if l == nil {
		return false
	}
	for _, v := range l.spLeft {
		if v > 0 {
			return true
		}
	}
	return false
}

// Exhausted reports whether nothing is left of any commitment (no Savings Plan commitment, no
// reserved instance): every usage now costs its list price (true for a nil ledger).
func (l *Ledger) Exhausted() bool {
	if l.HasSavingsPlanLeft() {
		return false
	}
	if l != nil {
		for _, n := range l.riLeft {
			if n > 0 {
				return false
			}
		}
	}
	return true
}

// Use is one commitment's utilisation (the shape the audit record carries too).
type Use = utilisation.Use

// Kinds of Use.
const (
	KindSavingsPlan = "SavingsPlan"
	KindReservation = "Reservation"
)

// Utilisation reports each commitment's use so far: Savings Plans, then reservations, each in
// input order. Nil for a nil ledger.
func (l *Ledger) Utilisation() []Use {
	if l == nil {
		return nil
	}
	var out []Use
	for p, sp := range l.c.SavingsPlans {
		used := sp.CommitmentPerHour - max(l.spLeft[p], 0)
		out = append(out, Use{Name: sp.Name, Kind: KindSavingsPlan, CommittedPerHour: sp.CommitmentPerHour, UsedPerHour: used,
			Utilisation: used / sp.CommitmentPerHour, SavedPerHour: l.spSaved[p]})
	}
	for i, r := range l.c.Reservations {
		used := r.Count - l.riLeft[i]
		out = append(out, Use{Name: r.Name, Kind: KindReservation, Count: r.Count, Used: used, Utilisation: float64(used) / float64(r.Count),
			SavedPerHour: l.riSaved[i]})
	}
	return out
}

// NodeUsage is a node's usage from its labels (instance type, zone, capacity type) and the
// catalog's list price for that offering; region is the catalog's. False when the labels or the
// catalog do not name a priced offering.
func NodeUsage(labels map[string]string, cat *catalog.Catalog) (Usage, bool) {
	u := Usage{InstanceType: labels[corev1.LabelInstanceTypeStable], Zone: labels[corev1.LabelTopologyZone],
		CapacityType: labels[apisv1.LabelCapacityType]}
	if cat == nil || u.InstanceType == "" {
		return u, false
	}
	u.Region = cat.Region
	it := cat.Get(u.InstanceType)
	if it == nil {
		return u, false
	}
	for _, o := range it.Offerings {
		if o.Zone == u.Zone && o.CapacityType == u.CapacityType {
			u.ListPricePerHour = o.PricePerHour
			return u, true
		}
	}
	return u, false
}

// ClusterUtilisation is the utilisation of the commitments by the cluster's nodes (each priced
// from its labels and the catalog, NodeUsage), in the nodes' order: what `dovetail plan` and
// `dovetail cost` show for a running cluster. Nil when c is nil or empty.
func ClusterUtilisation(c *apisv1.Commitments, nodes []*corev1.Node, cat *catalog.Catalog) []Use {
	l := NewLedger(c)
	if l == nil {
		return nil
	}
	var us []Usage
	for _, n := range nodes {
		if u, ok := NodeUsage(n.Labels, cat); ok {
			us = append(us, u)
		}
	}
	l.Consume(us)
	return l.Utilisation()
}

// WriteUtilisation writes one line per commitment, for `dovetail plan` and `dovetail cost`:
// "Savings Plan compute: 1.0000 of 1.0000 USD/h used (100.0 %)" or
// "Reservation ri-m6i: 2 of 2 instances used (100.0 %)". Nothing for no commitments.
func WriteUtilisation(w io.Writer, uses []Use) error {
	for _, u := range uses {
		var err error
		if u.Kind == KindSavingsPlan {
			_, err = fmt.Fprintf(w, "Savings Plan %s: %.4f of %.4f USD/h used (%.1f %%)\n", u.Name, u.UsedPerHour, u.CommittedPerHour, 100*u.Utilisation)
		} else {
			_, err = fmt.Fprintf(w, "Reservation %s: %d of %d instances used (%.1f %%)\n", u.Name, u.Used, u.Count, 100*u.Utilisation)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
