package catalog

import "sort"

// Catalog is the set of instance types of one region.
type Catalog struct {
	Region string
	// Types are sorted by name.
	types  []*InstanceType
	byName map[string]*InstanceType
}

// New builds a catalog from instance types (sorted by name for determinism).
func New(region string, types []*InstanceType) *Catalog {
	c := &Catalog{Region: region, types: append([]*InstanceType(nil), types...), byName: map[string]*InstanceType{}}
	sort.Slice(c.types, func(i, j int) bool { return c.types[i].Name < c.types[j].Name })
	for _, t := range c.types {
		c.byName[t.Name] = t
	}
	return c
}

// Types returns all instance types sorted by name. Callers must not modify them.
func (c *Catalog) Types() []*InstanceType { return c.types }

// Get returns the named instance type or nil.
func (c *Catalog) Get(name string) *InstanceType { return c.byName[name] }
