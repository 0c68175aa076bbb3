// Package manifests reads Kubernetes manifests (files, directories, multi-document YAML or JSON)
// into a Set of typed objects for `dovetail plan` and local dev mode: Karpenter NodePools,
// EC2NodeClasses and NodeClaims, and the core kinds the solver needs (workload controllers, Pods,
// DaemonSets, PodDisruptionBudgets, Nodes, Namespaces, and the volume kinds
// PersistentVolumeClaim, PersistentVolume and StorageClass).
//
// Kinds Dovetail does not use (Services, ConfigMaps, CRDs, ...) are skipped with a warning, so a
// whole `helm template` render can be passed in. A malformed document is an error that names the
// file, the document index (0-based, in file order) and the field path.
package manifests

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	apiv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// DefaultNamespace is given to namespaced objects whose metadata.namespace is empty, as kubectl
// does without --namespace.
const DefaultNamespace = "default"

// Set is everything read from a group of manifests, each slice in document order.
type Set struct {
	NodePools   []*apiv1.NodePool
	NodeClasses []apiv1.NodeClass
	NodeClaims  []*apiv1.NodeClaim
	// NodeOverlays are karpenter.sh/v1alpha1 price and capacity overlays (validated as the API
	// server admits them; Karpenter's runtime rules are applied when they are resolved).
	NodeOverlays []*apiv1.NodeOverlay
	// Commitments are the Savings Plans and Reserved Instances of the ConfigMap named
	// apiv1.CommitmentsConfigMap (in any namespace; at most one); nil without it. Other
	// ConfigMaps are skipped.
	Commitments *apiv1.Commitments
	// ProvisioningRequests are Cluster Autoscaler's autoscaling.x-k8s.io/v1 ProvisioningRequests
	// (every class; status as read), and PodTemplates the PodTemplates read (those their pod
	// sets name, and any other).
	ProvisioningRequests []*apiv1.ProvisioningRequest
	PodTemplates         []*corev1.PodTemplate
	// Pods are the standalone Pod documents; those with spec.nodeName are bound to a Node.
	Pods []*corev1.Pod
	// Workloads are the pod controllers (Deployment, StatefulSet, ReplicaSet, Job, CronJob);
	// ExpandPods turns them into pods.
	Workloads  []*Workload
	DaemonSets []*appsv1.DaemonSet
	// LimitRanges give the pods of their namespace (controllers' pods, Pods, DaemonSet pods)
	// the defaults admission would.
	LimitRanges []*corev1.LimitRange
	PDBs        []*policyv1.PodDisruptionBudget
	// Nodes are existing capacity.
	Nodes      []*corev1.Node
	Namespaces []*corev1.Namespace
	// PVCs are the PersistentVolumeClaim documents as written; ExpandPVCs adds the claims of
	// StatefulSets' volumeClaimTemplates and the default StorageClass.
	PVCs []*corev1.PersistentVolumeClaim
	// PVs and StorageClasses are cluster-scoped (no namespace).
	PVs            []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
	// Warnings lists documents that are not Kubernetes objects and skipped Karpenter kinds, one
	// line each, then one line counting the objects of kinds Dovetail does not use, per kind (a
	// `kubectl get` dump holds thousands of them: ConfigMaps, Events, Services...).
	Warnings []string
	// Skipped counts the objects of kinds Dovetail does not use, by kind.
	Skipped map[string]int

	// order remembers the document position of pods and workloads so ExpandPods can interleave
	// them in document order.
	order map[any]int
	seq   int
	// seen maps "kind/namespace/name" to where it was first read, to refuse duplicates.
	seen map[string]Source
	// decoded counts the documents and List items decoded; progress hears of it
	// (LoadOptions.Progress).
	decoded  int
	progress func(objects int)
}

// Objects counts the objects read that Dovetail plans with (every kind of the Set; not the
// skipped kinds counted in Skipped).
func (s *Set) Objects() int {
	return len(s.NodePools) + len(s.NodeClasses) + len(s.NodeClaims) + len(s.NodeOverlays) + len(s.Pods) + len(s.Workloads) + len(s.DaemonSets) +
		len(s.LimitRanges) + len(s.PDBs) + len(s.Nodes) + len(s.Namespaces) + len(s.PVCs) + len(s.PVs) + len(s.StorageClasses) +
		len(s.ProvisioningRequests) + len(s.PodTemplates)
}

// Workload is one pod controller read from a manifest.
type Workload struct {
	// Kind is Deployment, StatefulSet, ReplicaSet, Job or CronJob; APIVersion is apps/v1 or batch/v1.
	Kind       string
	APIVersion string
	Name       string
	Namespace  string
	// Replicas is the number of pods the controller runs at once: spec.replicas (default 1) for
	// Deployment, StatefulSet and ReplicaSet; for a Job (and one run of a CronJob) the active pods,
	// min(parallelism (default 1), completions when set), as the Job controller starts them.
	Replicas int32
	// Template is the pod template (labels, annotations, spec).
	Template corev1.PodTemplateSpec
	// Object is the decoded controller: *appsv1.Deployment, *appsv1.StatefulSet,
	// *appsv1.ReplicaSet, *batchv1.Job or *batchv1.CronJob.
	Object runtime.Object
	// Source is where it was read.
	Source Source
}

// Source locates a document: file path, 0-based document index in the file, and the 0-based
// index in the items of a `kind: List` document (-1 when the document is not a List).
type Source struct {
	File string
	Doc  int
	Item int
}

// String is "file doc N" or "file doc N items[M]".
func (s Source) String() string {
	if s.Item >= 0 {
		return fmt.Sprintf("%s doc %d items[%d]", s.File, s.Doc, s.Item)
	}
	return fmt.Sprintf("%s doc %d", s.File, s.Doc)
}

// Error is a malformed document: where it is, which object, the field path and the reason.
type Error struct {
	Source Source
	// Kind and Name identify the object when they could be read ("" otherwise).
	Kind, Name string
	// Field is the field path ("spec.replicas"); empty when the reason already names it.
	Field  string
	Reason string
}

func (e *Error) Error() string {
	reason := e.Reason
	if len(reason) > MaxReasonBytes {
		reason = reason[:MaxReasonBytes] + fmt.Sprintf("... (%d bytes in all)", len(e.Reason))
	}
	msg := e.Source.String()
	if e.Kind != "" {
		msg += ": " + e.Kind
		if e.Name != "" {
			msg += " " + e.Name
		}
	}
	if e.Field != "" {
		return msg + ": " + e.Field + ": " + reason
	}
	return msg + ": " + reason
}

// MaxReasonBytes bounds the reason an Error prints: a bad value of megabytes is cut, not echoed.
const MaxReasonBytes = 512

// claim records kind/namespace/name as read at src; a second object with the same identity is
// an error (kubectl apply would silently let the later one win).
func (s *Set) claim(src Source, kind, namespace, name string) error {
	if s.seen == nil {
		s.seen = map[string]Source{}
	}
	key := kind + "/" + namespace + "/" + name
	if first, dup := s.seen[key]; dup {
		id := name
		if namespace != "" {
			id = namespace + "/" + name
		}
		return &Error{Source: src, Kind: kind, Name: name, Field: "metadata.name",
			Reason: fmt.Sprintf("duplicate: %s %s is already defined at %s", kind, id, first)}
	}
	s.seen[key] = src
	return nil
}

func (s *Set) remember(obj any) {
	if s.order == nil {
		s.order = map[any]int{}
	}
	s.order[obj] = s.seq
	s.seq++
}

// skip counts an object of a kind Dovetail does not use.
func (s *Set) skip(kind string) {
	if s.Skipped == nil {
		s.Skipped = map[string]int{}
	}
	s.Skipped[kind]++
}

// summarise appends the one warning line that counts the skipped objects per kind ("skipped 7
// objects of kinds Dovetail does not use: ConfigMap 2, Service 5"), kinds in name order.
func (s *Set) summarise() {
	if len(s.Skipped) == 0 {
		return
	}
	kinds := make([]string, 0, len(s.Skipped))
	total := 0
	for k, n := range s.Skipped {
		kinds = append(kinds, k)
		total += n
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, s.Skipped[k])
	}
	noun := "objects"
	if total == 1 {
		noun = "object"
	}
	s.Warnings = append(s.Warnings, fmt.Sprintf("skipped %d %s of kinds Dovetail does not use: %s", total, noun, strings.Join(parts, ", ")))
}
