package provision

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/internal/emit"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/launch"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provreq"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// RequestAnswer is what a decision answered one ProvisioningRequest ("namespace/name"), for
// logs, local dev and tests.
type RequestAnswer struct {
	Request    string
	Conditions []metav1.Condition
	// Launched are the NodeClaims a best-effort-atomic-scale-up launch kept; RolledBack the
	// provider IDs it terminated when the launch was partial.
	Launched   []string
	RolledBack []string
}

// serveProvisioningRequests answers the snapshot's ProvisioningRequests before its other
// pending pods are planned (shared/provreq), and returns the snapshot those pods are planned on:
//
//  1. expiry: BookingExpired once a booking's 10 minutes ran out, Failed (Expired) for a
//     request 7 days old that never provisioned; CapacityRevoked for an atomic request whose
//     launched NodeClaims went before its pods came;
//  2. bookings: each booked request's unconsumed pods are placed on existing nodes and
//     in-flight NodeClaims (no launch) and bound there in the working snapshot, so no other pod
//     is planned into that room;
//  3. answers, oldest request first: check-capacity places its pods the same way and answers
//     Provisioned True (booked) or False (CapacityIsNotFound; Failed with noRetry);
//     best-effort-atomic-scale-up plans its pods with launches and launches them all or none
//     (launch.Step.RunAtomic), one such request per decision, as Cluster Autoscaler takes one.
//
// Every pending pod carrying a consume annotation is held back from the returned snapshot's
// pending pods, whether its request exists, is pending, booked or done (provreq.HoldBack, as
// Cluster Autoscaler filters them), with a FailedScheduling Event naming the request. The conditions are published as SetProvisioningRequestStatus
// commands: this function is their one writer.
func (h *Handler) serveProvisioningRequests(ctx context.Context, snap *events.Snapshot, statics []apisv1.NodeClaim, d *Decision) (*events.Snapshot, error) {
	reqs := provreq.Requests(snap)
	pending, held := provreq.HoldBack(snap)
	if len(reqs) == 0 && len(held) == 0 {
		return snap, nil
	}
	d.Held = held
	now := snap.Time.Time
	work := *snap
	work.PendingPods = pending
	work.Pods = append([]corev1.Pod(nil), snap.Pods...)
	work.NodeClaims = append(append([]apisv1.NodeClaim(nil), snap.NodeClaims...), statics...)
	work.UnavailableOfferings = append([]events.UnavailableOfferingMark(nil), snap.UnavailableOfferings...)
	answers := map[string]*RequestAnswer{}
	answer := func(r *provreq.Request, conds ...*metav1.Condition) *RequestAnswer {
		a := answers[r.Key()]
		if a == nil {
			a = &RequestAnswer{Request: r.Key()}
			answers[r.Key()] = a
		}
		for _, c := range conds {
			a.Conditions = append(a.Conditions, *c)
		}
		return a
	}
	for _, r := range reqs {
		if c := provreq.Expire(r.PR, now); c != nil {
			answer(r, c)
			continue
		}
		if r.State != provreq.StateBooked {
			continue
		}
		if !provreq.Holds(r, snap.NodeClaims) { // an atomic request's launched NodeClaims went
			gone := provreq.Revoked(r, snap.NodeClaims)
			answer(r, provreq.Condition(apisv1.ProvisioningRequestCapacityRevoked, true, provreq.ReasonNodeClaimsGone, strings.Join(gone, "; ")))
			continue
		}
		if _, err := h.book(&work, r.Unconsumed()); err != nil {
			return snap, err
		}
	}
	atomicTried := false
	for _, r := range reqs {
		if r.State != provreq.StatePending || answers[r.Key()] != nil {
			continue
		}
		accepted := provreq.Condition(apisv1.ProvisioningRequestAccepted, true, provreq.ReasonAccepted, "ProvisioningRequest is accepted by Dovetail")
		if r.Err != nil {
			answer(r, accepted, provreq.Condition(apisv1.ProvisioningRequestFailed, true, provreq.ReasonFailedToCreatePods, r.Err.Error()))
			continue
		}
		switch r.Class() {
		case apisv1.ProvisioningClassCheckCapacity:
			c, err := h.checkCapacity(&work, r)
			if err != nil {
				return snap, err
			}
			answer(r, accepted, c)
		case apisv1.ProvisioningClassBestEffortAtomicScaleUp:
			if atomicTried {
				continue // the next decision takes it
			}
			atomicTried = true
			a := answer(r, accepted)
			if err := h.atomicScaleUp(ctx, snap, &work, r, a, d); err != nil {
				return snap, err
			}
		}
	}
	if err := h.publishAnswers(ctx, snap, reqs, answers, d); err != nil {
		return snap, err
	}
	return &work, h.recordHeld(ctx, snap, held)
}

// recordHeld records Karpenter's FailedScheduling Warning on each consumer held back, naming its
// request and what the request says (provreq.Hold.Message); Cluster Autoscaler records a Normal
// Event naming the request on each pod it filters out. The agent aggregates a later decision's
// repeat into the same Event, whose count grows.
func (h *Handler) recordHeld(ctx context.Context, snap *events.Snapshot, held []provreq.Hold) error {
	if len(held) == 0 {
		return nil
	}
	recs := make([]events.EventRecord, 0, len(held))
	for i := range held {
		recs = append(recs, kevents.FailedSchedulingEvent(kevents.PodRef(held[i].Pod), held[i].Message()))
	}
	e := emit.Emitter{Cluster: h.Cluster, Component: Component, Codec: h.Codec, Publisher: h.Publisher}
	return e.Events(ctx, snap.Time.Time, snap.Revision, recs, "provisioning-request-consumers")
}

// solveOn plans pods on the working snapshot; without launch, with no NodePool, so only
// existing nodes and in-flight NodeClaims can take them.
func (h *Handler) solveOn(work *events.Snapshot, pods []corev1.Pod, launch bool) (*provisioning.Plan, error) {
	s := *work
	s.PendingPods = pods
	if !launch {
		s.NodePools = nil
	}
	in := provisioning.InputFromSnapshot(&s, h.Catalog, h.NodeSettings)
	in.Policies = h.Policies
	_, in.RequireResolvedNodeClasses = cloud.As[cloud.NodeClassResolver](h.Provider)
	return emit.Solve(h.Metrics, telemetry.ControllerProvisioner, in)
}

// book places pods on the working snapshot's existing capacity and binds the placed ones there
// (provreq.Book); it returns how many found no room.
func (h *Handler) book(work *events.Snapshot, pods []corev1.Pod) (int, error) {
	if len(pods) == 0 {
		return 0, nil
	}
	plan, err := h.solveOn(work, pods, false)
	if err != nil {
		return 0, err
	}
	bookPlacements(work, plan.ExistingNodes, nil)
	return len(plan.Unschedulable), nil
}

// bookPlacements binds the placed pods in the working snapshot (and the pods of the launched
// NodeClaims, by NodeClaim name).
func bookPlacements(work *events.Snapshot, placed []*provisioning.NodePlacement, launched []launch.Launched) {
	at := map[string][]*corev1.Pod{}
	for _, e := range placed {
		at[e.Name] = append(at[e.Name], e.Pods...)
	}
	for _, l := range launched {
		at[l.NodeClaim.Name] = append(at[l.NodeClaim.Name], l.Plan.Pods...)
	}
	work.Pods = append(work.Pods, provreq.Book(at)...)
}

// checkCapacity answers a check-capacity request: its pods all fit on existing nodes and
// in-flight NodeClaims (less what earlier bookings hold) → Provisioned True CapacityIsFound and
// booked; else nothing is booked and Provisioned False CapacityIsNotFound (Failed with
// noRetry), as Cluster Autoscaler's check-capacity class answers. Nothing is launched.
func (h *Handler) checkCapacity(work *events.Snapshot, r *provreq.Request) (*metav1.Condition, error) {
	plan, err := h.solveOn(work, r.Pods, false)
	if err != nil {
		return nil, err
	}
	if len(plan.Unschedulable) == 0 {
		bookPlacements(work, plan.ExistingNodes, nil)
		return provreq.Condition(apisv1.ProvisioningRequestProvisioned, true, provreq.ReasonCapacityIsFound, "Capacity is found in the cluster"), nil
	}
	msg := fmt.Sprintf("Capacity is not found: %d of %d pods fit the cluster's nodes and in-flight NodeClaims", len(r.Pods)-len(plan.Unschedulable), len(r.Pods))
	if provreq.NoRetry(r.PR) {
		return provreq.Condition(apisv1.ProvisioningRequestFailed, true, provreq.ReasonCapacityIsNotFound, msg), nil
	}
	return provreq.Condition(apisv1.ProvisioningRequestProvisioned, false, provreq.ReasonCapacityIsNotFound, msg+"; retried on the next decision"), nil
}

// atomicScaleUp answers a best-effort-atomic-scale-up request: its pods are planned with
// launches; when every pod fits existing capacity it is CapacityIsFound; when the plan places
// every pod, all its NodeClaims are launched or none (RunAtomic: a partial fleet result is
// terminated and its offerings marked, within this decision) and Provisioned turns True
// (CapacityIsProvisioned). A pod no plan can place, or a partial launch, answers Provisioned
// False CapacityIsNotFound, retried on later decisions until ValidUntilSeconds after the
// request's creation (7 days without it), then Failed.
func (h *Handler) atomicScaleUp(ctx context.Context, snap *events.Snapshot, work *events.Snapshot, r *provreq.Request, a *RequestAnswer, d *Decision) error {
	notFound := func(msg string) {
		until, err := provreq.ValidUntil(r.PR)
		switch {
		case err != nil:
			a.Conditions = append(a.Conditions, *provreq.Condition(apisv1.ProvisioningRequestFailed, true, provreq.ReasonCapacityIsNotFound, err.Error()))
		case !snap.Time.Time.Before(until):
			a.Conditions = append(a.Conditions, *provreq.Condition(apisv1.ProvisioningRequestFailed, true, provreq.ReasonCapacityIsNotFound, msg))
		default:
			a.Conditions = append(a.Conditions, *provreq.Condition(apisv1.ProvisioningRequestProvisioned, false, provreq.ReasonCapacityIsNotFound, msg+"; retried on the next decision"))
		}
	}
	plan, err := h.solveOn(work, r.Pods, true)
	if err != nil {
		return err
	}
	if len(plan.Unschedulable) > 0 {
		notFound(fmt.Sprintf("Capacity is not found: %d of %d pods fit no NodePool (%s: %s)", len(plan.Unschedulable), len(r.Pods),
			plan.Unschedulable[0].Pod.Name, plan.Unschedulable[0].Reason))
		return nil
	}
	if len(plan.NodeClaims) == 0 {
		bookPlacements(work, plan.ExistingNodes, nil)
		a.Conditions = append(a.Conditions, *provreq.Condition(apisv1.ProvisioningRequestProvisioned, true, provreq.ReasonCapacityIsFound, "Capacity is found in the cluster"))
		return nil
	}
	n := strconv.Itoa(len(plan.NodeClaims))
	step := launch.Step{
		Launcher:    &launch.Launcher{Cluster: h.Cluster, Provider: h.Provider, Catalog: h.Catalog},
		Decision:    launch.Decision{Revision: snap.Revision, Time: snap.Time.Time, ClusterFacts: snap.ClusterFacts},
		NodeClasses: snap.NodeClasses,
		Publish:     func(ctx context.Context, c events.Command) error { return h.publish(ctx, snap, c) },
		Reason: func(*provisioning.NodeClaimPlan) string {
			return fmt.Sprintf("ProvisioningRequest %s (%s): %s nodes launched together", r.Key(), r.Class(), n)
		},
		// The request's pods are not pods of the cluster: no pod is nominated to these nodes,
		// and the request is named instead (provreq.Revoked counts its NodeClaims).
		Annotate: func(nc *apisv1.NodeClaim) {
			delete(nc.Annotations, apisv1.AnnotationPlannedPods)
			nc.Annotations[provreq.AnnotationProvisioningRequest] = r.Key()
			nc.Annotations[provreq.AnnotationProvisioningRequestNodes] = n
		},
		Recorded: launch.RecordedIn(snap),
	}
	out, err := step.RunAtomic(ctx, plan)
	if errors.Is(err, launch.ErrBehindCloud) {
		return nil // Accepted only; the next snapshot decides
	}
	if err != nil {
		return err
	}
	work.UnavailableOfferings = append(work.UnavailableOfferings, out.Marks...)
	a.RolledBack = out.RolledBack
	if len(out.Launched) == 0 {
		for _, e := range out.Refused {
			d.Failures = append(d.Failures, fmt.Sprintf("ProvisioningRequest %s: %v", r.Key(), e))
		}
		msg := fmt.Sprintf("Capacity is not found: the cloud refused %d of %d nodes; none was kept", len(plan.NodeClaims)-len(out.Launched), len(plan.NodeClaims))
		if len(out.Refused) > 0 {
			msg += " (" + out.Refused[0].Error() + ")"
		}
		notFound(msg)
		return nil
	}
	for _, l := range out.Launched {
		work.NodeClaims = append(work.NodeClaims, *l.NodeClaim)
		a.Launched = append(a.Launched, l.NodeClaim.Name)
		d.Launched = append(d.Launched, Launched{NodeClaim: l.NodeClaim, Instance: l.Instance})
	}
	bookPlacements(work, plan.ExistingNodes, out.Launched)
	a.Conditions = append(a.Conditions, *provreq.Condition(apisv1.ProvisioningRequestProvisioned, true, provreq.ReasonCapacityIsProvisioned,
		fmt.Sprintf("Capacity is provisioned: %d nodes launched in one decision", len(out.Launched))))
	return nil
}

// publishAnswers publishes one SetProvisioningRequestStatus per answered request (ID from the
// cluster, the request's UID and the conditions, so a redelivered decision repeats it).
func (h *Handler) publishAnswers(ctx context.Context, snap *events.Snapshot, reqs []*provreq.Request, answers map[string]*RequestAnswer, d *Decision) error {
	for _, r := range reqs {
		a := answers[r.Key()]
		if a == nil || len(a.Conditions) == 0 {
			continue
		}
		d.Requests = append(d.Requests, *a)
		keys := []string{h.Cluster, "provisioning-request", string(r.PR.UID)}
		for _, c := range a.Conditions {
			keys = append(keys, c.Type, string(c.Status), c.Reason)
		}
		target := &apisv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: r.PR.Namespace, Name: r.PR.Name, UID: r.PR.UID},
			Status: apisv1.ProvisioningRequestStatus{Conditions: a.Conditions}}
		if err := h.publish(ctx, snap, events.Command{ID: events.CommandID(keys...), Kind: events.CommandSetProvisioningRequestStatus,
			Cluster: h.Cluster, SnapshotRevision: snap.Revision, ProvisioningRequest: target,
			Reason: fmt.Sprintf("ProvisioningRequest %s (%s)", r.Key(), r.Class())}); err != nil {
			return err
		}
	}
	return nil
}
