package v1

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Commitments are the cluster's billing commitments, which make some on-demand capacity cheaper
// than its list price: Savings Plans (a USD-per-hour spend commitment billed at a discount) and
// Reserved Instances or Azure reservations (a count of one instance type, paid whether or not it
// runs). They are read from the ConfigMap CommitmentsConfigMap, key CommitmentsKey, in the
// agent's namespace (docs/cost.md#commitments gives the schema and an example).
type Commitments struct {
	SavingsPlans []SavingsPlan `json:"savingsPlans,omitempty"`
	Reservations []Reservation `json:"reservations,omitempty"`
}

// The ConfigMap that carries Commitments, and its data key.
const (
	CommitmentsConfigMap = "dovetail-commitments"
	CommitmentsKey       = "commitments.yaml"
)

// Savings Plan types (AWS Savings Plans: "Compute" applies to any instance family in any region;
// "EC2Instance" to one instance family in one region).
const (
	SavingsPlanCompute     = "Compute"
	SavingsPlanEC2Instance = "EC2Instance"
)

// SavingsPlan is one Savings Plan: CommitmentPerHour USD per hour of on-demand usage in its
// scope is billed at the discounted rate; usage beyond it at the list price.
type SavingsPlan struct {
	Name string `json:"name"`
	// Type is SavingsPlanCompute or SavingsPlanEC2Instance.
	Type string `json:"type"`
	// InstanceFamily ("m6i") and Region ("us-east-1") scope an EC2Instance plan; a Compute plan
	// has neither.
	InstanceFamily string `json:"instanceFamily,omitempty"`
	Region         string `json:"region,omitempty"`
	// CommitmentPerHour is the committed spend, USD per hour at the discounted rates (> 0).
	CommitmentPerHour float64 `json:"commitmentPerHour"`
	// DiscountRate is the fraction off the list price (0 < rate < 1; 0.30: 30 % off) for every
	// instance type in scope that Rates does not name.
	DiscountRate float64 `json:"discountRate"`
	// Rates are the discount rates of instance types where they are known (the plan's rate
	// card), by instance type name; each 0 < rate < 1.
	Rates map[string]float64 `json:"rates,omitempty"`
}

// Reservation is a Reserved Instance (EC2) or an Azure reservation: Count instances of
// InstanceType, billed whether they run or not, that cover on-demand nodes of that type in Zone
// (a zonal Reserved Instance) or anywhere in Region (a regional Reserved Instance, an Azure
// reservation). Exactly one of Zone and Region is set.
type Reservation struct {
	Name         string `json:"name"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone,omitempty"`
	Region       string `json:"region,omitempty"`
	Count        int    `json:"count"`
}

// Bounds on the input, so memory stays bounded by the ConfigMap's size.
const (
	maxCommitments = 1000
	maxRates       = 2000
)

// ParseCommitments reads the YAML (or JSON) of CommitmentsKey strictly (an unknown field is an
// error) and validates it. Errors name the field: "savingsPlans[0].discountRate: must be in
// (0, 1), got 1.3".
func ParseCommitments(data []byte) (*Commitments, error) {
	var c Commitments
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", CommitmentsKey, err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks every field as the schema in docs/cost.md states it; the error names each bad
// field and why, joined by "; ".
func (c *Commitments) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if n := len(c.SavingsPlans) + len(c.Reservations); n > maxCommitments {
		bad("savingsPlans, reservations: %d commitments, at most %d", n, maxCommitments)
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	names := map[string]string{}
	name := func(field, n string) {
		switch {
		case n == "":
			bad("%s.name: required", field)
		case len(n) > 253 || strings.ContainsAny(n, " \t\n\"'\\"):
			bad("%s.name: %q must be at most 253 characters without spaces or quotes", field, n)
		case names[n] != "":
			bad("%s.name: %q is also %s", field, n, names[n])
		default:
			names[n] = field
		}
	}
	rate := func(field string, r float64) {
		if math.IsNaN(r) || r <= 0 || r >= 1 {
			bad("%s: must be in (0, 1), got %v", field, r)
		}
	}
	for i, sp := range c.SavingsPlans {
		f := fmt.Sprintf("savingsPlans[%d]", i)
		name(f, sp.Name)
		switch sp.Type {
		case SavingsPlanCompute:
			if sp.InstanceFamily != "" || sp.Region != "" {
				bad("%s: a Compute Savings Plan applies to every family and region: instanceFamily and region must be empty", f)
			}
		case SavingsPlanEC2Instance:
			if sp.InstanceFamily == "" || strings.Contains(sp.InstanceFamily, ".") {
				bad("%s.instanceFamily: required for an EC2Instance Savings Plan, a family such as m6i, got %q", f, sp.InstanceFamily)
			}
			if sp.Region == "" {
				bad("%s.region: required for an EC2Instance Savings Plan", f)
			}
		default:
			bad("%s.type: must be %s or %s, got %q", f, SavingsPlanCompute, SavingsPlanEC2Instance, sp.Type)
		}
		if math.IsNaN(sp.CommitmentPerHour) || math.IsInf(sp.CommitmentPerHour, 0) || sp.CommitmentPerHour <= 0 {
			bad("%s.commitmentPerHour: must be a positive USD per hour, got %v", f, sp.CommitmentPerHour)
		}
		rate(f+".discountRate", sp.DiscountRate)
		if len(sp.Rates) > maxRates {
			bad("%s.rates: %d entries, at most %d", f, len(sp.Rates), maxRates)
			continue
		}
		types := make([]string, 0, len(sp.Rates))
		for t := range sp.Rates {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, t := range types {
			if t == "" {
				bad("%s.rates: an empty instance type", f)
				continue
			}
			rate(fmt.Sprintf("%s.rates[%s]", f, t), sp.Rates[t])
			if sp.Type == SavingsPlanEC2Instance && InstanceFamilyOf(t) != sp.InstanceFamily {
				bad("%s.rates[%s]: not in instance family %s", f, t, sp.InstanceFamily)
			}
		}
	}
	for i, r := range c.Reservations {
		f := fmt.Sprintf("reservations[%d]", i)
		name(f, r.Name)
		if r.InstanceType == "" {
			bad("%s.instanceType: required", f)
		}
		if (r.Zone == "") == (r.Region == "") {
			bad("%s: exactly one of zone (a zonal Reserved Instance) and region (a regional one, or an Azure reservation) must be set", f)
		}
		if r.Count <= 0 {
			bad("%s.count: must be a positive number of instances, got %d", f, r.Count)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// InstanceFamilyOf is an instance type's family as EC2 Instance Savings Plans name it: the part
// of an EC2 type name before the dot ("m6i.xlarge" → "m6i"); the whole name when it has none (an
// Azure size, which no EC2Instance plan covers).
func InstanceFamilyOf(instanceType string) string {
	if i := strings.IndexByte(instanceType, '.'); i >= 0 {
		return instanceType[:i]
	}
	return instanceType
}

// Rate is the plan's discount rate for an instance type in its scope (region: the offering's),
// and false when the type is not covered.
func (sp *SavingsPlan) Rate(instanceType, region string) (float64, bool) {
	if sp.Type == SavingsPlanEC2Instance && (InstanceFamilyOf(instanceType) != sp.InstanceFamily || region != sp.Region) {
		return 0, false
	}
	if r, ok := sp.Rates[instanceType]; ok {
		return r, true
	}
	return sp.DiscountRate, true
}

// Covers reports whether the reservation applies to an on-demand node of the type in the zone
// of the region.
func (r *Reservation) Covers(instanceType, zone, region string) bool {
	if instanceType != r.InstanceType {
		return false
	}
	if r.Zone != "" {
		return zone == r.Zone
	}
	return region == r.Region
}

// DeepCopy copies the commitments (the snapshot's objects are deep-copied).
func (c *Commitments) DeepCopy() *Commitments {
	if c == nil {
		return nil
	}
	out := &Commitments{Reservations: append([]Reservation(nil), c.Reservations...)}
	for _, sp := range c.SavingsPlans {
		cp := sp
		if sp.Rates != nil {
			cp.Rates = make(map[string]float64, len(sp.Rates))
			for k, v := range sp.Rates {
				cp.Rates[k] = v
			}
		}
		out.SavingsPlans = append(out.SavingsPlans, cp)
	}
	return out
}

// CommitmentsFromConfigMap reads the commitments of a ConfigMap named CommitmentsConfigMap (data
// key CommitmentsKey; the agent and `dovetail plan` read it alike). Errors name the ConfigMap
// and the field.
func CommitmentsFromConfigMap(cm *corev1.ConfigMap) (*Commitments, error) {
	where := "ConfigMap " + cm.Namespace + "/" + cm.Name + ": data[" + CommitmentsKey + "]"
	data, ok := cm.Data[CommitmentsKey]
	if !ok {
		return nil, fmt.Errorf("%s: required", where)
	}
	c, err := ParseCommitments([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return c, nil
}
