package ec2api

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The EC2 Query protocol (EC2 API reference, "Query requests" and "Response structures"):
//
//   - requests are form-encoded: Action, Version, then members by their serialized name; list
//     members are flattened with 1-based indices ("Filter.1.Name", "Filter.1.Value.1",
//     "LaunchTemplateConfigs.1.Overrides.2.InstanceType"); nested structures are dotted.
//   - responses are XML: <ActionResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">, a
//     requestId, then members in lowerCamel names; every list element is an <item>.
//
// Both sides are done by reflection over the SDK's own input and output types
// (github.com/aws/aws-sdk-go-v2/service/ec2 and its types package), so the fake reads exactly
// what the SDK wrote and writes what the SDK reads. Member names follow the Go field names except
// where EC2's wire name differs; those exceptions are listed below, taken from the SDK's
// generated serializers.go and deserializers.go (service/ec2 v1.344.3).

// xmlItemNames are output list members whose elements are not <item>, by "<Go type>.<Go
// field>": a launch template network interface's groupSet holds <groupId> elements
// (deserializers.go, GroupIdStringList).
var xmlItemNames = map[string]string{
	"LaunchTemplateInstanceNetworkInterfaceSpecification.Groups": "groupId",
}

// encodeItems writes a list member whose elements are named item.
func encodeItems(e *xml.Encoder, name, item string, v reflect.Value) error {
	el := xml.StartElement{Name: xml.Name{Local: name}}
	if err := e.EncodeToken(el); err != nil {
		return err
	}
	for i := 0; i < v.Len(); i++ {
		if err := encodeValue(e, item, v.Index(i)); err != nil {
			return err
		}
	}
	return e.EncodeToken(el.End())
}

// queryListNames are list members whose query name is not the Go field name minus its final "s".
var queryListNames = map[string]string{
	"LaunchTemplateConfigs": "LaunchTemplateConfigs",
	"Overrides":             "Overrides",
	"Versions":              "LaunchTemplateVersion", // DescribeLaunchTemplateVersions
	// "<Go type>.<Go field>" where one type's member differs: a launch template's network
	// interface names its groups SecurityGroupId.N (serializers.go,
	// LaunchTemplateInstanceNetworkInterfaceSpecificationRequest).
	"LaunchTemplateInstanceNetworkInterfaceSpecificationRequest.Groups": "SecurityGroupId",
}

// xmlNames are output members whose XML name is not the lowerCamel Go field name, by
// "<Go type>.<Go field>".
var xmlNames = map[string]string{
	"Instance.BlockDeviceMappings":                               "blockDeviceMapping",
	"Instance.NetworkInterfaces":                                 "networkInterfaceSet",
	"Instance.PublicDnsName":                                     "dnsName",
	"Instance.PublicIpAddress":                                   "ipAddress",
	"Instance.SecurityGroups":                                    "groupSet",
	"Instance.State":                                             "instanceState",
	"Instance.StateTransitionReason":                             "reason",
	"Instance.Tags":                                              "tagSet",
	"Instance.Licenses":                                          "licenseSet",
	"Instance.ElasticGpuAssociations":                            "elasticGpuAssociationSet",
	"Instance.ElasticInferenceAcceleratorAssociations":           "elasticInferenceAcceleratorAssociationSet",
	"Instance.SecondaryInterfaces":                               "secondaryInterfaceSet",
	"Reservation.Groups":                                         "groupSet",
	"Reservation.Instances":                                      "instancesSet",
	"Subnet.Tags":                                                "tagSet",
	"CapacityReservation.Tags":                                   "tagSet",
	"SecurityGroup.Description":                                  "groupDescription",
	"SecurityGroup.Tags":                                         "tagSet",
	"IpPermission.UserIdGroupPairs":                              "groups",
	"Image.BlockDeviceMappings":                                  "blockDeviceMapping",
	"Image.ImageWatermarks":                                      "imageWatermarkSet",
	"Image.OwnerId":                                              "imageOwnerId",
	"Image.Public":                                               "isPublic",
	"Image.State":                                                "imageState",
	"Image.Tags":                                                 "tagSet",
	"LaunchTemplate.Tags":                                        "tagSet",
	"LaunchTemplateTagSpecification.Tags":                        "tagSet",
	"ResponseLaunchTemplateData.BlockDeviceMappings":             "blockDeviceMappingSet",
	"ResponseLaunchTemplateData.ElasticGpuSpecifications":        "elasticGpuSpecificationSet",
	"ResponseLaunchTemplateData.ElasticInferenceAccelerators":    "elasticInferenceAcceleratorSet",
	"ResponseLaunchTemplateData.LicenseSpecifications":           "licenseSet",
	"ResponseLaunchTemplateData.NetworkInterfaces":               "networkInterfaceSet",
	"ResponseLaunchTemplateData.SecondaryInterfaces":             "secondaryInterfaceSet",
	"ResponseLaunchTemplateData.SecurityGroupIds":                "securityGroupIdSet",
	"LaunchTemplateInstanceNetworkInterfaceSpecification.Groups": "groupSet",
	"ResponseLaunchTemplateData.SecurityGroups":                  "securityGroupSet",
	"ResponseLaunchTemplateData.TagSpecifications":               "tagSpecificationSet",
	"FleetLaunchTemplateOverrides.BlockDeviceMappings":           "blockDeviceMappingSet",
	"EbsInfo.EbsCards":                                           "ebsCardSet",
	"GpuDeviceInfo.Workloads":                                    "workloadSet",
	"NetworkCardInfo.InterfaceTypes":                             "interfaceTypeSet",
}

// timeFormat is how EC2 writes timestamps (ISO 8601 in UTC with milliseconds).
const timeFormat = "2006-01-02T15:04:05.000Z"

// ---- requests ----

// node is one level of a dotted query key.
type node struct {
	value    *string
	children map[string]*node
}

func buildTree(form url.Values) *node {
	root := &node{children: map[string]*node{}}
	for key, vals := range form {
		if len(vals) == 0 {
			continue
		}
		n := root
		for _, p := range strings.Split(key, ".") {
			c := n.children[p]
			if c == nil {
				c = &node{children: map[string]*node{}}
				n.children[p] = c
			}
			n = c
		}
		v := vals[0]
		n.value = &v
	}
	return root
}

// decodeQuery fills the SDK input struct pointed to by out from the form. Unknown members are
// ignored, as the SDK never sends them; malformed scalars are an error naming the member.
func decodeQuery(form url.Values, out any) error {
	return decodeNode(buildTree(form), reflect.ValueOf(out).Elem(), "")
}

func decodeNode(n *node, v reflect.Value, path string) error {
	if n == nil {
		return nil
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeNode(n, v.Elem(), path)
	}
	if v.Type() == reflect.TypeOf(time.Time{}) {
		if n.value == nil {
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, *n.value)
		if err != nil {
			return fmt.Errorf("%s: %q is not an ISO 8601 time", path, *n.value)
		}
		v.Set(reflect.ValueOf(t))
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := f.Name
			if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() != reflect.Uint8 {
				if q, ok := queryListNames[t.Name()+"."+f.Name]; ok {
					name = q
				} else if q, ok := queryListNames[f.Name]; ok {
					name = q
				} else {
					name = strings.TrimSuffix(f.Name, "s")
				}
			}
			if err := decodeNode(n.children[name], v.Field(i), join(path, name)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		idx := make([]int, 0, len(n.children))
		for k := range n.children {
			i, err := strconv.Atoi(k)
			if err != nil || i < 1 {
				return fmt.Errorf("%s.%s: list index must be a positive integer", path, k)
			}
			idx = append(idx, i)
		}
		sort.Ints(idx)
		s := reflect.MakeSlice(v.Type(), len(idx), len(idx))
		for j, i := range idx {
			if err := decodeNode(n.children[strconv.Itoa(i)], s.Index(j), fmt.Sprintf("%s.%d", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if n.value == nil {
		return nil
	}
	s := *n.value
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean", path, s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer", path, s)
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", path, s)
		}
		v.SetFloat(f)
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// ---- responses ----

// member is one top-level member of a response.
type member struct {
	name  string
	value any
}

// encodeResponse writes <ActionResponse> with a requestId and the members.
func encodeResponse(action, requestID string, members ...member) ([]byte, error) {
	var b strings.Builder
	b.WriteString(xml.Header)
	e := xml.NewEncoder(&b)
	start := xml.StartElement{Name: xml.Name{Local: action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: "http://ec2.amazonaws.com/doc/2016-11-15/"}}}
	if err := e.EncodeToken(start); err != nil {
		return nil, err
	}
	if err := e.EncodeElement(requestID, xml.StartElement{Name: xml.Name{Local: "requestId"}}); err != nil {
		return nil, err
	}
	for _, m := range members {
		if err := encodeValue(e, m.name, reflect.ValueOf(m.value)); err != nil {
			return nil, err
		}
	}
	if err := e.EncodeToken(start.End()); err != nil {
		return nil, err
	}
	if err := e.Flush(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func encodeValue(e *xml.Encoder, name string, v reflect.Value) error {
	if !v.IsValid() {
		return nil
	}
	if v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		return encodeValue(e, name, v.Elem())
	}
	el := xml.StartElement{Name: xml.Name{Local: name}}
	if t, ok := v.Interface().(time.Time); ok {
		return e.EncodeElement(t.UTC().Format(timeFormat), el)
	}
	switch v.Kind() {
	case reflect.Struct:
		if err := e.EncodeToken(el); err != nil {
			return err
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fn, ok := xmlNames[t.Name()+"."+f.Name]
			if !ok {
				fn = lowerFirst(f.Name)
			}
			if item, ok := xmlItemNames[t.Name()+"."+f.Name]; ok && v.Field(i).Len() > 0 {
				if err := encodeItems(e, fn, item, v.Field(i)); err != nil {
					return err
				}
				continue
			}
			if err := encodeValue(e, fn, v.Field(i)); err != nil {
				return err
			}
		}
		return e.EncodeToken(el.End())
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		if err := e.EncodeToken(el); err != nil {
			return err
		}
		for i := 0; i < v.Len(); i++ {
			if err := encodeValue(e, "item", v.Index(i)); err != nil {
				return err
			}
		}
		return e.EncodeToken(el.End())
	case reflect.String:
		return e.EncodeElement(v.String(), el)
	case reflect.Bool:
		return e.EncodeElement(strconv.FormatBool(v.Bool()), el)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return e.EncodeElement(strconv.FormatInt(v.Int(), 10), el)
	case reflect.Float32, reflect.Float64:
		return e.EncodeElement(strconv.FormatFloat(v.Float(), 'f', -1, 64), el)
	}
	return nil // maps and documents do not occur in the EC2 shapes served here
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

// encodeError writes EC2's error body: <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>.
func encodeError(code, message, requestID string) []byte {
	var b strings.Builder
	b.WriteString(xml.Header)
	b.WriteString("<Response><Errors><Error><Code>")
	_ = xml.EscapeText(&b, []byte(code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(message))
	b.WriteString("</Message></Error></Errors><RequestID>")
	_ = xml.EscapeText(&b, []byte(requestID))
	b.WriteString("</RequestID></Response>")
	return []byte(b.String())
}
