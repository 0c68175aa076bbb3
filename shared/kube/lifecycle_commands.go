package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// The NodeClaim lifecycle commands: what Karpenter's registration, initialization and
// termination controllers write, decided by a function and applied here. Each is idempotent:
// a redelivered command finds its effect in place and writes nothing.

// maxListedFailures bounds how many per-pod failures an error names (the rest are counted).
const maxListedFailures = 10

// --- RegisterNode ---

func (a *Applier) registerNode(ctx context.Context, cmd *events.Command) error {
	if err := validateRegisterNode(cmd); err != nil {
		return err
	}
	if err := a.refuseIfNodeRecreated(ctx, cmd); err != nil {
		return err
	}
	claim, err := a.state.NodeClaim(cmd.NodeClaim.Name)
	if err != nil {
		return err
	}
	if claim == nil {
		ref := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: cmd.NodeClaim.Name}
		if a.state.Revisions().Deleted(KindNodeClaim, cmd.NodeClaim.Name) {
			return a.refuse(ctx, cmd, ref, "NodeClaim was deleted")
		}
		return fmt.Errorf("register node %s: NodeClaim %s not in the agent's cache (not created yet?)", cmd.NodeName, cmd.NodeClaim.Name)
	}
	if err := a.refuseUnownedClaim(ctx, cmd, claim); err != nil {
		return err
	}
	if v, ok := cmd.Labels[apisv1.LabelNodePool]; ok && v != claim.Labels[apisv1.LabelNodePool] {
		return fmt.Errorf("%w: command.labels[%q]: %q is not NodeClaim %s's NodePool %q", ErrInvalidCommand, apisv1.LabelNodePool, v, claim.Name, claim.Labels[apisv1.LabelNodePool])
	}
	if why := notTheClaims(cmd, claim); why != "" {
		return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName), why)
	}
	cached := a.state.Node(cmd.NodeName)
	if cached == nil {
		return fmt.Errorf("register node %s: node not in the agent's cache (not registered yet?)", cmd.NodeName)
	}
	var registered *corev1.Node // set when this call lifted karpenter.sh/unregistered
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		registered = nil
		node, err := a.kube.CoreV1().Nodes().Get(ctx, cmd.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("register node %s: node not found", cmd.NodeName)
		}
		if err != nil {
			return fmt.Errorf("register node %s: %w", cmd.NodeName, err)
		}
		if node.UID != cached.UID {
			// The cache has not seen this incarnation yet, so its staleness check said nothing
			// about it: wait for the cache.
			return fmt.Errorf("register node %s: node uid %s is not the cached %s (cache behind)", cmd.NodeName, node.UID, cached.UID)
		}
		if err := matchProviderID(cmd, node, claim); err != nil {
			return err
		}
		patch := registrationPatch(cmd, node)
		if patch != nil && node.DeletionTimestamp != nil {
			// The API server forbids new finalizers on an object being deleted (422 on every
			// retry), and a Node on its way out is no longer to be registered.
			return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName), "node is being deleted")
		}
		if patch == nil {
			return nil // registered already (redelivered command)
		}
		body, err := json.Marshal(patch)
		if err != nil {
			return err
		}
		patched, err := a.kube.CoreV1().Nodes().Patch(ctx, cmd.NodeName, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component})
		if err == nil && hasTaintKey(node.Spec.Taints, apisv1.TaintKeyUnregistered) {
			registered = patched
		}
		return err
	})
	if err == nil && registered != nil {
		pool, zone := nodeLabels(registered)
		a.opts.Metrics.Record(telemetry.NodesCreated, 1, pool, zone)
	}
	return err
}

func hasTaintKey(taints []corev1.Taint, key string) bool {
	for _, t := range taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// notTheClaims returns "" when everything a RegisterNode writes is its NodeClaim's, as
// Karpenter's registration syncs the NodeClaim's labels, annotations and taints onto the Node
// (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/registration.go), else which
// value is not: labels are the NodeClaim's (less the agent's mark) and karpenter.sh/registered=
// true; annotations the NodeClaim's; taints its taints, startup taints and its
// dovetail.dev/planned taint (shared/lifecycle register). A mismatch with the cache (a label
// changed since the snapshot) is refused, and the next decision sends the NodeClaim as it is.
func notTheClaims(cmd *events.Command, claim *apisv1.NodeClaim) string {
	for _, k := range sortedKeys(cmd.Labels) {
		v := cmd.Labels[k]
		if k == apisv1.LabelNodeRegistered && v == "true" {
			continue
		}
		if have, ok := claim.Labels[k]; !ok || have != v || k == apisv1.LabelManagedBy {
			return fmt.Sprintf("command.labels[%q]: %q is not NodeClaim %s's label", k, v, claim.Name)
		}
	}
	for _, k := range sortedKeys(cmd.Annotations) {
		if have, ok := claim.Annotations[k]; !ok || have != cmd.Annotations[k] {
			return fmt.Sprintf("command.annotations[%q]: %q is not NodeClaim %s's annotation", k, cmd.Annotations[k], claim.Name)
		}
	}
	allowed := append(append([]corev1.Taint{apisv1.PlannedTaint(claim.Name)}, claim.Spec.Taints...), claim.Spec.StartupTaints...)
	for i, t := range cmd.Taints {
		if !slices.ContainsFunc(allowed, func(c corev1.Taint) bool { return c.Key == t.Key && c.Value == t.Value && c.Effect == t.Effect }) {
			return fmt.Sprintf("command.taints[%d]: %q is none of NodeClaim %s's taints, startup taints or planned taint", i, t.ToString(), claim.Name)
		}
	}
	return ""
}

func validateRegisterNode(cmd *events.Command) error {
	switch {
	case cmd.NodeName == "":
		return fmt.Errorf("%w: command.nodeName: must not be empty", ErrInvalidCommand)
	case cmd.NodeClaim == nil || cmd.NodeClaim.Name == "":
		return fmt.Errorf("%w: command.nodeClaim.metadata.name: must not be empty", ErrInvalidCommand)
	}
	if err := validateFinalizer(cmd.Finalizer); err != nil {
		return err
	}
	if cmd.Finalizer != events.FinalizerTermination {
		return fmt.Errorf("%w: command.finalizer: %q: a registered Node gets %s, Dovetail's only finalizer on it", ErrInvalidCommand, cmd.Finalizer, events.FinalizerTermination)
	}
	if err := validateLabels(cmd.Labels); err != nil {
		return err
	}
	if v, ok := cmd.Labels[apisv1.LabelManagedBy]; ok {
		return fmt.Errorf("%w: command.labels[%q]: %q: the ownership mark is the NodeClaim's, and only the agent writes it", ErrInvalidCommand, apisv1.LabelManagedBy, v)
	}
	for _, k := range sortedKeys(cmd.Annotations) {
		for _, msg := range validation.IsQualifiedName(k) {
			return fmt.Errorf("%w: command.annotations[%q]: %s", ErrInvalidCommand, k, msg)
		}
	}
	for i := range cmd.Taints {
		if err := validateTaint(fmt.Sprintf("command.taints[%d]", i), &cmd.Taints[i]); err != nil {
			return err
		}
	}
	return nil
}

// validateFinalizer applies the API server's rule for a finalizer the agent adds: a qualified
// name with a domain prefix (apimachinery ValidateFinalizerName; only the built-in finalizers
// may go without one).
func validateFinalizer(f string) error {
	if f == "" {
		return fmt.Errorf("%w: command.finalizer: must not be empty", ErrInvalidCommand)
	}
	for _, msg := range validation.IsQualifiedName(f) {
		return fmt.Errorf("%w: command.finalizer: %q: %s", ErrInvalidCommand, f, msg)
	}
	if !strings.Contains(f, "/") {
		return fmt.Errorf("%w: command.finalizer: %q: must be domain-qualified (e.g. %s)", ErrInvalidCommand, f, events.FinalizerTermination)
	}
	return nil
}

func validateLabels(labels map[string]string) error {
	for _, k := range sortedKeys(labels) {
		for _, msg := range validation.IsQualifiedName(k) {
			return fmt.Errorf("%w: command.labels[%q]: %s", ErrInvalidCommand, k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			return fmt.Errorf("%w: command.labels[%q]: value %q: %s", ErrInvalidCommand, k, labels[k], msg)
		}
	}
	return nil
}

// matchProviderID checks the Node is the NodeClaim's instance: the registration is what makes
// the Node Dovetail's (ownership.go), so both provider IDs must be known and equal. A NodeClaim
// or Node without one yet (the agent writes the NodeClaim's status after creating it; the cloud
// controller sets a Node's after the kubelet registers on some clouds) is retried; a different
// one is never right.
func matchProviderID(cmd *events.Command, node *corev1.Node, claim *apisv1.NodeClaim) error {
	if claim.Status.ProviderID == "" {
		return fmt.Errorf("register node %s: NodeClaim %s records no status.providerID yet", node.Name, claim.Name)
	}
	if node.Spec.ProviderID == claim.Status.ProviderID {
		if claim.Status.NodeName != "" && claim.Status.NodeName != node.Name {
			return fmt.Errorf("%w: command.nodeName: NodeClaim %s is registered as node %s, not %s", ErrInvalidCommand, claim.Name, claim.Status.NodeName, node.Name)
		}
		return nil
	}
	if node.Spec.ProviderID == "" {
		return fmt.Errorf("register node %s: node has no spec.providerID yet (NodeClaim %s records %q)", node.Name, claim.Name, claim.Status.ProviderID)
	}
	return fmt.Errorf("%w: command.nodeName: node %s has spec.providerID %q, NodeClaim %s records status.providerID %q",
		ErrInvalidCommand, node.Name, node.Spec.ProviderID, claim.Name, claim.Status.ProviderID)
}

// registrationPatch is the merge patch that registers node, or nil when nothing is missing. It
// carries the resourceVersion read, so a concurrent writer turns it into a 409 and a re-read.
// Labels and annotations merge key by key; taints and finalizers are lists, which a merge
// patch replaces whole, so they are computed from the node read.
func registrationPatch(cmd *events.Command, node *corev1.Node) map[string]any {
	meta := map[string]any{}
	if set := missingEntries(node.Labels, cmd.Labels); len(set) > 0 {
		meta["labels"] = set
	}
	if set := missingEntries(node.Annotations, cmd.Annotations); len(set) > 0 {
		meta["annotations"] = set
	}
	if !hasString(node.Finalizers, cmd.Finalizer) {
		meta["finalizers"] = append(append([]string{}, node.Finalizers...), cmd.Finalizer)
	}
	patch := map[string]any{}
	if taints, changed := registeredTaints(node.Spec.Taints, cmd.Taints); changed {
		patch["spec"] = map[string]any{"taints": taints}
	}
	if len(meta) == 0 && len(patch) == 0 {
		return nil
	}
	meta["resourceVersion"] = node.ResourceVersion
	patch["metadata"] = meta
	return patch
}

// registeredTaints drops every karpenter.sh/unregistered taint (any effect) and appends each
// wanted taint whose key and effect are not there yet (a present one keeps its value, as
// Karpenter's registration does).
func registeredTaints(have, want []corev1.Taint) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(have)+len(want))
	changed := false
	for _, t := range have {
		if t.Key == apisv1.TaintKeyUnregistered {
			changed = true
			continue
		}
		out = append(out, t)
	}
	for _, w := range want {
		if w.Key == apisv1.TaintKeyUnregistered || hasTaint(out, w) {
			continue
		}
		out = append(out, w)
		changed = true
	}
	return out, changed
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for _, h := range taints {
		if h.Key == t.Key && h.Effect == t.Effect {
			return true
		}
	}
	return false
}

// missingEntries returns the entries of want that have does not hold with the same value.
func missingEntries(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			out[k] = v
		}
	}
	return out
}

// --- SetNodeClaimStatus ---

func (a *Applier) setNodeClaimStatus(ctx context.Context, cmd *events.Command) error {
	if err := validateNodeClaimStatus(cmd); err != nil {
		return err
	}
	name := cmd.NodeClaim.Name
	res := a.dyn.Resource(NodeClaimGVR)
	var transitions []events.EventRecord
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		transitions = nil
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			a.opts.Logger.Info("SetNodeClaimStatus: NodeClaim gone, nothing to record", "command", cmd.ID, "nodeClaim", name)
			return nil
		}
		if err != nil {
			return fmt.Errorf("get NodeClaim %s: %w", name, err)
		}
		got := &apisv1.NodeClaim{}
		if err := FromUnstructured(u, got); err != nil {
			return fmt.Errorf("NodeClaim %s in cluster: %w", name, err)
		}
		if err := a.refuseUnownedClaim(ctx, cmd, got); err != nil {
			return err
		}
		status := a.nodeClaimStatusPatch(got, &cmd.NodeClaim.Status, cmd.ClearConditions)
		if status == nil {
			return nil // recorded already
		}
		transitions = conditionTransitions(kevents.NodeClaimRef(got), got.Status.Conditions, cmd.NodeClaim.Status.Conditions)
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": got.ResourceVersion},
			"status":   status,
		})
		if err != nil {
			return err
		}
		_, err = res.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component}, "status")
		return err
	})
	if err != nil {
		return err
	}
	return a.recordEvents(ctx, cmd.ID, transitions)
}

// conditionTransitions are the Events of each wanted condition whose status differs from the
// object's (operatorpkg's status controller: Registered, Initialized, Ready on a NodeClaim).
func conditionTransitions(ref corev1.ObjectReference, have, want []metav1.Condition) []events.EventRecord {
	var out []events.EventRecord
	for _, w := range want {
		var from metav1.ConditionStatus
		if i := conditionIndex(have, w.Type); i >= 0 {
			from = have[i].Status
		}
		if from == w.Status || (from == "" && w.Status == metav1.ConditionUnknown) {
			continue // no transition (Karpenter starts every condition Unknown)
		}
		if w.Reason == "" {
			w.Reason = w.Type
		}
		out = append(out, kevents.ConditionTransition(ref, from, w))
	}
	return out
}

func validateNodeClaimStatus(cmd *events.Command) error {
	if cmd.NodeClaim == nil || cmd.NodeClaim.Name == "" {
		return fmt.Errorf("%w: command.nodeClaim.metadata.name: must not be empty", ErrInvalidCommand)
	}
	if n := cmd.NodeClaim.Status.NodeName; n != "" {
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			return fmt.Errorf("%w: command.nodeClaim.status.nodeName: %q: %s", ErrInvalidCommand, n, msg)
		}
	}
	seen := map[string]bool{}
	for i, typ := range cmd.ClearConditions {
		if typ == "" {
			return fmt.Errorf("%w: command.clearConditions[%d]: must not be empty", ErrInvalidCommand, i)
		}
	}
	for i, c := range cmd.NodeClaim.Status.Conditions {
		p := fmt.Sprintf("command.nodeClaim.status.conditions[%d]", i)
		switch {
		case c.Type == "":
			return fmt.Errorf("%w: %s.type: must not be empty", ErrInvalidCommand, p)
		case seen[c.Type]:
			return fmt.Errorf("%w: %s.type: %q given twice", ErrInvalidCommand, p, c.Type)
		}
		seen[c.Type] = true
		switch c.Status {
		case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
		default:
			return fmt.Errorf("%w: %s.status: %q is not True, False or Unknown", ErrInvalidCommand, p, c.Status)
		}
	}
	return nil
}

// nodeClaimStatusPatch returns the status fields to write (nodeName, and the whole conditions
// list: a merge patch replaces lists), or nil when the NodeClaim already records want.
//
// Each wanted condition replaces the one of its type. A condition whose status did not change
// keeps its lastTransitionTime (metav1.Condition: the time the status last changed); a changed
// one takes the command's time, or the agent's clock when the command gave none. An empty
// reason becomes the type and observedGeneration 0 the NodeClaim's generation, as Karpenter's
// status conditions (operatorpkg) write them; the CRD requires reason and lastTransitionTime.
func (a *Applier) nodeClaimStatusPatch(got *apisv1.NodeClaim, want *apisv1.NodeClaimStatus, clear []string) map[string]any {
	status := map[string]any{}
	if want.NodeName != "" && want.NodeName != got.Status.NodeName {
		status["nodeName"] = want.NodeName
	}
	have := got.Status.Conditions
	cleared := false
	for _, typ := range clear {
		if i := conditionIndex(have, typ); i >= 0 {
			have = append(append([]metav1.Condition(nil), have[:i]...), have[i+1:]...)
			cleared = true
		}
	}
	conds, changed := mergeConditions(have, want.Conditions, got.Generation, a.opts.Clock.Now())
	changed = changed || cleared
	if changed {
		status["conditions"] = conds
	}
	if len(status) == 0 {
		return nil
	}
	return status
}

// mergeConditions returns have with each of want replacing the condition of its type (the others
// kept), and whether anything changed. A condition whose status did not change keeps its
// lastTransitionTime; a changed one takes its own, or now when it gave none. An empty reason
// becomes the type and observedGeneration 0 the object's generation, as operatorpkg writes them
// (the CRDs require reason and lastTransitionTime).
func mergeConditions(have, want []metav1.Condition, generation int64, now time.Time) ([]metav1.Condition, bool) {
	conds := append([]metav1.Condition(nil), have...)
	changed := false
	for _, w := range want {
		if w.Reason == "" {
			w.Reason = w.Type
		}
		if w.ObservedGeneration == 0 {
			w.ObservedGeneration = generation
		}
		i := conditionIndex(conds, w.Type)
		switch {
		case i >= 0 && conds[i].Status == w.Status:
			w.LastTransitionTime = conds[i].LastTransitionTime
		case w.LastTransitionTime.IsZero():
			w.LastTransitionTime = metav1.NewTime(now)
		}
		if i < 0 {
			conds = append(conds, w)
			changed = true
		} else if !conditionEqual(conds[i], w) {
			conds[i] = w
			changed = true
		}
	}
	return conds, changed
}

func conditionIndex(conds []metav1.Condition, typ string) int {
	for i := range conds {
		if conds[i].Type == typ {
			return i
		}
	}
	return -1
}

func conditionEqual(x, y metav1.Condition) bool {
	return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
		x.ObservedGeneration == y.ObservedGeneration && x.LastTransitionTime.Equal(&y.LastTransitionTime)
}

// --- LabelNode ---

func (a *Applier) labelNode(ctx context.Context, cmd *events.Command) error {
	if cmd.NodeName == "" {
		return fmt.Errorf("%w: command.nodeName: must not be empty", ErrInvalidCommand)
	}
	if len(cmd.Labels) == 0 {
		return fmt.Errorf("%w: command.labels: must set at least one label", ErrInvalidCommand)
	}
	if err := validateLabels(cmd.Labels); err != nil {
		return err
	}
	for _, k := range ownershipLabels {
		if v, ok := cmd.Labels[k]; ok {
			return fmt.Errorf("%w: command.labels[%q]: %q: LabelNode may not write a label that says whose a node is (only RegisterNode, from its NodeClaim)", ErrInvalidCommand, k, v)
		}
	}
	// The one label Dovetail's lifecycle function writes after registration (as Karpenter's
	// initialization controller does); any other would place workloads or topology on a
	// forged command's word.
	for _, k := range sortedKeys(cmd.Labels) {
		if k != apisv1.LabelNodeInitialized || cmd.Labels[k] != "true" {
			return fmt.Errorf("%w: command.labels[%q]: %q: LabelNode writes only %s=true", ErrInvalidCommand, k, cmd.Labels[k], apisv1.LabelNodeInitialized)
		}
	}
	if err := a.refuseIfNodeRecreated(ctx, cmd); err != nil {
		return err
	}
	node, err := a.currentNode(ctx, cmd.NodeName)
	if err != nil {
		return err
	}
	if node == nil {
		a.opts.Logger.Info("LabelNode: node gone, nothing to label", "command", cmd.ID, "node", cmd.NodeName)
		return nil
	}
	if err := a.refuseUnownedNode(ctx, cmd, node); err != nil {
		return err
	}
	// Labels merge key by key, so no resourceVersion is needed: a concurrent writer of other
	// keys loses nothing, and setting the same values again changes nothing.
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": cmd.Labels}})
	if err != nil {
		return err
	}
	_, err = a.kube.CoreV1().Nodes().Patch(ctx, cmd.NodeName, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component})
	if apierrors.IsNotFound(err) {
		a.opts.Logger.Info("LabelNode: node gone, nothing to label", "command", cmd.ID, "node", cmd.NodeName)
		return nil
	}
	if err != nil {
		return fmt.Errorf("label node %s: %w", cmd.NodeName, err)
	}
	return nil
}

// --- RemoveFinalizer ---

func (a *Applier) removeFinalizer(ctx context.Context, cmd *events.Command) error {
	if cmd.Finalizer == "" {
		return fmt.Errorf("%w: command.finalizer: must not be empty", ErrInvalidCommand)
	}
	if (cmd.NodeName != "" || (cmd.NodeClaim != nil && cmd.NodeClaim.Name != "")) && cmd.Finalizer != events.FinalizerTermination {
		// The termination finalizer is the one a Node or NodeClaim carries of Dovetail's; any
		// other is another controller's, and releasing it is not the agent's to do.
		return fmt.Errorf("%w: command.finalizer: %q: the agent releases only %s from a Node or NodeClaim", ErrInvalidCommand, cmd.Finalizer, events.FinalizerTermination)
	}
	if cmd.NodeName != "" {
		if err := a.refuseIfNodeRecreated(ctx, cmd); err != nil {
			return err
		}
		return a.removeNodeFinalizer(ctx, cmd)
	}
	if cmd.NodeClass != nil && (cmd.NodeClaim == nil || cmd.NodeClaim.Name == "") {
		return a.nodeClassFinalizer(ctx, cmd, false)
	}
	if cmd.NodeClaim == nil || cmd.NodeClaim.Name == "" {
		return fmt.Errorf("%w: command.nodeName: must name a Node (or command.nodeClaim.metadata.name a NodeClaim)", ErrInvalidCommand)
	}
	name := cmd.NodeClaim.Name
	if a.state.CreatedSince(KindNodeClaim, name, cmd.SnapshotRevision) {
		ref := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: name}
		if cached, _ := a.state.NodeClaim(name); cached != nil {
			ref.UID = cached.UID
		}
		return a.refuse(ctx, cmd, ref, fmt.Sprintf("NodeClaim was created after snapshot revision %d (or the revision predates this agent)", cmd.SnapshotRevision))
	}
	return a.removeNodeClaimFinalizer(ctx, cmd)
}

func (a *Applier) removeNodeFinalizer(ctx context.Context, cmd *events.Command) error {
	nodes := a.kube.CoreV1().Nodes()
	var terminated *corev1.Node // set when this call released a deleting Node's termination finalizer
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		terminated = nil
		node, err := nodes.Get(ctx, cmd.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get node %s: %w", cmd.NodeName, err)
		}
		body := finalizerRemovalPatch(node.Finalizers, cmd.Finalizer, node.ResourceVersion)
		if body == nil {
			return nil
		}
		if err := a.refuseUnownedNode(ctx, cmd, node); err != nil {
			return err
		}
		if cmd.Finalizer == events.FinalizerTermination {
			if why := terminationEvidenceReason(cmd, node.DeletionTimestamp != nil, node.Spec.ProviderID); why != "" {
				return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName), why)
			}
		}
		_, err = nodes.Patch(ctx, cmd.NodeName, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil && cmd.Finalizer == events.FinalizerTermination && node.DeletionTimestamp != nil {
			terminated = node
		}
		return err
	})
	if err == nil && terminated != nil {
		pool, zone := nodeLabels(terminated)
		a.opts.Metrics.Record(telemetry.NodesTerminated, 1, pool, zone)
	}
	return err
}

func (a *Applier) removeNodeClaimFinalizer(ctx context.Context, cmd *events.Command) error {
	name := cmd.NodeClaim.Name
	res := a.dyn.Resource(NodeClaimGVR)
	var terminated map[string]string // labels of a deleting NodeClaim whose termination finalizer this call released
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		terminated = nil
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get NodeClaim %s: %w", name, err)
		}
		body := finalizerRemovalPatch(u.GetFinalizers(), cmd.Finalizer, u.GetResourceVersion())
		if body == nil {
			return nil
		}
		got := &apisv1.NodeClaim{}
		if err := FromUnstructured(u, got); err != nil {
			return fmt.Errorf("NodeClaim %s in cluster: %w", name, err)
		}
		if err := a.refuseUnownedClaim(ctx, cmd, got); err != nil {
			return err
		}
		if cmd.Finalizer == events.FinalizerTermination {
			ref := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: name, UID: got.UID}
			if why := terminationEvidenceReason(cmd, got.DeletionTimestamp != nil, got.Status.ProviderID); why != "" {
				return a.refuse(ctx, cmd, ref, why)
			}
			// The tombstone goes first: once the finalizer is gone the NodeClaim is, and a
			// replayed CreateNodeClaim must find that it was.
			if err := a.recordTombstone(ctx, name, got.Status.ProviderID, a.opts.Clock.Now()); err != nil {
				return fmt.Errorf("record NodeClaim %s tombstone: %w", name, err)
			}
		}
		_, err = res.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil && cmd.Finalizer == events.FinalizerTermination && u.GetDeletionTimestamp() != nil {
			terminated = u.GetLabels()
		}
		return err
	})
	if err == nil && terminated != nil {
		a.opts.Metrics.Record(telemetry.NodeClaimsTerminated, 1, terminated[apisv1.LabelNodePool], terminated[apisv1.LabelCapacityType],
			terminated[corev1.LabelTopologyZone])
	}
	return err
}

// finalizerRemovalPatch is the merge patch removing f from have (a list: replaced whole, hence
// the resourceVersion), or nil when f is not there.
func finalizerRemovalPatch(have []string, f, resourceVersion string) []byte {
	if !hasString(have, f) {
		return nil
	}
	rest := make([]string, 0, len(have))
	for _, h := range have {
		if h != f {
			rest = append(rest, h)
		}
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion, "finalizers": rest}})
	return body
}

// --- NominatePods ---

func (a *Applier) nominatePods(ctx context.Context, cmd *events.Command) error {
	if cmd.NodeName == "" && cmd.NodeClaim != nil {
		return a.nominatePodsForClaim(ctx, cmd)
	}
	if err := validatePodRefs(cmd); err != nil {
		return err
	}
	// Pods are given the planned taint's toleration only for a node of Dovetail's; the lifecycle
	// function nominates once the node registered, so a node gone is nothing to do.
	node, err := a.currentNode(ctx, cmd.NodeName)
	if err != nil {
		return err
	}
	if node == nil {
		a.opts.Logger.Info("NominatePods: node gone, nothing to nominate", "command", cmd.ID, "node", cmd.NodeName)
		return nil
	}
	if err := a.refuseUnownedNode(ctx, cmd, node); err != nil {
		return err
	}
	owner, _ := a.nodeOwner(node)
	claim := ""
	if owner != nil {
		claim = owner.Name
	}
	if why := foreignToleration(cmd.Toleration, claim); why != "" {
		return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName), why)
	}
	return eachPodParallel(ctx, cmd, a.opts.NominateParallelism, "nominate pods for node "+cmd.NodeName, func(ref events.PodRef) error { return a.nominatePod(ctx, cmd, ref) })
}

// nominatePodsForClaim is NominatePods naming a NodeClaim whose node has not registered yet: the
// provision function sends it right behind the NodeClaim's CreateNodeClaim (same ordering key),
// so the planned pods tolerate the node's planned taint before the node exists. Were they given
// it only once the node registered, the pod update would requeue each pod into one more failed
// kube-scheduler attempt just before the registration lifts the node's unregistered taint, and
// the pod would sit out that attempt's backoff (issue 28: node Ready to pod bound, p50 8.3 s
// against Karpenter's 2.2 s at N = 1,000). The toleration must be PlannedToleration of a
// NodeClaim the agent created whose node may carry that taint: the register path adds it, and
// the agent refuses any other toleration, as for a node.
func (a *Applier) nominatePodsForClaim(ctx context.Context, cmd *events.Command) error {
	if cmd.NodeClaim.Name == "" {
		return fmt.Errorf("%w: command.nodeClaim.metadata.name: must not be empty", ErrInvalidCommand)
	}
	if err := validatePodList(cmd); err != nil {
		return err
	}
	nc, err := a.currentNodeClaim(ctx, cmd.NodeClaim.Name)
	if err != nil {
		return err
	}
	if nc == nil || nc.DeletionTimestamp != nil {
		a.opts.Logger.Info("NominatePods: NodeClaim gone or going, nothing to nominate", "command", cmd.ID, "nodeClaim", cmd.NodeClaim.Name)
		return nil
	}
	if err := a.refuseUnownedClaim(ctx, cmd, nc); err != nil {
		return err
	}
	if why := foreignToleration(cmd.Toleration, nc.Name); why != "" {
		return a.refuse(ctx, cmd, corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: nc.Name, UID: nc.UID}, why)
	}
	return eachPodParallel(ctx, cmd, a.opts.NominateParallelism, "nominate pods for NodeClaim "+nc.Name, func(ref events.PodRef) error { return a.nominatePod(ctx, cmd, ref) })
}

// foreignToleration says why NominatePods may not add t (nil: it adds nothing), or "" when t is
// the planned taint's toleration of NodeClaim claim ("": the node has none), the only toleration
// the agent adds: any other would let the pod past taints that are not Dovetail's to lift.
func foreignToleration(t *corev1.Toleration, claim string) string {
	if t == nil || (claim != "" && *t == apisv1.PlannedToleration(claim)) {
		return ""
	}
	want := "none (the node has no NodeClaim)"
	if claim != "" {
		pt := apisv1.PlannedToleration(claim)
		want = fmt.Sprintf("%s=%s:%s of NodeClaim %s", pt.Key, pt.Value, pt.Effect, claim)
	}
	return fmt.Sprintf("command.toleration: %s %s %s:%s is not the planned taint's toleration (%s)", t.Key, t.Operator, t.Value, t.Effect, want)
}

// eachPodParallel is eachPod with up to n pods in flight at once: a nomination is two or three
// requests per pod, and a decision nominates every pod it planned (issue 28: 200 pods one after
// the other held the last nodes' registration, which follows their nominations in the command
// order, for seconds). The failures are listed in the command's pod order.
func eachPodParallel(ctx context.Context, cmd *events.Command, n int, what string, fn func(events.PodRef) error) error {
	errs := make([]error, len(cmd.Pods))
	workqueue.ParallelizeUntil(ctx, max(n, 1), len(cmd.Pods), func(i int) { errs[i] = fn(cmd.Pods[i]) })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, cmd.Pods[i].Namespace+"/"+cmd.Pods[i].Name+": "+err.Error())
		}
	}
	return podFailures(what, len(cmd.Pods), failed)
}

// eachPod applies fn to each pod of the command, going on past a failure to the rest: the failures
// are reported together (podFailures), so one stuck pod does not hold back the others.
func eachPod(ctx context.Context, cmd *events.Command, what string, fn func(events.PodRef) error) error {
	var failed []string
	for _, ref := range cmd.Pods {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fn(ref); err != nil {
			failed = append(failed, ref.Namespace+"/"+ref.Name+": "+err.Error())
		}
	}
	return podFailures(what, len(cmd.Pods), failed)
}

// nominatePod adds the command's toleration (the node's planned taint's) to the pod's
// spec.tolerations, with the resourceVersion read: a pod bound in between answers 409 and is
// skipped on the re-read. It does not set status.nominatedNodeName (design note "Planned pods
// tolerate, they are not nominated"): kube-scheduler runs its filters with every nominated pod
// of equal or higher priority added to its node, for every pod it tries, and at 1,000 pending
// pods that was 27 s of its Filter time against Karpenter's 0.2 s. The first attempt reads the
// pod from the agent's cache (no GET: the cache is at most a watch event behind, and a stale
// resourceVersion only costs the 409 and a GET).
func (a *Applier) nominatePod(ctx context.Context, cmd *events.Command, ref events.PodRef) error {
	pods := a.kube.CoreV1().Pods(ref.Namespace)
	cached := a.state.Pod(ref.Namespace, ref.Name)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p *corev1.Pod
		var err error
		if cached != nil && cached.ResourceVersion != "" {
			p, cached = cached.DeepCopy(), nil
		} else {
			p, err = pods.Get(ctx, ref.Name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			a.opts.Logger.Debug("NominatePods: pod gone", "command", cmd.ID, "pod", ref.Namespace+"/"+ref.Name)
			return nil
		}
		if err != nil {
			return err
		}
		if skip := nominationSkip(p, ref, cmd.Toleration); skip != "" {
			a.opts.Logger.Debug("NominatePods: pod skipped", "command", cmd.ID, "pod", podKey(p), "why", skip)
			return nil
		}
		// Tolerations may only be added to a pod, so the whole list is written with the
		// resourceVersion read.
		spec, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": p.ResourceVersion},
			"spec":     map[string]any{"tolerations": append(append([]corev1.Toleration(nil), p.Spec.Tolerations...), *cmd.Toleration)},
		})
		if err != nil {
			return err
		}
		_, err = pods.Patch(ctx, ref.Name, types.MergePatchType, spec, metav1.PatchOptions{FieldManager: a.opts.Component})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func hasToleration(ts []corev1.Toleration, t corev1.Toleration) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Operator == t.Operator && x.Value == t.Value && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

// --- UntaintNode ---

// claimDeleting reports whether the node's NodeClaim is being deleted.
func (a *Applier) claimDeleting(n *corev1.Node) bool {
	nc := a.nodeClaimOf(n)
	return nc != nil && nc.DeletionTimestamp != nil
}

// nodeClaimOf returns the node's NodeClaim in the cache (by status.nodeName or providerID), or
// nil.
func (a *Applier) nodeClaimOf(n *corev1.Node) *apisv1.NodeClaim {
	for _, obj := range a.state.nodeClaims.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		nc := &apisv1.NodeClaim{}
		if FromUnstructured(u, nc) != nil || (nc.Status.NodeName != n.Name && (nc.Status.ProviderID == "" || nc.Status.ProviderID != n.Spec.ProviderID)) {
			continue
		}
		return nc
	}
	return nil
}

func (a *Applier) untaintNode(ctx context.Context, cmd *events.Command) error {
	if cmd.NodeName == "" || cmd.Taint == nil || cmd.Taint.Key == "" {
		return fmt.Errorf("%w: command.nodeName and command.taint.key: required for UntaintNode", ErrInvalidCommand)
	}
	if k := cmd.Taint.Key; k != apisv1.TaintKeyDisrupted && k != apisv1.TaintKeyPlanned {
		return fmt.Errorf("%w: command.taint.key: %q: the agent removes only %s and %s, the taints Dovetail's functions write; a node's other taints are its NodePool's or another controller's",
			ErrInvalidCommand, k, apisv1.TaintKeyDisrupted, apisv1.TaintKeyPlanned)
	}
	nodes := a.kube.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, cmd.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := a.refuseUnownedNode(ctx, cmd, node); err != nil {
			return err
		}
		exact := cmd.Taint.TimeAdded != nil
		if exact && cmd.Taint.Key == apisv1.TaintKeyDisrupted && (node.DeletionTimestamp != nil || a.claimDeleting(node)) {
			// The termination path drains under whatever karpenter.sh/disrupted taint the node
			// has (it adds none when one is there): removing it would let the pods back.
			return nil
		}
		keep := make([]corev1.Taint, 0, len(node.Spec.Taints))
		for _, t := range node.Spec.Taints {
			if t.Key != cmd.Taint.Key || (cmd.Taint.Effect != "" && t.Effect != cmd.Taint.Effect) ||
				(exact && (t.Value != cmd.Taint.Value || t.TimeAdded == nil || t.TimeAdded.Unix() != cmd.Taint.TimeAdded.Unix())) {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(node.Spec.Taints) {
			return nil // gone already
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": node.ResourceVersion}, "spec": map[string]any{"taints": keep}})
		if err != nil {
			return err
		}
		_, err = nodes.Patch(ctx, cmd.NodeName, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// nominationSkip says why the pod is not to be given the toleration ("" when it is).
func nominationSkip(p *corev1.Pod, ref events.PodRef, t *corev1.Toleration) string {
	switch {
	case t == nil:
		return "the command carries no toleration"
	case ref.UID != "" && string(p.UID) != ref.UID:
		return "re-created (uid " + string(p.UID) + ", command has " + ref.UID + ")"
	case p.Spec.NodeName != "":
		return "already bound to " + p.Spec.NodeName
	case IsTerminal(p):
		return "terminal (" + string(p.Status.Phase) + ")"
	case p.DeletionTimestamp != nil:
		return "being deleted"
	case hasToleration(p.Spec.Tolerations, *t):
		return "already tolerates the planned taint"
	}
	return ""
}

// --- DeletePods ---

func (a *Applier) deletePods(ctx context.Context, cmd *events.Command) error {
	if err := validatePodRefs(cmd); err != nil {
		return err
	}
	if err := a.refuseIfNodeRecreated(ctx, cmd); err != nil {
		return err
	}
	node, err := a.currentNode(ctx, cmd.NodeName)
	if err != nil {
		return err
	}
	if node == nil {
		// Pods bound to a Node that no longer exists are the pod garbage collector's.
		a.opts.Logger.Info("DeletePods: node gone, its pods are not Dovetail's to delete", "command", cmd.ID, "node", cmd.NodeName)
		return nil
	}
	if err := a.refuseUnownedNode(ctx, cmd, node); err != nil {
		return err
	}
	// Deleting skips the Eviction API and the pods' PDBs: only the termination path's last resort
	// (shared/lifecycle drain, as Karpenter's terminator past a NodeClaim's
	// terminationGracePeriod), so only on a node whose NodeClaim is being deleted with one.
	if nc, _ := a.nodeOwner(node); nc == nil || nc.DeletionTimestamp == nil || nc.Spec.TerminationGracePeriod == nil {
		return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName),
			"DeletePods deletes pods only on a node whose NodeClaim is being deleted and has a terminationGracePeriod (the termination path's forced drain)")
	}
	return eachPod(ctx, cmd, "delete pods on node "+cmd.NodeName, func(ref events.PodRef) error { return a.deletePod(ctx, cmd, ref) })
}

// deletePod deletes one pod of the node with the command's grace period. The precondition is
// the UID read (the command's when it names one), so a pod re-created under the same name in
// between (answered 409) is left alone; spec.nodeName is immutable once set, so the UID also
// pins the node checked.
func (a *Applier) deletePod(ctx context.Context, cmd *events.Command, ref events.PodRef) error {
	pods := a.kube.CoreV1().Pods(ref.Namespace)
	p, err := pods.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case ref.UID != "" && string(p.UID) != ref.UID:
		a.opts.Logger.Debug("DeletePods: pod re-created, the one named is gone", "command", cmd.ID, "pod", podKey(p), "uid", p.UID, "commandUID", ref.UID)
		return nil
	case p.Spec.NodeName != cmd.NodeName:
		a.opts.Logger.Info("DeletePods: pod is not on the command's node, skipped", "command", cmd.ID, "pod", podKey(p), "podNode", p.Spec.NodeName, "node", cmd.NodeName)
		return nil
	}
	opts := metav1.DeleteOptions{GracePeriodSeconds: ref.GracePeriodSeconds}
	if p.UID != "" {
		uid := p.UID
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = pods.Delete(ctx, ref.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) { // gone, or a UID precondition failed
		return nil
	}
	return err
}

func validatePodRefs(cmd *events.Command) error {
	if cmd.NodeName == "" {
		return fmt.Errorf("%w: command.nodeName: must not be empty", ErrInvalidCommand)
	}
	return validatePodList(cmd)
}

// validatePodList checks the command's pods: at least one, each named, grace periods >= 0.
func validatePodList(cmd *events.Command) error {
	if len(cmd.Pods) == 0 {
		return fmt.Errorf("%w: command.pods: must list at least one pod", ErrInvalidCommand)
	}
	for i, p := range cmd.Pods {
		switch {
		case p.Namespace == "" || p.Name == "":
			return fmt.Errorf("%w: command.pods[%d]: namespace and name are required", ErrInvalidCommand, i)
		case p.GracePeriodSeconds != nil && *p.GracePeriodSeconds < 0:
			return fmt.Errorf("%w: command.pods[%d].gracePeriodSeconds: must be >= 0, got %d", ErrInvalidCommand, i, *p.GracePeriodSeconds)
		}
	}
	return nil
}

// podFailures joins per-pod failures into one retryable error (nil when there are none), naming
// at most maxListedFailures of them.
func podFailures(what string, total int, failed []string) error {
	if len(failed) == 0 {
		return nil
	}
	listed := failed
	more := ""
	if len(listed) > maxListedFailures {
		listed = listed[:maxListedFailures]
		more = fmt.Sprintf("; and %d more", len(failed)-maxListedFailures)
	}
	return fmt.Errorf("%s: %d of %d pods failed: %s%s", what, len(failed), total, strings.Join(listed, "; "), more)
}

// --- shared ---

// refuseIfNodeRecreated refuses the command (with an Event) when its node was (re)created after
// the command's snapshot revision, or the revision predates this agent: the name then refers
// to another Node than the one the decision saw.
func (a *Applier) refuseIfNodeRecreated(ctx context.Context, cmd *events.Command) error {
	if !a.state.CreatedSince(KindNode, cmd.NodeName, cmd.SnapshotRevision) {
		return nil
	}
	return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName), fmt.Sprintf("node was created after snapshot revision %d (or the revision predates this agent)", cmd.SnapshotRevision))
}

// nodeRef is the Event target for a Node, with its cached UID when known.
func (a *Applier) nodeRef(name string) corev1.ObjectReference {
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name}
	if n := a.state.Node(name); n != nil {
		ref.UID = n.UID
	}
	return ref
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
