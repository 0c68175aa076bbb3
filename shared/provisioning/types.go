// Package provisioning is Dovetail's solver: pending pods + cluster state + catalog →
// NodeClaims, each with its ranked offerings. It is pure: no I/O, no wall clock, no map-order
// dependence, so the same input always gives the same plan.
package provisioning

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/commitments"
	"github.com/dovetail-dev/dovetail/shared/overlay"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// MaxInstanceTypes caps how many instance types a NodeClaim's offering list carries, as
// Karpenter does (MaxInstanceTypes = 60 in its CreateFleet path): the cheapest 60 types keep
// every useful fallback while keeping the fleet request small.
const MaxInstanceTypes = 60

// Input is everything one decision needs.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes are the cluster's nodes; BoundPods the non-terminal pods bound to them.
	Nodes     []*corev1.Node
	BoundPods []*corev1.Pod
	// NodeClaims are all NodeClaims. Those not yet backed by a registered Node are in flight:
	// their capacity absorbs pods before new NodeClaims are opened.
	NodeClaims []*apisv1.NodeClaim
	DaemonSets []*appsv1.DaemonSet
	// LimitRanges give DaemonSet pods the defaults admission would (their overhead is counted
	// with them); pending pods arrive admitted already.
	LimitRanges []*corev1.LimitRange
	NodePools   []*apisv1.NodePool
	NodeClasses []apisv1.NodeClass
	Catalog     *catalog.Catalog
	// NodeSettings gives the settings a NodeClass's nodes boot with (image family, kubelet block,
	// ephemeral volume), which change their allocatable. The edge supplies it from the cloud
	// provider (cloud.NodeSettingsFor), so the plan assumes exactly the room the node will
	// report; nil gives catalog.NodeSettings' defaults for every NodeClass.
	NodeSettings NodeSettingsFunc
	// Unavailable reports offerings marked unavailable (ICE); nil means none are. A reserved
	// offering is marked as instance type × zone × "reserved".
	Unavailable func(instanceType, zone, capacityType, scope string) bool
	// ReservationCounts are the free instances of the capacity reservations the NodeClasses'
	// status lists, by reservation id, as the cloud reported them for this decision (the edge
	// asks EC2; `dovetail plan` reads apisv1.AnnotationReservationCounts). A reservation without
	// a count is not offered. See reservationsLeft for how NodeClaims in flight are counted.
	ReservationCounts map[string]apisv1.ReservationCount
	// Time is the decision's time (the snapshot's, dated by the function's clock), used to stop
	// offering a capacity block within apisv1.CapacityBlockExpiryLead of its end (zero: the
	// reservations' status state alone decides) and as the end of the scale-up rate policies'
	// windows (zero: every NodeClaim counts in every window).
	Time time.Time
	// ScaleUpGuardrails applies the NodePools' scale-up rate policies
	// (guardrails.AnnotationScaleUpPolicies) as limits. The provision function sets it; the
	// replacements of interruption, drift, repair and consolidation never do, so they are never
	// held (they still count, as NodeClaims created in the window, against later scale-ups).
	ScaleUpGuardrails bool
	// Volumes: claims, volumes and classes the pods' volumes refer to. A bound PVC pins its PV's
	// node affinity; an unbound WaitForFirstConsumer PVC its class's allowedTopologies.
	PVCs           []*corev1.PersistentVolumeClaim
	PVs            []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
	// RequireResolvedNodeClasses refuses NodePools whose NodeClass has no Ready condition yet
	// (the lifecycle function has not resolved it), not only those Ready=False. The functions
	// set it when their provider resolves NodeClasses; `dovetail plan` over manifests does not.
	RequireResolvedNodeClasses bool
	// Overlays are the NodeOverlays resolved against the NodePools and Catalog (overlay.Resolve,
	// once per decision: consolidation's simulations share it); nil applies none. Every offering
	// price the solver ranks, bounds and returns, and every type's capacity, is the overlaid one.
	Overlays *overlay.Store
	// Commitments are the cluster's Savings Plans and Reserved Instances / Azure reservations
	// (nil: none, and the solver does no commitment work). The nodes and in-flight NodeClaims
	// consume them first; the plan's on-demand offerings are priced at what is left (see
	// commitments.go).
	Commitments *apisv1.Commitments
	// CommitmentUsage, when not nil, is what consumes Commitments before the plan instead of
	// Nodes and the in-flight NodeClaims (consolidation's simulations pass every node they keep,
	// including those left out of Nodes as too full to matter).
	CommitmentUsage []commitments.Usage
	// ledger is what the nodes and in-flight NodeClaims leave of Commitments (compile sets it).
	ledger *commitments.Ledger
	// Simulation asks for placements only, as consolidation does hundreds of times per
	// decision: no lower bound (Plan.LowerBoundPerHour stays 0) and no pattern packing (first-fit,
	// refine and the LP-guided re-pack only), which keeps a simulation cheap.
	Simulation bool
	// Policies are the operator's --min-values-policy and --preference-policy (zero: Strict,
	// Respect); consolidation's simulations plan under the same ones, as Karpenter's do.
	Policies Policies
	// Requests memoizes the pods' effective requests (scheduling.PodRequests) across the solver
	// runs of one caller over the same pods, as the preview's many evaluations of one cluster
	// are; nil computes them per run.
	Requests *scheduling.RequestMemo
	// Bins keeps the existing nodes' bins across the solver runs of one caller (BinCache); nil
	// builds them per run.
	Bins *BinCache
}

// NodeSettingsFunc computes a NodeClass's node settings; the zero NodeClass (a NodePool whose
// NodeClass is missing) must give the defaults. Errors name the field under "spec".
type NodeSettingsFunc func(apisv1.NodeClass) (catalog.NodeSettings, error)

func (in *Input) nodeSettings(nc apisv1.NodeClass) (catalog.NodeSettings, error) {
	if in.NodeSettings == nil {
		return catalog.NodeSettings{}, nil
	}
	return in.NodeSettings(nc)
}

// Plan is the solver's decision.
type Plan struct {
	NodeClaims    []*NodeClaimPlan
	ExistingNodes []*NodePlacement
	Unschedulable []Unschedulable
	// LowerBoundPerHour is a lower bound (USD per hour) on the cost of any plan that places the
	// pods this plan put on new NodeClaims on new nodes (the fit-cut bound of package
	// lowerbound: no plan can be cheaper); 0 when no pod needs a new node.
	LowerBoundPerHour float64
	// Commitments is each commitment's utilisation by the cluster's nodes and this plan's
	// NodeClaims together; nil without Input.Commitments.
	Commitments []commitments.Use
}

// Gap is how much more than the lower bound the plan costs, as a fraction: TotalPricePerHour /
// LowerBoundPerHour − 1. The plan costs at most this fraction more than the cheapest possible
// plan (0.05: at most 5 % more). 0 when there is no bound (no new NodeClaims).
func (p *Plan) Gap() float64 {
	if p.LowerBoundPerHour <= 0 {
		return 0
	}
	return max(p.TotalPricePerHour()/p.LowerBoundPerHour-1, 0)
}

// NodeClaimPlan is one node to launch.
type NodeClaimPlan struct {
	NodePool     *apisv1.NodePool
	NodeClassRef *apisv1.NodeClassReference
	// Requirements are the NodePool's requirements intersected with every placed pod's.
	Requirements scheduling.Requirements
	// Labels are what the node registers with: template labels, the pool name and the
	// single-valued requirements.
	Labels        map[string]string
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	Pods          []*corev1.Pod
	// Requests is the sum of the pods' effective requests (DaemonSet overhead excluded).
	Requests scheduling.Resources
	// Slot tells apart the NodeClaims of one decision that carry no pods (a static NodePool's,
	// StaticPlans: "static-<i>"); it is part of the NodeClaim's name. "" for a pod-driven claim.
	Slot string
	// Offerings are what the fleet request may choose from, cheapest first. NodeClaims of one
	// plan with the same candidates share the slice: filter into a new one, never in place.
	Offerings []Offering
	// MinValuesRelaxed: under MinValuesBestEffort, the candidate types could not keep some
	// requirement's minValues, and Requirements carry the lowered minValues (the distinct values
	// the candidates have). The launch annotates the NodeClaim
	// karpenter.sh/nodeclaim-min-values-relaxed with it.
	MinValuesRelaxed bool
	// EffectivePricePerHour is what the first offering costs under the commitments, USD per
	// hour (0 under a Reserved Instance, the Savings Plan's rate on its covered share, list
	// beyond); meaningful only when Committed.
	EffectivePricePerHour float64
	Committed             bool
}

// Offering is one ranked launch option for a NodeClaim.
type Offering struct {
	InstanceType *catalog.InstanceType
	catalog.Offering
	// DaemonOverhead is the DaemonSet pods' requests on this instance type.
	DaemonOverhead scheduling.Resources
}

// InstanceTypeOptions returns the distinct instance type names in offering order.
func (n *NodeClaimPlan) InstanceTypeOptions() []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range n.Offerings {
		if !seen[o.InstanceType.Name] {
			seen[o.InstanceType.Name] = true
			out = append(out, o.InstanceType.Name)
		}
	}
	return out
}

// PriceOverlayApplied reports whether a NodeOverlay changed the price of an offering of one of
// the claim's instance types (Karpenter's IsPricingOverlayApplied over the claim's types, which
// sets apisv1.AnnotationPriceOverlayApplied on the NodeClaim).
func (n *NodeClaimPlan) PriceOverlayApplied() bool {
	for _, o := range n.Offerings {
		for _, to := range o.InstanceType.Offerings {
			if to.PriceOverlay != "" {
				return true
			}
		}
	}
	return false
}

// CapacityOverlayApplied reports whether a NodeOverlay added capacity to one of the claim's
// instance types (apisv1.AnnotationCapacityOverlayApplied).
func (n *NodeClaimPlan) CapacityOverlayApplied() bool {
	for _, o := range n.Offerings {
		if len(o.InstanceType.OverlayCapacity) > 0 {
			return true
		}
	}
	return false
}

// Cheapest returns the first offering (what the fleet would get first).
func (n *NodeClaimPlan) Cheapest() Offering { return n.Offerings[0] }

// NodePlacement lists pods placed on an existing node or an in-flight NodeClaim.
type NodePlacement struct {
	// Name is the node's name, or the NodeClaim's name when InFlight.
	Name     string
	InFlight bool
	Pods     []*corev1.Pod
}

// Unschedulable is a pod no node can take, with the reason.
type Unschedulable struct {
	Pod    *corev1.Pod
	Reason string
	// Refusals are Reason's parts, typed: each NodePool tried (in weight order) and what turned
	// the pod away there; one Refusal without a NodePool when the pod itself is invalid or no
	// NodePool exists.
	Refusals []Refusal
	// AwaitingNodeClasses names the NodeClasses ("EC2NodeClass default", sorted) whose status is
	// not written yet and whose NodePools turned the pod away for that reason alone: the pod
	// waits for them to resolve rather than failing (Input.RequireResolvedNodeClasses). Empty
	// when no such NodePool was a candidate.
	AwaitingNodeClasses []string
	// LimitsExceeded names, for each NodePool whose limits turned the pod away (in weight
	// order), the limits that did: those every instance type the pod fits exceeds in what is
	// left after the plan's own new NodeClaims, else each one some type exceeds (resources
	// sorted). Empty when no NodePool's limits refused the pod. The typed form of Reason's
	// "limits exceeded" parts, for metrics.
	LimitsExceeded []LimitHit
}

// LimitHit is one NodePool limit that turned a pod away: Resource is a spec.limits resource name (cpu,
// memory, nodes, nvidia.com/gpu, ...) or ResourcePricePerHour for the price guardrail
// (apisv1.AnnotationMaxPricePerHour).
type LimitHit struct {
	NodePool string
	Resource corev1.ResourceName
}

// Waiting reports whether the pod may still be placed once its NodeClasses resolve.
func (u Unschedulable) Waiting() bool { return len(u.AwaitingNodeClasses) > 0 }

// TotalPricePerHour sums the first offering of every NodeClaim (USD per hour), each at its
// effective price under the commitments when the plan was made with them.
func (p *Plan) TotalPricePerHour() float64 {
	var t float64
	for _, n := range p.NodeClaims {
		t += n.PricePerHour()
	}
	return t
}

// PricePerHour is what the claim's first offering costs, USD per hour: its effective price
// under the commitments when the plan was made with them, else the offering's price.
func (n *NodeClaimPlan) PricePerHour() float64 {
	if n.Committed {
		return n.EffectivePricePerHour
	}
	return n.Cheapest().PricePerHour
}

func sortBy[T any](xs []T, key func(T) string) {
	sort.SliceStable(xs, func(i, j int) bool { return key(xs[i]) < key(xs[j]) })
}
