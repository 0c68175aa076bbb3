package manifests

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis"
	apiv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// coreDecoder decodes the built-in kinds strictly (unknown and duplicate fields are errors)
// without defaulting or conversion, as `kubectl apply --validate=strict` would refuse them.
// The scheme holds only the groups of coreKinds, not client-go's scheme of every API group: that
// one linked a quarter of each function's bootstrap (docs/benchmarks.md, "Lambda bootstraps").
var coreDecoder = serializer.NewCodecFactory(coreScheme(), serializer.EnableStrict).UniversalDeserializer()

// coreScheme registers the API groups of coreKinds (core, apps, batch, policy, storage; v1 each).
func coreScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme,
		batchv1.AddToScheme, policyv1.AddToScheme, storagev1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("manifests: scheme: %v", err))
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// header is what every document must carry to be routed.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// coreKinds are the built-in kinds Dovetail reads, with the one API version accepted for each
// (the GA versions; older ones were removed from Kubernetes by 1.25).
var coreKinds = map[string]string{
	"Deployment":          "apps/v1",
	"StatefulSet":         "apps/v1",
	"ReplicaSet":          "apps/v1",
	"DaemonSet":           "apps/v1",
	"Job":                 "batch/v1",
	"CronJob":             "batch/v1",
	"Pod":                 "v1",
	"Node":                "v1",
	"Namespace":           "v1",
	"PodDisruptionBudget": "policy/v1",
	// Volumes: the solver honours their topology (PV node affinity, StorageClass
	// allowedTopologies and volumeBindingMode).
	"PersistentVolumeClaim": "v1",
	"PersistentVolume":      "v1",
	"StorageClass":          "storage.k8s.io/v1",
	// LimitRange: the defaults admission gives the pods of its namespace.
	"LimitRange": "v1",
	// PodTemplate: the pods a ProvisioningRequest's pod sets stand for.
	"PodTemplate": "v1",
}

func (s *Set) decodeDocument(src Source, raw []byte) error {
	if s.decoded++; s.progress != nil && s.decoded%ProgressEvery == 0 {
		s.progress(s.decoded)
	}
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return &Error{Source: src, Reason: "not a Kubernetes object: " + err.Error()}
	}
	if h.APIVersion == "" && h.Kind == "" {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s: no apiVersion and kind, not a Kubernetes object; skipped", src))
		return nil
	}
	if h.Kind == "" {
		return &Error{Source: src, Field: "kind", Reason: "required"}
	}
	if h.APIVersion == "" {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: "apiVersion", Reason: "required"}
	}
	if h.Kind == "List" {
		return s.decodeList(src, h, raw)
	}
	group := h.APIVersion
	if i := strings.LastIndex(group, "/"); i >= 0 {
		group = group[:i]
	} else {
		group = ""
	}
	switch {
	case group == apiv1.Group || group == apiv1.AWSGroup || group == apiv1.AzureGroup:
		return s.decodeKarpenter(src, h, raw)
	case group == provisioningRequestGroup && h.Kind == kindProvisioningRequest:
		return s.decodeProvisioningRequest(src, h, raw)
	case h.Kind == "ConfigMap" && h.APIVersion == "v1" && h.Metadata.Name == apiv1.CommitmentsConfigMap:
		return s.decodeCommitments(src, h, raw)
	case coreKinds[h.Kind] != "" && (group == "" || isBuiltinGroup(group)):
		if want := coreKinds[h.Kind]; h.APIVersion != want {
			return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: "apiVersion",
				Reason: fmt.Sprintf("%s is not supported for %s; use %s", h.APIVersion, h.Kind, want)}
		}
		return s.decodeCore(src, h, raw)
	default:
		s.skip(h.Kind)
		return nil
	}
}

// isBuiltinGroup reports whether group is one of the built-in API groups that serve the core
// kinds in some (older) version, so an old apiVersion is refused rather than skipped.
func isBuiltinGroup(group string) bool {
	switch group {
	case "apps", "batch", "policy", "extensions", "storage.k8s.io":
		return true
	}
	return false
}

// decodeList reads `kind: List` (what `kubectl get -o yaml` prints): each item is decoded as a
// document of its own.
func (s *Set) decodeList(src Source, h header, raw []byte) error {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return &Error{Source: src, Kind: "List", Field: "items", Reason: "want a list of objects: " + err.Error()}
	}
	if src.Item >= 0 {
		return &Error{Source: src, Kind: "List", Reason: "a List inside a List is not supported"}
	}
	for i, item := range list.Items {
		isrc := src
		isrc.Item = i
		if err := s.decodeDocument(isrc, item); err != nil {
			return err
		}
	}
	return nil
}

// jsonFieldError matches encoding/json's type errors, which name the Go type, then the JSON
// path ("... Go struct field DeploymentSpec.spec.replicas of type int32").
var jsonFieldError = regexp.MustCompile(`Go struct field \w+\.([\w.\[\]]+) of type (\S+)`)

func (s *Set) decodeCore(src Source, h header, raw []byte) error {
	if err := checkBounds(src, h, raw); err != nil {
		return err
	}
	obj, _, err := coreDecoder.Decode(raw, nil, nil)
	if err != nil {
		return coreError(src, h, raw, err)
	}
	if m, ok := obj.(metav1.Object); ok && m.GetName() != "" {
		ns := m.GetNamespace()
		if ns == "" && !clusterScoped[h.Kind] {
			ns = DefaultNamespace
		}
		if err := s.claim(src, h.Kind, ns, m.GetName()); err != nil {
			return err
		}
	}
	if err := checkValues(src, h, obj); err != nil {
		return err
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		defaultNamespace(&o.ObjectMeta.Namespace)
		return s.addWorkload(src, o, h.Kind, o.Name, o.Namespace, o.Spec.Replicas, o.Spec.Template)
	case *appsv1.StatefulSet:
		defaultNamespace(&o.ObjectMeta.Namespace)
		return s.addWorkload(src, o, h.Kind, o.Name, o.Namespace, o.Spec.Replicas, o.Spec.Template)
	case *appsv1.ReplicaSet:
		defaultNamespace(&o.ObjectMeta.Namespace)
		return s.addWorkload(src, o, h.Kind, o.Name, o.Namespace, o.Spec.Replicas, o.Spec.Template)
	case *batchv1.Job:
		defaultNamespace(&o.ObjectMeta.Namespace)
		n, err := jobActivePods(src, h, "spec", o.Spec)
		if err != nil {
			return err
		}
		return s.addWorkload(src, o, h.Kind, o.Name, o.Namespace, &n, o.Spec.Template)
	case *batchv1.CronJob:
		defaultNamespace(&o.ObjectMeta.Namespace)
		n, err := jobActivePods(src, h, "spec.jobTemplate.spec", o.Spec.JobTemplate.Spec)
		if err != nil {
			return err
		}
		return s.addWorkload(src, o, h.Kind, o.Name, o.Namespace, &n, o.Spec.JobTemplate.Spec.Template)
	case *corev1.Pod:
		defaultNamespace(&o.ObjectMeta.Namespace)
		if err := checkName(src, h); err != nil {
			return err
		}
		if err := checkPodSpec(src, h, "spec", &o.Spec); err != nil {
			return err
		}
		s.Pods = append(s.Pods, o)
		s.remember(o)
	case *appsv1.DaemonSet:
		defaultNamespace(&o.ObjectMeta.Namespace)
		if err := checkName(src, h); err != nil {
			return err
		}
		if err := checkPodSpec(src, h, "spec.template.spec", &o.Spec.Template.Spec); err != nil {
			return err
		}
		s.DaemonSets = append(s.DaemonSets, o)
	case *policyv1.PodDisruptionBudget:
		defaultNamespace(&o.ObjectMeta.Namespace)
		if err := checkName(src, h); err != nil {
			return err
		}
		if o.Spec.MinAvailable != nil && o.Spec.MaxUnavailable != nil {
			return &Error{Source: src, Kind: h.Kind, Name: o.Name, Field: "spec",
				Reason: "minAvailable and maxUnavailable are mutually exclusive"}
		}
		s.PDBs = append(s.PDBs, o)
	case *corev1.Node:
		if err := checkName(src, h); err != nil {
			return err
		}
		s.Nodes = append(s.Nodes, o)
	case *corev1.Namespace:
		if err := checkName(src, h); err != nil {
			return err
		}
		s.Namespaces = append(s.Namespaces, o)
	case *corev1.PersistentVolumeClaim:
		defaultNamespace(&o.ObjectMeta.Namespace)
		if err := checkName(src, h); err != nil {
			return err
		}
		s.PVCs = append(s.PVCs, o)
	case *corev1.PersistentVolume:
		if err := checkName(src, h); err != nil {
			return err
		}
		s.PVs = append(s.PVs, o)
	case *corev1.PodTemplate:
		defaultNamespace(&o.ObjectMeta.Namespace)
		if err := checkName(src, h); err != nil {
			return err
		}
		if err := checkPodSpec(src, h, "template.spec", &o.Template.Spec); err != nil {
			return err
		}
		s.PodTemplates = append(s.PodTemplates, o)
	case *corev1.LimitRange:
		defaultNamespace(&o.ObjectMeta.Namespace)
		if err := checkName(src, h); err != nil {
			return err
		}
		s.LimitRanges = append(s.LimitRanges, o)
	case *storagev1.StorageClass:
		if err := checkName(src, h); err != nil {
			return err
		}
		if o.Provisioner == "" {
			return &Error{Source: src, Kind: h.Kind, Name: o.Name, Field: "provisioner", Reason: "required"}
		}
		if m := o.VolumeBindingMode; m != nil && *m != storagev1.VolumeBindingImmediate && *m != storagev1.VolumeBindingWaitForFirstConsumer {
			return &Error{Source: src, Kind: h.Kind, Name: o.Name, Field: "volumeBindingMode",
				Reason: fmt.Sprintf("%q is not Immediate or WaitForFirstConsumer", *m)}
		}
		s.StorageClasses = append(s.StorageClasses, o)
	default:
		// Unreachable: coreKinds and this switch list the same kinds.
		return &Error{Source: src, Kind: h.Kind, Reason: fmt.Sprintf("decoded to unexpected type %T", obj)}
	}
	return nil
}

// coreError turns a decoder error into an *Error with the field path when the decoder gave one.
func coreError(src Source, h header, raw []byte, err error) *Error {
	e := &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name}
	if runtime.IsStrictDecodingError(err) {
		// "strict decoding error: unknown field "spec.foo", duplicate field "x"": already a path.
		e.Reason = strings.TrimPrefix(err.Error(), "strict decoding error: ")
		return e
	}
	msg := err.Error()
	if strings.Contains(msg, "quantities must match") {
		// resource.Quantity's parse error carries no path; find the offending value ourselves.
		if path, val, ok := findBadQuantity(raw); ok {
			e.Field = path
			e.Reason = fmt.Sprintf("%q is not a quantity (want e.g. 250m, 1.5, 512Mi, 2Gi)", val)
			return e
		}
	}
	if m := jsonFieldError.FindStringSubmatch(msg); m != nil {
		e.Field = m[1]
		e.Reason = "wrong type, want " + m[2] + " (" + msg + ")"
		return e
	}
	e.Reason = msg
	return e
}

// resourceListKeys are the fields of the core kinds whose values are resource.Quantity maps.
var resourceListKeys = map[string]bool{
	"requests": true, "limits": true, "capacity": true, "allocatable": true, "overhead": true,
}

// findBadQuantity returns the path and value of the first entry of a resource list (requests,
// limits, capacity, allocatable, overhead) that does not parse as a quantity, walking the
// document in key order.
func findBadQuantity(raw []byte) (path, value string, ok bool) {
	var doc any
	if json.Unmarshal(raw, &doc) != nil {
		return "", "", false
	}
	var walk func(v any, path string, inList bool) (string, string, bool)
	walk = func(v any, path string, inList bool) (string, string, bool) {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := k
				if path != "" {
					p = path + "." + k
				}
				if inList {
					if s, isStr := t[k].(string); isStr {
						if _, err := resource.ParseQuantity(s); err != nil {
							return p, s, true
						}
					}
					continue
				}
				if p, s, found := walk(t[k], p, resourceListKeys[k]); found {
					return p, s, true
				}
			}
		case []any:
			for i, e := range t {
				if p, s, found := walk(e, fmt.Sprintf("%s[%d]", path, i), false); found {
					return p, s, true
				}
			}
		}
		return "", "", false
	}
	return walk(doc, "", false)
}

// clusterScoped are the core kinds without a namespace.
var clusterScoped = map[string]bool{"Node": true, "Namespace": true, "PersistentVolume": true, "StorageClass": true}

func defaultNamespace(ns *string) {
	if *ns == "" {
		*ns = DefaultNamespace
	}
}

func checkName(src Source, h header) error {
	if h.Metadata.Name == "" {
		return &Error{Source: src, Kind: h.Kind, Field: "metadata.name", Reason: "required"}
	}
	return nil
}

// checkPodSpec refuses what would make a pod meaningless to the solver; the API server's full
// validation is not repeated here.
func checkPodSpec(src Source, h header, field string, spec *corev1.PodSpec) error {
	if len(spec.Containers) == 0 {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: field + ".containers",
			Reason: "at least one container is required"}
	}
	for i, c := range spec.Containers {
		if c.Name == "" {
			return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name,
				Field: fmt.Sprintf("%s.containers[%d].name", field, i), Reason: "required"}
		}
	}
	if err := scheduling.ValidatePodResources(spec); err != nil {
		// The error's path starts at the pod spec ("spec.containers[0]...: reason"); the
		// manifest's field is under the template's.
		path, reason, _ := strings.Cut(err.Error(), ": ")
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: field + strings.TrimPrefix(path, "spec"), Reason: reason}
	}
	return nil
}

// MaxReplicas is the most pods one workload may expand to (the pods of a Job or CronJob counted
// as it runs them at once): 20,000, enough for the largest clusters Dovetail plans (its solver
// benchmarks run 10,000 pods at once), and small enough that a typo ("replicas: 10000000")
// fails with a message instead of running out of memory.
const MaxReplicas = 20000

// jobActivePods is how many pods a Job runs at once: parallelism (default 1), capped by
// completions when set (the Job controller never starts more pods than remaining completions).
// Source: Kubernetes Job docs, "Controlling parallelism".
func jobActivePods(src Source, h header, field string, spec batchv1.JobSpec) (int32, error) {
	n := int32(1)
	if spec.Parallelism != nil {
		if *spec.Parallelism < 0 {
			return 0, &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: field + ".parallelism",
				Reason: fmt.Sprintf("must be >= 0, got %d", *spec.Parallelism)}
		}
		n = *spec.Parallelism
	}
	if spec.Completions != nil {
		if *spec.Completions < 0 {
			return 0, &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: field + ".completions",
				Reason: fmt.Sprintf("must be >= 0, got %d", *spec.Completions)}
		}
		n = min(n, *spec.Completions)
	}
	return n, nil
}

func (s *Set) addWorkload(src Source, obj runtime.Object, kind, name, ns string, replicas *int32, tmpl corev1.PodTemplateSpec) error {
	h := header{Kind: kind}
	h.Metadata.Name = name
	if err := checkName(src, h); err != nil {
		return err
	}
	templateField := "spec.template.spec"
	if kind == "CronJob" {
		templateField = "spec.jobTemplate.spec.template.spec"
	}
	if err := checkPodSpec(src, h, templateField, &tmpl.Spec); err != nil {
		return err
	}
	n := int32(1) // Deployment, StatefulSet and ReplicaSet default spec.replicas to 1.
	if replicas != nil {
		if *replicas < 0 {
			return &Error{Source: src, Kind: kind, Name: name, Field: "spec.replicas",
				Reason: fmt.Sprintf("must be >= 0, got %d", *replicas)}
		}
		n = *replicas
	}
	if n > MaxReplicas {
		return &Error{Source: src, Kind: kind, Name: name, Field: "spec.replicas",
			Reason: fmt.Sprintf("%d is more than Dovetail plans for one workload (at most %d)", n, MaxReplicas)}
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	w := &Workload{
		Kind: kind, APIVersion: gvk.GroupVersion().String(), Name: name, Namespace: ns,
		Replicas: n, Template: tmpl, Object: obj, Source: src,
	}
	s.Workloads = append(s.Workloads, w)
	s.remember(w)
	return nil
}

// decodeKarpenter reads the karpenter.sh (NodeOverlay included), karpenter.k8s.aws and karpenter.azure.com kinds with shared/apis.Load
// (strict decoding, v1beta1 converted to v1, defaults filled, validated). Any other kind of those groups (v1alpha5 Provisioner, ...) is refused
// rather than skipped: silently dropping a pool would make every plan wrong.
func (s *Set) decodeKarpenter(src Source, h header, raw []byte) error {
	if !apis.IsKnown(h.APIVersion, h.Kind) {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: "apiVersion",
			Reason: fmt.Sprintf("%s %s is not supported; Dovetail reads karpenter.sh/v1 (and v1beta1) NodePool, karpenter.sh/v1 NodeClaim, karpenter.sh/v1alpha1 NodeOverlay, karpenter.k8s.aws/v1 (and v1beta1) EC2NodeClass and karpenter.azure.com/v1beta1 (and v1alpha2) AKSNodeClass", h.APIVersion, h.Kind)}
	}
	if err := checkName(src, h); err != nil {
		return err
	}
	if err := checkBounds(src, h, raw); err != nil {
		return err
	}
	obj, err := apis.Load(raw)
	if err != nil {
		// apis errors are field-error aggregates that already start with the field path.
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Reason: err.Error()}
	}
	if err := s.claim(src, h.Kind, "", h.Metadata.Name); err != nil {
		return err
	}
	switch o := obj.(type) {
	case *apiv1.NodePool:
		s.NodePools = append(s.NodePools, o)
	case *apiv1.EC2NodeClass:
		s.NodeClasses = append(s.NodeClasses, apiv1.NodeClass{EC2: o})
	case *apiv1.AKSNodeClass:
		s.NodeClasses = append(s.NodeClasses, apiv1.NodeClass{AKS: o})
	case *apiv1.NodeClaim:
		s.NodeClaims = append(s.NodeClaims, o)
	case *apiv1.NodeOverlay:
		s.NodeOverlays = append(s.NodeOverlays, o)
	default:
		return &Error{Source: src, Kind: h.Kind, Reason: fmt.Sprintf("decoded to unexpected type %T", obj)}
	}
	return nil
}

// checkValues refuses an object whose label, annotation, taint, toleration or quantity values
// the API server would refuse (shared/apis/validate), so a manifest or a kubectl dump never
// carries into a plan, or a node's bootstrap, what a cluster could not hold. The first problem
// is named with its field path; the count of the others follows.
func checkValues(src Source, h header, obj runtime.Object) error {
	var errs field.ErrorList
	meta := func(m *metav1.ObjectMeta) {
		errs = append(errs, validate.Labels(m.Labels, field.NewPath("metadata", "labels"))...)
		errs = append(errs, validate.Annotations(m.Annotations, field.NewPath("metadata", "annotations"))...)
	}
	template := func(p *field.Path, t *corev1.PodTemplateSpec) {
		errs = append(errs, validate.Labels(t.Labels, p.Child("metadata", "labels"))...)
		errs = append(errs, validate.Annotations(t.Annotations, p.Child("metadata", "annotations"))...)
		errs = append(errs, validate.PodSpec(&t.Spec, p.Child("spec"))...)
	}
	spec := field.NewPath("spec")
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta(&o.ObjectMeta)
		template(spec.Child("template"), &o.Spec.Template)
	case *appsv1.StatefulSet:
		meta(&o.ObjectMeta)
		template(spec.Child("template"), &o.Spec.Template)
	case *appsv1.ReplicaSet:
		meta(&o.ObjectMeta)
		template(spec.Child("template"), &o.Spec.Template)
	case *appsv1.DaemonSet:
		meta(&o.ObjectMeta)
		template(spec.Child("template"), &o.Spec.Template)
	case *batchv1.Job:
		meta(&o.ObjectMeta)
		template(spec.Child("template"), &o.Spec.Template)
	case *batchv1.CronJob:
		meta(&o.ObjectMeta)
		template(spec.Child("jobTemplate", "spec", "template"), &o.Spec.JobTemplate.Spec.Template)
	case *corev1.Pod:
		meta(&o.ObjectMeta)
		errs = append(errs, validate.PodSpec(&o.Spec, spec)...)
	case *corev1.PodTemplate:
		meta(&o.ObjectMeta)
		template(field.NewPath("template"), &o.Template)
	case *corev1.Node:
		meta(&o.ObjectMeta)
		errs = append(errs, validate.Taints(o.Spec.Taints, spec.Child("taints"), nil)...)
		errs = append(errs, validate.ResourceList(o.Status.Capacity, field.NewPath("status", "capacity"))...)
		errs = append(errs, validate.ResourceList(o.Status.Allocatable, field.NewPath("status", "allocatable"))...)
	case metav1.Object:
		errs = append(errs, validate.Labels(o.GetLabels(), field.NewPath("metadata", "labels"))...)
		errs = append(errs, validate.Annotations(o.GetAnnotations(), field.NewPath("metadata", "annotations"))...)
	}
	if len(errs) == 0 {
		return nil
	}
	reason := errs[0].ErrorBody()
	if len(errs) > 1 {
		reason += fmt.Sprintf(" (and %d more invalid fields)", len(errs)-1)
	}
	return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: errs[0].Field, Reason: reason}
}

// decodeCommitments reads the commitments ConfigMap (apiv1.CommitmentsFromConfigMap); a second
// one is an error naming both.
func (s *Set) decodeCommitments(src Source, h header, raw []byte) error {
	if err := checkBounds(src, h, raw); err != nil {
		return err
	}
	obj, _, err := coreDecoder.Decode(raw, nil, nil)
	if err != nil {
		return coreError(src, h, raw, err)
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Reason: "not a ConfigMap"}
	}
	if err := s.claim(src, h.Kind, "commitments", h.Metadata.Name); err != nil {
		return err
	}
	c, err := apiv1.CommitmentsFromConfigMap(cm)
	if err != nil {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: "data[" + apiv1.CommitmentsKey + "]", Reason: strings.TrimPrefix(err.Error(), "ConfigMap "+cm.Namespace+"/"+cm.Name+": data["+apiv1.CommitmentsKey+"]: ")}
	}
	s.Commitments = c
	return nil
}

// Cluster Autoscaler's ProvisioningRequest: the one version it serves (v1beta1 is deprecated and
// not read, as the provision function does not serve it: docs/batch.md).
const (
	provisioningRequestGroup   = "autoscaling.x-k8s.io"
	provisioningRequestVersion = provisioningRequestGroup + "/v1"
	kindProvisioningRequest    = "ProvisioningRequest"
)

// decodeProvisioningRequest reads an autoscaling.x-k8s.io/v1 ProvisioningRequest strictly
// (unknown and duplicate fields are errors) and checks it against the CRD's schema as a
// snapshot's is checked (events.ValidateProvisioningRequest), status included: a dump carries
// the conditions the provision function wrote.
func (s *Set) decodeProvisioningRequest(src Source, h header, raw []byte) error {
	if h.APIVersion != provisioningRequestVersion {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Field: "apiVersion",
			Reason: fmt.Sprintf("%s is not supported for %s; use %s", h.APIVersion, h.Kind, provisioningRequestVersion)}
	}
	if err := checkName(src, h); err != nil {
		return err
	}
	if err := checkBounds(src, h, raw); err != nil {
		return err
	}
	pr := &apiv1.ProvisioningRequest{}
	strict, err := kjson.UnmarshalStrict(raw, pr, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Reason: err.Error()}
	}
	if len(strict) > 0 {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Reason: strict[0].Error()}
	}
	defaultNamespace(&pr.Namespace)
	if err := s.claim(src, h.Kind, pr.Namespace, pr.Name); err != nil {
		return err
	}
	if err := events.ValidateProvisioningRequest(pr); err != nil {
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Reason: err.Error()}
	}
	s.ProvisioningRequests = append(s.ProvisioningRequests, pr)
	return nil
}
