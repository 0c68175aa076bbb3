package catalog

import (
	"sort"
	"time"
)

// DefaultUnavailableTTL is how long an offering stays marked after an insufficient-capacity error
// or an interruption: 3 minutes, Karpenter's UnavailableOfferingsTTL (pkg/cache/cache.go).
const DefaultUnavailableTTL = 3 * time.Minute

// OfferingKey names one offering: instance type × zone × capacity type.
type OfferingKey struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

// UnavailableMark is one marked offering and the time its mark expires.
type UnavailableMark struct {
	OfferingKey
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
}

// Unavailable is a set of offerings marked unavailable until an expiry time. It holds no clock:
// every method that depends on time takes `now`, so decisions stay deterministic and the set can
// travel in a snapshot (Marks / NewUnavailable) between stateless functions. Not safe for
// concurrent mutation; the zero value is not usable, call NewUnavailable.
type Unavailable struct {
	marks map[OfferingKey]UnavailableMark
}

// NewUnavailable returns a set holding the given marks (for a key given twice the later expiry wins).
func NewUnavailable(marks ...UnavailableMark) *Unavailable {
	u := &Unavailable{marks: make(map[OfferingKey]UnavailableMark, len(marks))}
	for _, m := range marks {
		u.put(m)
	}
	return u
}

func (u *Unavailable) put(m UnavailableMark) {
	if old, ok := u.marks[m.OfferingKey]; ok && !m.Until.After(old.Until) {
		return
	}
	u.marks[m.OfferingKey] = m
}

// Mark marks an offering unavailable from now for ttl (ttl ≤ 0 means DefaultUnavailableTTL). A
// later mark of the same offering extends it; an earlier expiry never shortens it.
func (u *Unavailable) Mark(key OfferingKey, reason string, now time.Time, ttl time.Duration) {
	if ttl <= 0 {
		ttl = DefaultUnavailableTTL
	}
	u.put(UnavailableMark{OfferingKey: key, Until: now.Add(ttl), Reason: reason})
}

// IsUnavailable reports whether the offering is marked and its mark has not expired at now
// (a mark is active while now < Until).
func (u *Unavailable) IsUnavailable(key OfferingKey, now time.Time) bool {
	if u == nil || len(u.marks) == 0 {
		return false
	}
	m, ok := u.marks[key]
	return ok && now.Before(m.Until)
}

// Expire drops marks that have expired at now and returns how many were dropped.
func (u *Unavailable) Expire(now time.Time) int {
	n := 0
	for k, m := range u.marks {
		if !now.Before(m.Until) {
			delete(u.marks, k)
			n++
		}
	}
	return n
}

// Marks returns the marks still active at now, sorted by instance type, zone, capacity type
// (stable for snapshots and tests).
func (u *Unavailable) Marks(now time.Time) []UnavailableMark {
	if u == nil {
		return nil
	}
	out := make([]UnavailableMark, 0, len(u.marks))
	for _, m := range u.marks {
		if now.Before(m.Until) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].OfferingKey, out[j].OfferingKey
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.CapacityType < b.CapacityType
	})
	return out
}

// WithUnavailable returns a catalog whose offerings marked in u (active at now) have Available =
// false. Types without a marked offering are shared with c, not copied, so this is cheap; c itself
// is not modified.
func (c *Catalog) WithUnavailable(u *Unavailable, now time.Time) *Catalog {
	active := u.Marks(now)
	if len(active) == 0 {
		return c
	}
	byType := map[string][]UnavailableMark{}
	for _, m := range active {
		byType[m.InstanceType] = append(byType[m.InstanceType], m)
	}
	types := make([]*InstanceType, len(c.types))
	copy(types, c.types)
	for i, t := range types {
		marks, ok := byType[t.Name]
		if !ok {
			continue
		}
		cp := *t
		cp.Offerings = append([]Offering(nil), t.Offerings...)
		for j := range cp.Offerings {
			o := &cp.Offerings[j]
			for _, m := range marks {
				if m.Zone == o.Zone && m.CapacityType == o.CapacityType {
					o.Available = false
				}
			}
		}
		types[i] = &cp
	}
	return New(c.Region, types)
}
