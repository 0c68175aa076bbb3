package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Event reasons the agent records when a status it writes turns a NodeClass or NodePool unusable.
const (
	// ReasonNodeClassNotReady is recorded on a NodeClass whose Ready turned False, and on each
	// NodePool whose NodeClassReady did: the pool launches nothing until the class is Ready.
	ReasonNodeClassNotReady = "NodeClassNotReady"
	// ReasonNodePoolInvalid is recorded on a NodePool whose ValidationSucceeded turned False (a
	// field Dovetail refuses, such as spec.replicas): the pool launches nothing.
	ReasonNodePoolInvalid = "NodePoolInvalid"
	// ReasonLimitReached is recorded on a NodePool whose SpendWithinLimits turned False: a
	// limit or spend guardrail is spent, and pods needing more stay pending.
	ReasonLimitReached = apisv1.ReasonLimitReached
)

// nodeClassTarget returns the GVR and name of a command's NodeClass. Error: no NodeClass, or a
// kind the agent does not serve yet.
func nodeClassTarget(cmd *events.Command) (schema.GroupVersionResource, string, error) {
	if cmd.NodeClass == nil || cmd.NodeClass.Name() == "" {
		return schema.GroupVersionResource{}, "", fmt.Errorf("%w: command.nodeClass.metadata.name: must not be empty", ErrInvalidCommand)
	}
	gvr, err := NodeClassGVR(cmd.NodeClass.Kind())
	if err != nil {
		return schema.GroupVersionResource{}, "", fmt.Errorf("%w: command.%w", ErrInvalidCommand, err)
	}
	return gvr, cmd.NodeClass.Name(), nil
}

// --- SetNodeClassStatus ---

func (a *Applier) setNodeClassStatus(ctx context.Context, cmd *events.Command) error {
	gvr, name, err := nodeClassTarget(cmd)
	if err != nil {
		return err
	}
	var evs eventCheck
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := a.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			a.opts.Logger.Info("SetNodeClassStatus: NodeClass gone, nothing to record", "command", cmd.ID, "nodeClass", name)
			return nil
		}
		if err != nil {
			return fmt.Errorf("get %s %s: %w", cmd.NodeClass.Kind(), name, err)
		}
		got, err := nodeClassFrom(u, cmd.NodeClass.Kind())
		if err != nil {
			return fmt.Errorf("%s %s in cluster: %w", cmd.NodeClass.Kind(), name, err)
		}
		gotStatus, gen := statusOf(got), got.Meta().Generation
		want := statusOf(*cmd.NodeClass)
		wantConds, _ := mergeConditions(got.Conditions(), cmd.NodeClass.Conditions(), gen, a.opts.Clock.Now())
		setConditions(want, wantConds)
		if equality.Semantic.DeepEqual(gotStatus, want) {
			return nil
		}
		evs = turnedFalse(got.Conditions(), wantConds, apisv1.ConditionReady, got.Meta().UID)
		return a.patchStatus(ctx, gvr, name, u.GetResourceVersion(), gotStatus, want)
	})
	if err != nil || !evs.fire {
		return err
	}
	msg := "NodeClass is not ready: " + cmd.NodeClass.NotReady()
	return a.event(ctx, cmd, corev1.ObjectReference{APIVersion: gvr.Group + "/" + gvr.Version, Kind: cmd.NodeClass.Kind(),
		Name: name, UID: evs.uid}, ReasonNodeClassNotReady, msg)
}

// nodeClassFrom decodes a NodeClass object of the kind.
func nodeClassFrom(u *unstructured.Unstructured, kind string) (apisv1.NodeClass, error) {
	if kind == apisv1.KindAKSNodeClass {
		got := &apisv1.AKSNodeClass{}
		return apisv1.NodeClass{AKS: got}, FromUnstructured(u, got)
	}
	got := &apisv1.EC2NodeClass{}
	return apisv1.NodeClass{EC2: got}, FromUnstructured(u, got)
}

// statusOf returns a copy of the member's status (a pointer, so its conditions can be set).
func statusOf(n apisv1.NodeClass) any {
	if n.AKS != nil {
		st := n.AKS.DeepCopy().Status
		return &st
	}
	st := n.EC2.DeepCopy().Status
	return &st
}

func setConditions(status any, conds []metav1.Condition) {
	switch st := status.(type) {
	case *apisv1.AKSNodeClassStatus:
		st.Conditions = conds
	case *apisv1.EC2NodeClassStatus:
		st.Conditions = conds
	}
}

// --- SetNodePoolStatus ---

func (a *Applier) setNodePoolStatus(ctx context.Context, cmd *events.Command) error {
	if cmd.NodePool == nil || cmd.NodePool.Name == "" {
		return fmt.Errorf("%w: command.nodePool.metadata.name: must not be empty", ErrInvalidCommand)
	}
	name := cmd.NodePool.Name
	var evs, invalid, spent eventCheck
	var message, invalidMsg, spentMsg string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := a.dyn.Resource(NodePoolGVR).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get NodePool %s: %w", name, err)
		}
		got := &apisv1.NodePool{}
		if err := FromUnstructured(u, got); err != nil {
			return fmt.Errorf("NodePool %s in cluster: %w", name, err)
		}
		want := cmd.NodePool.DeepCopy().Status
		want.Conditions, _ = mergeConditions(got.Status.Conditions, want.Conditions, got.Generation, a.opts.Clock.Now())
		if equality.Semantic.DeepEqual(got.Status, want) {
			return nil
		}
		evs = turnedFalse(got.Status.Conditions, want.Conditions, apisv1.ConditionNodeClassReady, got.UID)
		if c := meta.FindStatusCondition(want.Conditions, apisv1.ConditionNodeClassReady); c != nil {
			message = c.Message
		}
		invalid = turnedFalse(got.Status.Conditions, want.Conditions, apisv1.ConditionValidationSucceeded, got.UID)
		spent = turnedFalse(got.Status.Conditions, want.Conditions, apisv1.ConditionSpendWithinLimits, got.UID)
		if c := meta.FindStatusCondition(want.Conditions, apisv1.ConditionSpendWithinLimits); c != nil {
			spentMsg = c.Message
		}
		if c := meta.FindStatusCondition(want.Conditions, apisv1.ConditionValidationSucceeded); c != nil {
			invalidMsg = c.Message
		}
		return a.patchStatus(ctx, NodePoolGVR, name, u.GetResourceVersion(), got.Status, want)
	})
	if err != nil {
		return err
	}
	ref := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodePool", Name: name, UID: evs.uid}
	if invalid.fire {
		if err := a.event(ctx, cmd, ref, ReasonNodePoolInvalid, "NodePool launches nothing: "+invalidMsg); err != nil {
			return err
		}
	}
	if spent.fire {
		ref.UID = spent.uid
		if err := a.event(ctx, cmd, ref, ReasonLimitReached, "NodePool launches nothing more that needs it: "+spentMsg); err != nil {
			return err
		}
	}
	if !evs.fire {
		return nil
	}
	return a.event(ctx, cmd, ref, ReasonNodeClassNotReady, "NodePool launches nothing: "+message)
}

// --- SetNodeOverlayStatus ---

// setNodeOverlayStatus writes the command's conditions onto the NodeOverlay (the others it has
// are kept), as Karpenter's nodeoverlay controller patches status.conditions; no Event, as
// Karpenter records none. A NodeOverlay gone, or at another generation than decided on, is left
// alone.
func (a *Applier) setNodeOverlayStatus(ctx context.Context, cmd *events.Command) error {
	if cmd.NodeOverlay == nil || cmd.NodeOverlay.Name == "" {
		return fmt.Errorf("%w: command.nodeOverlay.metadata.name: must not be empty", ErrInvalidCommand)
	}
	// Only Karpenter's NodeOverlay conditions: the agent writes nothing else of an object a
	// person owns.
	for i, c := range cmd.NodeOverlay.Status.Conditions {
		if c.Type != apisv1.ConditionValidationSucceeded && c.Type != apisv1.ConditionReady {
			return fmt.Errorf("%w: command.nodeOverlay.status.conditions[%d].type: %q: a NodeOverlay has only %s and %s",
				ErrInvalidCommand, i, c.Type, apisv1.ConditionValidationSucceeded, apisv1.ConditionReady)
		}
	}
	name := cmd.NodeOverlay.Name
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := a.dyn.Resource(NodeOverlayGVR).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get NodeOverlay %s: %w", name, err)
		}
		got := &apisv1.NodeOverlay{}
		if err := FromUnstructured(u, got); err != nil {
			return fmt.Errorf("NodeOverlay %s in cluster: %w", name, err)
		}
		if got.Generation != cmd.NodeOverlay.Generation {
			a.opts.Logger.Info("SetNodeOverlayStatus: NodeOverlay changed since the decision, left for the next one",
				"command", cmd.ID, "nodeOverlay", name, "decided", cmd.NodeOverlay.Generation, "now", got.Generation)
			return nil
		}
		want := got.Status
		var changed bool
		want.Conditions, changed = mergeConditions(got.Status.Conditions, cmd.NodeOverlay.Status.Conditions, got.Generation, a.opts.Clock.Now())
		if !changed {
			return nil
		}
		return a.patchStatus(ctx, NodeOverlayGVR, name, u.GetResourceVersion(), got.Status, want)
	})
}

// eventCheck says whether a status write turned a condition False, and on which object.
type eventCheck struct {
	fire bool
	uid  types.UID
}

// turnedFalse reports a condition that is False in want and was not False before.
func turnedFalse(before, after []metav1.Condition, typ string, uid types.UID) eventCheck {
	b, w := meta.FindStatusCondition(before, typ), meta.FindStatusCondition(after, typ)
	return eventCheck{fire: w != nil && w.Status == metav1.ConditionFalse && (b == nil || b.Status != metav1.ConditionFalse), uid: uid}
}

// patchStatus writes want as the object's whole status through /status: a JSON merge patch
// carrying every field of want, null for each field got has and want lacks (so a list that
// became empty is removed), and the resourceVersion read, so a concurrent write conflicts.
func (a *Applier) patchStatus(ctx context.Context, gvr schema.GroupVersionResource, name, resourceVersion string, got, want any) error {
	toMap := func(v any) (map[string]any, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		return m, json.Unmarshal(b, &m)
	}
	status, err := toMap(want)
	if err != nil {
		return err
	}
	old, err := toMap(got)
	if err != nil {
		return err
	}
	for k := range old {
		if _, ok := status[k]; !ok {
			status[k] = nil
		}
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion}, "status": status})
	if err != nil {
		return err
	}
	_, err = a.dyn.Resource(gvr).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// event records a Warning Event on ref, named after the command, the reason and the object so
// a redelivered command finds it already there (AlreadyExists is success). A namespaced object's
// Event goes to its namespace; a cluster-scoped object's to "default", where kubectl describe
// looks.
func (a *Applier) event(ctx context.Context, cmd *events.Command, ref corev1.ObjectReference, reason, msg string) error {
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	key := cmd.ID + "\x00" + reason + "\x00" + ref.Kind + "/" + ref.Name
	if reason == ReasonCommandRefused {
		key = cmd.ID + "\x00" + string(cmd.Kind) + "\x00" + ref.Kind + "/" + ref.Name // the name refusals always had
	}
	sum := sha256.Sum256([]byte(key))
	suffix := "." + hex.EncodeToString(sum[:8])
	base := ref.Name
	if max := validation.DNS1123SubdomainMaxLength - len(suffix); len(base) > max {
		base = base[:max]
	}
	if len(msg) > 1024 {
		msg = msg[:1021] + "..." // an Event message is read by people; the status has the rest
	}
	now := metav1.NewTime(a.opts.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: base + suffix, Namespace: ns},
		InvolvedObject: ref, Reason: reason, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: a.opts.Component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "dovetail.dev/agent", ReportingInstance: a.opts.Component,
	}
	if _, err := a.kube.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("record %s event on %s/%s: %w", reason, ref.Kind, ref.Name, err)
	}
	return nil
}

// --- AddFinalizer / RemoveFinalizer on a NodeClass ---

func (a *Applier) nodeClassFinalizer(ctx context.Context, cmd *events.Command, add bool) error {
	if cmd.Finalizer == "" {
		return fmt.Errorf("%w: command.finalizer: must not be empty", ErrInvalidCommand)
	}
	gvr, name, err := nodeClassTarget(cmd)
	if err != nil {
		return err
	}
	kind := cmd.NodeClass.Kind()
	if want := nodeClassFinalizerOf(kind); cmd.Finalizer != want {
		return fmt.Errorf("%w: command.finalizer: %q: the agent adds and releases only %s on a %s", ErrInvalidCommand, cmd.Finalizer, want, kind)
	}
	res := a.dyn.Resource(gvr)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get %s %s: %w", kind, name, err)
		}
		if !add && hasString(u.GetFinalizers(), cmd.Finalizer) {
			if why := a.nodeClassReleaseReason(kind, u); why != "" {
				ref := corev1.ObjectReference{APIVersion: gvr.GroupVersion().String(), Kind: kind, Name: name, UID: u.GetUID()}
				return a.refuse(ctx, cmd, ref, why)
			}
		}
		var body []byte
		switch {
		case add && u.GetDeletionTimestamp() != nil:
			return nil // a finalizer cannot be added to an object being deleted
		case add && !hasString(u.GetFinalizers(), cmd.Finalizer):
			body, _ = json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": u.GetResourceVersion(),
				"finalizers": append(append([]string(nil), u.GetFinalizers()...), cmd.Finalizer)}})
		case !add:
			body = finalizerRemovalPatch(u.GetFinalizers(), cmd.Finalizer, u.GetResourceVersion())
		}
		if body == nil {
			return nil
		}
		_, err = res.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// nodeClassFinalizerOf is the termination finalizer of a NodeClass kind (shared/lifecycle
// finalizerOf: Karpenter's AWS and Azure providers' own).
func nodeClassFinalizerOf(kind string) string {
	if kind == apisv1.KindAKSNodeClass {
		return events.FinalizerAKSNodeClassTermination
	}
	return events.FinalizerNodeClassTermination
}

// nodeClassReleaseReason returns "" when a NodeClass's termination finalizer may go (it is being
// deleted and no NodeClaim in the cache names it in spec.nodeClassRef: the lifecycle function's
// rule, as Karpenter's NodeClass termination waits for its NodeClaims), else why not.
func (a *Applier) nodeClassReleaseReason(kind string, u *unstructured.Unstructured) string {
	if u.GetDeletionTimestamp() == nil {
		return fmt.Sprintf("%s %s is not being deleted: its termination finalizer is released only at the end of a deletion", kind, u.GetName())
	}
	for _, key := range a.state.nodeClaims.GetStore().ListKeys() {
		nc, err := a.state.NodeClaim(key)
		if err != nil || nc == nil || nc.Spec.NodeClassRef == nil {
			continue
		}
		ref := nc.Spec.NodeClassRef
		if ref.Name == u.GetName() && (ref.Kind == kind || (ref.Kind == "" && kind == apisv1.KindEC2NodeClass)) {
			return fmt.Sprintf("NodeClaim %s still uses %s %s", nc.Name, kind, u.GetName())
		}
	}
	return ""
}
