package disruption

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/overlay"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// AnnotationMirror marks a static pod's mirror; it belongs to the node and is never evicted.
const AnnotationMirror = "kubernetes.io/config.mirror"

// Node is one cluster node as the disruption core sees it.
type Node struct {
	Node  *corev1.Node
	Claim *apisv1.NodeClaim // nil when no NodeClaim records the node
	Pool  *apisv1.NodePool  // nil when not labelled with an existing NodePool
	// Pods are every non-terminal pod bound to the node; Movable those that must be placed
	// elsewhere when it goes (not DaemonSet pods, not mirror pods).
	Pods    []*corev1.Pod
	Movable []*corev1.Pod
	// InstanceType, Zone and CapacityType identify the offering; Price is its USD per hour in
	// the catalog (PriceKnown false when the offering is not in the catalog), under the
	// snapshot's commitments when it has them (commitments.go).
	InstanceType, Zone, CapacityType string
	Price                            float64
	PriceKnown                       bool
	Initialized                      bool
	// Disrupting: being deleted, its NodeClaim being deleted, or tainted karpenter.sh/disrupted.
	Disrupting bool
	// TaintValue is the value of its karpenter.sh/disrupted taint ("" when untainted).
	TaintValue string
	// Requests sums all its pods' requests; Allocatable is the node's.
	Requests, Allocatable scheduling.Resources

	// For simulations: the node with only the residents that matter and the allocatable the
	// others leave (see State.binView).
	view     *corev1.Node
	viewPods []*corev1.Pod
	free     scheduling.Resources
	binnable bool
	hasAnti  bool
	// settling is the view with spec.unschedulable set when the node is under its pool's
	// consolidateAfter (State.consolidateAfterLeft): consolidation moves no pod onto it, while
	// its pods still count for topology. Nil otherwise.
	settling  *corev1.Node
	requested scheduling.Resources // movable pods' requests
	// listPrice is Price before the commitments (commitments.go); set only with commitments.
	listPrice float64
	// bookedBy are the live ProvisioningRequest bookings with pods booked here (bookings.go).
	bookedBy []*booking
}

// Name is the node's name.
func (n *Node) Name() string { return n.Node.Name }

// ProviderID is the node's provider ID, or its NodeClaim's.
func (n *Node) ProviderID() string {
	if n.Node.Spec.ProviderID != "" {
		return n.Node.Spec.ProviderID
	}
	if n.Claim != nil {
		return n.Claim.Status.ProviderID
	}
	return ""
}

// State is a snapshot compiled for disruption decisions. Build it with NewState; it is
// read-only afterwards and safe to share between goroutines.
type State struct {
	Snapshot *events.Snapshot
	Catalog  *catalog.Catalog
	// NodeSettings is the cloud provider's NodeClass → node settings rule, for simulations.
	NodeSettings provisioning.NodeSettingsFunc
	// Policies are the operator's scheduling policies its simulations plan under (zero:
	// Strict, Respect), as Karpenter's disruption simulations take --min-values-policy and
	// --preference-policy (pkg/controllers/disruption/helpers.go SimulateScheduling).
	Policies provisioning.Policies
	// Requests memoizes pod requests across the simulations (and across States of one caller,
	// as the preview's rounds are); nil computes them per simulation.
	Requests *scheduling.RequestMemo
	// Bins keeps the nodes' bins across the simulations (provisioning.BinCache: reused only
	// where nothing they were made from changed); nil builds them per simulation.
	Bins *provisioning.BinCache
	// Now is the snapshot's time: the only clock the core reads.
	Now   time.Time
	Nodes []*Node // sorted by name
	Pools map[string]*apisv1.NodePool
	PDBs  *PDBs
	// Counts are the pools' budget counts (CountPoolNodes).
	Counts map[string]PoolCount
	// Overlays are the snapshot's NodeOverlays resolved once (overlay.ResolveSnapshot): the
	// nodes' prices and every simulation's offerings are the overlaid ones, as Karpenter's
	// disruption reads instance types through the same overlay store as provisioning.
	Overlays *overlay.Store

	byName     map[string]*Node
	pending    []*corev1.Pod
	claims     []*apisv1.NodeClaim
	anyAnti    bool
	poolLimits bool
	base       *simInputs
	registered map[*apisv1.NodeClaim]bool // NodeClaims whose node is in the snapshot
	totals     map[string]PoolTotals      // the Balanced score's denominators, per pool
	// sims counts simulations (for reports and benchmarks).
	sims atomic.Int64

	// bookings are the live ProvisioningRequest bookings; bookedInFlight their pods booked on
	// in-flight NodeClaims, bound to the NodeClaim's name (bookings.go).
	bookings       []*booking
	bookedInFlight []*corev1.Pod
}

// Simulations is how many scheduling simulations this state has run.
func (s *State) Simulations() int64 { return s.sims.Load() }

// NewState compiles a snapshot; settings is the cloud provider's NodeClass → node settings rule
// its simulations plan with (nil: defaults). It returns an error only for an unusable input (no
// snapshot or no catalog).
func NewState(snap *events.Snapshot, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc) (*State, error) {
	if snap == nil {
		return nil, fmt.Errorf("snapshot: required")
	}
	if cat == nil {
		return nil, fmt.Errorf("catalog: required")
	}
	s := compile(snap, true)
	s.Catalog, s.NodeSettings, s.Overlays = cat, settings, overlay.ResolveSnapshot(snap, cat)
	for _, n := range s.Nodes {
		n.Price, n.PriceKnown = offeringPrice(cat, s.Overlays, n.Node.Labels[apisv1.LabelNodePool], n.InstanceType, n.Zone, n.CapacityType)
	}
	s.priceCommitments()
	if err := s.bookCapacity(); err != nil {
		return nil, err
	}
	b := s.simBase()
	s.base = &b
	for _, n := range s.Nodes {
		s.prepareView(n)
		if s.consolidateAfterLeft(n) > 0 {
			v := *n.view
			v.Spec.Unschedulable = true
			n.settling = &v
		}
	}
	s.totals = s.poolTotals()
	return s, nil
}

// compile is the part of NewState that needs no catalog: the pools, each node with its
// NodeClaim, pool, offering identity and pods, the pending pods and the PDBs over them; with
// requests, each node's pod requests summed (simulations need them, the blocker rules do not).
// Prices are left unknown and nothing for simulations is prepared.
func compile(snap *events.Snapshot, requests bool) *State {
	s := &State{Snapshot: snap, Now: snap.Time.Time, Pools: map[string]*apisv1.NodePool{},
		byName: map[string]*Node{}, Counts: CountPoolNodes(snap), registered: map[*apisv1.NodeClaim]bool{}}
	for i := range snap.NodePools {
		np := &snap.NodePools[i]
		s.Pools[np.Name] = np
		if len(np.Spec.Limits) > 0 {
			s.poolLimits = true
		}
	}
	claims := claimsByNode(snap)
	for i := range snap.NodeClaims {
		s.claims = append(s.claims, &snap.NodeClaims[i])
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		nc := claims[n.Name]
		node := &Node{Node: n, Claim: nc, Initialized: Initialized(n, nc), Disrupting: MarkedForDeletion(n, nc),
			Allocatable: scheduling.FromList(n.Status.Allocatable)}
		node.TaintValue, _ = disruptedTaint(n)
		if nc != nil {
			s.registered[nc] = true
		}
		if p := n.Labels[apisv1.LabelNodePool]; p != "" {
			node.Pool = s.Pools[p]
		}
		node.InstanceType = n.Labels[corev1.LabelInstanceTypeStable]
		node.Zone = n.Labels[corev1.LabelTopologyZone]
		node.CapacityType = n.Labels[apisv1.LabelCapacityType]
		if nc != nil {
			node.InstanceType = firstNonEmpty(node.InstanceType, nc.Labels[corev1.LabelInstanceTypeStable])
			node.Zone = firstNonEmpty(node.Zone, nc.Labels[corev1.LabelTopologyZone])
			node.CapacityType = firstNonEmpty(node.CapacityType, nc.Labels[apisv1.LabelCapacityType])
		}
		s.byName[n.Name] = node
		s.Nodes = append(s.Nodes, node)
	}
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Node.Name < s.Nodes[j].Node.Name })
	all := make([]*corev1.Pod, 0, len(snap.Pods)+len(snap.PendingPods))
	for i := range snap.Pods {
		p := &snap.Pods[i]
		all = append(all, p)
		n := s.byName[p.Spec.NodeName]
		if n == nil || scheduling.IsTerminal(p) {
			continue
		}
		var req scheduling.Resources
		if requests {
			req = scheduling.PodRequests(p)
			n.Requests = n.Requests.Add(req)
		}
		n.Pods = append(n.Pods, p)
		if !scheduling.IsDaemonSetPod(p) && p.Annotations[AnnotationMirror] == "" {
			n.Movable = append(n.Movable, p)
			if requests {
				n.requested = n.requested.Add(req)
			}
		}
		if p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil && len(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			s.anyAnti = true
			n.hasAnti = true
		}
	}
	for i := range snap.PendingPods {
		p := &snap.PendingPods[i]
		s.pending = append(s.pending, p)
		all = append(all, p)
		if p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil && len(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			s.anyAnti = true
		}
	}
	s.PDBs = NewPDBs(snap.PDBs, all)
	return s
}

// Node returns the named node, or nil.
func (s *State) Node(name string) *Node { return s.byName[name] }

// prepareView builds the node as simulations see it. When no pod anywhere has required
// anti-affinity, a resident pod matters to placement only through its requests, so only
// DaemonSet pods (which the solver counts to know which DaemonSets still have to arrive) stay as
// residents and the others are folded into a lower allocatable: exact, and each simulation
// then costs O(nodes) instead of O(pods).
func (s *State) prepareView(n *Node) {
	n.binnable = !n.Disrupting && !n.Node.Spec.Unschedulable
	n.free = n.Allocatable.Sub(n.Requests)
	if s.anyAnti {
		n.view, n.viewPods = n.Node, n.Pods
		return
	}
	var folded scheduling.Resources
	for _, p := range n.Pods {
		if scheduling.IsDaemonSetPod(p) {
			n.viewPods = append(n.viewPods, p)
			continue
		}
		folded = folded.Add(scheduling.PodRequests(p))
	}
	v := *n.Node
	v.Status.Allocatable = n.Allocatable.Sub(folded).List()
	n.view = &v
}

// offeringPrice finds the offering's price (USD per hour) under the node's NodePool's
// NodeOverlays. A node in a capacity reservation is priced as Karpenter prices reserved
// offerings, on-demand / catalog.ReservedPriceDivisor: it is paid for, so consolidation never
// replaces it with bought capacity, yet may still remove it when empty.
func offeringPrice(cat *catalog.Catalog, overlays *overlay.Store, pool, it, zone, ct string) (float64, bool) {
	base := cat.Get(it)
	if base == nil {
		return 0, false
	}
	if ct == apisv1.CapacityTypeReserved {
		price, ok := base.OnDemandPrice()
		return price / catalog.ReservedPriceDivisor, ok
	}
	// The price under the node's NodePool's overlays, as the solver prices its replacements.
	t := overlays.Apply(pool, base)
	for _, o := range t.Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o.PricePerHour, true
		}
	}
	return 0, false
}

// EvictionCost is the cost of evicting one pod, after Karpenter's disruption cost
// (kubernetes-sigs/karpenter pkg/utils/disruption EvictionCost): 1, plus
// controller.kubernetes.io/pod-deletion-cost / 2^27, plus priority / 2^25, clamped to [-10, 10].
func EvictionCost(p *corev1.Pod) float64 {
	cost := 1.0
	if v, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			cost += f / math.Pow(2, 27)
		}
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / math.Pow(2, 25)
	}
	return math.Max(-10, math.Min(10, cost))
}

// DisruptionCost sums the movable pods' eviction costs, scaled by the share of the NodeClaim's
// lifetime left before expireAfter (a node about to expire is cheap to disrupt), as Karpenter
// orders its consolidation candidates.
func (s *State) DisruptionCost(n *Node) float64 {
	var c float64
	for _, p := range n.Movable {
		c += EvictionCost(p)
	}
	return c * LifetimeRemaining(n.Claim, s.Now)
}

// LifetimeRemaining is the share of the NodeClaim's lifetime left before its expireAfter, in
// [0, 1]: (expireAfter − age) / expireAfter, clamped; 1 for a NodeClaim that never expires or
// a nil one. Karpenter's LifetimeRemaining (kubernetes-sigs/karpenter pkg/utils/disruption).
func LifetimeRemaining(nc *apisv1.NodeClaim, now time.Time) float64 {
	if nc == nil || nc.Spec.ExpireAfter.Duration == nil || *nc.Spec.ExpireAfter.Duration <= 0 {
		return 1
	}
	total := nc.Spec.ExpireAfter.Duration.Seconds()
	age := now.Sub(nc.CreationTimestamp.Time).Seconds()
	return math.Max(0, math.Min(1, (total-age)/total))
}

// LastPodEvent is when the node's pods last changed: the NodeClaim's status.lastPodEventTime or
// the latest start (or creation) of a pod on it, whichever is later; with neither, when the
// node was created.
func (n *Node) LastPodEvent() time.Time {
	var t time.Time
	if n.Claim != nil && n.Claim.Status.LastPodEventTime != nil {
		t = n.Claim.Status.LastPodEventTime.Time
	}
	for _, p := range n.Movable {
		pt := p.CreationTimestamp.Time
		if p.Status.StartTime != nil && p.Status.StartTime.After(pt) {
			pt = p.Status.StartTime.Time
		}
		if pt.After(t) {
			t = pt
		}
	}
	if t.IsZero() {
		t = n.Node.CreationTimestamp.Time
	}
	return t
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
