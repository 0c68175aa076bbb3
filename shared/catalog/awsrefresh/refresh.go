// Package awsrefresh builds the AWS catalog online: instance types from DescribeInstanceTypes,
// their zones from DescribeInstanceTypeOfferings (LocationType availability-zone), spot prices from
// DescribeSpotPriceHistory (the latest price per type × zone) and on-demand prices from the AWS
// Price List API (GetProducts). Every price it sets says catalog.PriceSourceLive. When a call
// fails, RefreshOrEmbedded answers with the embedded catalog and the error.
package awsrefresh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// EC2API is the part of the EC2 client the refresh calls (satisfied by *ec2.Client).
type EC2API interface {
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// PricingAPI is the part of the Price List client the refresh calls (satisfied by *pricing.Client,
// which must be built for a Price List region: us-east-1, eu-central-1 or ap-south-1).
type PricingAPI interface {
	GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// Options configure a refresh.
type Options struct {
	// Region whose catalog is built. Required.
	Region string
	EC2    EC2API
	// Pricing may be nil: the types then get spot offerings only where a spot price exists and
	// on-demand offerings at the embedded list price (PriceSourceEmbedded) where it has one.
	Pricing PricingAPI
	// Now is the start time of the spot price query (default time.Now).
	Now func() time.Time
}

// RefreshOrEmbedded refreshes, and on any error returns the region's embedded catalog
// (catalog.AWSRegionCatalog) together with the error that caused the fallback, so the caller can
// log it; a region with no embedded catalog has no fallback. err is nil only when the catalog is
// live.
func RefreshOrEmbedded(ctx context.Context, o Options) (*catalog.Catalog, error) {
	c, err := Refresh(ctx, o)
	if err == nil {
		return c, nil
	}
	embedded, eerr := catalog.AWSRegionCatalog(o.Region)
	if eerr != nil {
		return nil, errors.Join(err, eerr)
	}
	return embedded, fmt.Errorf("using the embedded catalog: %w", err)
}

// Refresh builds the region's catalog from the APIs. A type gets an offering per zone it is
// offered in and per capacity type it has a price for.
func Refresh(ctx context.Context, o Options) (*catalog.Catalog, error) {
	facts, err := refreshFacts(ctx, o)
	if err != nil {
		return nil, err
	}
	return fromCache(o.Region, facts)
}

// refreshFacts calls the APIs and returns each type's facts and offerings.
func refreshFacts(ctx context.Context, o Options) ([]cachedType, error) {
	if o.Region == "" || o.EC2 == nil {
		return nil, errors.New("awsrefresh: Options.Region and Options.EC2 are required")
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	var infos []ec2types.InstanceTypeInfo
	pt := ec2.NewDescribeInstanceTypesPaginator(o.EC2, &ec2.DescribeInstanceTypesInput{})
	for pt.HasMorePages() {
		page, err := pt.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstanceTypes: %w", err)
		}
		infos = append(infos, page.InstanceTypes...)
	}
	var offerings []ec2types.InstanceTypeOffering
	po := ec2.NewDescribeInstanceTypeOfferingsPaginator(o.EC2, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	for po.HasMorePages() {
		page, err := po.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstanceTypeOfferings: %w", err)
		}
		offerings = append(offerings, page.InstanceTypeOfferings...)
	}
	var history []ec2types.SpotPrice
	start := now()
	ps := ec2.NewDescribeSpotPriceHistoryPaginator(o.EC2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"}, StartTime: &start})
	for ps.HasMorePages() {
		page, err := ps.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeSpotPriceHistory: %w", err)
		}
		history = append(history, page.SpotPriceHistory...)
	}
	spot, err := LatestSpotPrices(history)
	if err != nil {
		return nil, err
	}
	var onDemand map[string]float64
	source := catalog.PriceSourceLive
	if o.Pricing != nil {
		if onDemand, err = OnDemandPrices(ctx, o.Pricing, o.Region); err != nil {
			return nil, err
		}
	} else {
		embedded, err := catalog.AWSRegionCatalog(o.Region)
		if err != nil {
			return nil, fmt.Errorf("no Price List client and %w", err)
		}
		onDemand, source = embeddedPrices(embedded), catalog.PriceSourceEmbedded
	}
	return buildFacts(infos, offerings, spot, onDemand, source)
}

// embeddedPrices are an embedded catalog's on-demand list prices.
func embeddedPrices(c *catalog.Catalog) map[string]float64 {
	out := map[string]float64{}
	for _, it := range c.Types() {
		for _, o := range it.Offerings {
			if o.CapacityType == apisv1.CapacityTypeOnDemand {
				out[it.Name] = o.PricePerHour
			}
		}
	}
	return out
}

// OnDemandPrices reads the region's Linux, shared-tenancy, no-preinstalled-software on-demand
// hourly prices (USD) from GetProducts, all pages. The filters are the Price List attributes of
// EC2 compute products (Price List API reference; the same ones Karpenter's pricing provider uses).
func OnDemandPrices(ctx context.Context, api PricingAPI, region string) (map[string]float64, error) {
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v1"), Filters: []pricingtypes.Filter{
		term("regionCode", region), term("operatingSystem", "Linux"), term("tenancy", "Shared"), term("preInstalledSw", "NA"),
		term("capacitystatus", "Used"), term("productFamily", "Compute Instance"),
	}}
	out := map[string]float64{}
	p := pricing.NewGetProductsPaginator(api, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("pricing GetProducts: %w", err)
		}
		for i, item := range page.PriceList {
			typ, price, err := OnDemandPrice(item)
			if err != nil {
				return nil, fmt.Errorf("pricing GetProducts PriceList[%d]: %w", i, err)
			}
			if typ != "" {
				out[typ] = price
			}
		}
	}
	return out, nil
}

// priceListItem is the part of a Price List product document the refresh reads.
type priceListItem struct {
	Product struct {
		Attributes map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// OnDemandPrice parses one Price List product document (a GetProducts PriceList item) into its
// instance type and hourly USD on-demand price. A product without an hourly USD on-demand price
// returns typ "" and no error (nothing to record); malformed JSON or price is an error.
func OnDemandPrice(doc string) (typ string, usdPerHour float64, err error) {
	var item priceListItem
	if err := json.Unmarshal([]byte(doc), &item); err != nil {
		return "", 0, fmt.Errorf("price list item: %w", err)
	}
	typ = item.Product.Attributes["instanceType"]
	if typ == "" {
		return "", 0, errors.New("price list item: product.attributes.instanceType missing")
	}
	// Term and dimension keys are SKU codes; visit them sorted so a product with several hourly
	// dimensions always yields the same one.
	termKeys := sortedKeys(item.Terms.OnDemand)
	for _, tk := range termKeys {
		dims := item.Terms.OnDemand[tk].PriceDimensions
		for _, dk := range sortedKeys(dims) {
			d := dims[dk]
			usd, ok := d.PricePerUnit["USD"]
			if d.Unit != "Hrs" || !ok {
				continue
			}
			p, err := strconv.ParseFloat(usd, 64)
			if err != nil || p < 0 {
				return "", 0, fmt.Errorf("price list item %s: terms.OnDemand.%s.priceDimensions.%s.pricePerUnit.USD %q is not a price", typ, tk, dk, usd)
			}
			if p == 0 {
				continue // zero-priced dimensions belong to reservations and hosts, not list prices
			}
			return typ, p, nil
		}
	}
	return "", 0, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SpotKey names a spot price: instance type and zone.
type SpotKey struct{ InstanceType, Zone string }

// LatestSpotPrices keeps the most recent price (USD per hour) per type × zone; at equal
// timestamps the lower price wins, so the result does not depend on response order. A price that
// does not parse is an error naming it.
func LatestSpotPrices(history []ec2types.SpotPrice) (map[SpotKey]float64, error) {
	type entry struct {
		at    time.Time
		price float64
	}
	latest := map[SpotKey]entry{}
	for i, h := range history {
		p, err := strconv.ParseFloat(aws.ToString(h.SpotPrice), 64)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("SpotPriceHistory[%d].SpotPrice: %q is not a price", i, aws.ToString(h.SpotPrice))
		}
		k := SpotKey{InstanceType: string(h.InstanceType), Zone: aws.ToString(h.AvailabilityZone)}
		at := aws.ToTime(h.Timestamp)
		cur, ok := latest[k]
		if !ok || at.After(cur.at) || (at.Equal(cur.at) && p < cur.price) {
			latest[k] = entry{at: at, price: p}
		}
	}
	out := make(map[SpotKey]float64, len(latest))
	for k, e := range latest {
		out[k] = e.price
	}
	return out, nil
}

// ZonesByType lists each type's availability zones (sorted) from DescribeInstanceTypeOfferings
// with LocationType availability-zone.
func ZonesByType(offerings []ec2types.InstanceTypeOffering) map[string][]string {
	out := map[string][]string{}
	for _, o := range offerings {
		if o.LocationType != "" && o.LocationType != ec2types.LocationTypeAvailabilityZone {
			continue
		}
		t := string(o.InstanceType)
		out[t] = append(out[t], aws.ToString(o.Location))
	}
	for t := range out {
		sort.Strings(out[t])
		out[t] = compact(out[t])
	}
	return out
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// TypeFacts maps one DescribeInstanceTypes entry to catalog facts. Errors name the missing field.
func TypeFacts(info ec2types.InstanceTypeInfo) (catalog.AWSTypeFacts, error) {
	f := catalog.AWSTypeFacts{Name: string(info.InstanceType), BareMetal: aws.ToBool(info.BareMetal), Hypervisor: string(info.Hypervisor)}
	if info.VCpuInfo == nil || info.VCpuInfo.DefaultVCpus == nil {
		return f, fmt.Errorf("%s: VCpuInfo.DefaultVCpus missing", f.Name)
	}
	f.VCPU = int64(*info.VCpuInfo.DefaultVCpus)
	if info.MemoryInfo == nil || info.MemoryInfo.SizeInMiB == nil {
		return f, fmt.Errorf("%s: MemoryInfo.SizeInMiB missing", f.Name)
	}
	f.MemoryMiB = *info.MemoryInfo.SizeInMiB
	if pi := info.ProcessorInfo; pi != nil {
		for _, a := range pi.SupportedArchitectures {
			switch a {
			case ec2types.ArchitectureTypeX8664:
				f.Arch = "amd64"
			case ec2types.ArchitectureTypeArm64:
				f.Arch = "arm64"
			}
			if f.Arch != "" {
				break
			}
		}
		f.CPUManufacturer = strings.ToLower(aws.ToString(pi.Manufacturer))
		if pi.SustainedClockSpeedInGhz != nil {
			f.SustainedClockMHz = int64(*pi.SustainedClockSpeedInGhz*1000 + 0.5)
		}
	}
	if f.Arch == "" {
		return f, fmt.Errorf("%s: ProcessorInfo.SupportedArchitectures has neither x86_64 nor arm64", f.Name)
	}
	if g := info.GpuInfo; g != nil && len(g.Gpus) > 0 {
		d := g.Gpus[0]
		f.GPUCount = int64(aws.ToInt32(d.Count))
		f.GPUName = kebab(aws.ToString(d.Name))
		f.GPUManufacturer = strings.ToLower(aws.ToString(d.Manufacturer))
		if d.MemoryInfo != nil {
			f.GPUMemoryMiB = int64(aws.ToInt32(d.MemoryInfo.SizeInMiB))
		}
	}
	if n := info.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		d := n.NeuronDevices[0]
		f.AcceleratorCount = int64(aws.ToInt32(d.Count))
		f.AcceleratorName = strings.ToLower(aws.ToString(d.Name))
		f.AcceleratorManufacturer = "aws"
		if d.CoreInfo != nil {
			f.NeuronCores = f.AcceleratorCount * int64(aws.ToInt32(d.CoreInfo.Count))
		}
	}
	if s := info.InstanceStorageInfo; s != nil {
		f.LocalNVMeGB = aws.ToInt64(s.TotalSizeInGB)
	}
	if ni := info.NetworkInfo; ni != nil {
		f.EncryptionInTransit = ni.EncryptionInTransitSupported
		f.IPv4PerENI = int64(aws.ToInt32(ni.Ipv4AddressesPerInterface))
		f.DefaultCardMaxENIs = int64(aws.ToInt32(ni.MaximumNetworkInterfaces))
		// The VPC CNI attaches ENIs on the default network card only.
		for _, c := range ni.NetworkCards {
			if aws.ToInt32(c.NetworkCardIndex) == aws.ToInt32(ni.DefaultNetworkCardIndex) && c.MaximumNetworkInterfaces != nil {
				f.DefaultCardMaxENIs = int64(*c.MaximumNetworkInterfaces)
			}
		}
		if ni.EfaInfo != nil {
			f.EFA = int64(aws.ToInt32(ni.EfaInfo.MaximumEfaInterfaces))
		}
		f.NetworkCards = int64(aws.ToInt32(ni.MaximumNetworkCards))
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedInfo != nil {
		f.EBSBandwidthMbps = int64(aws.ToInt32(e.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	return f, nil
}

// kebab lower-cases and hyphenates a device name ("Radeon Pro V520" → "radeon-pro-v520"), the
// form of Karpenter's GPU-name label.
func kebab(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), " ", "-")
}

// Build assembles a catalog from parsed API data: per type, an on-demand offering in each of its
// zones when onDemand has its price (priced with odSource) and a spot offering in each zone with
// a spot price (PriceSourceLive), when the type supports that usage class. A type whose facts do
// not parse is an error naming it.
func Build(region string, infos []ec2types.InstanceTypeInfo, offerings []ec2types.InstanceTypeOffering,
	spot map[SpotKey]float64, onDemand map[string]float64, odSource catalog.PriceSource) (*catalog.Catalog, error) {
	facts, err := buildFacts(infos, offerings, spot, onDemand, odSource)
	if err != nil {
		return nil, err
	}
	return fromCache(region, facts)
}

// buildFacts is Build before the instance types are made: each type's facts and offerings.
func buildFacts(infos []ec2types.InstanceTypeInfo, offerings []ec2types.InstanceTypeOffering,
	spot map[SpotKey]float64, onDemand map[string]float64, odSource catalog.PriceSource) ([]cachedType, error) {
	zones := ZonesByType(offerings)
	out := make([]cachedType, 0, len(infos))
	for _, info := range infos {
		f, err := TypeFacts(info)
		if err != nil {
			return nil, err
		}
		supports := map[string]bool{}
		for _, u := range info.SupportedUsageClasses {
			supports[string(u)] = true
		}
		if len(info.SupportedUsageClasses) == 0 {
			supports[apisv1.CapacityTypeOnDemand], supports[apisv1.CapacityTypeSpot] = true, true
		}
		var offs []catalog.Offering
		for _, z := range zones[f.Name] {
			if p, ok := onDemand[f.Name]; ok && supports[apisv1.CapacityTypeOnDemand] {
				offs = append(offs, catalog.Offering{Zone: z, CapacityType: apisv1.CapacityTypeOnDemand, PricePerHour: p, PriceSource: odSource, Available: true})
			}
			if p, ok := spot[SpotKey{f.Name, z}]; ok && supports[apisv1.CapacityTypeSpot] {
				offs = append(offs, catalog.Offering{Zone: z, CapacityType: apisv1.CapacityTypeSpot, PricePerHour: p, PriceSource: catalog.PriceSourceLive, Available: true})
			}
		}
		out = append(out, cachedType{Facts: f, Offerings: offs})
	}
	return out, nil
}
