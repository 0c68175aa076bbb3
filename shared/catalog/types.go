// Package catalog holds instance types and their offerings (zone × capacity type × price), with
// allocatable computed from the published EKS node overhead rules. The AWS us-east-1 catalog is
// embedded for offline use (see data/README.md for provenance and licence).
package catalog

import (
	corev1 "k8s.io/api/core/v1"
)

// PriceSource says where a price came from. Estimates are labelled as such wherever shown.
type PriceSource string

const (
	// PriceSourceEmbedded is the on-demand list price embedded with the catalog.
	PriceSourceEmbedded PriceSource = "embedded-list-price"
	// PriceSourceSpotModel is a modelled spot price: an estimate, not a market price.
	PriceSourceSpotModel PriceSource = "estimate-spot-model"
	// PriceSourceLive is a price read from a cloud API at run time.
	PriceSourceLive PriceSource = "live"
	// PriceSourceReservation is a capacity reservation's: already paid for, so priced at the
	// type's on-demand price / ReservedPriceDivisor (Karpenter's rule) to rank first.
	PriceSourceReservation PriceSource = "capacity-reservation"
	// PriceSourceCommitment is an on-demand price under the cluster's commitments (package
	// commitments): 0 for a Reserved Instance's or Azure reservation's instance, the Savings
	// Plan's discounted rate for one a Savings Plan covers.
	PriceSourceCommitment PriceSource = "commitment"
)

// ReservedPriceDivisor divides an instance type's on-demand price to price its reserved
// offerings: Karpenter models a capacity reservation as free (it is paid whether used or not)
// while keeping the relative order of types for consolidation (karpenter-provider-aws
// pkg/providers/instancetype/offering: odPrice / 10,000,000).
const ReservedPriceDivisor = 10_000_000.0

// Offering is one way to buy an instance type: a zone and a capacity type at a price.
type Offering struct {
	Zone         string      `json:"zone"`
	CapacityType string      `json:"capacityType"`
	PricePerHour float64     `json:"pricePerHour"` // USD per hour
	PriceSource  PriceSource `json:"priceSource"`
	Available    bool        `json:"available"`
	// ReservationID and ReservationType name the capacity reservation of a reserved offering
	// (capacity type "reserved"; type "default" or "capacity-block"); empty otherwise. Reserved
	// offerings are not in the catalog: each NodeClass's resolved reservations make them.
	ReservationID   string `json:"reservationID,omitempty"`
	ReservationType string `json:"reservationType,omitempty"`
	// PriceOverlay names the NodeOverlay whose price or priceAdjustment set PricePerHour (the
	// price the solver ranks and the fleet prioritizes by); empty when the price is the
	// catalog's (package overlay).
	PriceOverlay string `json:"priceOverlay,omitempty"`
}

// OnDemandPrice returns the type's on-demand price (USD per hour, the cheapest zone's) and
// whether it has one.
func (it *InstanceType) OnDemandPrice() (float64, bool) {
	best, ok := 0.0, false
	for _, o := range it.Offerings {
		if o.CapacityType == "on-demand" && (!ok || o.PricePerHour < best) {
			best, ok = o.PricePerHour, true
		}
	}
	return best, ok
}

// InstanceType is one instance type with its capacity, node overhead and offerings.
type InstanceType struct {
	Name string
	// Labels are the well-known node labels the type carries (arch, os, instance-type and the
	// karpenter.k8s.aws/instance-* labels); requirements are matched against them.
	Labels map[string]string
	// Capacity is what the kubelet reports before reservations: cpu, memory (after the VM
	// memory overhead), pods, ephemeral-storage and extended resources (nvidia.com/gpu, ...).
	Capacity corev1.ResourceList
	// Overhead is kube-reserved + system-reserved + the eviction threshold.
	Overhead Overhead
	// Offerings are the zone × capacity type purchase options, sorted by price, then zone, then
	// capacity type (SortOfferings).
	Offerings []Offering
	// Spec is the hardware the capacity and overhead were computed from (vCPU, memory, ENI pod
	// limit, devices); nil for types built by hand, which then derive overrides from Capacity and
	// Overhead alone.
	Spec *Spec
	// Azure is the VM size's hardware for the AKS rules (azurerules.go); nil for EC2 types.
	Azure *AzureSpec
	// OverlayCapacity are the extended resources NodeOverlays add to this type under one
	// NodePool (package overlay): each replaces the same-named resource of Capacity in capacity
	// and allocatable, as Karpenter's ApplyCapacityOverlay assigns them. Never cpu, memory,
	// ephemeral-storage or pods. Nil on the catalog's own types.
	OverlayCapacity corev1.ResourceList

	// Numeric views of Capacity and Allocatable(), computed once by New (see prepare).
	capacityFast, allocatableFast Resources
	fastReady                     bool
}

// Overhead is what the kubelet holds back from capacity.
type Overhead struct {
	KubeReserved      corev1.ResourceList
	SystemReserved    corev1.ResourceList
	EvictionThreshold corev1.ResourceList
}

// Total sums the three reservations.
func (o Overhead) Total() corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range []corev1.ResourceList{o.KubeReserved, o.SystemReserved, o.EvictionThreshold} {
		for k, v := range l {
			q := out[k]
			q.Add(v)
			out[k] = q
		}
	}
	return out
}

// Allocatable is Capacity minus Overhead, as the kubelet computes node.status.allocatable.
func (it *InstanceType) Allocatable() corev1.ResourceList {
	out := corev1.ResourceList{}
	total := it.Overhead.Total()
	for k, v := range it.Capacity {
		q := v.DeepCopy()
		if o, ok := total[k]; ok {
			q.Sub(o)
		}
		if q.Sign() < 0 {
			q.Set(0)
		}
		out[k] = q
	}
	return out
}
