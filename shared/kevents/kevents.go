// Package kevents builds the Kubernetes Events Dovetail records, with Karpenter's reasons and
// messages (sigs.k8s.io/karpenter v1: pkg/events/reason.go,
// pkg/controllers/provisioning/scheduling/events.go, pkg/controllers/disruption/events, and
// operatorpkg's status controller for condition transitions), so kubectl describe, event
// exporters and alerts written for Karpenter read Dovetail. It is pure: functions build the
// records of what they decided, the agent those of what it observed while writing.
package kevents

import (
	"fmt"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Karpenter's Event reasons.
const (
	// Nominated (Normal, on a pod): the NodeClaim planned for it exists.
	Nominated = "Nominated"
	// FailedScheduling (Warning, on a pod): the plan could not place it.
	FailedScheduling = "FailedScheduling"
	// DisruptionTerminating (Normal, on a NodeClaim and its Node): a disruption started, with
	// its reason (Underutilized, Empty, Drifted, Expired, Interrupted) and decision.
	DisruptionTerminating = "DisruptionTerminating"
	// DisruptionBlocked (Normal, on a NodeClaim and its Node, or a NodePool for its budget): a
	// disruption the node is due for waits for a PodDisruptionBudget, a
	// karpenter.sh/do-not-disrupt annotation or a disruption budget.
	DisruptionBlocked = "DisruptionBlocked"
)

// ObjectRef is the involved-object reference of a Kubernetes object of kind (namespace empty for
// a cluster-scoped one).
func ObjectRef(apiVersion, kind string, m metav1.ObjectMeta) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID}
}

// PodRef, NodeRef and NodeClaimRef reference the objects Events are recorded on most.
func PodRef(p *corev1.Pod) corev1.ObjectReference {
	ref := ObjectRef("v1", "Pod", p.ObjectMeta)
	if ref.Namespace == "" {
		ref.Namespace = metav1.NamespaceDefault
	}
	return ref
}

// NodeRef references a Node.
func NodeRef(n *corev1.Node) corev1.ObjectReference { return ObjectRef("v1", "Node", n.ObjectMeta) }

// NodeClaimRef references a NodeClaim.
func NodeClaimRef(nc *apisv1.NodeClaim) corev1.ObjectReference {
	return ObjectRef(apisv1.GroupVersion, "NodeClaim", nc.ObjectMeta)
}

// NominatedEvent: "Pod should schedule on: nodeclaim/<name>" (with ", node/<name>" once the
// NodeClaim has a Node), Karpenter's NominatePodEvent; one per pod and NodeClaim.
func NominatedEvent(pod corev1.ObjectReference, nodeClaim, node string) events.EventRecord {
	info := []string{"nodeclaim/" + nodeClaim}
	if node != "" {
		info = append(info, "node/"+node)
	}
	return events.EventRecord{Object: pod, Type: corev1.EventTypeNormal, Reason: Nominated,
		Message: "Pod should schedule on: " + strings.Join(info, ", "), Key: nodeClaim}
}

// FailedSchedulingEvent: "Failed to schedule pod, <why>", Karpenter's PodFailedToScheduleEvent.
func FailedSchedulingEvent(pod corev1.ObjectReference, why string) events.EventRecord {
	return events.EventRecord{Object: pod, Type: corev1.EventTypeWarning, Reason: FailedScheduling,
		Message: "Failed to schedule pod, " + why}
}

// Disrupting is Karpenter's Terminating events: "Disrupting NodeClaim: <Reason>" on the
// NodeClaim and "Disrupting Node: <Reason>" on its Node (a reference without a name is left
// out). reason is the disruption reason, with the decision after a slash where there is one
// ("Underutilized/Replace", "Drifted/Replace", "Expired/Delete", "Interrupted"); its first letter
// is capitalized as Karpenter's title-casing does.
func Disrupting(claim, node corev1.ObjectReference, reason string) []events.EventRecord {
	reason = upperFirst(reason)
	var out []events.EventRecord
	if claim.Name != "" {
		out = append(out, events.EventRecord{Object: claim, Type: corev1.EventTypeNormal, Reason: DisruptionTerminating,
			Message: "Disrupting NodeClaim: " + reason, Key: reason})
	}
	if node.Name != "" {
		out = append(out, events.EventRecord{Object: node, Type: corev1.EventTypeNormal, Reason: DisruptionTerminating,
			Message: "Disrupting Node: " + reason, Key: reason})
	}
	return out
}

// Blocked is Karpenter's Blocked events: msg on the NodeClaim and on its Node (a reference
// without a name is left out). msg names the blocker in Karpenter's words (PDBBlocks,
// DoNotDisruptPod, ...).
func Blocked(claim, node corev1.ObjectReference, msg string) []events.EventRecord {
	var out []events.EventRecord
	for _, ref := range []corev1.ObjectReference{claim, node} {
		if ref.Name != "" {
			out = append(out, events.EventRecord{Object: ref, Type: corev1.EventTypeNormal, Reason: DisruptionBlocked, Message: msg})
		}
	}
	return out
}

// NamedNodeClaim and NamedNode reference a NodeClaim or Node by name (and UID when known).
func NamedNodeClaim(name string, uid types.UID) corev1.ObjectReference {
	if name == "" {
		return corev1.ObjectReference{}
	}
	return corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: name, UID: uid}
}

// NamedNodePool references the NodePool name, with its UID when pools lists it.
func NamedNodePool(pools []apisv1.NodePool, name string) corev1.ObjectReference {
	for i := range pools {
		if pools[i].Name == name {
			return ObjectRef(apisv1.GroupVersion, "NodePool", pools[i].ObjectMeta)
		}
	}
	return corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodePool", Name: name}
}

// NamedNode references a Node by name.
func NamedNode(name string, uid types.UID) corev1.ObjectReference {
	if name == "" {
		return corev1.ObjectReference{}
	}
	return corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}
}

// PDBBlocks is Karpenter's message for a PodDisruptionBudget that allows no eviction of a pod
// on the node: "Pdb prevents pod evictions (PodDisruptionBudget=[<namespace>/<name>])".
func PDBBlocks(pdbs ...string) string {
	return fmt.Sprintf("Pdb prevents pod evictions (PodDisruptionBudget=[%s])", strings.Join(pdbs, " "))
}

// DoNotDisruptPod is Karpenter's message for a pod annotated karpenter.sh/do-not-disrupt:
// `Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=<namespace>/<name>)`.
func DoNotDisruptPod(pod string) string {
	return fmt.Sprintf("Pod has %q annotation (Pod=%s)", apisv1.AnnotationDoNotDisrupt, pod)
}

// DoNotDisruptObject is the message for a Node or NodeClaim annotated
// karpenter.sh/do-not-disrupt (kind "Node" or "NodeClaim").
func DoNotDisruptObject(kind string) string {
	return fmt.Sprintf("%s has %q annotation", kind, apisv1.AnnotationDoNotDisrupt)
}

// BudgetBlocked is Karpenter's NodePoolBlockedForDisruptionReason event on the NodePool: "No
// allowed disruptions for disruption reason <reason> due to blocking budget"; one per pool and
// reason.
func BudgetBlocked(pool corev1.ObjectReference, reason string) events.EventRecord {
	return events.EventRecord{Object: pool, Type: corev1.EventTypeNormal, Reason: DisruptionBlocked,
		Message: fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget", reason), Key: reason}
}

// ConditionTransition is operatorpkg's status-controller event, which is how Karpenter's
// NodeClaims get their Launched, Registered, Initialized and Ready events: reason the condition
// type, "Status condition transitioned, Type: <type>, Status: <old> -> <new>, Reason: <reason>"
// (", Message: <message>" when there is one). One per object, type and new status.
func ConditionTransition(obj corev1.ObjectReference, from metav1.ConditionStatus, c metav1.Condition) events.EventRecord {
	if from == "" {
		from = metav1.ConditionUnknown // Karpenter initializes every condition Unknown
	}
	msg := fmt.Sprintf("Status condition transitioned, Type: %s, Status: %s -> %s, Reason: %s", c.Type, from, c.Status, c.Reason)
	if c.Message != "" {
		msg += ", Message: " + c.Message
	}
	return events.EventRecord{Object: obj, Type: corev1.EventTypeNormal, Reason: c.Type, Message: msg, Key: string(c.Status)}
}

func upperFirst(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return s
}
