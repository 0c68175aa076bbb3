package disruption

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provreq"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// booking is a ProvisioningRequest whose booking holds capacity now (provreq.Holds).
type booking struct {
	req *provreq.Request
	// pods counts the request's pods booked on each node (by node name).
	pods map[string]int
}

// bookCapacity keeps the capacity live ProvisioningRequest bookings hold out of consolidation,
// as Cluster Autoscaler books a Provisioned request's pods into the cluster snapshot to reserve
// capacity from scale-down (its provisioning-request processor's bookCapacity). The booking is
// the request's own Provisioned condition (provreq.Holds); its pods not yet matched by a bound
// consumer (Request.Unconsumed) are placed the way the provision function books them: oldest
// request first, on existing nodes and in-flight NodeClaims only (no NodePool), each booking
// seeing the room the earlier ones took (functions/provision serveProvisioningRequests, step 2).
// A booked pod becomes a resident of its node that is never moved: it counts in the node's
// requests (so no simulation moves pods into that room) and the node is not a candidate
// (BlockerProvisioningRequest). A pod booked on an in-flight NodeClaim is kept in
// bookedInFlight and passed to every simulation. The snapshot and the PodDisruptionBudgets are
// left as they are.
func (s *State) bookCapacity() error {
	reqs := provreq.Requests(s.Snapshot)
	if len(reqs) == 0 {
		return nil
	}
	work := *s.Snapshot
	work.NodePools = nil
	work.Pods = append([]corev1.Pod(nil), s.Snapshot.Pods...)
	for _, r := range reqs {
		if !provreq.Holds(r, s.Snapshot.NodeClaims) {
			continue
		}
		b := &booking{req: r, pods: map[string]int{}}
		s.bookings = append(s.bookings, b)
		pods := r.Unconsumed()
		if len(pods) == 0 {
			continue
		}
		one := work
		one.PendingPods = pods
		in := provisioning.InputFromSnapshot(&one, s.Catalog, s.NodeSettings)
		in.Policies = s.Policies // zero here: NewState's callers set Policies after it (docs/batch.md Limits)
		plan, err := provisioning.Solve(in)
		if err != nil {
			return fmt.Errorf("booking of ProvisioningRequest %s: %w", r.Key(), err)
		}
		at := map[string][]*corev1.Pod{}
		for _, e := range plan.ExistingNodes {
			at[e.Name] = append(at[e.Name], e.Pods...)
		}
		booked := provreq.Book(at)
		work.Pods = append(work.Pods, booked...)
		for i := range booked {
			p := &booked[i]
			b.pods[p.Spec.NodeName]++
			n := s.byName[p.Spec.NodeName]
			if n == nil {
				s.bookedInFlight = append(s.bookedInFlight, p)
				continue
			}
			if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
				s.anyAnti, n.hasAnti = true, true
			}
			n.Pods = append(n.Pods, p)
			n.Requests = n.Requests.Add(scheduling.PodRequests(p))
			if !slices.Contains(n.bookedBy, b) {
				n.bookedBy = append(n.bookedBy, b)
			}
		}
	}
	return nil
}

// bookingBlockers are the live bookings that keep n: a request with pods booked on n, and a
// best-effort-atomic-scale-up request that launched n's NodeClaim
// (provreq.AnnotationProvisioningRequest) while its consumers are not all bound, within its
// booking window (Cluster Autoscaler keeps booked capacity from scale-down for that window).
func (s *State) bookingBlockers(n *Node) []Blocker {
	var out []Blocker
	for _, b := range n.bookedBy {
		out = append(out, Blocker{BlockerProvisioningRequest, requestRef(b.req),
			fmt.Sprintf("ProvisioningRequest %s books %d pod(s) on the node until %s", b.req.Key(), b.pods[n.Name()],
				provreq.BookedUntil(b.req.PR).UTC().Format("2006-01-02T15:04:05Z"))})
	}
	if n.Claim == nil || n.Claim.Annotations[provreq.AnnotationProvisioningRequest] == "" {
		return out
	}
	for _, b := range s.bookings {
		r := b.req
		if r.Key() != n.Claim.Annotations[provreq.AnnotationProvisioningRequest] || r.Class() != apisv1.ProvisioningClassBestEffortAtomicScaleUp ||
			r.Bound >= len(r.Pods) || slices.Contains(n.bookedBy, b) {
			continue
		}
		out = append(out, Blocker{BlockerProvisioningRequest, requestRef(r),
			fmt.Sprintf("launched for ProvisioningRequest %s, %d of whose %d pods are bound; kept until %s", r.Key(), r.Bound, len(r.Pods),
				provreq.BookedUntil(r.PR).UTC().Format("2006-01-02T15:04:05Z"))})
	}
	return out
}

func requestRef(r *provreq.Request) ObjectRef {
	return ObjectRef{Kind: "ProvisioningRequest", Namespace: r.PR.Namespace, Name: r.PR.Name}
}
