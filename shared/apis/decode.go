// Package apis reads, defaults and validates Dovetail's Karpenter-compatible objects: NodePool
// and NodeClaim (karpenter.sh/v1), EC2NodeClass (karpenter.k8s.aws/v1) and AKSNodeClass
// (karpenter.azure.com/v1beta1, and the deprecated v1alpha2 the Azure provider still serves). v1beta1 NodePool and
// EC2NodeClass manifests are converted to v1 as they are read (package v1beta1).
package apis

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/apis/v1beta1"
)

// Kinds Decode reads.
const (
	KindNodePool     = "NodePool"
	KindNodeClaim    = "NodeClaim"
	KindEC2NodeClass = "EC2NodeClass"
	KindAKSNodeClass = "AKSNodeClass"
)

// ErrUnknownKind is returned (wrapped) by Decode for an apiVersion/kind it does not read, so
// callers reading mixed manifests (Deployments, Pods...) can route those elsewhere.
var ErrUnknownKind = errors.New("not a Dovetail API kind")

// IsKnown reports whether Decode reads this apiVersion and kind.
func IsKnown(apiVersion, kind string) bool {
	switch apiVersion + "/" + kind {
	case v1.GroupVersion + "/" + KindNodePool, v1.GroupVersion + "/" + KindNodeClaim,
		v1.AWSGroupVersion + "/" + KindEC2NodeClass,
		v1beta1.GroupVersion + "/" + KindNodePool, v1beta1.AWSGroupVersion + "/" + KindEC2NodeClass,
		v1.AzureGroupVersion + "/" + KindAKSNodeClass, v1.AzureV1alpha2GroupVersion + "/" + KindAKSNodeClass,
		v1.NodeOverlayGroupVersion + "/" + v1.KindNodeOverlay:
		return true
	}
	return false
}

// Decode reads one YAML or JSON document and returns *v1.NodePool, *v1.NodeClaim, *v1.NodeOverlay,
// *v1.EC2NodeClass or *v1.AKSNodeClass, chosen by apiVersion and kind (v1alpha2 AKSNodeClass has
// the v1beta1 fields and reads into the same type). karpenter.sh/v1beta1 NodePool and
// karpenter.k8s.aws/v1beta1 EC2NodeClass are converted to v1 (see package v1beta1).
//
// Decoding is strict, as `kubectl apply --validate=strict` is: unknown and duplicate fields are
// errors. Errors are field.ErrorList aggregates whose messages start with the field path
// ("spec.template.spec.foo: Forbidden: unknown field"). An unknown apiVersion/kind wraps
// ErrUnknownKind. Decode does not default or validate; see Load for all three steps.
func Decode(doc []byte) (runtime.Object, error) {
	// YAMLToJSONStrict refuses duplicate keys, which YAML parsers otherwise resolve silently.
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("not a valid YAML or JSON document: %w", err)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(j, &tm); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("apiVersion"), string(j), "cannot read apiVersion/kind: "+err.Error())}.ToAggregate()
	}
	switch {
	case tm.APIVersion == "" || tm.Kind == "":
		var errs field.ErrorList
		if tm.APIVersion == "" {
			errs = append(errs, field.Required(field.NewPath("apiVersion"), ""))
		}
		if tm.Kind == "" {
			errs = append(errs, field.Required(field.NewPath("kind"), ""))
		}
		return nil, errs.ToAggregate()
	case !IsKnown(tm.APIVersion, tm.Kind):
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, ErrUnknownKind)
	}

	switch tm.APIVersion {
	case v1.NodeOverlayGroupVersion:
		obj := &v1.NodeOverlay{}
		if err := strictUnmarshal(j, obj); err != nil {
			return nil, err
		}
		return obj, nil
	case v1.AzureGroupVersion, v1.AzureV1alpha2GroupVersion:
		obj := &v1.AKSNodeClass{}
		if err := strictUnmarshal(j, obj); err != nil {
			return nil, err
		}
		return obj, nil
	case v1.GroupVersion, v1.AWSGroupVersion:
		var obj runtime.Object
		switch tm.Kind {
		case KindNodePool:
			obj = &v1.NodePool{}
		case KindNodeClaim:
			obj = &v1.NodeClaim{}
		default:
			obj = &v1.EC2NodeClass{}
		}
		if err := strictUnmarshal(j, obj); err != nil {
			return nil, err
		}
		return obj, nil
	case v1beta1.GroupVersion:
		in := &v1beta1.NodePool{}
		if err := strictUnmarshal(j, in); err != nil {
			return nil, err
		}
		out, errs := v1beta1.ConvertNodePool(in)
		if len(errs) > 0 {
			return nil, errs.ToAggregate()
		}
		return out, nil
	default: // karpenter.k8s.aws/v1beta1 EC2NodeClass
		in := &v1beta1.EC2NodeClass{}
		if err := strictUnmarshal(j, in); err != nil {
			return nil, err
		}
		out, errs := v1beta1.ConvertEC2NodeClass(in)
		if len(errs) > 0 {
			return nil, errs.ToAggregate()
		}
		return out, nil
	}
}

// strictUnmarshal decodes JSON case-sensitively, refusing unknown and duplicate fields, and
// turns every problem into a field error with its path (see locateErrors).
func strictUnmarshal(j []byte, into any) error {
	strict, err := kjson.UnmarshalStrict(j, into, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err == nil && len(strict) == 0 {
		return nil
	}
	var errs field.ErrorList
	for _, s := range strict {
		if strings.Contains(s.Error(), "duplicate field") {
			var fe kjson.FieldError
			p := "<document>"
			if errors.As(s, &fe) {
				p = fe.FieldPath()
			}
			errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: p, BadValue: field.OmitValueType{}, Detail: "the field appears twice"})
		}
	}
	var raw any
	if jerr := json.Unmarshal(j, &raw); jerr != nil {
		return append(errs, field.Invalid(field.NewPath("<document>"), string(j), jerr.Error())).ToAggregate()
	}
	errs = append(errs, locateErrors(raw, reflect.TypeOf(into).Elem(), nil)...)
	if len(errs) == 0 && err != nil {
		errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: "<document>", BadValue: field.OmitValueType{}, Detail: err.Error()})
	}
	return errs.ToAggregate()
}
