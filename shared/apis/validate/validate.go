// Package validate checks Kubernetes object values by the rules the API server applies, written
// once for every entry: manifests and kubectl dumps (shared/manifests, shared/apis), the snapshot
// and the commands that arrive over the queue (events), and the launch path right before node
// bootstrap is rendered (shared/cloud/aws/userdata, shared/cloud/azure/customdata).
//
// The rules are the API server's: metadata through k8s.io/apimachinery's own validators
// (pkg/api/validation ValidateAnnotations and ValidateFinalizerName, pkg/apis/meta/v1/validation
// ValidateLabels, pkg/api/validate/content IsLabelKey, IsLabelValue, IsDNS1123Subdomain and
// IsDNS1123Label, with byte-loop fast paths for the valid case: fast.go); the core-type rules that
// live in k8s.io/kubernetes pkg/apis/core/validation (not importable) are restated here with the
// function they restate named on each. Every function returns all problems with their field path
// and never panics; a nil or empty input is valid unless the rule requires a value. A valid
// input returns nil without touching the path, so a caller with many objects may check with a
// nil path first and build the real one only when something is wrong.
//
// The package imports only apimachinery, k8s.io/api and the plain API types (shared/apis/v1), so
// the wire contract (events) can use it without taking on shared/apis' defaults and conversions.
package validate

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// TaintEffects are the effects a taint may have (k8s.io/kubernetes pkg/apis/core/validation
// validateTaintEffect; Karpenter's NodePool CRD enum is the same three).
var TaintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

// Name checks an object name is a DNS-1123 subdomain (at most 253 characters of lower-case
// alphanumerics, '-' and '.', starting and ending alphanumeric): the API server's
// NameIsDNSSubdomain, which Node (ValidateNodeName), Pod, NodePool and NodeClaim names follow.
func Name(name string, p *field.Path) field.ErrorList {
	if dns1123SubdomainOK(name) {
		return nil
	}
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return invalid(p, name, content.IsDNS1123Subdomain(name))
}

// Namespace checks a namespace name is a DNS-1123 label (at most 63 characters; the API server's
// ValidateNamespaceName).
func Namespace(ns string, p *field.Path) field.ErrorList {
	if dns1123LabelOK(ns) {
		return nil
	}
	if ns == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return invalid(p, ns, content.IsDNS1123Label(ns))
}

// Labels checks label keys (qualified names: an optional DNS-1123 subdomain prefix of at most
// 253 characters and '/', then at most 63 characters of alphanumerics, '-', '_', '.') and values
// (at most 63 characters of the same set, starting and ending alphanumeric, or empty), with
// apimachinery's ValidateLabels, the API server's own. Paths are p[key].
func Labels(labels map[string]string, p *field.Path) field.ErrorList {
	if labelsOK(labels) {
		return nil
	}
	// ValidateLabels reports keys at p and values at p; naming the key makes the field unique.
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		errs = append(errs, metavalidation.ValidateLabels(map[string]string{k: labels[k]}, p.Key(k))...)
	}
	return errs
}

// LabelValue checks one label value (content.IsLabelValue, formerly IsValidLabelValue) at p;
// requirement values and taint values follow the same rule.
func LabelValue(v string, p *field.Path) field.ErrorList {
	if labelValueOK(v) {
		return nil
	}
	return invalid(p, v, content.IsLabelValue(v))
}

// QualifiedName checks a label, taint or annotation key (content.IsLabelKey, formerly
// IsQualifiedName) at p; empty is Required.
func QualifiedName(k string, p *field.Path) field.ErrorList {
	if labelKeyOK(k) {
		return nil
	}
	if k == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return invalid(p, k, content.IsLabelKey(k))
}

// invalid turns apimachinery's messages about v into one field.Invalid each at p.
func invalid(p *field.Path, v string, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, m := range msgs {
		errs = append(errs, field.Invalid(p, v, m))
	}
	return errs
}

// Annotations checks annotation keys (qualified names, lower-cased as the API server does) and
// their total size (keys plus values at most 256 KiB, TotalAnnotationSizeLimitB) with
// apimachinery's ValidateAnnotations.
func Annotations(annotations map[string]string, p *field.Path) field.ErrorList {
	return apivalidation.ValidateAnnotations(annotations, p)
}

// Finalizers checks each finalizer is a qualified name (apimachinery ValidateFinalizerName).
func Finalizers(finalizers []string, p *field.Path) field.ErrorList {
	ok := true
	for _, f := range finalizers {
		ok = ok && labelKeyOK(f)
	}
	if ok {
		return nil
	}
	var errs field.ErrorList
	for i, f := range finalizers {
		errs = append(errs, apivalidation.ValidateFinalizerName(f, p.Index(i))...)
	}
	return errs
}

// ObjectMeta checks what Dovetail reads of an object's metadata: name (DNS-1123 subdomain),
// namespace (a DNS-1123 label; required when namespaced, forbidden otherwise), labels,
// annotations and finalizers. p is the object's path; children are metadata.*.
func ObjectMeta(m *metav1.ObjectMeta, namespaced bool, p *field.Path) field.ErrorList {
	if dns1123SubdomainOK(m.Name) && (namespaced && dns1123LabelOK(m.Namespace) || !namespaced && m.Namespace == "") &&
		labelsOK(m.Labels) && len(m.Annotations) == 0 && len(m.Finalizers) == 0 {
		return nil
	}
	mp := p.Child("metadata")
	errs := Name(m.Name, mp.Child("name"))
	switch {
	case namespaced:
		errs = append(errs, Namespace(m.Namespace, mp.Child("namespace"))...)
	case m.Namespace != "":
		errs = append(errs, field.Forbidden(mp.Child("namespace"), "not allowed on this cluster-scoped object"))
	}
	errs = append(errs, Labels(m.Labels, mp.Child("labels"))...)
	errs = append(errs, Annotations(m.Annotations, mp.Child("annotations"))...)
	return append(errs, Finalizers(m.Finalizers, mp.Child("finalizers"))...)
}

// Taint checks one taint: key a qualified name (required), value a label value, effect one of
// NoSchedule, PreferNoSchedule, NoExecute. Restates k8s.io/kubernetes pkg/apis/core/validation
// validateNodeTaints (and validateTaintEffect with allowEmpty false).
func Taint(t corev1.Taint, p *field.Path) field.ErrorList {
	errs := QualifiedName(t.Key, p.Child("key"))
	errs = append(errs, LabelValue(t.Value, p.Child("value"))...)
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	case "":
		errs = append(errs, field.Required(p.Child("effect"), "one of NoSchedule, PreferNoSchedule, NoExecute"))
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), string(t.Effect), TaintEffects))
	}
	return errs
}

// Taints checks each taint and that no key and effect pair repeats across the lists sharing
// seen (validateNodeTaints: "taints must be unique by key and effect pair"); seen may be nil.
func Taints(taints []corev1.Taint, p *field.Path, seen map[string]bool) field.ErrorList {
	if len(taints) == 0 {
		return nil
	}
	if seen == nil {
		seen = map[string]bool{}
	}
	var errs field.ErrorList
	for i, t := range taints {
		tp := p.Index(i)
		errs = append(errs, Taint(t, tp)...)
		k := t.Key + "\x00" + string(t.Effect)
		if seen[k] {
			errs = append(errs, field.Duplicate(tp, fmt.Sprintf("%s:%s", t.Key, t.Effect)))
		}
		seen[k] = true
	}
	return errs
}

// Tolerations checks each toleration (Toleration) at p[i].
func Tolerations(tols []corev1.Toleration, p *field.Path) field.ErrorList {
	ok := true
	for i := range tols {
		ok = ok && tolerationOK(&tols[i])
	}
	if ok {
		return nil
	}
	var errs field.ErrorList
	for i, t := range tols {
		errs = append(errs, Toleration(t, p.Index(i))...)
	}
	return errs
}

// Toleration restates k8s.io/kubernetes pkg/apis/core/validation ValidateTolerations for one
// toleration: a key, when set, is a qualified name; an empty key needs operator Exists; operator
// Exists takes no value, Equal (or empty) takes a label value; other operators are refused; the
// effect is empty or a taint effect; tolerationSeconds only with NoExecute.
func Toleration(t corev1.Toleration, tp *field.Path) field.ErrorList {
	if tolerationOK(&t) {
		return nil
	}
	return tolerationRules(t, tp)
}

// tolerationRules is Toleration without the fast path.
func tolerationRules(t corev1.Toleration, tp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, QualifiedName(t.Key, tp.Child("key"))...)
	} else if t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(tp.Child("operator"), t.Operator, "operator must be Exists when key is empty"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		errs = append(errs, LabelValue(t.Value, tp.Child("value"))...)
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(tp.Child("value"), t.Value, "value must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(tp.Child("operator"), string(t.Operator), []string{"Equal", "Exists"}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(tp.Child("effect"), string(t.Effect), TaintEffects))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(tp.Child("effect"), t.Effect, "effect must be NoExecute when tolerationSeconds is set"))
	}
	return errs
}

// ResourceList checks resource names (qualified names; validateResourceName) and that every
// quantity is non-negative (ValidateResourceQuantityValue / ValidateNonnegativeQuantity).
func ResourceList(rl corev1.ResourceList, p *field.Path) field.ErrorList {
	if resourceListOK(rl) {
		return nil
	}
	var errs field.ErrorList
	for _, name := range sortedKeys(rl) {
		rp := p.Key(name)
		errs = append(errs, QualifiedName(name, rp)...)
		if q := rl[corev1.ResourceName(name)]; q.Sign() < 0 {
			errs = append(errs, field.Invalid(rp, q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

// NodeSelectorRequirement checks a requirement's key (qualified name) and values (label values,
// which is what they become on a node: Karpenter's NodePool CRD requires the same). Operators and
// value counts are shared/apis' (Karpenter's) rules; this is the part that reaches a node.
func NodeSelectorRequirement(key string, values []string, p *field.Path) field.ErrorList {
	errs := QualifiedName(key, p.Child("key"))
	for i, v := range values {
		errs = append(errs, LabelValue(v, p.Child("values").Index(i))...)
	}
	return errs
}

// NodeClaimSpec checks the values of a NodeClaim (or NodePool template) spec that reach a node's
// labels, taints or sizing: requirement keys and values, taints and startupTaints (unique by key
// and effect across both, as Karpenter's webhook requires) and resource requests.
func NodeClaimSpec(s *v1.NodeClaimSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range s.Requirements {
		errs = append(errs, NodeSelectorRequirement(r.Key, r.Values, p.Child("requirements").Index(i))...)
	}
	seen := map[string]bool{}
	errs = append(errs, Taints(s.Taints, p.Child("taints"), seen)...)
	errs = append(errs, Taints(s.StartupTaints, p.Child("startupTaints"), seen)...)
	return append(errs, ResourceList(s.Resources.Requests, p.Child("resources", "requests"))...)
}

// NodePool checks a NodePool's metadata, its template's labels and annotations, its template
// spec (NodeClaimSpec) and its limits. p is the NodePool's path.
func NodePool(np *v1.NodePool, p *field.Path) field.ErrorList {
	errs := ObjectMeta(&np.ObjectMeta, false, p)
	tmpl := p.Child("spec", "template")
	errs = append(errs, Labels(np.Spec.Template.ObjectMeta.Labels, tmpl.Child("metadata", "labels"))...)
	errs = append(errs, Annotations(np.Spec.Template.ObjectMeta.Annotations, tmpl.Child("metadata", "annotations"))...)
	errs = append(errs, NodeClaimSpec(&np.Spec.Template.Spec, tmpl.Child("spec"))...)
	return append(errs, ResourceList(np.Spec.Limits, p.Child("spec", "limits"))...)
}

// NodeClaim checks a NodeClaim's metadata and spec. p is the NodeClaim's path.
func NodeClaim(nc *v1.NodeClaim, p *field.Path) field.ErrorList {
	errs := ObjectMeta(&nc.ObjectMeta, false, p)
	return append(errs, NodeClaimSpec(&nc.Spec, p.Child("spec"))...)
}

// Node checks a Node's metadata, spec.taints and its status capacity and allocatable.
func Node(n *corev1.Node, p *field.Path) field.ErrorList {
	errs := ObjectMeta(&n.ObjectMeta, false, p)
	errs = append(errs, Taints(n.Spec.Taints, p.Child("spec", "taints"), nil)...)
	errs = append(errs, ResourceList(n.Status.Capacity, p.Child("status", "capacity"))...)
	return append(errs, ResourceList(n.Status.Allocatable, p.Child("status", "allocatable"))...)
}

// PodSpec checks the scheduling constraints of a pod spec: nodeSelector (labels), tolerations,
// and node affinity requirement keys and values. PodResources checks its quantities.
func PodSpec(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	if podSpecOK(s) {
		return nil
	}
	errs := Labels(s.NodeSelector, p.Child("nodeSelector"))
	errs = append(errs, Tolerations(s.Tolerations, p.Child("tolerations"))...)
	if a := s.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		tp := p.Child("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		for i, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for j, r := range term.MatchExpressions {
				errs = append(errs, nodeAffinityRequirement(r, tp.Index(i).Child("matchExpressions").Index(j))...)
			}
		}
	}
	return errs
}

// PodResources checks a pod spec's container, init container and overhead resource names and
// quantities (non-negative). shared/scheduling ValidatePodResources adds the request-within-limit
// rule for manifests; this is the part every entry shares.
func PodResources(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	ok := resourceListOK(s.Overhead)
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			ok = ok && resourceListOK(list[i].Resources.Requests) && resourceListOK(list[i].Resources.Limits)
		}
	}
	if ok {
		return nil
	}
	var errs field.ErrorList
	for _, cs := range []struct {
		name string
		list []corev1.Container
	}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
		for i, c := range cs.list {
			cp := p.Child(cs.name).Index(i).Child("resources")
			errs = append(errs, ResourceList(c.Resources.Requests, cp.Child("requests"))...)
			errs = append(errs, ResourceList(c.Resources.Limits, cp.Child("limits"))...)
		}
	}
	return append(errs, ResourceList(s.Overhead, p.Child("overhead"))...)
}

// nodeAffinityRequirement restates the API server's ValidateNodeSelectorRequirement for what
// Dovetail reads: the key is a qualified name and, for In and NotIn, each value a label value.
// Gt and Lt take one integer, which may be negative ("-1" is not a label value), so those
// values are left to the scheduling code that parses them.
func nodeAffinityRequirement(r corev1.NodeSelectorRequirement, p *field.Path) field.ErrorList {
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		return NodeSelectorRequirement(r.Key, r.Values, p)
	}
	return QualifiedName(r.Key, p.Child("key"))
}

// Pod checks a pod's metadata (namespaced), PodSpec and PodResources.
func Pod(pod *corev1.Pod, p *field.Path) field.ErrorList {
	errs := ObjectMeta(&pod.ObjectMeta, true, p)
	errs = append(errs, PodSpec(&pod.Spec, p.Child("spec"))...)
	return append(errs, PodResources(&pod.Spec, p.Child("spec"))...)
}

// tolerationOK is Toleration's rules as a yes or no (TestTolerationAndPodSpecFastPaths checks the
// two agree).
func tolerationOK(t *corev1.Toleration) bool {
	if t.Key == "" {
		if t.Operator != corev1.TolerationOpExists {
			return false
		}
	} else if !labelKeyOK(t.Key) {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if !labelValueOK(t.Value) {
			return false
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			return false
		}
	default:
		return false
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return false
	}
	return t.TolerationSeconds == nil || t.Effect == corev1.TaintEffectNoExecute
}

// podSpecOK is PodSpec's rules as a yes or no.
func podSpecOK(s *corev1.PodSpec) bool {
	if !labelsOK(s.NodeSelector) {
		return false
	}
	for i := range s.Tolerations {
		if !tolerationOK(&s.Tolerations[i]) {
			return false
		}
	}
	if a := s.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range term.MatchExpressions {
				if !labelKeyOK(r.Key) {
					return false
				}
				if r.Operator == corev1.NodeSelectorOpIn || r.Operator == corev1.NodeSelectorOpNotIn {
					for _, v := range r.Values {
						if !labelValueOK(v) {
							return false
						}
					}
				}
			}
		}
	}
	return true
}

// resourceListOK says every name is a qualified name and every quantity non-negative.
func resourceListOK(rl corev1.ResourceList) bool {
	for name, q := range rl {
		if !labelKeyOK(string(name)) || q.Sign() < 0 {
			return false
		}
	}
	return true
}

// labelsOK says every key and value is valid (the fast paths), so no path need be built.
func labelsOK(labels map[string]string) bool {
	for k, v := range labels {
		if !labelKeyOK(k) || !labelValueOK(v) {
			return false
		}
	}
	return true
}

func sortedKeys[K ~string, V any](m map[K]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	return keys
}
