// Package v1 holds Dovetail's NodePool, NodeClaim and EC2NodeClass types. They are wire-compatible
// with Karpenter's karpenter.sh/v1 and karpenter.k8s.aws/v1 APIs, so the manifests users already
// have apply unchanged. The types are plain structs (no controller-runtime), so the pure core can
// import them.
package v1

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API groups and versions Dovetail reads.
const (
	Group           = "karpenter.sh"
	Version         = "v1"
	GroupVersion    = Group + "/" + Version
	V1beta1Version  = Group + "/v1beta1"
	AWSGroup        = "karpenter.k8s.aws"
	AWSGroupVersion = AWSGroup + "/v1"
)

// Well-known labels, annotations and taints (the karpenter.sh and Kubernetes ones, so existing
// selectors and tolerations keep working).
const (
	LabelNodePool          = "karpenter.sh/nodepool"
	LabelCapacityType      = "karpenter.sh/capacity-type"
	LabelNodeInitialized   = "karpenter.sh/initialized"
	LabelNodeRegistered    = "karpenter.sh/registered"
	AnnotationDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	AnnotationNodePoolHash = "karpenter.sh/nodepool-hash"
	TaintKeyDisrupted      = "karpenter.sh/disrupted"
	// AnnotationNodeClaimMinValuesRelaxed is "true" on a NodeClaim whose requirements' minValues
	// were lowered to launch it (--min-values-policy=BestEffort), else "false"; Karpenter's
	// scheduler writes it on every NodeClaim it makes (NodeClaimMinValuesRelaxedAnnotationKey).
	AnnotationNodeClaimMinValuesRelaxed = "karpenter.sh/nodeclaim-min-values-relaxed"
	TaintKeyUnregistered                = "karpenter.sh/unregistered"
	// TaintKeyPlanned (value: the NodeClaim) keeps a new node for the pods planned onto it,
	// which tolerate it, until they are bound; then the lifecycle function removes it.
	TaintKeyPlanned = "dovetail.dev/planned"

	LabelInstanceCategory   = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily     = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration = "karpenter.k8s.aws/instance-generation"
	LabelInstanceSize       = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU        = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceMemory     = "karpenter.k8s.aws/instance-memory"
	LabelInstanceGPUCount   = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUName    = "karpenter.k8s.aws/instance-gpu-name"
	LabelInstanceHypervisor = "karpenter.k8s.aws/instance-hypervisor"
	LabelEC2NodeClass       = "karpenter.k8s.aws/ec2nodeclass"

	CapacityTypeOnDemand = "on-demand"
	CapacityTypeSpot     = "spot"
	CapacityTypeReserved = "reserved"

	// Dovetail's own tags and labels.
	LabelNodeClaim = "dovetail.dev/nodeclaim"
	// LabelManagedBy (value ManagedByAgent) is the ownership mark the agent writes on every
	// NodeClaim it creates, and lets no command write: with the Node's spec.providerID equal to
	// the NodeClaim's status.providerID it is what makes a Node or NodeClaim Dovetail's
	// (shared/kube ownership.go).
	LabelManagedBy = "dovetail.dev/managed-by"
	ManagedByAgent = "dovetail-agent"
	// AnnotationPlannedPods lists the pods ("namespace/name", comma-separated) the decision
	// placed on a NodeClaim, so that once its Node registers their nominatedNodeName can point
	// there and the scheduler binds them where they were planned.
	AnnotationPlannedPods = "dovetail.dev/planned-pods"
	// AnnotationSnapshotRevision is the snapshot revision a NodeClaim was decided on: the
	// NodeClaims of one decision share it.
	AnnotationSnapshotRevision = "dovetail.dev/snapshot-revision"
	TagCluster                 = "dovetail.dev/cluster"
	TagNodePool                = "karpenter.sh/nodepool"
	TagNodeClaim               = "karpenter.sh/nodeclaim"
)

// PlannedTaint is the dovetail.dev/planned taint a node launched for NodeClaim nc carries until
// the pods planned onto it are bound.
func PlannedTaint(nc string) corev1.Taint {
	return corev1.Taint{Key: TaintKeyPlanned, Value: nc, Effect: corev1.TaintEffectNoSchedule}
}

// PlannedToleration tolerates PlannedTaint(nc): what a pod planned onto that node is given.
func PlannedToleration(nc string) corev1.Toleration {
	return corev1.Toleration{Key: TaintKeyPlanned, Operator: corev1.TolerationOpEqual, Value: nc, Effect: corev1.TaintEffectNoSchedule}
}

// HasPlannedToleration reports whether pod carries PlannedToleration(nc) exactly: the pod was
// planned onto nc's node and given its toleration already.
func HasPlannedToleration(pod *corev1.Pod, nc string) bool {
	return slices.Contains(pod.Spec.Tolerations, PlannedToleration(nc))
}

// Consolidation policies. The v1beta1 name WhenUnderutilized converts to WhenEmptyOrUnderutilized.
// Balanced (Karpenter v1.14, kubernetes-sigs/karpenter pkg/apis/v1/nodepool.go) consolidates
// what WhenEmptyOrUnderutilized does, but only moves whose savings justify the disruption they
// cause (shared/disruption balanced.go).
const (
	ConsolidationPolicyWhenEmpty                = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized = "WhenEmptyOrUnderutilized"
	ConsolidationPolicyBalanced                 = "Balanced"
	ConsolidationPolicyWhenUnderutilized        = "WhenUnderutilized" // v1beta1 only
)

// BalancedK is the Balanced policy's scoring parameter: a move is approved when its score
// (share of the pool's cost saved over share of the pool's disruption cost caused) is at least
// 1/BalancedK = 0.5. Karpenter v1.14 fixes it at 2 (pkg/apis/v1/nodepool.go BalancedK; no field).
const BalancedK = 2

// Disruption reasons, used by budgets.
const (
	DisruptionReasonUnderutilized = "Underutilized"
	DisruptionReasonEmpty         = "Empty"
	DisruptionReasonDrifted       = "Drifted"
)

// NodePool is karpenter.sh/v1 NodePool: a template for the nodes Dovetail may launch, with
// requirements, limits, weight and disruption rules.
// +kubebuilder:object:root=true
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodePoolSpec   `json:"spec"`
	Status            NodePoolStatus `json:"status,omitempty"`
}

// NodePoolSpec is the desired shape of a NodePool.
type NodePoolSpec struct {
	Template   NodeClaimTemplate `json:"template"`
	Disruption Disruption        `json:"disruption,omitempty"`
	// Limits caps the total capacity (cpu, memory, nvidia.com/gpu, ...) of all nodes of the pool.
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Weight orders NodePools: higher weight is tried first (0-100).
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes the NodePool static: it holds exactly this many NodeClaims whatever its
	// pods need (shared/static decides; Karpenter v1.14's alpha static capacity). With it,
	// weight and every limit but limits.nodes are refused and consolidation is off.
	Replicas *int64 `json:"replicas,omitempty"`
}

// NodeClaimTemplate is what every NodeClaim of the pool starts from.
type NodeClaimTemplate struct {
	ObjectMeta ObjectMeta    `json:"metadata,omitempty"`
	Spec       NodeClaimSpec `json:"spec"`
}

// ObjectMeta is the subset of metadata a NodeClaim template may set.
type ObjectMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Disruption configures consolidation and budgets.
type Disruption struct {
	// ConsolidateAfter is a duration ("30s") or "Never".
	ConsolidateAfter    *NillableDuration `json:"consolidateAfter,omitempty"`
	ConsolidationPolicy string            `json:"consolidationPolicy,omitempty"`
	Budgets             []Budget          `json:"budgets,omitempty"`
	// ConsolidateWhen is Karpenter's newer cost-aware policy (WhenEmpty, WhenEmptyOrUnderutilized,
	// WhenCostJustifiesDisruption); accepted and preserved so such manifests decode.
	ConsolidateWhen string `json:"consolidateWhen,omitempty"`
	// DecisionRatioThreshold (> 0, Karpenter's default 1.0) goes with ConsolidateWhen=WhenCostJustifiesDisruption.
	DecisionRatioThreshold *float64 `json:"decisionRatioThreshold,omitempty"`
}

// Budget limits how many nodes may be disrupted at once. Nodes is a count ("5") or a percentage
// ("10%"); Schedule (cron) and Duration make it active only in a window; Reasons narrows it.
type Budget struct {
	Reasons  []string         `json:"reasons,omitempty"`
	Nodes    string           `json:"nodes"`
	Schedule *string          `json:"schedule,omitempty"`
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodePoolStatus reports the pool's provisioned resources and conditions.
type NodePoolStatus struct {
	Resources  corev1.ResourceList `json:"resources,omitempty"`
	Conditions []metav1.Condition  `json:"conditions,omitempty"`
	// Nodes is the number of nodes of the pool.
	Nodes *int64 `json:"nodes,omitempty"`
	// NodeClassObservedGeneration is the generation of the NodeClass last seen.
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
}

// NodeClaim is karpenter.sh/v1 NodeClaim: one node Dovetail asked the cloud for.
// +kubebuilder:object:root=true
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeClaimSpec   `json:"spec"`
	Status            NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimSpec is shared by NodePool templates and NodeClaims.
type NodeClaimSpec struct {
	Taints        []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements  []NodeSelectorRequirementWithMinValues `json:"requirements"`
	Resources     ResourceRequirements                   `json:"resources,omitempty"`
	NodeClassRef  *NodeClassReference                    `json:"nodeClassRef"`
	// ExpireAfter is a duration ("720h") or "Never".
	ExpireAfter            NillableDuration `json:"expireAfter,omitempty"`
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
}

// NodeSelectorRequirementWithMinValues is a node selector requirement with Karpenter's minValues:
// the offering list must keep at least MinValues distinct values for the key.
type NodeSelectorRequirementWithMinValues struct {
	corev1.NodeSelectorRequirement `json:",inline"`
	MinValues                      *int `json:"minValues,omitempty"`
}

// ResourceRequirements is the requests the NodeClaim was sized for.
type ResourceRequirements struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClassReference points at the cloud-specific NodeClass.
type NodeClassReference struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// NodeClaimStatus is what the cloud and the node reported.
type NodeClaimStatus struct {
	NodeName         string              `json:"nodeName,omitempty"`
	ProviderID       string              `json:"providerID,omitempty"`
	ImageID          string              `json:"imageID,omitempty"`
	Capacity         corev1.ResourceList `json:"capacity,omitempty"`
	Allocatable      corev1.ResourceList `json:"allocatable,omitempty"`
	Conditions       []metav1.Condition  `json:"conditions,omitempty"`
	LastPodEventTime *metav1.Time        `json:"lastPodEventTime,omitempty"`
}

// NodeClaim condition types.
const (
	ConditionLaunched    = "Launched"
	ConditionRegistered  = "Registered"
	ConditionInitialized = "Initialized"
	ConditionDrifted     = "Drifted"
	ConditionReady       = "Ready"
	// Termination conditions, as Karpenter v1.14's node termination controller writes them
	// (pkg/apis/v1 nodeclaim_status.go; pkg/controllers/node/termination drain.go,
	// volumedetachment.go, pkg/utils/termination EnsureTerminated).
	ConditionDrained             = "Drained"
	ConditionVolumesDetached     = "VolumesDetached"
	ConditionInstanceTerminating = "InstanceTerminating"
)

// NodePoolList and friends let manifests and informers carry lists.
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// NodeClaimList is a list of NodeClaims.
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// AnnotationMaxPricePerHour is Dovetail's spend guardrail on a NodePool: the most its nodes and
// in-flight NodeClaims may cost together, in USD per hour (a decimal, e.g. "12.50"). An
// annotation rather than a spec field, so Karpenter's NodePool schema stays untouched; the
// solver enforces it like spec.limits (in-flight NodeClaims count, each new NodeClaim at the
// highest price of the offerings its fleet request may pick). Accelerator caps need no
// annotation: spec.limits takes any resource name (nvidia.com/gpu: 4, aws.amazon.com/neuron: 16),
// and Karpenter enforces those too.
const AnnotationMaxPricePerHour = "dovetail.dev/max-price-per-hour"

// MaxPricePerHour returns the NodePool's price guardrail (USD per hour) and whether it has one.
// Error: the annotation is not a non-negative decimal number.
func MaxPricePerHour(np *NodePool) (float64, bool, error) {
	v, ok := np.Annotations[AnnotationMaxPricePerHour]
	if !ok {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, true, fmt.Errorf("metadata.annotations[%s]: %q is not a non-negative number of USD per hour", AnnotationMaxPricePerHour, v)
	}
	return f, true, nil
}

// ConditionSpendWithinLimits is Dovetail's NodePool condition for its limits and spend
// guardrails (spec.limits, accelerator counts among them, and AnnotationMaxPricePerHour): False
// with ReasonLimitReached naming each limit the pool's NodeClaims have reached. A condition of
// its own, so Karpenter's Ready keeps its meaning.
const (
	ConditionSpendWithinLimits = "SpendWithinLimits"
	ReasonLimitReached         = "LimitReached"
)
