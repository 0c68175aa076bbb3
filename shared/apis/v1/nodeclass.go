package v1

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindEC2NodeClass is the kind of karpenter.k8s.aws/v1 EC2NodeClass.
const KindEC2NodeClass = "EC2NodeClass"

// NodeClass is a NodeClass of any cloud (EC2NodeClass, AKSNodeClass): at most one member is set, and the zero value means
// "no NodeClass". It is what the snapshot, the solver input and the launch request carry, so the
// core and the wire contract name no cloud; each edge takes the member it serves and refuses the
// others.
//
// On the wire a NodeClass is the object itself: its kind says which member it is. An object
// without a kind decodes as an EC2NodeClass, the only kind snapshot schema 1 ever carried.
// +kubebuilder:object:generate=false
type NodeClass struct {
	EC2 *EC2NodeClass
	AKS *AKSNodeClass
}

// NodeClassOf wraps a typed NodeClass (*EC2NodeClass, *AKSNodeClass); nil or another type gives
// the zero NodeClass.
func NodeClassOf(obj any) NodeClass {
	switch o := obj.(type) {
	case *EC2NodeClass:
		if o != nil {
			return NodeClass{EC2: o}
		}
	case *AKSNodeClass:
		if o != nil {
			return NodeClass{AKS: o}
		}
	case NodeClass:
		return o
	}
	return NodeClass{}
}

// IsZero reports whether no member is set.
func (n NodeClass) IsZero() bool { return n.EC2 == nil && n.AKS == nil }

// Meta returns the object's metadata, or nil for the zero NodeClass.
func (n NodeClass) Meta() *metav1.ObjectMeta {
	switch {
	case n.EC2 != nil:
		return &n.EC2.ObjectMeta
	case n.AKS != nil:
		return &n.AKS.ObjectMeta
	}
	return nil
}

// Name is metadata.name ("" for the zero NodeClass).
func (n NodeClass) Name() string {
	if m := n.Meta(); m != nil {
		return m.Name
	}
	return ""
}

// Kind is the member's kind (EC2NodeClass, AKSNodeClass), "" for the zero NodeClass.
func (n NodeClass) Kind() string {
	switch {
	case n.EC2 != nil:
		return KindEC2NodeClass
	case n.AKS != nil:
		return KindAKSNodeClass
	}
	return ""
}

// Group is the member's API group (karpenter.k8s.aws, karpenter.azure.com), "" for the zero
// NodeClass.
func (n NodeClass) Group() string {
	switch {
	case n.EC2 != nil:
		return AWSGroup
	case n.AKS != nil:
		return AzureGroup
	}
	return ""
}

// Tags are spec.tags: what the cloud puts on the instance besides Dovetail's own tags.
func (n NodeClass) Tags() map[string]string {
	switch {
	case n.EC2 != nil:
		return n.EC2.Spec.Tags
	case n.AKS != nil:
		return n.AKS.Spec.Tags
	}
	return nil
}

// Matches reports whether ref names this NodeClass: same name, and the same kind and group
// where ref gives them (Karpenter v1 defaults both; manifests converted from v1beta1 may lack
// the group).
func (n NodeClass) Matches(ref *NodeClassReference) bool {
	if ref == nil || n.IsZero() || ref.Name != n.Name() {
		return false
	}
	return (ref.Kind == "" || ref.Kind == n.Kind()) && (ref.Group == "" || ref.Group == n.Group())
}

// FindNodeClass returns the NodeClass ref names, or the zero NodeClass when none does.
func FindNodeClass(classes []NodeClass, ref *NodeClassReference) NodeClass {
	for _, c := range classes {
		if c.Matches(ref) {
			return c
		}
	}
	return NodeClass{}
}

// DeepCopy copies the member.
func (n NodeClass) DeepCopy() NodeClass {
	return NodeClass{EC2: n.EC2.DeepCopy(), AKS: n.AKS.DeepCopy()}
}

// MarshalJSON writes the member object; the zero NodeClass is null.
func (n NodeClass) MarshalJSON() ([]byte, error) {
	switch {
	case n.EC2 != nil:
		c := *n.EC2
		if c.Kind == "" { // typed informers' objects carry no TypeMeta: name the kind for UnmarshalJSON
			c.TypeMeta = metav1.TypeMeta{APIVersion: AWSGroupVersion, Kind: KindEC2NodeClass}
		}
		return json.Marshal(&c)
	case n.AKS != nil:
		c := *n.AKS
		if c.Kind == "" {
			c.TypeMeta = metav1.TypeMeta{APIVersion: AzureGroupVersion, Kind: KindAKSNodeClass}
		}
		return json.Marshal(&c)
	}
	return []byte("null"), nil
}

// UnmarshalJSON reads an object and picks the member by its kind. Errors: a kind that is no
// NodeClass Dovetail knows, or a member that does not decode.
func (n *NodeClass) UnmarshalJSON(b []byte) error {
	*n = NodeClass{}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(b, &tm); err != nil {
		return fmt.Errorf("nodeClass: %w", err)
	}
	switch tm.Kind {
	case KindEC2NodeClass, "":
		n.EC2 = &EC2NodeClass{}
		return json.Unmarshal(b, n.EC2)
	case KindAKSNodeClass:
		n.AKS = &AKSNodeClass{}
		return json.Unmarshal(b, n.AKS)
	default:
		return fmt.Errorf("nodeClass: kind %q is not a NodeClass Dovetail knows (%s, %s)", tm.Kind, KindEC2NodeClass, KindAKSNodeClass)
	}
}
