// Package events is Dovetail's wire contract: the CloudEvents envelope, the event and command
// types, and the versioned, compressed snapshot codec. It imports only the API types.
package events

import (
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// CloudEvents types Dovetail publishes. The version suffix changes when the payload does.
const (
	TypePodsPending = "dev.dovetail.pods.pending.v1"
	TypeSnapshot    = "dev.dovetail.snapshot.v1"
	TypeCommand     = "dev.dovetail.command.v1"
)

// SnapshotSchemaVersion is the version of the Snapshot payload; decoders refuse other versions.
const SnapshotSchemaVersion = 1

// Snapshot is everything a decision needs, as the agent saw the cluster at one revision.
type Snapshot struct {
	SchemaVersion int    `json:"schemaVersion"`
	Cluster       string `json:"cluster"`
	// Revision increases with every change the agent observes; commands carry the revision they
	// were decided on, and the agent refuses commands whose targets changed since.
	Revision int64 `json:"revision"`
	// Time is the agent's clock when the snapshot was taken; the core uses it instead of a wall clock.
	Time metav1.Time `json:"time"`
	// Complete says the snapshot was built from synced informers of every kind, so what it does
	// not list does not exist: only then may absence (an orphan instance) become action.
	Complete bool `json:"complete,omitempty"`
	// PendingPods are unschedulable pods waiting for capacity (PodScheduled=False, reason Unschedulable,
	// or simply unbound and not terminal).
	PendingPods []corev1.Pod `json:"pendingPods,omitempty"`
	// Nodes and the pods bound to them (non-terminal).
	Nodes      []corev1.Node      `json:"nodes,omitempty"`
	Pods       []corev1.Pod       `json:"pods,omitempty"`
	DaemonSets []appsv1.DaemonSet `json:"daemonSets,omitempty"`
	// LimitRanges give DaemonSet pods their admission defaults (optional: older agents send
	// none, and then no defaults apply).
	LimitRanges []corev1.LimitRange            `json:"limitRanges,omitempty"`
	PDBs        []policyv1.PodDisruptionBudget `json:"pdbs,omitempty"`
	NodePools   []apisv1.NodePool              `json:"nodePools,omitempty"`
	NodeClasses []apisv1.NodeClass             `json:"nodeClasses,omitempty"`
	NodeClaims  []apisv1.NodeClaim             `json:"nodeClaims,omitempty"`
	// PVCs are the claims the snapshot's pods (pending and bound) refer to; PVs the volumes
	// bound to them plus the unbound Available ones (candidates for static binding);
	// StorageClasses all classes. The solver reads their topology (PV node affinity, class
	// allowedTopologies and volumeBindingMode) and counts attached volumes per node.
	PVCs           []corev1.PersistentVolumeClaim `json:"pvcs,omitempty"`
	PVs            []corev1.PersistentVolume      `json:"pvs,omitempty"`
	StorageClasses []storagev1.StorageClass       `json:"storageClasses,omitempty"`
	// VolumeAttachments are the attachments of nodes that are being deleted (storage.k8s.io/v1,
	// spec.nodeName one of them): the termination waits for them to be gone before it
	// terminates the instance (Karpenter's VolumesDetached). Optional: an older agent sends none.
	VolumeAttachments []storagev1.VolumeAttachment `json:"volumeAttachments,omitempty"`
	// UnavailableOfferings are offerings marked unavailable (ICE) and not yet expired.
	UnavailableOfferings []UnavailableOfferingMark `json:"unavailableOfferings,omitempty"`
	// NodeOverlays are the cluster's karpenter.sh/v1alpha1 NodeOverlays (optional: an agent that
	// does not watch them sends none, and then no overlay applies).
	NodeOverlays []apisv1.NodeOverlay `json:"nodeOverlays,omitempty"`
	// ProvisioningRequests are the cluster's autoscaling.x-k8s.io/v1 ProvisioningRequests
	// (optional: an agent on a cluster without the CRD sends none), and PodTemplates the
	// PodTemplates their pod sets name (only those). The provision function serves them
	// (shared/provreq).
	ProvisioningRequests []apisv1.ProvisioningRequest `json:"provisioningRequests,omitempty"`
	PodTemplates         []corev1.PodTemplate         `json:"podTemplates,omitempty"`
	// Commitments are the cluster's Savings Plans and Reserved Instances / Azure reservations,
	// from the ConfigMap apisv1.CommitmentsConfigMap in the agent's namespace (optional: nil
	// when there is none, or from an agent that does not read it; then every offering is at
	// its list price).
	Commitments *apisv1.Commitments `json:"commitments,omitempty"`
	// ClusterFacts are what the agent discovered from the API server (nil from an agent that
	// discovers nothing, or before its first discovery): optional, so older agents' snapshots
	// still decode.
	ClusterFacts *ClusterFacts `json:"clusterFacts,omitempty"`
}

// ClusterFacts are the cluster facts a node's bootstrap and its image depend on, discovered by the
// agent as Karpenter discovers them instead of being configured: the Kubernetes version from the
// API server's /version (Karpenter's version provider: client-go discovery ServerVersion, Major +
// "." + Minor without a trailing "+"), the cluster DNS address from the kube-system/kube-dns
// Service's clusterIP (karpenter-provider-aws operator: KubeDNSIP), the service range from the
// default ServiceCIDR object (networking.k8s.io/v1 ServiceCIDR "kubernetes", Kubernetes 1.33+)
// and the IP family of the cluster DNS address (the provider's bootstrap reads IPv6 from it). An
// empty field was not discoverable; the functions' flags, when set, override each.
type ClusterFacts struct {
	// KubernetesVersion is major.minor: "1.31".
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// ClusterDNSIP is the kube-dns Service's clusterIP.
	ClusterDNSIP string `json:"clusterDNSIP,omitempty"`
	// ServiceCIDR is the cluster's (first) service range.
	ServiceCIDR string `json:"serviceCIDR,omitempty"`
	// IPFamily is "ipv4" or "ipv6".
	IPFamily string `json:"ipFamily,omitempty"`
}

// MaxClockSkew is how far a snapshot's time may be from the clock of the function deciding on
// it: 2 minutes, four periods of the agent's timer snapshots (30 s) plus queueing, and well under
// every time-based rule (consolidateAfter, expiry, the 15-minute registration TTL, a
// NodeClaim's terminationGracePeriod, the orphan grace period, a spot notice's 2 minutes). A
// snapshot dated further ahead means a wrong clock (dead-lettered: no time-based decision trusts
// it); one dated further back is stale (skipped: a newer one follows).
const MaxClockSkew = 2 * time.Minute

// ErrClockSkew is wrapped when a snapshot's time is more than MaxClockSkew from the deciding
// function's clock.
var ErrClockSkew = errors.New("snapshot time skewed from the function's clock")

// CheckClock returns nil when the snapshot's time is within MaxClockSkew of now, else an error
// wrapping ErrClockSkew naming snapshot.time, the skew and the bound.
func (s *Snapshot) CheckClock(now time.Time) error {
	skew := s.Time.Sub(now)
	if skew > MaxClockSkew || skew < -MaxClockSkew {
		return fmt.Errorf("%w: snapshot.time: %s is %s from this function's clock %s (at most %s)",
			ErrClockSkew, s.Time.UTC().Format(time.RFC3339), skew.Round(time.Second), now.UTC().Format(time.RFC3339), MaxClockSkew)
	}
	return nil
}

// OfferingKey names one offering: instance type × zone × capacity type. It is the one
// spelling of an offering's identity on the wire and in every map keyed by offering.
type OfferingKey struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// Scope limits a mark to the launches of one capacity scope: "" for every launch of the
	// offering; an EC2 placement group's scope (apisv1.NodeClass.CapacityScope) for launches of
	// the NodeClasses in that group, as Karpenter scopes the insufficient-capacity cache to the
	// placement group (karpenter-provider-aws pkg/cache/unavailableofferings.go
	// WithPlacementGroup). At most MaxScopeLength characters of [a-z0-9-].
	Scope string `json:"scope,omitempty"`
}

// MaxScopeLength bounds OfferingKey.Scope.
const MaxScopeLength = 63

// String renders "type/zone/capacity-type", e.g. "m5.large/us-east-1a/spot", and "@scope" after
// it for a scoped key.
func (k OfferingKey) String() string {
	s := k.InstanceType + "/" + k.Zone + "/" + k.CapacityType
	if k.Scope != "" {
		s += "@" + k.Scope
	}
	return s
}

// UnavailableOfferingTTL is how long an offering stays marked unavailable after the cloud
// refused it or interrupted it: 3 minutes, Karpenter's UnavailableOfferingsTTL
// (aws/karpenter-provider-aws pkg/cache/cache.go). Every mark Dovetail writes uses it.
const UnavailableOfferingTTL = 3 * time.Minute

// UnavailableOfferingMark is an offering the cloud refused, remembered until Expires.
type UnavailableOfferingMark struct {
	OfferingKey
	Reason  string      `json:"reason"`
	Expires metav1.Time `json:"expires"`
}

// MarkUnavailable is the mark for an offering refused at t: it expires UnavailableOfferingTTL later.
func MarkUnavailable(k OfferingKey, reason string, t time.Time) UnavailableOfferingMark {
	return MarkUnavailableFor(k, reason, t, UnavailableOfferingTTL)
}

// MarkUnavailableFor is the mark for an offering refused at t that the cloud's rules keep out
// for ttl (a non-positive ttl is UnavailableOfferingTTL): Azure's error classes carry their own
// durations, 10 minutes to 23 hours (shared/cloud/azure, capacity errors).
func MarkUnavailableFor(k OfferingKey, reason string, t time.Time, ttl time.Duration) UnavailableOfferingMark {
	if ttl <= 0 {
		ttl = UnavailableOfferingTTL
	}
	return UnavailableOfferingMark{OfferingKey: k, Reason: reason, Expires: metav1.NewTime(t.Add(ttl))}
}

// UnavailableAt returns a lookup of the marks active at now (now < Expires; the later expiry
// wins for an offering marked twice), or nil when there are none, which the solver reads as
// "every offering is available". An offering is unavailable to a launch of scope when an
// unscoped mark or a mark of that scope holds it.
func UnavailableAt(marks []UnavailableOfferingMark, now time.Time) func(instanceType, zone, capacityType, scope string) bool {
	if len(marks) == 0 {
		return nil
	}
	until := make(map[OfferingKey]time.Time, len(marks))
	for _, m := range marks {
		if old, ok := until[m.OfferingKey]; !ok || m.Expires.After(old) {
			until[m.OfferingKey] = m.Expires.Time
		}
	}
	return func(it, zone, ct, scope string) bool {
		if exp, ok := until[OfferingKey{InstanceType: it, Zone: zone, CapacityType: ct}]; ok && now.Before(exp) {
			return true
		}
		if scope == "" {
			return false
		}
		exp, ok := until[OfferingKey{InstanceType: it, Zone: zone, CapacityType: ct, Scope: scope}]
		return ok && now.Before(exp)
	}
}

// CommandKind names what the agent is asked to do.
type CommandKind string

// Command kinds.
const (
	// CommandCreateNodeClaim records a launched NodeClaim (with its provider ID) in the cluster.
	// NodeClaim.CreationTimestamp is the decision's time (required: the agent refuses a
	// NodeClaim name created and deleted before, a decision older than it remembers, and a
	// provider ID another NodeClaim records or whose Node is older than the decision or lacks
	// the NodeClaim's karpenter.sh/nodepool label: recording it would adopt that Node).
	CommandCreateNodeClaim CommandKind = "CreateNodeClaim"
	// CommandDeleteNodeClaim removes a NodeClaim (and its Node) after its instance is gone.
	CommandDeleteNodeClaim CommandKind = "DeleteNodeClaim"
	// CommandTaintNode adds karpenter.sh/disrupted:NoSchedule, the one taint the agent adds (any
	// other is an invalid command; another effect only stamps a stray disrupted taint the node
	// already has).
	CommandTaintNode CommandKind = "TaintNode"
	// CommandDrainNode evicts the node's pods through the Eviction API.
	CommandDrainNode CommandKind = "DrainNode"
	// CommandDeleteNode deletes the Node object.
	CommandDeleteNode CommandKind = "DeleteNode"
	// CommandMarkUnavailable records unavailable offerings where later decisions find them.
	CommandMarkUnavailable CommandKind = "MarkOfferingsUnavailable"

	// The NodeClaim lifecycle (the lifecycle function decides; see functions/lifecycle).

	// CommandRegisterNode syncs a NodeClaim onto the Node its instance registered as
	// (Karpenter's registration): sets Labels and Annotations on the Node, adds each of Taints
	// that is missing (matched by key and effect), removes the karpenter.sh/unregistered taint
	// and adds Finalizer. NodeName is the Node, NodeClaim names the NodeClaim. The agent applies
	// only the NodeClaim's own labels (and karpenter.sh/registered=true), annotations, taints,
	// startup taints and planned taint, and FinalizerTermination.
	CommandRegisterNode CommandKind = "RegisterNode"
	// CommandSetNodeClaimStatus writes NodeClaim status through /status: status.nodeName when
	// NodeClaim.Status.NodeName is set, and each of NodeClaim.Status.Conditions replacing the
	// condition of its type (the others are kept).
	CommandSetNodeClaimStatus CommandKind = "SetNodeClaimStatus"
	// CommandLabelNode sets Labels on the Node NodeName: karpenter.sh/initialized=true, the only
	// label the agent writes this way (any other is an invalid command).
	CommandLabelNode CommandKind = "LabelNode"
	// CommandRemoveFinalizer removes Finalizer from the Node NodeName, or, when NodeName is
	// empty, from the NodeClaim NodeClaim.Name, or from the NodeClass NodeClass. A finalizer
	// already gone is success. FinalizerTermination leaves only an object being deleted, with
	// Instance the cloud's evidence that its instance is gone or going. Only Dovetail's
	// finalizers: FinalizerTermination on a Node or NodeClaim, the kind's termination finalizer on
	// a NodeClass, released only while it is being deleted and no NodeClaim uses it.
	CommandRemoveFinalizer CommandKind = "RemoveFinalizer"
	// CommandNominatePods adds Toleration to the spec.tolerations of each of Pods that is still
	// unbound: the toleration of the dovetail.dev/planned taint of NodeName (the node the plan
	// placed the pods on), so only the planned pods fit the new node at first (the agent refuses
	// any other toleration). Instead of NodeName it may name a NodeClaim (NodeClaim, its name
	// only) whose node has not registered yet: the provision function sends that form right
	// behind the NodeClaim's CreateNodeClaim, so the pods tolerate the taint before the node
	// exists. The name is the wire contract's; since 2026-12-07 the agent no
	// longer sets status.nominatedNodeName (kube-scheduler's cost of nominated pods, design note
	// "Planned pods tolerate, they are not nominated"), and a command without Toleration does
	// nothing.
	CommandNominatePods CommandKind = "NominatePods"
	// CommandUntaintNode removes Taint (matched by key and effect; karpenter.sh/disrupted or
	// dovetail.dev/planned only, any other key is an invalid command) from the Node NodeName. A
	// Taint with timeAdded removes only that taint (same value and timeAdded, to the second),
	// and, for karpenter.sh/disrupted, not from a node whose Node or NodeClaim is being deleted
	// (the termination path drains under it): how consolidation removes a stray taint it saw.
	CommandUntaintNode CommandKind = "UntaintNode"
	// CommandDeletePods deletes Pods (not evicts: a NodeClaim's terminationGracePeriod has run
	// out), each with its GracePeriodSeconds and a UID precondition, from the Node NodeName.
	// The agent applies it only on a node whose NodeClaim is being deleted and has a
	// terminationGracePeriod (any other is refused).
	CommandDeletePods CommandKind = "DeletePods"

	// Status of NodeClasses and NodePools (the lifecycle function decides).

	// CommandSetNodeClassStatus writes NodeClass.Status (its kind's: EC2NodeClass subnets,
	// securityGroups, amis, instanceProfile, conditions) through /status. Each condition keeps
	// its lastTransitionTime when its status did not change; when Ready turns False a Warning
	// Event says why.
	CommandSetNodeClassStatus CommandKind = "SetNodeClassStatus"
	// CommandSetNodePoolStatus writes NodePool.Status (resources, nodes, conditions
	// ValidationSucceeded, NodeClassReady, Ready) through /status; when NodeClassReady turns
	// False a Warning Event on the NodePool says why it launches nothing.
	CommandSetNodePoolStatus CommandKind = "SetNodePoolStatus"
	// CommandSetNodeOverlayStatus writes NodeOverlay.Status.Conditions (ValidationSucceeded and
	// Ready, the only types the agent accepts: Karpenter's NodeOverlay condition set) through
	// /status, each condition keeping its lastTransitionTime when its status did not change.
	// NodeOverlay.metadata.generation is the generation decided on: a NodeOverlay whose spec
	// changed since is left for the next decision.
	CommandSetNodeOverlayStatus CommandKind = "SetNodeOverlayStatus"
	// CommandSetProvisioningRequestStatus writes ProvisioningRequest.Status.Conditions (only
	// Cluster Autoscaler's types: Accepted, Provisioned, Failed, BookingExpired,
	// CapacityRevoked) onto the ProvisioningRequest of that namespace and name through /status,
	// each condition keeping its lastTransitionTime when its status did not change (the others
	// are kept). ProvisioningRequest.metadata.uid is the request decided on: one re-created
	// under the same name is left alone. The provision function is its one writer.
	CommandSetProvisioningRequestStatus CommandKind = "SetProvisioningRequestStatus"
	// CommandAddFinalizer adds Finalizer to the NodeClass NodeClass (its deletion then waits
	// for the lifecycle function to release what was created for it); only the kind's
	// termination finalizer (FinalizerNodeClassTermination, FinalizerAKSNodeClassTermination).
	CommandAddFinalizer CommandKind = "AddFinalizer"

	// CommandRecordEvents records Events (and nothing else): what a function decided that
	// changes no object, such as a pod it could not place (FailedScheduling) or a node it may
	// not disrupt (DisruptionBlocked).
	CommandRecordEvents CommandKind = "RecordEvents"
)

// MaxEventMessageBytes bounds an Event's message: it is read by people (kubectl describe), and
// the object's status or the decision's log keeps the rest.
const MaxEventMessageBytes = 1024

// EventRecord is a Kubernetes Event a function asks the agent to record (the agent is the only
// writer to the API server). On a command of another kind, the agent records it once the
// command's effect is in place, never for a refused command. Repeats of one Event (the same
// object, Reason and Key) are one Event object whose count grows, as client-go's recorder
// aggregates them; a redelivered command counts once.
type EventRecord struct {
	// Object is the involved object: Kind and Name (Namespace for a namespaced kind); UID and
	// APIVersion when known. Kinds: Pod, Node, NodeClaim, NodePool, EC2NodeClass, AKSNodeClass.
	Object corev1.ObjectReference `json:"object"`
	// Type is Normal or Warning.
	Type   string `json:"type"`
	Reason string `json:"reason"`
	// Message is at most MaxEventMessageBytes (the agent truncates longer ones).
	Message string `json:"message"`
	// Key distinguishes Events of one object and reason that are not repeats of each other
	// (Karpenter's dedupe values beyond the object, e.g. the NodeClaim a pod is nominated to).
	Key string `json:"key,omitempty"`
}

// FinalizerNodeClassTermination is the finalizer on EC2NodeClasses: deleting one waits until no
// NodeClaim uses it and its instance profile is deleted. Karpenter's own key.
const FinalizerNodeClassTermination = "karpenter.k8s.aws/termination"

// FinalizerAKSNodeClassTermination is the Azure provider's finalizer on AKSNodeClasses: deleting
// one waits until no NodeClaim uses it.
const FinalizerAKSNodeClassTermination = "karpenter.azure.com/termination"

// FinalizerTermination is the finalizer on the NodeClaims and Nodes Dovetail launches:
// deleting either runs the termination path (taint, drain, terminate the instance, then
// remove the finalizers). Karpenter's own key, so its users' tooling recognises it.
const FinalizerTermination = "karpenter.sh/termination"

// PodRef names one pod of a DeletePods or NominatePods command.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID guards against deleting a pod re-created under the same name.
	UID string `json:"uid,omitempty"`
	// GracePeriodSeconds is the deletion grace period (DeletePods); nil: the pod's own.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// Command is one effect a function asks the agent to apply.
type Command struct {
	// ID is derived from the decision, so a redelivered decision yields the same ID.
	ID      string      `json:"id"`
	Kind    CommandKind `json:"kind"`
	Cluster string      `json:"cluster"`
	// SnapshotRevision is the revision of the snapshot the decision was made on.
	SnapshotRevision int64  `json:"snapshotRevision"`
	Reason           string `json:"reason,omitempty"`

	NodeClaim   *apisv1.NodeClaim         `json:"nodeClaim,omitempty"`
	NodeName    string                    `json:"nodeName,omitempty"`
	Taint       *corev1.Taint             `json:"taint,omitempty"`
	Unavailable []UnavailableOfferingMark `json:"unavailable,omitempty"`

	// Labels, Annotations and Taints are what RegisterNode / LabelNode put on a Node.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Taints      []corev1.Taint    `json:"taints,omitempty"`
	// ClearConditions, on SetNodeClaimStatus, are condition types to remove from the NodeClaim
	// (Karpenter clears Consolidatable and Drifted rather than setting them False).
	ClearConditions []string `json:"clearConditions,omitempty"`
	// Finalizer is what RegisterNode adds and RemoveFinalizer removes.
	Finalizer string `json:"finalizer,omitempty"`
	// Pods are the pods of NominatePods and DeletePods.
	Pods []PodRef `json:"pods,omitempty"`
	// Toleration is what NominatePods adds to each pod.
	Toleration *corev1.Toleration `json:"toleration,omitempty"`
	// NodeClass is the target of SetNodeClassStatus, AddFinalizer and RemoveFinalizer (its
	// kind, name and, for SetNodeClassStatus, the status to write).
	NodeClass *apisv1.NodeClass `json:"nodeClass,omitempty"`
	// NodePool is the target of SetNodePoolStatus, with the status to write.
	NodePool *apisv1.NodePool `json:"nodePool,omitempty"`
	// NodeOverlay is the target of SetNodeOverlayStatus (name, generation decided on), with the
	// status to write.
	NodeOverlay *apisv1.NodeOverlay `json:"nodeOverlay,omitempty"`
	// ProvisioningRequest is the target of SetProvisioningRequestStatus (namespace, name, uid),
	// with the conditions to write.
	ProvisioningRequest *apisv1.ProvisioningRequest `json:"provisioningRequest,omitempty"`
	// Budget, on a TaintNode that starts a voluntary disruption (consolidation, drift), is the
	// unit of the NodePool's disruption budget the taint reserves (see BudgetReservation).
	Budget *BudgetReservation `json:"budget,omitempty"`
	// Events are recorded once the command is applied (a RecordEvents command has only these).
	Events []EventRecord `json:"events,omitempty"`
	// Instance, on a RemoveFinalizer of FinalizerTermination, is the cloud's word on the
	// object's instance, as the function that terminated it read it: the agent has no cloud
	// credentials, so it releases the finalizer only on this evidence (InstanceEvidence).
	Instance *InstanceEvidence `json:"instance,omitempty"`
}

// OrderingKey is the key the agent applies commands in order by (the NATS consumer's Key):
// commands with the same key are applied one at a time in the order they were published,
// commands with different keys concurrently. Two commands need one order only when they are in
// flight together and touch the same object: a function decides on a snapshot, and a snapshot
// that shows an earlier command's effect was taken after that command was applied, so the order
// at stake is that of the commands one decision (one lifecycle pass, one disruption sequence)
// publishes back to back. The key is, first that applies:
//
//   - "node/<name>" for a command that names a Node: NodeName (NominatePods, RegisterNode,
//     LabelNode, TaintNode, UntaintNode, DrainNode, DeleteNode, DeletePods, RemoveFinalizer of
//     a Node), or NodeClaim.Status.NodeName of a SetNodeClaimStatus. So a node's NominatePods,
//     RegisterNode, planned-taint release and LabelNode stay in their pass's order, and the
//     NodeClaim status writes that record them (they name the node) stay behind them; a
//     TaintNode stays before the DrainNode of its disruption.
//   - "nodeclaim/<name>" for a command on a NodeClaim that names no Node (CreateNodeClaim,
//     DeleteNodeClaim, RemoveFinalizer of a NodeClaim, status writes before registration or
//     during termination, a NominatePods naming the NodeClaim: applied after its create).
//   - "nodeclass/<kind>/<name>", "nodepool/<name>", "nodeoverlay/<name>",
//     "provisioningrequest/<namespace>/<name>" for the status and finalizer commands of those.
//   - "offerings" for MarkOfferingsUnavailable: one ConfigMap holds every mark, and a later
//     expiry must not be overwritten by an earlier one applied after it.
//   - "events/<id>" for RecordEvents: each Event is counted on its own object with a
//     conflict-checked write, so they need no order among themselves.
//   - "" for anything else (a kind this build does not know).
//
// What the key does not order, and why that holds: a NodeClaim's commands that name its node
// and those that do not may pass each other (the Node's name is not in every command); each
// writes whole conditions or finalizers of its own, and the next lifecycle pass rewrites a
// condition whose message differs. The cross-object checks the agent makes (a disruption
// budget's free units, a provider ID no other NodeClaim records, NodeClaim tombstones) read
// the API server under a lock or a compare-and-swap write (the budget ledger, the tombstone
// ConfigMap), or the informer caches, which lag the commands just applied whatever the order.
func (c *Command) OrderingKey() string {
	switch {
	case c.NodeName != "":
		return "node/" + c.NodeName
	case c.NodeClaim != nil && c.Kind == CommandSetNodeClaimStatus && c.NodeClaim.Status.NodeName != "":
		return "node/" + c.NodeClaim.Status.NodeName
	case c.NodeClaim != nil:
		return "nodeclaim/" + c.NodeClaim.Name
	case c.NodeClass != nil:
		return "nodeclass/" + c.NodeClass.Kind() + "/" + c.NodeClass.Name()
	case c.NodePool != nil:
		return "nodepool/" + c.NodePool.Name
	case c.NodeOverlay != nil:
		return "nodeoverlay/" + c.NodeOverlay.Name
	case c.ProvisioningRequest != nil:
		return "provisioningrequest/" + c.ProvisioningRequest.Namespace + "/" + c.ProvisioningRequest.Name
	case c.Kind == CommandMarkUnavailable:
		return "offerings"
	case c.Kind == CommandRecordEvents:
		return "events/" + c.ID
	}
	return ""
}

// Instance states a RemoveFinalizer of FinalizerTermination may carry as evidence: the instance is
// terminated or shutting down (EC2 DescribeInstances state names; an Azure VM being deleted reads
// as shutting-down), or the cloud no longer knows it.
const (
	InstanceTerminated   = "terminated"
	InstanceShuttingDown = "shutting-down"
	InstanceNotFound     = "not-found"
)

// InstanceEvidence is what a function saw of one instance in the cloud after asking it to
// terminate the instance. The agent checks ProviderID is the object's own (NodeClaim
// status.providerID, Node spec.providerID; "" only for an object that never recorded one) and
// State is InstanceTerminated, InstanceShuttingDown or InstanceNotFound before it lets the object
// go: releasing the termination finalizer of a running instance would orphan it.
type InstanceEvidence struct {
	ProviderID string `json:"providerID"`
	State      string `json:"state"`
}

// BudgetReservation makes the agent the one ledger of a cluster's disruption budgets. Every
// function counts disrupting nodes from its snapshot (the karpenter.sh/disrupted taint, deletion,
// NotReady), but two functions deciding on the same snapshot would each spend the same free
// unit. So a TaintNode starting a voluntary disruption carries the budget it was decided under,
// and the agent, which grants units one at a time (a lock and a compare-and-swap write of its
// ledger ConfigMap), applies the taint only while fewer than MaxDisrupting nodes of NodePool are
// disrupting by its own count (its caches plus the taints it granted that its caches do not
// show yet); otherwise it refuses the command (an Event
// names the budget) and the function decides again on a later snapshot.
type BudgetReservation struct {
	NodePool string `json:"nodePool"`
	// Reason is the disruption reason whose budgets applied: Empty, Underutilized or Drifted.
	Reason string `json:"reason"`
	// MaxDisrupting is how many of the pool's nodes the budgets allow disrupting at once, for
	// Reason, when the function decided (disruption.BudgetTotal).
	MaxDisrupting int `json:"maxDisrupting"`
}

// PodsPending is the payload of TypePodsPending: the batch trigger plus the snapshot.
type PodsPending struct {
	// Pods names the pending pods ("ns/name") that closed this batch.
	Pods     []string  `json:"pods"`
	Snapshot *Snapshot `json:"snapshot"`
}
