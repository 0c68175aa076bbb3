// Package provreq serves Cluster Autoscaler's ProvisioningRequest (autoscaling.x-k8s.io/v1):
// the pods a request stands for, its state from its conditions, the consuming pods held back
// from ordinary provisioning (HoldBack, which the provision function, `dovetail plan` and
// `dovetail explain` share), and the capacity booked for it. Pure: no clock (the snapshot's
// time is the time), no I/O. The provision function decides with it (functions/provision
// provreq.go) and is the one writer of the requests' conditions.
//
// State lives in the request's own conditions, so stateless functions keep bookings: a request
// whose Provisioned condition turned True less than BookingWindow ago (its lastTransitionTime) is
// booked, and every decision books its capacity again from the snapshot before it plans other
// pods.
package provreq

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// BookingWindow is how long capacity stays booked after Provisioned turned True: 10 minutes,
// Cluster Autoscaler's defaultReservationTime (provisioningrequest/checkcapacity processor.go).
const BookingWindow = 10 * time.Minute

// ExpiryAge is how long a request that never turned Provisioned is retried before it fails
// (reason Expired): 7 days, Cluster Autoscaler's defaultExpirationTime (same file).
const ExpiryAge = 7 * 24 * time.Hour

// Condition reasons, Cluster Autoscaler's (provisioningrequest/conditions conditions.go), plus
// FailedToCreatePods for a pod set whose PodTemplate is missing and CapacityRevokedReason.
const (
	ReasonAccepted              = "Accepted"
	ReasonCapacityIsFound       = "CapacityIsFound"
	ReasonCapacityIsNotFound    = "CapacityIsNotFound"
	ReasonCapacityIsProvisioned = "CapacityIsProvisioned"
	ReasonFailedToCreatePods    = "FailedToCreatePods"
	ReasonBookingExpired        = "CapacityReservationTimeExpired"
	ReasonExpired               = "Expired"
	// ReasonNodeClaimsGone: a NodeClaim launched for the request went before its pods came.
	ReasonNodeClaimsGone = "NodeClaimsGone"
)

// AnnotationProvisioningRequest ("namespace/name") is on every NodeClaim launched for a
// best-effort-atomic-scale-up request, with AnnotationProvisioningRequestNodes, how many the
// request launched: a decision counts them to see capacity revoked.
const (
	AnnotationProvisioningRequest      = "dovetail.dev/provisioning-request"
	AnnotationProvisioningRequestNodes = "dovetail.dev/provisioning-request-nodes"
)

// State is where a request stands.
type State string

const (
	// StatePending: not answered yet, or answered Provisioned=False (retried every decision).
	StatePending State = "Pending"
	// StateBooked: Provisioned=True within BookingWindow; its capacity is kept for its pods.
	StateBooked State = "Booked"
	// StateDone: Failed, BookingExpired or CapacityRevoked is True; nothing more to do.
	StateDone State = "Done"
)

// Request is one ProvisioningRequest of a snapshot with what a decision needs of it.
type Request struct {
	PR    *apisv1.ProvisioningRequest
	State State
	// Pods are the pods the pod sets stand for (Count of each PodTemplate), named
	// "<request>-<set>-<index>", annotated as consumers; nil when a template is missing (Err).
	Pods []corev1.Pod
	// Err names the missing PodTemplate (the request fails: FailedToCreatePods).
	Err error
	// Bound counts the consuming pods already bound to a node: that much of the booking is used.
	Bound int
	// Consumers are the pending pods consuming the request ("namespace/name").
	Consumers []string
}

// Key is "namespace/name".
func (r *Request) Key() string { return r.PR.Namespace + "/" + r.PR.Name }

// Class is the request's provisioning class.
func (r *Request) Class() string { return r.PR.Spec.ProvisioningClassName }

// Unconsumed returns the request's pods not yet matched by a bound consumer: what its booking
// still holds.
func (r *Request) Unconsumed() []corev1.Pod {
	if r.Bound >= len(r.Pods) {
		return nil
	}
	return r.Pods[r.Bound:]
}

// Requests returns the snapshot's ProvisioningRequests of the two classes, oldest first (then by
// namespace/name, as Cluster Autoscaler takes them), each with its state at the snapshot's time,
// its pods and its consumers.
func Requests(snap *events.Snapshot) []*Request {
	templates := map[string]*corev1.PodTemplate{}
	for i := range snap.PodTemplates {
		t := &snap.PodTemplates[i]
		templates[t.Namespace+"/"+t.Name] = t
	}
	var out []*Request
	byKey := map[string]*Request{}
	for i := range snap.ProvisioningRequests {
		pr := &snap.ProvisioningRequests[i]
		switch pr.Spec.ProvisioningClassName {
		case apisv1.ProvisioningClassCheckCapacity, apisv1.ProvisioningClassBestEffortAtomicScaleUp:
		default:
			continue
		}
		r := &Request{PR: pr, State: StateOf(pr, snap.Time.Time)}
		r.Pods, r.Err = PodsOf(pr, templates)
		out = append(out, r)
		byKey[r.Key()] = r
	}
	for i := range snap.Pods {
		if r := byKey[consumed(&snap.Pods[i])]; r != nil {
			r.Bound++
		}
	}
	for i := range snap.PendingPods {
		p := &snap.PendingPods[i]
		if r := byKey[consumed(p)]; r != nil {
			r.Consumers = append(r.Consumers, p.Namespace+"/"+p.Name)
		}
	}
	slices.SortStableFunc(out, func(a, b *Request) int {
		if c := a.PR.CreationTimestamp.Compare(b.PR.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Key(), b.Key())
	})
	return out
}

// consumed is "namespace/name" of the request a pod consumes, or "".
func consumed(p *corev1.Pod) string {
	if n, _ := apisv1.ConsumesProvisioningRequest(p.Annotations); n != "" {
		return p.Namespace + "/" + n
	}
	return ""
}

// StateOf reads a request's state from its conditions at now: Done once Failed, BookingExpired
// or CapacityRevoked is True; Booked while Provisioned has been True for less than
// BookingWindow; else Pending (a Provisioned=True past the window is Pending here only until
// Expire writes BookingExpired, and Expire is what a decision does with it).
func StateOf(pr *apisv1.ProvisioningRequest, now time.Time) State {
	c := pr.Status.Conditions
	if meta.IsStatusConditionTrue(c, apisv1.ProvisioningRequestFailed) || meta.IsStatusConditionTrue(c, apisv1.ProvisioningRequestBookingExpired) ||
		meta.IsStatusConditionTrue(c, apisv1.ProvisioningRequestCapacityRevoked) {
		return StateDone
	}
	if p := meta.FindStatusCondition(c, apisv1.ProvisioningRequestProvisioned); p != nil && p.Status == metav1.ConditionTrue {
		if now.Sub(p.LastTransitionTime.Time) < BookingWindow {
			return StateBooked
		}
		return StateDone // the booking ran out: Expire writes BookingExpired
	}
	return StatePending
}

// Holds reports whether r's booking keeps capacity now: r is Booked, and, for a
// best-effort-atomic-scale-up request whose pods are not all bound, none of the NodeClaims it
// launched is being deleted or gone (Revoked; the provision function then answers
// CapacityRevoked instead). The provision function books the capacity of the requests that hold
// before it plans other pods, and consolidation keeps it (shared/disruption bookings.go), as
// Cluster Autoscaler's provisioning-request processor books Provisioned requests' pods into the
// cluster snapshot "to reserve capacity from ScaleDown" (provreq processor bookCapacity).
func Holds(r *Request, claims []apisv1.NodeClaim) bool {
	if r.State != StateBooked {
		return false
	}
	if r.Class() == apisv1.ProvisioningClassBestEffortAtomicScaleUp && r.Bound < len(r.Pods) && len(Revoked(r, claims)) > 0 {
		return false
	}
	return true
}

// BookedUntil is when a booked request's window ends: Provisioned's lastTransitionTime +
// BookingWindow (zero when Provisioned is not True).
func BookedUntil(pr *apisv1.ProvisioningRequest) time.Time {
	if p := meta.FindStatusCondition(pr.Status.Conditions, apisv1.ProvisioningRequestProvisioned); p != nil && p.Status == metav1.ConditionTrue {
		return p.LastTransitionTime.Add(BookingWindow)
	}
	return time.Time{}
}

// Expire returns the condition a request needs at now that no plan decides: BookingExpired
// once Provisioned has been True for BookingWindow, Failed (Expired) once a request never
// provisioned is ExpiryAge old (Cluster Autoscaler's check-capacity processor, applied to both
// classes here); nil otherwise.
func Expire(pr *apisv1.ProvisioningRequest, now time.Time) *metav1.Condition {
	c := pr.Status.Conditions
	if meta.IsStatusConditionTrue(c, apisv1.ProvisioningRequestFailed) || meta.IsStatusConditionTrue(c, apisv1.ProvisioningRequestBookingExpired) ||
		meta.IsStatusConditionTrue(c, apisv1.ProvisioningRequestCapacityRevoked) {
		return nil
	}
	if p := meta.FindStatusCondition(c, apisv1.ProvisioningRequestProvisioned); p != nil && p.Status == metav1.ConditionTrue {
		if now.Sub(p.LastTransitionTime.Time) >= BookingWindow {
			return Condition(apisv1.ProvisioningRequestBookingExpired, true, ReasonBookingExpired, "Capacity reservation time is expired")
		}
		return nil
	}
	if now.Sub(pr.CreationTimestamp.Time) >= ExpiryAge {
		return Condition(apisv1.ProvisioningRequestFailed, true, ReasonExpired, "ProvisioningRequest is expired")
	}
	return nil
}

// Condition builds a condition (lastTransitionTime is set by the agent's merge when the status
// changes).
func Condition(typ string, status bool, reason, message string) *metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return &metav1.Condition{Type: typ, Status: s, Reason: reason, Message: message}
}

// PodsOf returns the pods a request's pod sets stand for: for each set, Count copies of its
// PodTemplate's pod (labels, annotations and spec), named "<request>-<set>-<index>" in the
// request's namespace, carrying the consume annotation and a UID derived from the request's, so
// equal snapshots give equal pods. Error: a PodTemplate the snapshot lacks, named with its pod
// set.
func PodsOf(pr *apisv1.ProvisioningRequest, templates map[string]*corev1.PodTemplate) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	for i, ps := range pr.Spec.PodSets {
		t := templates[pr.Namespace+"/"+ps.PodTemplateRef.Name]
		if t == nil {
			return nil, templateNotFound(i, pr.Namespace, ps.PodTemplateRef.Name)
		}
		for j := 0; j < int(ps.Count); j++ {
			p := corev1.Pod{ObjectMeta: *t.Template.ObjectMeta.DeepCopy(), Spec: *t.Template.Spec.DeepCopy()}
			p.Name = pr.Name + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
			p.Namespace = pr.Namespace
			p.UID = types.UID(string(pr.UID) + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(j))
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[apisv1.AnnotationConsumeProvisioningRequest] = pr.Name
			p.Spec.NodeName = ""
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// Hold is a pending pod held back from ordinary provisioning because it carries a consume
// annotation, with what its request says: the provision function's FailedScheduling Event and
// `dovetail explain pod` print Message.
type Hold struct {
	Pod *corev1.Pod `json:"-"`
	// Request is "namespace/name" of the request the annotation names (in the pod's namespace).
	Request string `json:"request"`
	// Class is the request's provisioningClassName; for a request that does not exist, the
	// class the pod's own annotation names (AnnotationProvisioningClass), if any.
	Class string `json:"class,omitempty"`
	// Found: the snapshot holds the request.
	Found bool `json:"found"`
	// Served: its class is one Dovetail answers (check-capacity, best-effort-atomic-scale-up).
	Served bool `json:"served"`
	// State is the request's state at the snapshot's time (served requests only).
	State State `json:"state,omitempty"`
	// Conditions are the request's status conditions, as written.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Err is why the request cannot be served (a PodTemplate it names is missing).
	Err string `json:"error,omitempty"`
	// BookedUntil is when a booked request's capacity stops being kept (Provisioned's
	// lastTransitionTime + BookingWindow).
	BookedUntil *metav1.Time `json:"bookedUntil,omitempty"`
}

// Message says why the pod is held, naming the request, its class and what its conditions say.
func (h *Hold) Message() string {
	name := "ProvisioningRequest " + h.Request
	if h.Class != "" {
		name += " (" + h.Class + ")"
	}
	const why = "pods that consume a ProvisioningRequest are not provisioned for on their own, as Cluster Autoscaler keeps them out of scale-up"
	switch {
	case strings.HasSuffix(h.Request, "/"):
		return "its consume-provisioning-request annotation names no ProvisioningRequest: " + why
	case !h.Found:
		return "waits for " + name + ", which is not found: " + why
	case !h.Served:
		return "consumes " + name + ", a class Dovetail does not serve: nothing is provisioned for it or its pods"
	case h.Err != "":
		return "consumes " + name + ", which cannot be served: " + h.Err
	}
	switch h.State {
	case StateBooked:
		return fmt.Sprintf("consumes %s, Provisioned: its capacity is booked until %s for the kube-scheduler to bind its pods there", name, h.BookedUntil.UTC().Format(time.RFC3339))
	case StateDone:
		return "consumes " + name + ", which is done (" + h.conditionSummary() + "): nothing more is provisioned for it or its pods"
	}
	if s := h.conditionSummary(); s != "" {
		return "waits for " + name + " to be provisioned (" + s + ")"
	}
	return "waits for " + name + " to be provisioned (not answered yet)"
}

// conditionSummary is the request's True conditions and Provisioned, as "Type=Status Reason:
// message", joined by "; ".
func (h *Hold) conditionSummary() string {
	var parts []string
	for _, c := range h.Conditions {
		if c.Type == apisv1.ProvisioningRequestAccepted || (c.Status != metav1.ConditionTrue && c.Type != apisv1.ProvisioningRequestProvisioned) {
			continue
		}
		s := c.Type + "=" + string(c.Status)
		if c.Reason != "" {
			s += " " + c.Reason
		}
		if c.Message != "" {
			s += ": " + c.Message
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// HoldBack splits the snapshot's pending pods into those ordinary provisioning plans and the
// consumers it holds back: every pod carrying a consume annotation, whatever its request's
// state or class and whether it exists, as Cluster Autoscaler's ProvisioningRequestPodsFilter
// (processors/provreq pods_filter.go) filters every such pod out of scale-up. A consumer is
// served by its request: its capacity is provisioned or booked for it, and the kube-scheduler
// binds it there. pending keeps the snapshot's order; held is in the same order.
func HoldBack(snap *events.Snapshot) (pending []corev1.Pod, held []Hold) {
	var byKey map[string]*apisv1.ProvisioningRequest
	for i := range snap.PendingPods {
		p := &snap.PendingPods[i]
		name, ok := apisv1.ConsumesProvisioningRequest(p.Annotations)
		if !ok {
			continue
		}
		if byKey == nil {
			byKey = make(map[string]*apisv1.ProvisioningRequest, len(snap.ProvisioningRequests))
			for j := range snap.ProvisioningRequests {
				pr := &snap.ProvisioningRequests[j]
				byKey[pr.Namespace+"/"+pr.Name] = pr
			}
		}
		held = append(held, holdOf(p, name, byKey, snap))
	}
	if len(held) == 0 {
		return snap.PendingPods, nil
	}
	pending = make([]corev1.Pod, 0, len(snap.PendingPods)-len(held))
	for i := range snap.PendingPods {
		if _, ok := apisv1.ConsumesProvisioningRequest(snap.PendingPods[i].Annotations); !ok {
			pending = append(pending, snap.PendingPods[i])
		}
	}
	return pending, held
}

// holdOf is the Hold of pending pod p, which consumes the request name of its namespace.
func holdOf(p *corev1.Pod, name string, byKey map[string]*apisv1.ProvisioningRequest, snap *events.Snapshot) Hold {
	ns := p.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	h := Hold{Pod: p, Request: ns + "/" + name}
	pr := byKey[h.Request]
	if name == "" || pr == nil {
		h.Class = apisv1.ProvisioningClassOfPod(p.Annotations)
		return h
	}
	h.Found, h.Class, h.Conditions = true, pr.Spec.ProvisioningClassName, pr.Status.Conditions
	switch h.Class {
	case apisv1.ProvisioningClassCheckCapacity, apisv1.ProvisioningClassBestEffortAtomicScaleUp:
	default:
		return h
	}
	h.Served, h.State = true, StateOf(pr, snap.Time.Time)
	if h.State == StatePending {
		for i, ps := range pr.Spec.PodSets {
			if !hasTemplate(snap, pr.Namespace, ps.PodTemplateRef.Name) {
				h.Err = templateNotFound(i, pr.Namespace, ps.PodTemplateRef.Name).Error()
				break
			}
		}
	}
	if h.State == StateBooked {
		c := meta.FindStatusCondition(pr.Status.Conditions, apisv1.ProvisioningRequestProvisioned)
		until := metav1.NewTime(c.LastTransitionTime.Add(BookingWindow))
		h.BookedUntil = &until
	}
	return h
}

// templateNotFound is the error of pod set i, whose PodTemplate ns/name is missing.
func templateNotFound(i int, ns, name string) error {
	return fmt.Errorf("spec.podSets[%d].podTemplateRef.name: PodTemplate %s/%s not found", i, ns, name)
}

func hasTemplate(snap *events.Snapshot, ns, name string) bool {
	for i := range snap.PodTemplates {
		if snap.PodTemplates[i].Namespace == ns && snap.PodTemplates[i].Name == name {
			return true
		}
	}
	return false
}

// Book returns pods bound where a plan placed them (each placement's node, or its in-flight
// NodeClaim's name): added to a snapshot's bound pods, they keep that room from every other
// pod the snapshot's plan places (the solver counts pods bound to an in-flight NodeClaim's name
// on that NodeClaim).
func Book(placements map[string][]*corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, node := range slices.Sorted(maps.Keys(placements)) {
		for _, p := range placements[node] {
			b := *p.DeepCopy()
			b.Spec.NodeName = node
			out = append(out, b)
		}
	}
	return out
}

// ValidUntil is when a best-effort-atomic-scale-up request stops being retried: creation +
// ValidUntilSeconds, or creation + ExpiryAge without the parameter. Error: a value that is not
// a non-negative integer, naming the parameter.
func ValidUntil(pr *apisv1.ProvisioningRequest) (time.Time, error) {
	v, ok := pr.Spec.Parameters[apisv1.ParameterValidUntilSeconds]
	if !ok {
		return pr.CreationTimestamp.Add(ExpiryAge), nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("spec.parameters.%s: %q: must be a non-negative integer number of seconds", apisv1.ParameterValidUntilSeconds, v)
	}
	return pr.CreationTimestamp.Add(time.Duration(n) * time.Second), nil
}

// NoRetry reports a check-capacity request's noRetry parameter ("true": fail at the first
// CapacityIsNotFound).
func NoRetry(pr *apisv1.ProvisioningRequest) bool {
	return pr.Spec.Parameters[apisv1.ParameterNoRetry] == "true"
}

// Revoked returns the names of what is missing of an atomic request's launched capacity: its
// NodeClaims (AnnotationProvisioningRequest) being deleted, and how many of the
// AnnotationProvisioningRequestNodes it launched are gone; empty when all are there or the
// request launched none (its capacity was found on existing nodes).
func Revoked(r *Request, claims []apisv1.NodeClaim) []string {
	var missing []string
	want, have := 0, 0
	for i := range claims {
		nc := &claims[i]
		if nc.Annotations[AnnotationProvisioningRequest] != r.Key() {
			continue
		}
		if n, err := strconv.Atoi(nc.Annotations[AnnotationProvisioningRequestNodes]); err == nil {
			want = max(want, n)
		}
		if nc.DeletionTimestamp != nil {
			missing = append(missing, "NodeClaim "+nc.Name+" is being deleted")
			continue
		}
		have++
	}
	if have+len(missing) < want {
		missing = append(missing, fmt.Sprintf("%d of %d NodeClaims are gone", want-have-len(missing), want))
	}
	return missing
}
