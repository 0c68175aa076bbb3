package apis

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Load decodes one document (Decode), fills defaults (SetDefaults, SetEC2NodeClassDefaults,
// SetAKSNodeClassDefaults, SetNodeClaimDefaults) and validates it. It returns *v1.NodePool,
// *v1.NodeClaim, *v1.EC2NodeClass, *v1.AKSNodeClass or *v1.NodeOverlay, or an error listing every problem with its field path, prefixed by the
// object's kind and name.
func Load(doc []byte) (runtime.Object, error) {
	obj, err := Decode(doc)
	if err != nil {
		return nil, err
	}
	if errs := DefaultAndValidate(obj); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return obj, nil
}

// DefaultAndValidate defaults obj in place and returns its validation errors. obj must be one of
// the types Decode returns; any other type gives a single error.
func DefaultAndValidate(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *v1.NodePool:
		SetDefaults(o)
		return ValidateNodePool(o)
	case *v1.NodeClaim:
		SetNodeClaimDefaults(o)
		return ValidateNodeClaim(o)
	case *v1.EC2NodeClass:
		SetEC2NodeClassDefaults(o)
		return ValidateEC2NodeClass(o)
	case *v1.AKSNodeClass:
		SetAKSNodeClassDefaults(o)
		return ValidateAKSNodeClass(o)
	case *v1.NodeOverlay:
		// A NodeOverlay has no defaults; its runtime rules (ValidateNodeOverlayRuntime) are the
		// overlay controller's, reported in its status, not refusals at admission.
		return ValidateNodeOverlay(o)
	}
	return field.ErrorList{field.TypeInvalid(field.NewPath("kind"), obj, "not a NodePool, NodeClaim, EC2NodeClass, AKSNodeClass or NodeOverlay")}
}
