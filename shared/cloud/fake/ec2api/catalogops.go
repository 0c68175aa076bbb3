package ec2api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
)

// InstanceTypeInfo describes a catalog type as DescribeInstanceTypes does. The catalog keeps
// only the VPC CNI pod limit, not the ENI layout, so the network info is written as one ENI with
// (limit − 1) IPv4 addresses, which gives the same limit by the VPC CNI formula
// ENIs × (IPv4 per ENI − 1) + 2; every other figure is the catalog's own.
func InstanceTypeInfo(it *catalog.InstanceType) types.InstanceTypeInfo {
	l := it.Labels
	info := types.InstanceTypeInfo{InstanceType: types.InstanceType(it.Name), CurrentGeneration: aws.Bool(true),
		SupportedRootDeviceTypes: []types.RootDeviceType{types.RootDeviceTypeEbs}, SupportedVirtualizationTypes: []types.VirtualizationType{types.VirtualizationTypeHvm}}
	arch := types.ArchitectureTypeX8664
	if l[corev1.LabelArchStable] == "arm64" {
		arch = types.ArchitectureTypeArm64
	}
	proc := &types.ProcessorInfo{SupportedArchitectures: []types.ArchitectureType{arch}}
	if m := l[catalog.LabelInstanceCPUManufacturer]; m != "" {
		proc.Manufacturer = aws.String(map[string]string{"intel": "Intel", "amd": "AMD", "aws": "AWS"}[m])
	}
	if mhz, err := strconv.ParseFloat(l[catalog.LabelInstanceCPUSustainedClockSpeedMhz], 64); err == nil {
		proc.SustainedClockSpeedInGhz = aws.Float64(mhz / 1000)
	}
	info.ProcessorInfo = proc
	switch hv := l[apisv1.LabelInstanceHypervisor]; hv {
	case "":
		info.BareMetal = aws.Bool(true)
	default:
		info.BareMetal = aws.Bool(false)
		info.Hypervisor = types.InstanceTypeHypervisor(hv)
	}
	if s := it.Spec; s != nil {
		info.VCpuInfo = &types.VCpuInfo{DefaultVCpus: aws.Int32(int32(s.VCPU))}
		info.MemoryInfo = &types.MemoryInfo{SizeInMiB: aws.Int64(s.MemoryMiB)}
		ni := &types.NetworkInfo{DefaultNetworkCardIndex: aws.Int32(0)}
		if s.ENILimitedPods > 2 {
			ni.MaximumNetworkInterfaces = aws.Int32(1)
			ni.Ipv4AddressesPerInterface = aws.Int32(int32(s.ENILimitedPods - 1))
			ni.NetworkCards = []types.NetworkCardInfo{{NetworkCardIndex: aws.Int32(0), MaximumNetworkInterfaces: aws.Int32(1)}}
		}
		if s.EFA > 0 {
			ni.EfaSupported = aws.Bool(true)
			ni.EfaInfo = &types.EfaInfo{MaximumEfaInterfaces: aws.Int32(int32(s.EFA))}
		}
		if s.NetworkCards > 0 {
			ni.MaximumNetworkCards = aws.Int32(int32(s.NetworkCards))
		}
		if v := l[catalog.LabelInstanceEncryptionInTransitSupported]; v != "" {
			ni.EncryptionInTransitSupported = aws.Bool(v == "true")
		}
		info.NetworkInfo = ni
		if gpus := s.NVIDIAGPU + s.AMDGPU; gpus > 0 {
			g := types.GpuDeviceInfo{Count: aws.Int32(int32(gpus)), Name: aws.String(l[apisv1.LabelInstanceGPUName]),
				Manufacturer: aws.String(map[bool]string{true: "NVIDIA", false: "AMD"}[s.NVIDIAGPU > 0])}
			if mem, err := strconv.ParseInt(l[catalog.LabelInstanceGPUMemory], 10, 32); err == nil {
				g.MemoryInfo = &types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(int32(mem))}
			}
			info.GpuInfo = &types.GpuInfo{Gpus: []types.GpuDeviceInfo{g}}
		}
		if s.Neuron > 0 {
			d := types.NeuronDeviceInfo{Count: aws.Int32(int32(s.Neuron)), Name: aws.String(l[catalog.LabelInstanceAcceleratorName])}
			if s.NeuronCore > 0 {
				d.CoreInfo = &types.NeuronDeviceCoreInfo{Count: aws.Int32(int32(s.NeuronCore / s.Neuron))}
			}
			info.NeuronInfo = &types.NeuronInfo{NeuronDevices: []types.NeuronDeviceInfo{d}}
		}
	}
	if gb, err := strconv.ParseInt(l[catalog.LabelInstanceLocalNVME], 10, 64); err == nil && gb > 0 {
		info.InstanceStorageSupported = aws.Bool(true)
		info.InstanceStorageInfo = &types.InstanceStorageInfo{TotalSizeInGB: aws.Int64(gb), NvmeSupport: types.EphemeralNvmeSupportRequired}
	}
	var classes []types.UsageClassType
	for _, ct := range []string{apisv1.CapacityTypeOnDemand, apisv1.CapacityTypeSpot} {
		for _, o := range it.Offerings {
			if o.CapacityType == ct {
				classes = append(classes, types.UsageClassType(ct))
				break
			}
		}
	}
	info.SupportedUsageClasses = classes
	return info
}

func (s *Server) describeInstanceTypes(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeInstanceTypesInput](s, "DescribeInstanceTypes", form)
	if aerr != nil {
		return nil, aerr
	}
	var names []string
	for _, t := range in.InstanceTypes {
		if s.cat.Get(string(t)) == nil {
			return nil, badRequest(CodeInvalidParameterValue, "The following supplied instance types do not exist: [%s]", t)
		}
		names = append(names, string(t))
	}
	var out []types.InstanceTypeInfo
	for _, it := range s.cat.Types() {
		if len(names) > 0 && !contains(names, it.Name) {
			continue
		}
		info := InstanceTypeInfo(it)
		ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "instance-type":
				return []string{it.Name}, true
			case "processor-info.supported-architecture":
				return []string{string(info.ProcessorInfo.SupportedArchitectures[0])}, true
			case "current-generation":
				return []string{"true"}, true
			}
			return nil, false
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out = append(out, info)
		}
	}
	// DescribeInstanceTypes returns at most 100 results a page (EC2 API reference).
	items, next, aerr := page(out, in.MaxResults, in.NextToken, 100)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeInstanceTypes", reqID, member{"instanceTypeSet", nonNil(items)}, member{"nextToken", next})
}

func (s *Server) describeInstanceTypeOfferings(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeInstanceTypeOfferingsInput](s, "DescribeInstanceTypeOfferings", form)
	if aerr != nil {
		return nil, aerr
	}
	lt := in.LocationType
	if lt == "" {
		lt = types.LocationTypeRegion
	}
	if lt != types.LocationTypeRegion && lt != types.LocationTypeAvailabilityZone {
		return nil, badRequest(CodeInvalidParameterValue, "LocationType %q is not served (region, availability-zone)", lt)
	}
	var out []types.InstanceTypeOffering
	for _, it := range s.cat.Types() {
		var locs []string
		if lt == types.LocationTypeRegion {
			if len(it.Offerings) > 0 {
				locs = []string{s.region}
			}
		} else {
			seen := map[string]bool{}
			for _, o := range it.Offerings {
				if !seen[o.Zone] {
					seen[o.Zone] = true
					locs = append(locs, o.Zone)
				}
			}
			sort.Strings(locs)
		}
		for _, loc := range locs {
			ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
				switch name {
				case "instance-type":
					return []string{it.Name}, true
				case "location":
					return []string{loc}, true
				}
				return nil, false
			})
			if aerr != nil {
				return nil, aerr
			}
			if ok {
				out = append(out, types.InstanceTypeOffering{InstanceType: types.InstanceType(it.Name), Location: aws.String(loc), LocationType: lt})
			}
		}
	}
	items, next, aerr := page(out, in.MaxResults, in.NextToken, 1000)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeInstanceTypeOfferings", reqID, member{"instanceTypeOfferingSet", nonNil(items)}, member{"nextToken", next})
}

// describeSpotPriceHistory answers with one current price per type × zone: the catalog's spot
// price (in the embedded catalog a modelled estimate, see catalog.SpotPriceEstimate), stamped now.
func (s *Server) describeSpotPriceHistory(_ context.Context, form url.Values, reqID string) ([]byte, *apiError) {
	in, aerr := decode[ec2.DescribeSpotPriceHistoryInput](s, "DescribeSpotPriceHistory", form)
	if aerr != nil {
		return nil, aerr
	}
	for _, pd := range in.ProductDescriptions {
		if pd != "Linux/UNIX" && pd != "Linux/UNIX (Amazon VPC)" {
			return nil, badRequest(CodeInvalidParameterValue, "ProductDescription %q: the fake sells Linux/UNIX only", pd)
		}
	}
	now := s.now().UTC()
	var out []types.SpotPrice
	for _, it := range s.cat.Types() {
		if len(in.InstanceTypes) > 0 && !contains(stringsOf(in.InstanceTypes), it.Name) {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType != apisv1.CapacityTypeSpot || (in.AvailabilityZone != nil && *in.AvailabilityZone != o.Zone) {
				continue
			}
			sp := types.SpotPrice{AvailabilityZone: aws.String(o.Zone), InstanceType: types.InstanceType(it.Name),
				ProductDescription: types.RIProductDescription("Linux/UNIX"), SpotPrice: aws.String(strconv.FormatFloat(o.PricePerHour, 'f', 6, 64)), Timestamp: &now}
			ok, aerr := matches(in.Filters, func(name string) ([]string, bool) {
				switch name {
				case "instance-type":
					return []string{it.Name}, true
				case "availability-zone":
					return []string{o.Zone}, true
				case "product-description":
					return []string{"Linux/UNIX"}, true
				}
				return nil, false
			})
			if aerr != nil {
				return nil, aerr
			}
			if ok {
				out = append(out, sp)
			}
		}
	}
	items, next, aerr := page(out, in.MaxResults, in.NextToken, 1000)
	if aerr != nil {
		return nil, aerr
	}
	return respond("DescribeSpotPriceHistory", reqID, member{"spotPriceHistorySet", nonNil(items)}, member{"nextToken", next})
}

func stringsOf[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

// ---- AWS JSON 1.1: SSM and Pricing ----

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request, target, reqID string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "SerializationException", err.Error(), reqID)
		return
	}
	s.record(target, string(body))
	if s.throttled(target) {
		writeJSONError(w, http.StatusBadRequest, "ThrottlingException", "Rate exceeded", reqID)
		return
	}
	var out any
	var code, msg string
	switch target {
	case "AmazonSSM.GetParameter":
		if denied := s.authorizeParameter(r.Context(), body); denied != nil {
			// SSM's wording of the same refusal (AWS JSON protocol: AccessDeniedException).
			writeJSONError(w, http.StatusBadRequest, "AccessDeniedException", strings.SplitN(denied.message, ". Encoded", 2)[0]+".", reqID)
			return
		}
		out, code, msg = s.getParameter(body)
	case "AWSPriceListService.GetProducts":
		out, code, msg = s.getProducts(body)
	default:
		code, msg = "UnknownOperationException", "unknown operation "+target
	}
	if code != "" {
		writeJSONError(w, http.StatusBadRequest, code, msg, reqID)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", reqID)
	_ = json.NewEncoder(w).Encode(out)
}

// writeJSONError writes an AWS JSON 1.1 error: the code in X-Amzn-ErrorType and "__type".
func writeJSONError(w http.ResponseWriter, status int, code, msg, reqID string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.Header().Set("X-Amzn-RequestId", reqID)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}

func (s *Server) getParameter(body []byte) (any, string, string) {
	var in struct{ Name string }
	if err := json.Unmarshal(body, &in); err != nil || in.Name == "" {
		return nil, "ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null"
	}
	v, ok := s.Parameter(in.Name)
	if !ok {
		return nil, "ParameterNotFound", ""
	}
	arn := "arn:aws:ssm:" + s.region + "::parameter" + in.Name
	if !strings.HasPrefix(in.Name, "/aws/service/") {
		arn = "arn:aws:ssm:" + s.region + ":" + s.account + ":parameter" + in.Name
	}
	return map[string]any{"Parameter": map[string]any{"Name": in.Name, "Type": "String", "Value": v, "Version": 1,
		"ARN": arn, "DataType": "text", "LastModifiedDate": float64(s.now().Unix())}}, "", ""
}

// offerTermCode and rateCode are the codes the Price List API uses for the on-demand term and
// its hourly rate (the same codes appear in the real m5.large GetProducts response).
const (
	offerTermCode = "JRTCKXETXF"
	rateCode      = "6YS6EN2CT7"
)

// regionNames are the Price List API's location names.
var regionNames = map[string]string{"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-2": "US West (Oregon)",
	"us-gov-west-1": "AWS GovCloud (US-West)"}

// getProducts serves the on-demand Linux price of each catalog type as a Price List product
// (shape of the real GetProducts response), answering TERM_MATCH filters on its attributes.
func (s *Server) getProducts(body []byte) (any, string, string) {
	var in struct {
		ServiceCode string
		Filters     []struct{ Type, Field, Value string }
		NextToken   string
		MaxResults  int
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, "InvalidParameterException", err.Error()
	}
	if in.ServiceCode != "AmazonEC2" {
		return nil, "InvalidParameterException", fmt.Sprintf("ServiceCode %q: the fake prices AmazonEC2 only", in.ServiceCode)
	}
	var list []string
	for _, it := range s.cat.Types() {
		price := -1.0
		for _, o := range it.Offerings {
			if o.CapacityType == apisv1.CapacityTypeOnDemand {
				price = o.PricePerHour
				break
			}
		}
		if price < 0 {
			continue
		}
		sku := strings.ToUpper(resourceID("sku", it.Name)[5:])
		attrs := map[string]string{"instanceType": it.Name, "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
			"capacitystatus": "Used", "licenseModel": "No License required", "regionCode": s.region, "location": regionNames[s.region],
			"locationType": "AWS Region", "servicecode": "AmazonEC2", "usagetype": "BoxUsage:" + it.Name, "operation": "RunInstances",
			"vcpu": it.Labels[apisv1.LabelInstanceCPU]}
		match := true
		for _, f := range in.Filters {
			v := attrs[f.Field]
			if f.Field == "productFamily" {
				v = "Compute Instance"
			}
			if f.Type != "TERM_MATCH" || v != f.Value {
				match = false
			}
		}
		if !match {
			continue
		}
		doc := map[string]any{
			"product":     map[string]any{"productFamily": "Compute Instance", "attributes": attrs, "sku": sku},
			"serviceCode": "AmazonEC2", "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
			"terms": map[string]any{"OnDemand": map[string]any{sku + "." + offerTermCode: map[string]any{
				"sku": sku, "offerTermCode": offerTermCode, "effectiveDate": "2026-11-01T00:00:00Z", "termAttributes": map[string]any{},
				"priceDimensions": map[string]any{sku + "." + offerTermCode + "." + rateCode: map[string]any{
					"unit": "Hrs", "beginRange": "0", "endRange": "Inf", "rateCode": sku + "." + offerTermCode + "." + rateCode, "appliesTo": []string{},
					"description":  fmt.Sprintf("$%g per On Demand Linux %s Instance Hour", price, it.Name),
					"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(price, 'f', 10, 64)},
				}},
			}}},
		}
		b, _ := json.Marshal(doc)
		list = append(list, string(b))
	}
	start := 0
	if in.NextToken != "" {
		n, err := strconv.Atoi(in.NextToken)
		if err != nil || n < 0 || n > len(list) {
			return nil, "InvalidNextTokenException", "invalid next token"
		}
		start = n
	}
	size := 100 // GetProducts MaxResults upper bound (Price List API reference)
	if in.MaxResults > 0 && in.MaxResults < size {
		size = in.MaxResults
	}
	end := min(start+size, len(list))
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": nonNil(list[start:end])}
	if end < len(list) {
		out["NextToken"] = strconv.Itoa(end)
	}
	return out, "", ""
}

// authorizeParameter checks ssm:GetParameter on the parameter's ARN: the public parameters are
// AWS's (no account in the ARN), others the caller's account's.
func (s *Server) authorizeParameter(ctx context.Context, body []byte) *apiError {
	var in struct{ Name string }
	_ = json.Unmarshal(body, &in)
	account := s.account
	if strings.HasPrefix(in.Name, "/aws/service/") {
		account = ""
	}
	return s.authorize(ctx, check{"ssm:GetParameter", "arn:aws:ssm:" + s.region + ":" + account + ":parameter" + in.Name, nil})
}
