package catalog

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// onDemandUSGovWest1CSV holds the us-gov-west-1 on-demand prices (provenance in data/README.md).
//
//go:embed data/on_demand_prices_us_gov_west_1.csv
var onDemandUSGovWest1CSV []byte

// AWSRegionUSGovWest1 is the embedded second region.
const AWSRegionUSGovWest1 = "us-gov-west-1"

// usGovWest1Zones are AWS GovCloud (US-West)'s availability zones (AWS GovCloud (US) User Guide).
var usGovWest1Zones = []string{"us-gov-west-1a", "us-gov-west-1b", "us-gov-west-1c"}

// EmbeddedRegions are the regions with an embedded catalog, for offline use (`dovetail plan`,
// local dev, tests). The functions build theirs from the EC2 and Price List APIs.
var EmbeddedRegions = []string{AWSRegion, AWSRegionUSGovWest1}

// embeddedUSEast1Loads counts builds of the embedded us-east-1 catalog, so a test can prove a
// function started for another region never reads it.
var embeddedUSEast1Loads atomic.Int64

// EmbeddedUSEast1Loads reports how often the embedded us-east-1 catalog was asked for.
func EmbeddedUSEast1Loads() int64 { return embeddedUSEast1Loads.Load() }

// usGovWest1 is the parsed us-gov-west-1 catalog (a lazy, not a package-level sync.OnceValues: see lazy).
var usGovWest1 lazy[*Catalog]

// AWSRegionCatalog returns the embedded catalog of a region: us-east-1 (AWS) or us-gov-west-1 (the same
// instance-type facts, the region's published on-demand prices and zones, spot at the spot-price
// model's estimate). Error: a region with no embedded catalog, naming the ones there are.
func AWSRegionCatalog(region string) (*Catalog, error) {
	switch region {
	case AWSRegion:
		return AWS()
	case AWSRegionUSGovWest1:
		return usGovWest1.get(func() (*Catalog, error) {
			return parseAWSRegion(AWSRegionUSGovWest1, usGovWest1Zones, onDemandUSGovWest1CSV)
		})
	}
	return nil, fmt.Errorf("region %q: no embedded catalog (embedded: %s); the functions build a region's catalog from the EC2 and Price List APIs",
		region, strings.Join(EmbeddedRegions, ", "))
}

// parseAWSRegion builds a region's catalog from the embedded facts and a price CSV (columns
// region, instance_type, price_per_hour, currency, ...). Types without a price there get no
// offerings.
func parseAWSRegion(region string, zones []string, pricesCSV []byte) (*Catalog, error) {
	rows, err := csv.NewReader(bytes.NewReader(pricesCSV)).ReadAll()
	if err != nil || len(rows) < 2 {
		return nil, fmt.Errorf("embedded %s prices: %v (%d rows)", region, err, len(rows))
	}
	prices := map[string]float64{}
	for i, r := range rows[1:] {
		if len(r) < 4 || r[0] != region || r[3] != "USD" {
			return nil, fmt.Errorf("embedded %s prices row %d: %q is not a USD price of the region", region, i+2, r)
		}
		p, err := strconv.ParseFloat(r[2], 64)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("embedded %s prices row %d: price %q", region, i+2, r[2])
		}
		prices[r[1]] = p
	}
	recs, err := embeddedAWSRecords()
	if err != nil {
		return nil, err
	}
	types := make([]*InstanceType, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		it := r.instanceTypeIn(region)
		it.Offerings = nil
		if p, ok := prices[r.Name]; ok {
			it.Offerings = zoneOfferings(r.Name, zones, p)
		}
		types = append(types, it)
	}
	c := New(region, types)
	c.Source = SourceEmbedded
	return c, nil
}
