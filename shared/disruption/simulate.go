package disruption

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// simInputs are the parts of every simulation's input that do not depend on what is removed.
type simInputs struct {
	daemonSets  []*appsv1.DaemonSet
	limitRanges []*corev1.LimitRange
	nodePools   []*apisv1.NodePool
	unavailable func(instanceType, zone, capacityType, scope string) bool
}

func (s *State) simBase() simInputs {
	var b simInputs
	snap := s.Snapshot
	for i := range snap.DaemonSets {
		b.daemonSets = append(b.daemonSets, &snap.DaemonSets[i])
	}
	for i := range snap.LimitRanges {
		b.limitRanges = append(b.limitRanges, &snap.LimitRanges[i])
	}
	for i := range snap.NodePools {
		b.nodePools = append(b.nodePools, &snap.NodePools[i])
	}
	b.unavailable = events.UnavailableAt(snap.UnavailableOfferings, s.Now)
	return b
}

// Simulate asks the bin-packing core (provisioning.Solve) where pods would go if the removed
// nodes were gone: the other nodes' free capacity and in-flight NodeClaims first, then new
// NodeClaims from the NodePools. Nodes that cannot take even the smallest pod are left out of
// the input (they could not receive any pod, so the result is the same), which keeps a
// simulation cheap on large clusters; with NodePool limits every node stays in, as the limits
// count every node's capacity.
func (s *State) Simulate(remove map[string]bool, pods []*corev1.Pod) (*provisioning.Plan, error) {
	return s.simulate(remove, pods, false)
}

// simulateMove is Simulate for a consolidation move: nodes under their pool's consolidateAfter
// take none of the moved pods (Karpenter v1.14's consolidation simulations skip such nodes for
// pods that are neither pending nor on a deleting node; a move's pods are neither).
func (s *State) simulateMove(remove map[string]bool, pods []*corev1.Pod) (*provisioning.Plan, error) {
	return s.simulate(remove, pods, true)
}

func (s *State) simulate(remove map[string]bool, pods []*corev1.Pod, move bool) (*provisioning.Plan, error) {
	if s.base == nil {
		b := s.simBase()
		s.base = &b
	}
	in := provisioning.Input{Pods: pods, Catalog: s.Catalog, DaemonSets: s.base.daemonSets, LimitRanges: s.base.limitRanges,
		Simulation: true, NodePools: s.base.nodePools, NodeClasses: s.Snapshot.NodeClasses, NodeSettings: s.NodeSettings, Unavailable: s.base.unavailable,
		Policies: s.Policies, Overlays: s.Overlays, Requests: s.Requests, Bins: s.Bins,
		Commitments: s.Snapshot.Commitments, CommitmentUsage: s.commitmentUsage(remove)}
	var least scheduling.Resources
	for i, p := range pods {
		r := s.Requests.Requests(p)
		if i == 0 || r.MilliCPU < least.MilliCPU {
			least.MilliCPU = r.MilliCPU
		}
		if i == 0 || r.Memory < least.Memory {
			least.Memory = r.Memory
		}
	}
	passed := map[*apisv1.NodeClaim]bool{}
	for _, n := range s.Nodes {
		if remove[n.Name()] {
			continue
		}
		if !s.poolLimits {
			if !n.binnable || n.free.MilliCPU < least.MilliCPU || n.free.Memory < least.Memory || n.free.Pods < 1 {
				continue
			}
		}
		if move && n.settling != nil {
			in.Nodes = append(in.Nodes, n.settling)
		} else {
			in.Nodes = append(in.Nodes, n.view)
		}
		in.BoundPods = append(in.BoundPods, n.viewPods...)
		if n.Claim != nil {
			passed[n.Claim] = true
		}
	}
	// A NodeClaim whose node is left out would look in flight to the solver (capacity counted
	// twice): pass only the NodeClaims of passed nodes and those with no node at all.
	for _, nc := range s.claims {
		if passed[nc] || !s.registered[nc] {
			in.NodeClaims = append(in.NodeClaims, nc)
		}
	}
	in.BoundPods = append(in.BoundPods, s.bookedInFlight...) // bookings.go
	s.sims.Add(1)
	return provisioning.Solve(in)
}
