package catalog

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// AWSRegion is the region of the embedded catalog.
const AWSRegion = "us-east-1"

// AWSZones are the us-east-1 availability zones the embedded catalog offers in.
var AWSZones = []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"}

// awsZonesFor is the embedded catalog's zone rule. The data has no per-zone availability (no
// DescribeInstanceTypeOfferings for us-east-1), so the rule is explicit and deterministic:
//   - every priced type is offered in us-east-1a, b, c, d and f;
//   - us-east-1e (use1-az3, the region's oldest zone) offers only Xen-hypervisor types (the
//     pre-Nitro generations: t2, m4, c4, r4, ...). The one real us-east-1 offering sample we hold,
//     the m5.large spot price history (testdata), lists zones a, b, c, d and f and never e.
//
// Live offerings replace this with the AWS provider.
func awsZonesFor(hypervisor string) []string {
	if hypervisor == "xen" {
		return AWSZones
	}
	return []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"}
}

// The spot-price model. No spot feed is reachable offline, so spot offerings carry an ESTIMATE
// (PriceSourceSpotModel), never a market price:
//
//	spot(type, zone) = onDemand × SpotModelRatio × (1 + v(type, zone))
//
// where v is a deterministic per-(type, zone) variation in ±SpotModelZoneSpread taken from an
// FNV-1a hash of "type/zone", centred so that its mean over the type's zones is exactly 0 (the
// mean spot price of a type is onDemand × SpotModelRatio). Prices are rounded to 6 decimals, the
// precision of DescribeSpotPriceHistory.
//
// Calibration: the only real spot history we hold (testdata/spot_price_history_m5_large_us_east_1.csv,
// m5.large Linux/UNIX, us-east-1a/b/c/d/f, 2021-01-08 → 2021-02-09, 250 prices) has a median of
// 0.0409 USD/h against an on-demand price of 0.096 USD/h: 0.0409 / 0.096 = 0.426. Its per-zone
// medians (0.0381 … 0.0428) lie within about ±6% of their mean (0.0404), hence the spread. One ratio
// serves every category because no spot data for any other type is available; real discounts vary by
// type and over time, so treat every modelled spot price as an estimate.
const (
	SpotModelRatio      = 0.426
	SpotModelZoneSpread = 0.06
)

// SpotPriceEstimate returns the modelled spot price (USD per hour) of a type in one of its zones.
// zones must be the full list of the type's zones (the centring of the variation uses it).
func SpotPriceEstimate(instanceType, zone string, zones []string, onDemandPerHour float64) float64 {
	_, mean := zoneVariations(instanceType, zones)
	return spotEstimate(onDemandPerHour, spotVariation(instanceType, zone), mean)
}

// zoneVariations returns spotVariation of each zone and their mean (summed in the zones' order).
func zoneVariations(instanceType string, zones []string) ([]float64, float64) {
	vs := make([]float64, len(zones))
	var mean float64
	for i, z := range zones {
		vs[i] = spotVariation(instanceType, z)
		mean += vs[i]
	}
	return vs, mean / float64(len(zones))
}

// spotEstimate is SpotPriceEstimate from a zone's variation and the mean over the type's zones.
func spotEstimate(onDemandPerHour, variation, mean float64) float64 {
	return roundPrice(onDemandPerHour * SpotModelRatio * (1 + (variation - mean)))
}

// spotVariation maps "type/zone" to a stable value in [−spread, +spread].
func spotVariation(instanceType, zone string) float64 {
	b := make([]byte, 0, len(instanceType)+1+len(zone))
	b = append(append(append(b, instanceType...), '/'), zone...)
	h := fnv.New64a()
	_, _ = h.Write(b)
	u := float64(h.Sum64()>>11) / float64(1<<53) // uniform in [0, 1)
	return (2*u - 1) * SpotModelZoneSpread
}

func roundPrice(p float64) float64 { return math.Round(p*1e6) / 1e6 }

// awsOfferings builds a priced type's offerings: on-demand at the embedded list price and spot at
// the modelled estimate, in each zone of awsZonesFor; sorted by price, then zone, then capacity type.
func awsOfferings(name, hypervisor string, onDemand float64) []Offering {
	return zoneOfferings(name, awsZonesFor(hypervisor), onDemand)
}

// zoneOfferings are a priced type's offerings in zones: on demand at the list price and spot at
// SpotPriceEstimate (each zone's variation hashed once, not once per zone pair); sorted as
// SortOfferings does.
func zoneOfferings(name string, zones []string, onDemand float64) []Offering {
	out := make([]Offering, 0, 2*len(zones))
	variation, mean := zoneVariations(name, zones)
	for i, z := range zones {
		out = append(out,
			Offering{Zone: z, CapacityType: apisv1.CapacityTypeOnDemand, PricePerHour: onDemand, PriceSource: PriceSourceEmbedded, Available: true},
			Offering{Zone: z, CapacityType: apisv1.CapacityTypeSpot, PricePerHour: spotEstimate(onDemand, variation[i], mean), PriceSource: PriceSourceSpotModel, Available: true},
		)
	}
	SortOfferings(out)
	return out
}

// SortOfferings orders offerings by price (ascending), then zone, then capacity type, the order
// InstanceType.Offerings keeps.
func SortOfferings(o []Offering) {
	slices.SortStableFunc(o, func(a, b Offering) int {
		if c := cmp.Compare(a.PricePerHour, b.PricePerHour); c != 0 {
			return c
		}
		if c := strings.Compare(a.Zone, b.Zone); c != 0 {
			return c
		}
		return strings.Compare(a.CapacityType, b.CapacityType)
	})
}

// IsEstimate reports whether the offering's price is a modelled estimate rather than a list or
// market price; anything that shows the price should say so.
func (o Offering) IsEstimate() bool { return o.PriceSource == PriceSourceSpotModel }
