package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/drain"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// ReasonCommandRefused is the Kubernetes Event reason recorded on the target of a refused command.
const ReasonCommandRefused = "DovetailCommandRefused"

// ErrInvalidCommand marks a command that can never be applied (missing or invalid field, or a
// NodeClaim that already records another instance). The message names the field path.
var ErrInvalidCommand = errors.New("invalid command")

// RefusedError is returned when a command was refused because its targets changed after the
// snapshot it was decided on. The refusal was recorded as a Kubernetes Event on the target; the
// command must not be retried (the next snapshot leads to a new decision).
type RefusedError struct {
	CommandID string
	Kind      events.CommandKind
	// Target is "Kind/name" of the object the Event was recorded on.
	Target string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("command %s (%s) refused on %s: %s", e.CommandID, e.Kind, e.Target, e.Reason)
}

// DrainIncompleteError is returned by DrainNode when some pods could not be evicted yet: a PDB
// answered 429 Too Many Requests, the per-eviction deadline passed, or the API failed. It is
// retryable: the command should be redelivered later.
type DrainIncompleteError struct {
	Node    string
	Evicted []string // "namespace/name"
	Blocked []string // "namespace/name: reason"
}

func (e *DrainIncompleteError) Error() string {
	return fmt.Sprintf("drain node %s incomplete: %d evicted, %d not yet: %s", e.Node, len(e.Evicted), len(e.Blocked), strings.Join(e.Blocked, "; "))
}

// ApplierOptions configures an Applier.
type ApplierOptions struct {
	// Namespace is the agent's namespace (the unavailable-offerings ConfigMap lives there).
	Namespace string
	// Clock stamps Events and defaults mark expiry (nil: real clock).
	Clock clock.PassiveClock
	// EvictionTimeout bounds each Eviction API call (default 10 s). client-go itself retries a
	// 429 carrying Retry-After up to 10 times (rest.Request maxRetries), which for a PDB-blocked
	// pod can take ~100 s; the deadline turns that into a prompt "blocked" outcome.
	EvictionTimeout time.Duration
	// DrainParallelism is how many evictions run at once (default 8).
	DrainParallelism int
	// NominateParallelism is how many pods of a NominatePods command are nominated at once
	// (default 8).
	NominateParallelism int
	// EventParallelism is how many Events of a command are written at once (default 8).
	EventParallelism int
	// Component is the Event source component (default "dovetail-agent").
	Component string
	// Logger receives refusals and notices (nil: slog.Default()).
	Logger *slog.Logger
	// Metrics receives Karpenter's counters for what the agent's writes complete: NodeClaims
	// created (a CreateNodeClaim that created the object), Nodes created (a registration that
	// lifted karpenter.sh/unregistered), NodeClaims and Nodes terminated (the termination
	// finalizer released from an object being deleted). nil: none.
	Metrics telemetry.Recorder
}

// Applier applies commands to the cluster. It reads the Watcher's caches for staleness checks and
// pod lists, and writes through the API clients.
type Applier struct {
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	state  *Watcher
	opts   ApplierOptions
	ledger ledger
	recent recentEvents
	// nominations rate-limits Nominated Events (NominationQPS, NominationBurst).
	nominations flowcontrol.RateLimiter
}

// NewApplier returns an Applier writing through kube and dyn, checking staleness against state.
func NewApplier(kube kubernetes.Interface, dyn dynamic.Interface, state *Watcher, opts ApplierOptions) *Applier {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.EvictionTimeout <= 0 {
		opts.EvictionTimeout = 10 * time.Second
	}
	if opts.DrainParallelism <= 0 {
		opts.DrainParallelism = 8
	}
	if opts.NominateParallelism <= 0 {
		opts.NominateParallelism = 8
	}
	if opts.EventParallelism <= 0 {
		opts.EventParallelism = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Metrics = telemetry.OrNop(opts.Metrics)
	if opts.Component == "" {
		opts.Component = "dovetail-agent"
	}
	if opts.Namespace == "" {
		opts.Namespace = state.opts.Namespace
	}
	return &Applier{kube: kube, dyn: dyn, state: state, opts: opts,
		nominations: flowcontrol.NewTokenBucketRateLimiterWithClock(NominationQPS, NominationBurst, limiterClock{opts.Clock})}
}

// Apply applies one command. It returns nil when the effect is in place (already-done effects
// are success: every kind is idempotent), a *RefusedError when the command is stale (an Event
// was recorded), an error wrapping ErrInvalidCommand when it can never succeed, and any other
// error when a retry may succeed (API unavailable, conflicts, *DrainIncompleteError).
//
// Ownership rules (ownership.go): every kind that touches a Node or a NodeClaim (TaintNode,
// UntaintNode, DrainNode, DeleteNode, LabelNode, RegisterNode, DeletePods, NominatePods,
// RemoveFinalizer of a Node or NodeClaim, DeleteNodeClaim, SetNodeClaimStatus) is refused on an
// object that is not Dovetail's: a NodeClaim without the agent's ownership mark, a Node no such
// NodeClaim records by providerID. No command may write the mark (CreateNodeClaim, RegisterNode
// and LabelNode carrying it are invalid), and LabelNode may not write ownership labels
// (karpenter.sh/nodepool, karpenter.sh/registered, ...).
//
// State rules: RemoveFinalizer of karpenter.sh/termination is refused unless the object is being
// deleted and the command carries the cloud's evidence (command.instance) that the object's own
// instance is terminated, shutting down or not found.
//
// Freshness: a CreateNodeClaim whose NodeClaim was created and deleted since (a tombstone,
// tombstones.go), or that was decided before the oldest deletion the tombstones remember, is
// refused: it is a replay, and would record a terminated instance as capacity.
//
// Staleness rules (the command's SnapshotRevision against the Watcher's revisions; a revision
// from before this agent started has no history and counts as stale):
//   - CreateNodeClaim and MarkOfferingsUnavailable are never refused as stale: the instance was
//     launched or the cloud refused an offering, and recording that is what prevents orphans and
//     retries.
//   - A TaintNode carrying a budget reservation (events.BudgetReservation) is refused when the
//     NodePool already has as many disrupting nodes as the reservation allows.
//   - DrainNode is refused for a node that is not tainted karpenter.sh/disrupted (nor being
//     deleted): its taint, which reserves the disruption, was refused or never sent.
//   - TaintNode and DrainNode are refused when a pod (not DaemonSet, mirror or terminal) was
//     bound to the node after the revision, the node was (re)created after it, or the node is
//     being deleted without the karpenter.sh/termination finalizer (with it, the deletion
//     waits for the termination path's taint and drain).
//   - DeleteNode is refused when a pod was bound to the node, or the node was (re)created, after
//     the revision; and, for a node without the termination finalizer, while pods a drain would
//     evict are left on it, unless its NodeClaim's terminationGracePeriod has run out since the
//     node was tainted karpenter.sh/disrupted.
//   - DeleteNodeClaim is refused when a pod was bound to its node after the revision.
//   - RegisterNode, LabelNode, DeletePods and RemoveFinalizer of a Node are refused when the
//     node was (re)created after the revision: the name now means another Node than the one
//     decided on. RemoveFinalizer of a NodeClaim is refused when the NodeClaim was. RegisterNode
//     is also refused when the node is being deleted and not registered yet.
//   - SetNodeOverlayStatus is skipped (success, logged) when the NodeOverlay's generation is not
//     the one decided on: its spec changed, and the next snapshot decides its status again.
//   - SetProvisioningRequestStatus is skipped (success, logged) when the request's UID is not
//     the one decided on: it was deleted and created again, and the next snapshot decides it.
//   - SetNodeClaimStatus and NominatePods are never refused: the first records what a function
//     observed of that NodeClaim (and a NodeClaim gone records nothing), the second is a hint
//     kube-scheduler re-checks, written only on pods still unbound.
//
// Absent targets: a RegisterNode whose Node is not there (or not in the cache yet) is retried;
// for every other kind a target gone is success (nothing left to do).
func (a *Applier) Apply(ctx context.Context, cmd *events.Command) error {
	if cmd == nil {
		return fmt.Errorf("%w: command: missing", ErrInvalidCommand)
	}
	if cmd.ID == "" {
		return fmt.Errorf("%w: command.id: must not be empty", ErrInvalidCommand)
	}
	if err := validateEvents(cmd); err != nil {
		return err
	}
	if err := a.apply(ctx, cmd); err != nil || cmd.Kind == events.CommandRecordEvents {
		return err
	}
	// The command's own Events say what it did: recorded only once its effect is in place.
	return a.recordEvents(ctx, cmd.ID, cmd.Events)
}

func (a *Applier) apply(ctx context.Context, cmd *events.Command) error {
	switch cmd.Kind {
	case events.CommandRecordEvents:
		if len(cmd.Events) == 0 {
			return fmt.Errorf("%w: command.events: must list at least one event", ErrInvalidCommand)
		}
		return a.recordEvents(ctx, cmd.ID, cmd.Events)
	case events.CommandCreateNodeClaim:
		return a.createNodeClaim(ctx, cmd)
	case events.CommandDeleteNodeClaim:
		return a.deleteNodeClaim(ctx, cmd)
	case events.CommandTaintNode:
		return a.taintNode(ctx, cmd)
	case events.CommandDrainNode:
		return a.drainNode(ctx, cmd)
	case events.CommandDeleteNode:
		return a.deleteNode(ctx, cmd)
	case events.CommandMarkUnavailable:
		return a.markUnavailable(ctx, cmd)
	case events.CommandRegisterNode:
		return a.registerNode(ctx, cmd)
	case events.CommandSetNodeClaimStatus:
		return a.setNodeClaimStatus(ctx, cmd)
	case events.CommandLabelNode:
		return a.labelNode(ctx, cmd)
	case events.CommandRemoveFinalizer:
		return a.removeFinalizer(ctx, cmd)
	case events.CommandNominatePods:
		return a.nominatePods(ctx, cmd)
	case events.CommandDeletePods:
		return a.deletePods(ctx, cmd)
	case events.CommandSetNodeClassStatus:
		return a.setNodeClassStatus(ctx, cmd)
	case events.CommandSetNodePoolStatus:
		return a.setNodePoolStatus(ctx, cmd)
	case events.CommandSetNodeOverlayStatus:
		return a.setNodeOverlayStatus(ctx, cmd)
	case events.CommandSetProvisioningRequestStatus:
		return a.setProvisioningRequestStatus(ctx, cmd)
	case events.CommandAddFinalizer:
		return a.nodeClassFinalizer(ctx, cmd, true)
	case events.CommandUntaintNode:
		return a.untaintNode(ctx, cmd)
	default:
		return fmt.Errorf("%w: command.kind: unknown kind %q", ErrInvalidCommand, cmd.Kind)
	}
}

// --- NodeClaims ---

func (a *Applier) createNodeClaim(ctx context.Context, cmd *events.Command) error {
	nc := cmd.NodeClaim
	switch {
	case nc == nil:
		return fmt.Errorf("%w: command.nodeClaim: missing", ErrInvalidCommand)
	case nc.Name == "":
		return fmt.Errorf("%w: command.nodeClaim.metadata.name: must not be empty", ErrInvalidCommand)
	case nc.Status.ProviderID == "":
		return fmt.Errorf("%w: command.nodeClaim.status.providerID: must name the launched instance", ErrInvalidCommand)
	}
	for _, msg := range validation.IsDNS1123Subdomain(nc.Name) {
		return fmt.Errorf("%w: command.nodeClaim.metadata.name: %q: %s", ErrInvalidCommand, nc.Name, msg)
	}
	if v, ok := nc.Labels[apisv1.LabelManagedBy]; ok {
		return fmt.Errorf("%w: command.nodeClaim.metadata.labels[%q]: %q: only the agent writes its ownership mark", ErrInvalidCommand, apisv1.LabelManagedBy, v)
	}
	if nc.CreationTimestamp.IsZero() {
		return fmt.Errorf("%w: command.nodeClaim.metadata.creationTimestamp: required: the decision's time, which tells a replay from a late delivery", ErrInvalidCommand)
	}
	ref := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: nc.Name}
	if why := a.claimedInstanceReason(nc); why != "" {
		return a.refuse(ctx, cmd, ref, why)
	}
	if why, err := a.tombstoneReason(ctx, nc.Name, nc.CreationTimestamp.Time); err != nil {
		return err
	} else if why != "" {
		return a.refuse(ctx, cmd, ref, why)
	}
	var uid types.UID
	created := false // this call created the object (not a redelivery finding it there)
	spec := nc.DeepCopy()
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[apisv1.LabelManagedBy] = apisv1.ManagedByAgent
	spec.Status = apisv1.NodeClaimStatus{}
	spec.ResourceVersion, spec.UID, spec.Namespace = "", "", ""
	u, err := ToUnstructured(spec, apisv1.GroupVersion, "NodeClaim")
	if err != nil {
		return fmt.Errorf("%w: command.nodeClaim: %v", ErrInvalidCommand, err)
	}
	unstructuredDropNulls(u.Object)
	res := a.dyn.Resource(NodeClaimGVR)
	obj, err := res.Create(ctx, u, metav1.CreateOptions{FieldManager: a.opts.Component})
	if err == nil {
		a.opts.Metrics.Record(telemetry.NodeClaimsCreated, 1, CreatedReason(ctx), nc.Labels[apisv1.LabelNodePool], MinValuesRelaxed(nc))
		uid, created = obj.GetUID(), true
	}
	if err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create NodeClaim %s: %w", nc.Name, err)
		}
		// Already there (redelivered command): success once its status records this instance.
		existing, err := res.Get(ctx, nc.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get NodeClaim %s: %w", nc.Name, err)
		}
		got := &apisv1.NodeClaim{}
		if err := FromUnstructured(existing, got); err != nil {
			return fmt.Errorf("NodeClaim %s in cluster: %w", nc.Name, err)
		}
		uid = got.UID
		if err := a.refuseUnownedClaim(ctx, cmd, got); err != nil {
			return err // a NodeClaim of that name someone else made: not the agent's to record an instance on
		}
		switch got.Status.ProviderID {
		case nc.Status.ProviderID:
			return a.launchedEvents(ctx, cmd, uid, false) // redelivered: the Events and the latency count once
		case "":
		default:
			return fmt.Errorf("%w: command.nodeClaim.status.providerID: NodeClaim %s already records instance %q, command has %q",
				ErrInvalidCommand, nc.Name, got.Status.ProviderID, nc.Status.ProviderID)
		}
	}
	// The API server ignores status on create when the CRD has a status subresource, so the
	// provider ID goes in through /status. A merge patch needs no resourceVersion.
	status, err := json.Marshal(map[string]any{"status": nc.Status})
	if err != nil {
		return fmt.Errorf("%w: command.nodeClaim.status: %v", ErrInvalidCommand, err)
	}
	if _, err := res.Patch(ctx, nc.Name, types.MergePatchType, status, metav1.PatchOptions{FieldManager: a.opts.Component}, "status"); err != nil {
		return fmt.Errorf("set NodeClaim %s status: %w", nc.Name, err)
	}
	return a.launchedEvents(ctx, cmd, uid, created)
}

// launchedEvents records what a created NodeClaim means, as Karpenter does: the transition of
// each of its conditions (Launched: "Status condition transitioned, Type: Launched, Status:
// Unknown -> True, ...") on the NodeClaim, and Nominated ("Pod should schedule on:
// nodeclaim/<name>") on each planned pod (apisv1.AnnotationPlannedPods) still pending in the
// agent's cache: now that the NodeClaim exists, the pod's wait has a name. When first (this
// call created the NodeClaim), each of those pods also records
// dovetail_pod_provisioning_latency_seconds: its creation until now.
func (a *Applier) launchedEvents(ctx context.Context, cmd *events.Command, uid types.UID, first bool) error {
	nc := cmd.NodeClaim
	ref := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: nc.Name, UID: uid}
	var recs []events.EventRecord
	for _, c := range nc.Status.Conditions {
		if c.Reason == "" {
			c.Reason = c.Type
		}
		recs = append(recs, kevents.ConditionTransition(ref, "", c))
	}
	for _, key := range strings.Split(nc.Annotations[apisv1.AnnotationPlannedPods], ",") {
		ns, name, ok := strings.Cut(key, "/")
		if !ok {
			continue
		}
		if p := a.state.Pod(ns, name); p != nil && p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			recs = append(recs, kevents.NominatedEvent(kevents.PodRef(p), nc.Name, ""))
			if first {
				a.recordProvisioningLatency(p, nc.Labels[apisv1.LabelNodePool])
			}
		}
	}
	return a.recordEvents(ctx, cmd.ID, recs)
}

// recordProvisioningLatency records dovetail_pod_provisioning_latency_seconds for a pending pod
// a NodeClaim was just created for: the applier's clock minus the pod's creationTimestamp
// (whole seconds, so the value is up to 1 s high), labelled by the NodeClaim's NodePool. A pod
// whose creation is unset or after now (clock skew) records nothing.
func (a *Applier) recordProvisioningLatency(p *corev1.Pod, nodePool string) {
	if p.CreationTimestamp.IsZero() {
		return
	}
	if d := a.opts.Clock.Since(p.CreationTimestamp.Time); d >= 0 {
		a.opts.Metrics.Record(telemetry.PodProvisioningLatency, d.Seconds(), nodePool)
	}
}

// unstructuredDropNulls removes null values (zero metav1.Time, nil pointers the converter kept)
// so the created object carries only what the command set.
func unstructuredDropNulls(m map[string]any) {
	for k, v := range m {
		switch t := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			unstructuredDropNulls(t)
		}
	}
}

func (a *Applier) deleteNodeClaim(ctx context.Context, cmd *events.Command) error {
	if cmd.NodeClaim == nil || cmd.NodeClaim.Name == "" {
		return fmt.Errorf("%w: command.nodeClaim.metadata.name: must not be empty", ErrInvalidCommand)
	}
	name := cmd.NodeClaim.Name
	cached, err := a.currentNodeClaim(ctx, name)
	if err != nil || cached == nil {
		return err // gone: nothing to delete
	}
	if err := a.refuseUnownedClaim(ctx, cmd, cached); err != nil {
		return err
	}
	if cached.Status.NodeName != "" && a.state.NodePodsChangedSince(cached.Status.NodeName, cmd.SnapshotRevision) {
		ref := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: name, UID: cached.UID}
		return a.refuse(ctx, cmd, ref, fmt.Sprintf("a pod was bound to its node %s after snapshot revision %d", cached.Status.NodeName, cmd.SnapshotRevision))
	}
	opts := metav1.DeleteOptions{}
	if cached.UID != "" {
		uid := cached.UID // a NodeClaim re-created under the name since is not the one checked
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = a.dyn.Resource(NodeClaimGVR).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete NodeClaim %s: %w", name, err)
	}
	return nil
}

// --- Nodes ---

// checkNode applies the node ownership and staleness rules; it returns the node (nil when
// absent: from the cache, or from the API server when the cache does not hold it).
func (a *Applier) checkNode(ctx context.Context, cmd *events.Command, refuseDeleting bool) (*corev1.Node, error) {
	if cmd.NodeName == "" {
		return nil, fmt.Errorf("%w: command.nodeName: must not be empty", ErrInvalidCommand)
	}
	node, err := a.currentNode(ctx, cmd.NodeName)
	if err != nil {
		return nil, err
	}
	if node != nil {
		if err := a.refuseUnownedNode(ctx, cmd, node); err != nil {
			return nil, err
		}
	}
	ref := a.nodeRef(cmd.NodeName)
	rev := cmd.SnapshotRevision
	switch {
	case a.state.CreatedSince(KindNode, cmd.NodeName, rev):
		return nil, a.refuse(ctx, cmd, ref, fmt.Sprintf("node was created after snapshot revision %d (or the revision predates this agent)", rev))
	case a.state.NodePodsChangedSince(cmd.NodeName, rev):
		return nil, a.refuse(ctx, cmd, ref, fmt.Sprintf("a pod was bound to the node after snapshot revision %d", rev))
	case refuseDeleting && node != nil && node.DeletionTimestamp != nil && !hasString(node.Finalizers, events.FinalizerTermination):
		// A node held by the termination finalizer waits for exactly this taint and drain
		// (the termination path); any other node being deleted is going away on its own.
		return nil, a.refuse(ctx, cmd, ref, "node is being deleted")
	}
	return node, nil
}

func (a *Applier) taintNode(ctx context.Context, cmd *events.Command) error {
	if err := validateTaint("command.taint", cmd.Taint); err != nil {
		return err
	}
	// Only the taint Dovetail's functions add: karpenter.sh/disrupted with NoSchedule (Karpenter's
	// DisruptedNoScheduleTaint, kubernetes-sigs/karpenter pkg/apis/v1/taints.go). Any other would
	// be the agent's own doing on a forged command: a NoExecute taint has the taint manager
	// delete the node's pods around the Eviction API and its PDBs.
	t := cmd.Taint
	notOurs := func() error {
		return fmt.Errorf("%w: command.taint: %q: the agent adds only %s:%s, the taint Dovetail's functions write",
			ErrInvalidCommand, t.ToString(), apisv1.TaintKeyDisrupted, corev1.TaintEffectNoSchedule)
	}
	if t.Key != apisv1.TaintKeyDisrupted {
		return notOurs()
	}
	cached, err := a.checkNode(ctx, cmd, true)
	if err != nil {
		return err
	}
	if cached == nil {
		a.opts.Logger.Info("TaintNode: node gone, nothing to taint", "command", cmd.ID, "node", cmd.NodeName)
		return nil
	}
	// Another effect only to stamp a stray karpenter.sh/disrupted taint the node already has
	// (disruption.StrayTaints): ApplyTaint then adds nothing.
	if t.Effect != corev1.TaintEffectNoSchedule && !hasTaint(cached.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}) {
		return notOurs()
	}
	if err := a.reserve(ctx, cmd, cached); err != nil {
		return err
	}
	// Read-modify-write with the resourceVersion in the merge patch: the API server answers 409
	// if the node changed in between, and RetryOnConflict reads again. (The fake clientset does
	// not check resourceVersion; the real-control-plane e2e does.)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := a.kube.CoreV1().Nodes().Get(ctx, cmd.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if t.Effect != corev1.TaintEffectNoSchedule && !hasTaint(node.Spec.Taints, *t) {
			return notOurs() // the stray went since the cache showed it: nothing to stamp, nothing to add
		}
		// Tainted already, or a stray disrupted taint stamped (disruption.ApplyTaint).
		taints, changed := disruption.ApplyTaint(node.Spec.Taints, *cmd.Taint)
		if !changed {
			return nil
		}
		stamped := len(taints) == len(node.Spec.Taints)
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		})
		if err != nil {
			return err
		}
		if _, err = a.kube.CoreV1().Nodes().Patch(ctx, cmd.NodeName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: a.opts.Component}); err != nil {
			return err
		}
		if cmd.Taint.Key == apisv1.TaintKeyDisrupted && !stamped {
			a.ledger.note(cmd.NodeName, node.Labels[apisv1.LabelNodePool], a.opts.Clock.Now())
		}
		return nil
	})
}

// validateTaint checks one taint; path names it in errors ("command.taint", "command.taints[2]").
func validateTaint(path string, t *corev1.Taint) error {
	if t == nil {
		return fmt.Errorf("%w: %s: missing", ErrInvalidCommand, path)
	}
	for _, msg := range validation.IsQualifiedName(t.Key) {
		return fmt.Errorf("%w: %s.key: %q: %s", ErrInvalidCommand, path, t.Key, msg)
	}
	for _, msg := range validation.IsValidLabelValue(t.Value) {
		return fmt.Errorf("%w: %s.value: %q: %s", ErrInvalidCommand, path, t.Value, msg)
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	default:
		return fmt.Errorf("%w: %s.effect: %q is not NoSchedule, PreferNoSchedule or NoExecute", ErrInvalidCommand, path, t.Effect)
	}
}

func (a *Applier) drainNode(ctx context.Context, cmd *events.Command) error {
	node, err := a.checkNode(ctx, cmd, true)
	if err != nil {
		return err
	}
	if node == nil {
		// Gone: nothing of Dovetail's is left to drain (pods bound to a Node that no longer
		// exists are the pod garbage collector's).
		a.opts.Logger.Info("DrainNode: node gone, nothing to drain", "command", cmd.ID, "node", cmd.NodeName)
		return nil
	}
	// Every function taints before it drains (the taint is the budget's unit, and keeps new pods
	// off): a drain of a node that is not disrupting, say behind a taint the budget refused,
	// would disrupt it without the budget.
	if node != nil && node.DeletionTimestamp == nil && !a.disrupting(node) {
		return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName), fmt.Sprintf("node is not tainted %s: a drain follows the taint that reserves its disruption", apisv1.TaintKeyDisrupted))
	}
	// Karpenter's drain order (shared/drain): only the first group that still has pods is
	// evicted; the next waits until every pod of this one is gone. Pods tolerating
	// karpenter.sh/disrupted, static and terminal pods are not waited for.
	step := drain.Next(a.state.PodsOnNode(cmd.NodeName), a.opts.Clock.Now())
	if step.Drained() {
		return nil
	}
	pods := step.Evict
	var blocked []string
	for _, p := range step.Protected {
		// Karpenter v1's termination never evicts a do-not-disrupt pod: it waits for it until
		// the NodeClaim's terminationGracePeriod, after which the function sends DeletePods.
		blocked = append(blocked, podKey(p)+": "+apisv1.AnnotationDoNotDisrupt)
	}
	if len(pods) == 0 && len(blocked) == 0 {
		// Only terminating pods are left in this group: the drain waits for them to go.
		return &DrainIncompleteError{Node: cmd.NodeName, Blocked: []string{fmt.Sprintf("%d %s pods still terminating", len(step.Waiting), step.Group)}}
	}
	var (
		mu      sync.Mutex
		evicted = make([]string, 0, len(pods))
	)
	workqueue.ParallelizeUntil(ctx, a.opts.DrainParallelism, len(pods), func(i int) {
		p := pods[i]
		err := a.evict(ctx, p)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil || apierrors.IsNotFound(err):
			evicted = append(evicted, podKey(p))
		case apierrors.IsTooManyRequests(err):
			blocked = append(blocked, podKey(p)+": eviction refused (429, a PodDisruptionBudget holds it)")
		case errors.Is(err, context.DeadlineExceeded):
			blocked = append(blocked, podKey(p)+fmt.Sprintf(": eviction not accepted within %s", a.opts.EvictionTimeout))
		default:
			blocked = append(blocked, podKey(p)+": "+err.Error())
		}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(blocked) > 0 {
		return &DrainIncompleteError{Node: cmd.NodeName, Evicted: evicted, Blocked: blocked}
	}
	if later := len(step.Waiting) - len(step.Evict); later > 0 {
		// The evicted pods are still terminating, and later groups wait for them.
		return &DrainIncompleteError{Node: cmd.NodeName, Evicted: evicted,
			Blocked: []string{fmt.Sprintf("%d pods wait for the %s pods to be gone", later, step.Group)}}
	}
	return nil
}

// undrained names the pods on a node a drain still waits for (drain.Waiting, terminating pods
// aside: they are on their way), at most five.
func (a *Applier) undrained(node string) []string {
	var out []string
	now := a.opts.Clock.Now()
	for _, p := range a.state.PodsOnNode(node) {
		if !drain.Waiting(p, now) || p.DeletionTimestamp != nil {
			continue
		}
		if len(out) == 5 {
			out = append(out, "...")
			break
		}
		out = append(out, podKey(p))
	}
	return out
}

// evict asks the Eviction API (policy/v1) to evict the pod, with a UID precondition so a pod
// re-created under the same name is left alone.
func (a *Applier) evict(ctx context.Context, p *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, a.opts.EvictionTimeout)
	defer cancel()
	uid := p.UID
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	if uid == "" {
		ev.DeleteOptions = nil
	}
	return a.kube.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
}

func (a *Applier) deleteNode(ctx context.Context, cmd *events.Command) error {
	node, err := a.checkNode(ctx, cmd, false)
	if err != nil {
		return err
	}
	// Deleting a Node object its pods still run on loses them without a PodDisruptionBudget
	// asked. A node with the termination finalizer is drained by the termination path its
	// deletion starts; any other is deleted only once drained.
	if node == nil {
		return nil // gone already
	}
	if !hasString(node.Finalizers, events.FinalizerTermination) && !a.graceOver(node) {
		if left := a.undrained(cmd.NodeName); len(left) > 0 {
			return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName), fmt.Sprintf("node still runs %d pods that were not drained (%s)", len(left), strings.Join(left, ", ")))
		}
	}
	opts := metav1.DeleteOptions{}
	if node.UID != "" {
		uid := node.UID
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = a.kube.CoreV1().Nodes().Delete(ctx, cmd.NodeName, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", cmd.NodeName, err)
	}
	return nil
}

// --- unavailable offerings ---

func (a *Applier) markUnavailable(ctx context.Context, cmd *events.Command) error {
	if len(cmd.Unavailable) == 0 {
		return fmt.Errorf("%w: command.unavailable: must list at least one offering", ErrInvalidCommand)
	}
	now := a.opts.Clock.Now()
	marks := map[string]events.UnavailableOfferingMark{}
	for i, m := range cmd.Unavailable {
		key, err := OfferingMarkKey(m)
		if err != nil {
			return fmt.Errorf("%w: command.%s", ErrInvalidCommand, strings.Replace(err.Error(), "unavailable", fmt.Sprintf("unavailable[%d]", i), 1))
		}
		if m.Expires.IsZero() {
			m.Expires = metav1.NewTime(now.Add(events.UnavailableOfferingTTL))
		}
		if prev, ok := marks[key]; !ok || m.Expires.After(prev.Expires.Time) {
			marks[key] = m
		}
	}
	cms := a.kube.CoreV1().ConfigMaps(a.opts.Namespace)
	return retry.OnError(retry.DefaultRetry, apierrors.IsAlreadyExists, func() error {
		cm, err := cms.Get(ctx, UnavailableOfferingsConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: UnavailableOfferingsConfigMap, Namespace: a.opts.Namespace}, Data: map[string]string{}}
			for k, m := range marks {
				b, _ := json.Marshal(m)
				cm.Data[k] = string(b)
			}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: a.opts.Component})
			return err
		}
		if err != nil {
			return err
		}
		// One key per offering: a merge patch touches only these keys, so concurrent writers
		// of other offerings never conflict. A later expiry already stored wins; expired
		// entries are pruned (null deletes a key in a JSON merge patch, RFC 7386).
		data := map[string]any{}
		stored, _ := decodeOfferingMarks(cm, time.Time{})
		storedByKey := map[string]events.UnavailableOfferingMark{}
		for _, s := range stored {
			k, _ := OfferingMarkKey(s)
			storedByKey[k] = s
		}
		for k, m := range marks {
			if s, ok := storedByKey[k]; ok && !m.Expires.After(s.Expires.Time) {
				continue
			}
			b, _ := json.Marshal(m)
			data[k] = string(b)
		}
		for k := range cm.Data {
			if _, writing := data[k]; writing {
				continue
			}
			if s, ok := storedByKey[k]; ok && !s.Expires.After(now) {
				data[k] = nil
			}
		}
		if len(data) == 0 {
			return nil
		}
		patch, err := json.Marshal(map[string]any{"data": data})
		if err != nil {
			return err
		}
		_, err = cms.Patch(ctx, UnavailableOfferingsConfigMap, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: a.opts.Component})
		return err
	})
}

// --- refusals ---

// refuse records a Warning Event (reason DovetailCommandRefused) on ref and returns a
// *RefusedError. The Event is written synchronously, named after the command so a redelivered
// refusal finds it already there; if it cannot be written, a plain error asks for redelivery,
// so a refusal is never silent.
func (a *Applier) refuse(ctx context.Context, cmd *events.Command, ref corev1.ObjectReference, reason string) error {
	msg := fmt.Sprintf("command %s (%s, snapshot revision %d) refused: %s", cmd.ID, cmd.Kind, cmd.SnapshotRevision, reason)
	if cmd.Reason != "" {
		msg += "; command reason: " + cmd.Reason
	}
	if err := a.event(ctx, cmd, ref, ReasonCommandRefused, msg); err != nil {
		return fmt.Errorf("record refusal of command %s: %w", cmd.ID, err)
	}
	a.opts.Logger.Info("command refused", "command", cmd.ID, "kind", cmd.Kind, "target", ref.Kind+"/"+ref.Name, "reason", reason)
	return &RefusedError{CommandID: cmd.ID, Kind: cmd.Kind, Target: ref.Kind + "/" + ref.Name, Reason: reason}
}
