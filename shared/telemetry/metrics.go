package telemetry

// Label names: Karpenter's (sigs.k8s.io/karpenter v1.14.0 pkg/metrics/constants.go and the
// controllers' metrics.go), so existing dashboards and alerts select the same series.
const (
	LabelNodePool         = "nodepool"
	LabelReason           = "reason"
	LabelResourceType     = "resource_type"
	LabelCapacityType     = "capacity_type"
	LabelZone             = "zone"
	LabelMinValuesRelaxed = "min_values_relaxed"
	LabelController       = "controller"
	LabelSchedulingID     = "scheduling_id"
	LabelDecision         = "decision"
	LabelConsolidation    = "consolidation_type"
	LabelMessageType      = "message_type"
	LabelMethod           = "method"
	LabelProvider         = "provider"
	LabelError            = "error"
	// Dovetail's own.
	LabelFunction  = "function"
	LabelKind      = "kind"
	LabelResult    = "result"
	LabelGuardrail = "guardrail"
)

// Controller label values: Karpenter's controller names where a Dovetail function does the
// same work (provisioner, disruption), else the function's name.
const (
	ControllerProvisioner  = "provisioner"
	ControllerDisruption   = "disruption"
	ControllerInterruption = "interruption"
	ControllerLifecycle    = "lifecycle"
)

// ControllerOf is the controller label of a function's metrics: provision is Karpenter's
// provisioner, consolidate and drift its disruption controller; others keep their name.
func ControllerOf(function string) string {
	switch function {
	case "provision":
		return ControllerProvisioner
	case "consolidate", "drift":
		return ControllerDisruption
	}
	return function
}

// Karpenter's metrics (names, kinds and label sets of sigs.k8s.io/karpenter v1.14.0 and
// aws/karpenter-provider-aws for interruption). The metrics table of docs/metrics.md says where
// Dovetail emits each.
var (
	NodeClaimsCreated = &Metric{Name: "karpenter_nodeclaims_created_total", Kind: Counter, Unit: UnitCount,
		Help:   "Number of nodeclaims created in total. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
		Labels: []string{LabelReason, LabelNodePool, LabelMinValuesRelaxed}}
	NodeClaimsTerminated = &Metric{Name: "karpenter_nodeclaims_terminated_total", Kind: Counter, Unit: UnitCount,
		Help:   "Number of nodeclaims terminated in total. Labeled by the owning nodepool, capacity type, and zone.",
		Labels: []string{LabelNodePool, LabelCapacityType, LabelZone}}
	NodeClaimsDisrupted = &Metric{Name: "karpenter_nodeclaims_disrupted_total", Kind: Counter, Unit: UnitCount,
		Help:   "Number of nodeclaims disrupted in total. Labeled by reason the nodeclaim was disrupted, the owning nodepool and capacity type.",
		Labels: []string{LabelReason, LabelNodePool, LabelCapacityType}}
	// NodeClaimsUnhealthyDisrupted is Karpenter's node health controller's counter
	// (pkg/controllers/node/health metrics.go): condition is the Node condition type in snake case
	// ("ready", "accelerated_hardware_ready"), image_id the NodeClaim's status.imageID.
	NodeClaimsUnhealthyDisrupted = &Metric{Name: "karpenter_nodeclaims_unhealthy_disrupted_total", Kind: Counter, Unit: UnitCount,
		Help:   "Number of unhealthy nodeclaims disrupted in total. Labeled by condition on the node was disrupted, the owning nodepool, and the image ID.",
		Labels: []string{"condition", LabelNodePool, LabelCapacityType, "image_id"}}
	NodesCreated = &Metric{Name: "karpenter_nodes_created_total", Kind: Counter, Unit: UnitCount,
		Help:   "Number of nodes created in total. Labeled by owning nodepool and zone.",
		Labels: []string{LabelNodePool, LabelZone}}
	NodesTerminated = &Metric{Name: "karpenter_nodes_terminated_total", Kind: Counter, Unit: UnitCount,
		Help:   "Number of nodes terminated in total. Labeled by owning nodepool and zone.",
		Labels: []string{LabelNodePool, LabelZone}}
	SchedulingDuration = &Metric{Name: "karpenter_scheduler_scheduling_duration_seconds", Kind: Histogram, Unit: UnitSeconds,
		Help:   "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
		Labels: []string{LabelController}}
	QueueDepth = &Metric{Name: "karpenter_scheduler_queue_depth", Kind: Gauge, Unit: UnitCount,
		Help:   "The number of pods currently waiting to be scheduled (the last batch a function solved).",
		Labels: []string{LabelController, LabelSchedulingID}}
	UnschedulablePods = &Metric{Name: "karpenter_scheduler_unschedulable_pods_count", Kind: Gauge, Unit: UnitCount,
		Help:   "The number of unschedulable Pods (the last batch a function solved).",
		Labels: []string{LabelController}}
	DisruptionDecisions = &Metric{Name: "karpenter_voluntary_disruption_decisions_total", Kind: Counter, Unit: UnitCount,
		Help:   "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
		Labels: []string{LabelDecision, LabelReason, LabelConsolidation}}
	DisruptionEligibleNodes = &Metric{Name: "karpenter_voluntary_disruption_eligible_nodes", Kind: Gauge, Unit: UnitCount,
		Help:   "Number of nodes eligible for disruption. Labeled by disruption reason.",
		Labels: []string{LabelReason}}
	NodePoolUsage = &Metric{Name: "karpenter_nodepools_usage", Kind: Gauge, Unit: UnitNone,
		Help:   "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
		Labels: []string{LabelResourceType, LabelNodePool}}
	NodePoolLimit = &Metric{Name: "karpenter_nodepools_limit", Kind: Gauge, Unit: UnitNone,
		Help:   "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
		Labels: []string{LabelResourceType, LabelNodePool}}
	PodStartupDuration = &Metric{Name: "karpenter_pods_startup_duration_seconds", Kind: Histogram, Unit: UnitSeconds,
		Help: "The time from pod creation until the pod is running."}
	InterruptionReceived = &Metric{Name: "karpenter_interruption_received_messages_total", Kind: Counter, Unit: UnitCount,
		Help:   "Count of messages received from the interruption queue. Broken down by message type.",
		Labels: []string{LabelMessageType}}
	CloudProviderErrors = &Metric{Name: "karpenter_cloudprovider_errors_total", Kind: Counter, Unit: UnitCount,
		Help:   "Total number of errors returned from CloudProvider calls.",
		Labels: []string{LabelController, LabelMethod, LabelProvider, LabelError}}
	CloudProviderDuration = &Metric{Name: "karpenter_cloudprovider_duration_seconds", Kind: Histogram, Unit: UnitSeconds,
		Help:   "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
		Labels: []string{LabelController, LabelMethod, LabelProvider}}
)

// Dovetail's own metrics.
var (
	PlanPrice = &Metric{Name: "dovetail_plan_price_usd_per_hour", Kind: Gauge, Unit: UnitNone,
		Help:   "Price (USD per hour) of the NodeClaims the last plan opened. Labeled by the deciding controller.",
		Labels: []string{LabelController}}
	PlanLowerBound = &Metric{Name: "dovetail_plan_lower_bound_usd_per_hour", Kind: Gauge, Unit: UnitNone,
		Help:   "Lower bound (USD per hour) no plan can beat for the pods the last plan placed on new NodeClaims.",
		Labels: []string{LabelController}}
	PlanGap = &Metric{Name: "dovetail_plan_gap_ratio", Kind: Histogram, Unit: UnitNone,
		Help:    "Plan price over its lower bound, minus one, per plan that opened NodeClaims.",
		Labels:  []string{LabelController},
		Buckets: []float64{0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}}
	QueueAge = &Metric{Name: "dovetail_queue_message_age_seconds", Kind: Histogram, Unit: UnitSeconds,
		Help:   "Age of a message when the function started handling it (now minus its publish time).",
		Labels: []string{LabelFunction}}
	HandlerDuration = &Metric{Name: "dovetail_handler_duration_seconds", Kind: Histogram, Unit: UnitSeconds,
		Help:   "Duration of one message's handling. Labeled by function and result (ok, retry, poison).",
		Labels: []string{LabelFunction, LabelResult}}
	DeadLettered = &Metric{Name: "dovetail_dead_lettered_messages_total", Kind: Counter, Unit: UnitCount,
		Help:   "Messages sent to the dead-letter path, by function and reason class.",
		Labels: []string{LabelFunction, LabelReason}}
	CommandsApplied = &Metric{Name: "dovetail_agent_commands_total", Kind: Counter, Unit: UnitCount,
		Help:   "Commands the agent handled, by kind and result (applied, refused, incomplete, poison, retry).",
		Labels: []string{LabelKind, LabelResult}}
	EventsPublished = &Metric{Name: "dovetail_agent_events_published_total", Kind: Counter, Unit: UnitCount,
		Help:   "Events the agent published, by CloudEvents type.",
		Labels: []string{LabelKind}}
	GuardrailHits = &Metric{Name: "dovetail_nodepool_guardrail_hits_total", Kind: Counter, Unit: UnitCount,
		Help:   "Plans in which a NodePool's spend guardrail (price per hour, accelerators) left pods unscheduled. Labeled by nodepool and guardrail.",
		Labels: []string{LabelNodePool, LabelGuardrail}}
	ScaleUpHeld = &Metric{Name: "dovetail_nodepool_scale_up_held_total", Kind: Counter, Unit: UnitCount,
		Help:   "New NodeClaims a NodePool's anomaly hold (dovetail.dev/anomaly-hold) kept back, counted once per plan. Labeled by nodepool.",
		Labels: []string{LabelNodePool}}
	// The cost ledger's rates (shared/ledger integrates the same records; docs/cost.md): set by
	// consolidate and provision for each NodePool a decision changed.
	NodePoolPrice = &Metric{Name: "dovetail_nodepool_price_usd_per_hour", Kind: Gauge, Unit: UnitNone,
		Help:   "What a NodePool's capacity costs (USD per hour, the prices the plan used) after the last decision that changed it.",
		Labels: []string{LabelNodePool}}
	NodePoolStaticBaseline = &Metric{Name: "dovetail_nodepool_static_baseline_usd_per_hour", Kind: Gauge, Unit: UnitNone,
		Help:   "What a static node group of one instance type would cost (USD per hour) for the NodePool's pods after the last decision that changed it.",
		Labels: []string{LabelNodePool}}
	NodePoolWaste = &Metric{Name: "dovetail_nodepool_waste_usd_per_hour", Kind: Gauge, Unit: UnitNone,
		Help:   "The priced idle allocatable of a NodePool (USD per hour): price times one minus the larger of the CPU and memory shares requested.",
		Labels: []string{LabelNodePool}}
	ConsolidationSavings = &Metric{Name: "dovetail_nodepool_consolidation_savings_usd_per_hour_total", Kind: Counter, Unit: UnitNone,
		Help:   "Sum of the consolidation decisions' savings (USD per hour, price before minus after) per NodePool: what no consolidation would add to the price.",
		Labels: []string{LabelNodePool}}
	// PodProvisioningLatency is the decision's share of a pod's startup: from the pod's
	// creation until the agent created the NodeClaim planned for it (the agent's batch window,
	// the snapshot's trip, the decision, the launch and the create).
	PodProvisioningLatency = &Metric{Name: "dovetail_pod_provisioning_latency_seconds", Kind: Histogram, Unit: UnitSeconds,
		Help:   "Time from a pod's creation until the agent created the NodeClaim planned for it, per pod. Labeled by the NodeClaim's nodepool.",
		Labels: []string{LabelNodePool}}
	Dropped = &Metric{Name: "dovetail_telemetry_dropped_total", Kind: Counter, Unit: UnitCount,
		Help:   "Metric values dropped because a call passed the wrong number of labels.",
		Labels: []string{"metric"}}
)

// All lists every metric defined here; backends register them up front so a scrape shows every
// family's HELP and TYPE even before its first value.
var All = []*Metric{
	NodeClaimsCreated, NodeClaimsTerminated, NodeClaimsDisrupted, NodeClaimsUnhealthyDisrupted, NodesCreated, NodesTerminated,
	SchedulingDuration, QueueDepth, UnschedulablePods, DisruptionDecisions, DisruptionEligibleNodes,
	NodePoolUsage, NodePoolLimit, PodStartupDuration, InterruptionReceived, CloudProviderErrors, CloudProviderDuration,
	PlanPrice, PlanLowerBound, PlanGap, QueueAge, HandlerDuration, DeadLettered, CommandsApplied, EventsPublished,
	GuardrailHits, ScaleUpHeld, NodePoolPrice, NodePoolStaticBaseline, NodePoolWaste, ConsolidationSavings, PodProvisioningLatency, Dropped,
}

// RecordPoolCosts records a decision's NodePool costs (Audit.NodePools) as the cost ledger's
// rates: the price after, the static baseline when computed, the waste (the dominant resource's
// idle share, priced, as shared/ledger prices it) and, for consolidations, the saving.
func RecordPoolCosts(rec Recorder, pools []PoolCost) {
	rec = OrNop(rec)
	for _, pc := range pools {
		rec.Record(NodePoolPrice, pc.PriceAfter, pc.NodePool)
		if pc.StaticBaseline > 0 {
			rec.Record(NodePoolStaticBaseline, pc.StaticBaseline, pc.NodePool)
		}
		used := 0.0
		if pc.AllocatableMilliCPU > 0 {
			used = float64(pc.RequestedMilliCPU) / float64(pc.AllocatableMilliCPU)
		}
		if pc.AllocatableMiB > 0 {
			used = max(used, float64(pc.RequestedMiB)/float64(pc.AllocatableMiB))
		}
		rec.Record(NodePoolWaste, pc.PriceAfter*(1-min(used, 1)), pc.NodePool)
		if pc.Consolidation && pc.PriceBefore > pc.PriceAfter {
			rec.Record(ConsolidationSavings, pc.PriceBefore-pc.PriceAfter, pc.NodePool)
		}
	}
}
