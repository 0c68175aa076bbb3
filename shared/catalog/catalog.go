package catalog

import "sort"

// Catalog is the set of instance types of one region.
type Catalog struct {
	Region string
	// Source says where the catalog came from, for every output that shows prices: "embedded"
	// (offline data: list prices of the data's date, spot estimated) or "live" (the region's APIs).
	Source string
	// Types are sorted by name.
	types  []*InstanceType
	byName map[string]*InstanceType
}

// New builds a catalog from instance types (sorted by name for determinism). It computes each
// type's numeric views (CapacityFast, AllocatableFast) once, so later reads are free and race-free;
// types must not be modified after they are passed in.
func New(region string, types []*InstanceType) *Catalog {
	c := &Catalog{Region: region, types: append([]*InstanceType(nil), types...), byName: make(map[string]*InstanceType, len(types))}
	sort.Slice(c.types, func(i, j int) bool { return c.types[i].Name < c.types[j].Name })
	for _, t := range c.types {
		t.prepare()
		c.byName[t.Name] = t
	}
	return c
}

// Types returns all instance types sorted by name. Callers must not modify them.
func (c *Catalog) Types() []*InstanceType { return c.types }

// Get returns the named instance type or nil.
func (c *Catalog) Get(name string) *InstanceType { return c.byName[name] }

// DearestPrice is the price (USD per hour) of an instance type's offering in zone with
// capacityType; an empty zone or capacity type matches any, and of several matches the dearest
// counts (what a spend guardrail must assume). 0 for a type the catalog does not know.
func (c *Catalog) DearestPrice(instanceType, zone, capacityType string) float64 {
	it := c.Get(instanceType)
	if it == nil {
		return 0
	}
	price := 0.0
	for _, o := range it.Offerings {
		if (zone == "" || o.Zone == zone) && (capacityType == "" || o.CapacityType == capacityType) {
			price = max(price, o.PricePerHour)
		}
	}
	return price
}
