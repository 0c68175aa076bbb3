// Package crd builds the apiextensions.k8s.io/v1 CustomResourceDefinitions of Dovetail's API
// (NodePool, NodeClaim, EC2NodeClass; v1 only) from the Go types of shared/apis/v1, so the
// OpenAPI schema cannot drift from what Decode accepts. infra/crds/*.yaml is its output
// (regenerate: go test ./shared/apis/crd -run TestCRDFiles -update).
package crd

import (
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Schema is the subset of OpenAPI v3 (JSONSchemaProps) the CRDs use.
type Schema struct {
	Description          string             `json:"description,omitempty"`
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	Maximum              *float64           `json:"maximum,omitempty"`
	ExclusiveMinimum     bool               `json:"exclusiveMinimum,omitempty"`
	MinItems             *int64             `json:"minItems,omitempty"`
	MaxItems             *int64             `json:"maxItems,omitempty"`
	MaxLength            *int64             `json:"maxLength,omitempty"`
	MaxProperties        *int64             `json:"maxProperties,omitempty"`
	Default              any                `json:"default,omitempty"`
	AnyOf                []*Schema          `json:"anyOf,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string,omitempty"`
	// Nullable: Go marshals an unset metav1.Time or NillableDuration as null.
	Nullable bool `json:"nullable,omitempty"`
}

var (
	tQuantity   = reflect.TypeFor[resource.Quantity]()
	tNillable   = reflect.TypeFor[v1.NillableDuration]()
	tDuration   = reflect.TypeFor[metav1.Duration]()
	tTime       = reflect.TypeFor[metav1.Time]()
	tObjectMeta = reflect.TypeFor[metav1.ObjectMeta]()
	tTypeMeta   = reflect.TypeFor[metav1.TypeMeta]()
)

// durationPattern is Karpenter's pattern for expireAfter and consolidateAfter.
const durationPattern = `^(([0-9]+(s|m|h))+|Never)$`

// quantityPattern is the Kubernetes quantity grammar (resource.ParseQuantity).
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// build derives the schema of t; path is the dotted JSON path used to look up Overrides.
func build(t reflect.Type, path string, o map[string]func(*Schema)) *Schema {
	s := buildType(t, path, o)
	if f, ok := o[path]; ok {
		f(s)
	}
	return s
}

func buildType(t reflect.Type, path string, o map[string]func(*Schema)) *Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case tQuantity:
		return &Schema{AnyOf: []*Schema{{Type: "integer"}, {Type: "string"}}, Pattern: quantityPattern, IntOrString: true}
	case tNillable:
		return &Schema{Type: "string", Pattern: durationPattern, Nullable: true}
	case tDuration:
		return &Schema{Type: "string"}
	case tTime:
		return &Schema{Type: "string", Format: "date-time", Nullable: true}
	case tObjectMeta:
		return &Schema{Type: "object"}
	}
	switch t.Kind() {
	case reflect.String:
		return &Schema{Type: "string"}
	case reflect.Bool:
		return &Schema{Type: "boolean"}
	case reflect.Int32:
		return &Schema{Type: "integer", Format: "int32"}
	case reflect.Int, reflect.Int64:
		return &Schema{Type: "integer", Format: "int64"}
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}
	case reflect.Slice:
		return &Schema{Type: "array", Items: build(t.Elem(), path+"[]", o)}
	case reflect.Map:
		return &Schema{Type: "object", AdditionalProperties: build(t.Elem(), path+"{}", o)}
	case reflect.Struct:
		s := &Schema{Type: "object", Properties: map[string]*Schema{}}
		addFields(s, t, path, o)
		sort.Strings(s.Required)
		return s
	}
	panic("crd: unsupported type " + t.String() + " at " + path)
}

func addFields(s *Schema, t reflect.Type, path string, o map[string]func(*Schema)) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			addFields(s, f.Type, path, o)
			continue
		}
		if !f.IsExported() {
			continue
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		s.Properties[name] = build(f.Type, p, o)
		if !strings.Contains(opts, "omitempty") && f.Type != tTypeMeta {
			s.Required = append(s.Required, name)
		}
	}
}

// Helpers for Overrides.
func enum(vals ...string) func(*Schema) {
	return func(s *Schema) {
		for _, v := range vals {
			s.Enum = append(s.Enum, v)
		}
	}
}

func pattern(p string) func(*Schema) { return func(s *Schema) { s.Pattern = p } }

func desc(d string) func(*Schema) { return func(s *Schema) { s.Description = d } }

func minMax(lo, hi float64) func(*Schema) { return func(s *Schema) { s.Minimum, s.Maximum = &lo, &hi } }

func minimum(lo float64) func(*Schema) { return func(s *Schema) { s.Minimum = &lo } }

func maxItems(n int64) func(*Schema) { return func(s *Schema) { s.MaxItems = &n } }

func dflt(v any) func(*Schema) { return func(s *Schema) { s.Default = v } }

func all(fs ...func(*Schema)) func(*Schema) {
	return func(s *Schema) {
		for _, f := range fs {
			f(s)
		}
	}
}
