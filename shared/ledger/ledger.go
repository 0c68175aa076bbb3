// Package ledger accumulates the decision audit records (telemetry.Audit) into a cost ledger per
// NodePool: what the capacity cost over time (spend, USD), what a static node group of one
// instance type would have cost for the same pods, what the capacity would have cost without the
// consolidation decisions, and the waste (allocatable no pod requested, priced). It is pure: no
// clock (the records carry their time), no I/O but the writer WriteHTML is given; the same
// records give the same ledger.
//
// Each NodePool's $/h is a step function: it holds the price after a decision until the next
// decision on that pool. Before a pool's first record it holds that record's price before,
// from the ledger's start (the first record of any pool).
package ledger

import (
	"fmt"
	"sort"
	"time"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// State is one NodePool's cost rates from a moment on (all USD per hour, except the shares).
type State struct {
	Time time.Time
	// Price is what the pool's capacity costs (the plan's effective prices).
	Price float64
	// StaticBaseline is a static node group of one instance type for the pool's pods
	// (provisioning.StaticBaseline); 0 while no record has priced it.
	StaticBaseline float64
	// NoConsolidation is Price plus every consolidation saving so far: what the pool would cost
	// had no consolidation run (the removed capacity kept running, the replacements never
	// launched).
	NoConsolidation float64
	// LowerBound is the last plan's lower bound for the pods it placed in the pool (0: none).
	LowerBound float64
	// Waste is the priced share of allocatable no pod requests: Price × (1 − the larger of the
	// CPU and memory shares requested). The larger share is the one that fills a node first
	// (the dominant resource), so only what is left of it is idle.
	Waste float64
	// CPUShare and MemoryShare are the requested shares of allocatable CPU and memory (0–1).
	CPUShare, MemoryShare float64
}

// Decision is a record on the ledger's timeline.
type Decision struct {
	Time     time.Time
	Action   string
	Function string
	ID       string
	Rule     string
	NodePool string
	// Delta is the pool's $/h after minus before (negative: a saving).
	Delta float64
}

// Ledger accumulates records. The zero value is empty and ready.
type Ledger struct {
	pools     map[string][]State
	decisions []Decision
	start     time.Time
	last      time.Time
	// commitments is the latest record's commitment utilisation (records without any leave it).
	commitments   []telemetry.CommitmentUse
	commitmentsAt time.Time
	// saved is the commitments' saving, a step function: each record with commitments sets the
	// cluster's $/h saved below list (the sum of their SavedPerHour) from its time on.
	saved []savedAt
}

// savedAt is the commitments' saving from a moment on, USD per hour.
type savedAt struct {
	Time    time.Time
	PerHour float64
}

// Add enters one record. Records without NodePools (drains, functions that do not price their
// decisions) are on the timeline only. Errors: a record without a time (written before records
// carried one), a record older than the one before it (the stream is ordered by decision), a
// NodePool entry without a name or with a negative price.
func (l *Ledger) Add(a telemetry.Audit) error {
	if a.Time.IsZero() {
		return fmt.Errorf("decision %s (%s %s): no time: the record predates the cost ledger", a.Decision, a.Function, a.Action)
	}
	if a.Time.Before(l.last) {
		return fmt.Errorf("decision %s (%s %s): time %s is before the previous record's %s: records must be in decision order",
			a.Decision, a.Function, a.Action, a.Time.UTC().Format(time.RFC3339), l.last.UTC().Format(time.RFC3339))
	}
	for i, pc := range a.NodePools {
		switch {
		case pc.NodePool == "":
			return fmt.Errorf("decision %s: nodePools[%d].nodePool: empty", a.Decision, i)
		case pc.PriceBefore < 0 || pc.PriceAfter < 0:
			return fmt.Errorf("decision %s: nodePools[%d] (%s): negative price %.4f -> %.4f", a.Decision, i, pc.NodePool, pc.PriceBefore, pc.PriceAfter)
		}
	}
	if l.pools == nil {
		l.pools = map[string][]State{}
		l.start = a.Time
	}
	l.last = a.Time
	if len(a.Commitments) > 0 {
		l.commitments, l.commitmentsAt = a.Commitments, a.Time
		sum := 0.0
		for _, u := range a.Commitments {
			sum += u.SavedPerHour
		}
		l.saved = append(l.saved, savedAt{Time: a.Time, PerHour: sum})
	}
	if len(a.NodePools) == 0 {
		l.decisions = append(l.decisions, Decision{Time: a.Time, Action: a.Action, Function: a.Function, ID: a.Decision, Rule: a.Rule})
	}
	for _, pc := range a.NodePools {
		l.decisions = append(l.decisions, Decision{Time: a.Time, Action: a.Action, Function: a.Function, ID: a.Decision, Rule: a.Rule,
			NodePool: pc.NodePool, Delta: pc.PriceAfter - pc.PriceBefore})
		states := l.pools[pc.NodePool]
		if len(states) == 0 {
			// The pool's first record: its price before held from the ledger's start.
			states = []State{{Time: l.start, Price: pc.PriceBefore, NoConsolidation: pc.PriceBefore}}
		}
		l.pools[pc.NodePool] = append(states, next(states[len(states)-1], a.Time, pc))
	}
	return nil
}

// next is the pool's state after pc, given the state before it.
func next(prev State, at time.Time, pc telemetry.PoolCost) State {
	s := State{Time: at, Price: pc.PriceAfter, StaticBaseline: prev.StaticBaseline, LowerBound: prev.LowerBound,
		NoConsolidation: prev.NoConsolidation + (pc.PriceAfter - pc.PriceBefore)}
	if pc.Consolidation {
		s.NoConsolidation = prev.NoConsolidation // the saving is what no consolidation keeps paying
	}
	if pc.StaticBaseline > 0 {
		s.StaticBaseline = pc.StaticBaseline
	}
	if pc.LowerBound > 0 {
		s.LowerBound = pc.LowerBound
	}
	s.CPUShare = share(pc.RequestedMilliCPU, pc.AllocatableMilliCPU)
	s.MemoryShare = share(pc.RequestedMiB, pc.AllocatableMiB)
	s.Waste = s.Price * (1 - max(s.CPUShare, s.MemoryShare))
	return s
}

func share(requested, allocatable int64) float64 {
	if allocatable <= 0 {
		return 0
	}
	return min(float64(requested)/float64(allocatable), 1)
}

// Totals are amounts over a period, in USD (rates integrated over hours).
type Totals struct {
	// Spend is what the capacity cost.
	Spend float64
	// StaticBaseline is what the static node group would have cost, over BaselineHours: the
	// hours in which a record had priced it. SavingVsStatic is StaticBaseline minus the spend
	// over those same hours.
	StaticBaseline, SavingVsStatic float64
	BaselineHours                  float64
	// NoConsolidation is what the capacity would have cost without consolidation;
	// SavingVsNoConsolidation is NoConsolidation − Spend.
	NoConsolidation, SavingVsNoConsolidation float64
	// Waste is the priced idle allocatable.
	Waste float64
	// Hours is the period's length.
	Hours float64
}

func (t *Totals) add(s State, hours float64) {
	t.Hours += hours
	t.Spend += s.Price * hours
	t.NoConsolidation += s.NoConsolidation * hours
	t.SavingVsNoConsolidation += (s.NoConsolidation - s.Price) * hours
	t.Waste += s.Waste * hours
	if s.StaticBaseline > 0 {
		t.BaselineHours += hours
		t.StaticBaseline += s.StaticBaseline * hours
		t.SavingVsStatic += (s.StaticBaseline - s.Price) * hours
	}
}

func (t *Totals) plus(o Totals) {
	t.Spend += o.Spend
	t.StaticBaseline += o.StaticBaseline
	t.SavingVsStatic += o.SavingVsStatic
	t.NoConsolidation += o.NoConsolidation
	t.SavingVsNoConsolidation += o.SavingVsNoConsolidation
	t.Waste += o.Waste
	t.BaselineHours = max(t.BaselineHours, o.BaselineHours)
	t.Hours = max(t.Hours, o.Hours)
}

// Period is a bucket of the report: an hour or a day (UTC), with its totals.
type Period struct {
	Start time.Time
	Totals
}

// PoolReport is one NodePool's part of a report.
type PoolReport struct {
	NodePool string
	Totals
	// States are the pool's rates from each change on, oldest first; the first is its price
	// before its first record, from the report's start.
	States []State
	Hours  []Period
	Days   []Period
}

// Report is the ledger from its first record to Until.
type Report struct {
	From, Until time.Time
	Total       Totals
	Pools       []PoolReport // by name
	Hours, Days []Period     // all pools
	// Series is the cluster's rates (every pool summed) at each change, oldest first.
	Series    []State
	Decisions []Decision
	// Commitments is the Savings Plans' and reservations' utilisation as the latest decision that
	// counted them saw it (at CommitmentsAt); empty when no record carried any.
	Commitments   []telemetry.CommitmentUse
	CommitmentsAt time.Time
	// CommitmentSavings is what the commitments took off the list-priced spend (USD): each
	// record's saving (the sum of its commitments' SavedPerHour) held until the next record
	// that counted commitments, integrated up to Until. EffectiveSpend is Total.Spend less it
	// (at least 0): the spend at the effective rates. Both 0 when no record carried a saving.
	CommitmentSavings, EffectiveSpend float64
}

// Report integrates the ledger up to until (the last record's time when zero or earlier).
func (l *Ledger) Report(until time.Time) Report {
	if until.Before(l.last) {
		until = l.last
	}
	r := Report{From: l.start, Until: until, Decisions: l.decisions, Commitments: l.commitments, CommitmentsAt: l.commitmentsAt}
	names := make([]string, 0, len(l.pools))
	for name := range l.pools {
		names = append(names, name)
	}
	sort.Strings(names)
	hours, days := map[time.Time]*Period{}, map[time.Time]*Period{}
	for _, name := range names {
		states := l.pools[name]
		pr := PoolReport{NodePool: name, States: states}
		ph, pd := map[time.Time]*Period{}, map[time.Time]*Period{}
		for i, s := range pr.States {
			end := until
			if i+1 < len(pr.States) {
				end = pr.States[i+1].Time
			}
			integrate(s, s.Time, end, &pr.Totals, ph, pd)
		}
		pr.Hours, pr.Days = sorted(ph), sorted(pd)
		merge(hours, pr.Hours)
		merge(days, pr.Days)
		r.Total.plus(pr.Totals)
		r.Pools = append(r.Pools, pr)
	}
	r.Hours, r.Days = sorted(hours), sorted(days)
	r.Series = series(r.Pools)
	for i, sv := range l.saved {
		end := until
		if i+1 < len(l.saved) {
			end = l.saved[i+1].Time
		}
		r.CommitmentSavings += sv.PerHour * end.Sub(sv.Time).Hours()
	}
	if r.CommitmentSavings > 0 {
		r.EffectiveSpend = max(r.Total.Spend-r.CommitmentSavings, 0)
	}
	return r
}

// integrate adds s's rates over [from, to) to t and to the hour and day buckets it spans.
func integrate(s State, from, to time.Time, t *Totals, hours, days map[time.Time]*Period) {
	for from.Before(to) {
		h := from.UTC().Truncate(time.Hour)
		end := h.Add(time.Hour)
		if to.Before(end) {
			end = to
		}
		dt := end.Sub(from).Hours()
		t.add(s, dt)
		bucket(hours, h).add(s, dt)
		d := time.Date(h.Year(), h.Month(), h.Day(), 0, 0, 0, 0, time.UTC)
		bucket(days, d).add(s, dt)
		from = end
	}
}

func bucket(m map[time.Time]*Period, at time.Time) *Totals {
	if m[at] == nil {
		m[at] = &Period{Start: at}
	}
	return &m[at].Totals
}

func merge(into map[time.Time]*Period, ps []Period) {
	for _, p := range ps {
		bucket(into, p.Start).plus(p.Totals)
	}
}

func sorted(m map[time.Time]*Period) []Period {
	out := make([]Period, 0, len(m))
	for _, p := range m {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// series sums the pools' rates at every time any of them changes.
func series(pools []PoolReport) []State {
	var times []time.Time
	for _, p := range pools {
		for _, s := range p.States {
			times = append(times, s.Time)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var out []State
	for i, at := range times {
		if i > 0 && at.Equal(times[i-1]) {
			continue
		}
		sum := State{Time: at}
		var reqCPU, reqMem float64 // price-weighted shares
		for _, p := range pools {
			s := at2(p.States, at)
			sum.Price += s.Price
			sum.StaticBaseline += s.StaticBaseline
			sum.NoConsolidation += s.NoConsolidation
			sum.LowerBound += s.LowerBound
			sum.Waste += s.Waste
			reqCPU += s.CPUShare * s.Price
			reqMem += s.MemoryShare * s.Price
		}
		if sum.Price > 0 {
			sum.CPUShare, sum.MemoryShare = reqCPU/sum.Price, reqMem/sum.Price
		}
		out = append(out, sum)
	}
	return out
}

// at2 is the state in force at t: the last one at or before it.
func at2(states []State, t time.Time) State {
	i := sort.Search(len(states), func(i int) bool { return states[i].Time.After(t) })
	if i == 0 {
		return State{Time: t}
	}
	return states[i-1]
}
