package disruption

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// DefaultPodGracePeriod is a pod's terminationGracePeriodSeconds when unset: 30 s (Kubernetes
// API, PodSpec.terminationGracePeriodSeconds default).
const DefaultPodGracePeriod = 30 * time.Second

// DefaultDrainMargin is the time the drain rule keeps between the last pod's end of grace and
// the reclaim: the command's trip through the queue to the agent (a few seconds), the Eviction
// API call (bounded at 10 s by the agent's EvictionTimeout) and the kubelet sending SIGTERM.
const DefaultDrainMargin = 15 * time.Second

// Values of the karpenter.sh/disrupted taint that say which function disrupts the node, so each
// function continues only its own disruptions (consolidation uses TaintValuePrefix).
const (
	TaintValueDrifted     = "drifted"
	TaintValueInterrupted = "interrupted"
)

// Target is a node (and/or its NodeClaim) a cloud notice or a disruption decision names.
type Target struct {
	ProviderID string
	Node       *corev1.Node       // nil when the instance has not registered a node yet
	NodeClaim  *apisv1.NodeClaim  // nil for a node Dovetail did not launch
	NodePool   *apisv1.NodePool   // nil when the pool is gone or the node has none
	Pods       []*corev1.Pod      // the node's evacuable pods (see Evacuable)
	Offering   events.OfferingKey // instance type, zone, capacity type from the labels
	Disrupting bool               // already tainted karpenter.sh/disrupted
	Tainted    *metav1.Time       // when the disrupted taint was added, if recorded
	TaintValue string             // the disrupted taint's value: which function disrupts the node
}

// Name is the node's name, else the NodeClaim's.
func (t *Target) Name() string {
	if t.Node != nil {
		return t.Node.Name
	}
	if t.NodeClaim != nil {
		return t.NodeClaim.Name
	}
	return t.ProviderID
}

// FindTargets returns the snapshot's nodes and NodeClaims whose providerID satisfies match, one
// Target per provider ID, sorted by name. A NodeClaim and its node are joined by providerID (or
// status.nodeName).
func FindTargets(snap *events.Snapshot, match func(providerID string) bool) []Target {
	byPID := map[string]*Target{}
	var order []string
	get := func(pid string) *Target {
		if t, ok := byPID[pid]; ok {
			return t
		}
		t := &Target{ProviderID: pid}
		byPID[pid] = t
		order = append(order, pid)
		return t
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if n.Spec.ProviderID != "" && match(n.Spec.ProviderID) {
			get(n.Spec.ProviderID).Node = n
		}
	}
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if nc.Status.ProviderID != "" && match(nc.Status.ProviderID) {
			get(nc.Status.ProviderID).NodeClaim = nc
		}
	}
	out := make([]Target, 0, len(order))
	for _, pid := range order {
		t := byPID[pid]
		completeTarget(snap, t)
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// TargetFor builds the Target of one node of the snapshot (with its NodeClaim, pool and pods).
// It scans the snapshot's NodeClaims and pods; for every node of a snapshot use targetIndex,
// which scans them once.
func TargetFor(snap *events.Snapshot, node *corev1.Node) Target {
	t := Target{ProviderID: node.Spec.ProviderID, Node: node}
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if (nc.Status.ProviderID != "" && nc.Status.ProviderID == node.Spec.ProviderID) || nc.Status.NodeName == node.Name {
			t.NodeClaim = nc
			break
		}
	}
	completeTarget(snap, &t)
	return t
}

func completeTarget(snap *events.Snapshot, t *Target) {
	if t.Node != nil {
		for i := range snap.Pods {
			if p := &snap.Pods[i]; p.Spec.NodeName == t.Node.Name && Evacuable(p) {
				t.Pods = append(t.Pods, p)
			}
		}
	}
	pool := fillTarget(t)
	for i := range snap.NodePools {
		if snap.NodePools[i].Name == pool {
			t.NodePool = &snap.NodePools[i]
		}
	}
}

// fillTarget sets the taint fields and the offering from the node (else the NodeClaim) and
// returns the NodePool name its labels carry.
func fillTarget(t *Target) (pool string) {
	labels := map[string]string{}
	if t.NodeClaim != nil {
		labels = t.NodeClaim.Labels
	}
	if t.Node != nil {
		labels = t.Node.Labels
		for _, taint := range t.Node.Spec.Taints {
			if taint.Key == apisv1.TaintKeyDisrupted {
				t.Disrupting, t.Tainted, t.TaintValue = true, taint.TimeAdded, taint.Value
			}
		}
	}
	t.Offering = events.OfferingKey{InstanceType: labels[corev1.LabelInstanceTypeStable],
		Zone: labels[corev1.LabelTopologyZone], CapacityType: labels[apisv1.LabelCapacityType]}
	return labels[apisv1.LabelNodePool]
}

// targetIndex gives every node of one snapshot its Target as TargetFor does, from maps built in
// one pass over the snapshot's NodeClaims, pods and NodePools: TargetFor scans all of them per
// node, which on a 5,000-node, 95,000-pod cluster was a fifth of a preview (PlanDrift runs per
// round, and twice when nodes expire). The snapshot must not change while the index is used.
type targetIndex struct {
	snap       *events.Snapshot
	claimByPID map[string]int // first NodeClaim (snapshot order) with that non-empty status.providerID
	claimByNN  map[string]int // first NodeClaim with that status.nodeName
	pods       map[string][]*corev1.Pod
	pools      map[string]*apisv1.NodePool // the last NodePool of a name, as completeTarget's loop keeps
}

func newTargetIndex(snap *events.Snapshot) *targetIndex {
	x := &targetIndex{snap: snap, claimByPID: map[string]int{}, claimByNN: map[string]int{},
		pods: map[string][]*corev1.Pod{}, pools: map[string]*apisv1.NodePool{}}
	for i := range snap.NodeClaims {
		st := &snap.NodeClaims[i].Status
		if _, ok := x.claimByPID[st.ProviderID]; !ok && st.ProviderID != "" {
			x.claimByPID[st.ProviderID] = i
		}
		if _, ok := x.claimByNN[st.NodeName]; !ok {
			x.claimByNN[st.NodeName] = i
		}
	}
	for i := range snap.Pods {
		if p := &snap.Pods[i]; Evacuable(p) {
			x.pods[p.Spec.NodeName] = append(x.pods[p.Spec.NodeName], p)
		}
	}
	for i := range snap.NodePools {
		x.pools[snap.NodePools[i].Name] = &snap.NodePools[i]
	}
	return x
}

// target is TargetFor(x.snap, node): the NodeClaim is the first in snapshot order that matches
// by provider ID or node name, so the earlier of the two indexed matches.
func (x *targetIndex) target(node *corev1.Node) Target {
	t := Target{ProviderID: node.Spec.ProviderID, Node: node}
	first := -1
	if i, ok := x.claimByPID[node.Spec.ProviderID]; ok {
		first = i
	}
	if i, ok := x.claimByNN[node.Name]; ok && (first < 0 || i < first) {
		first = i
	}
	if first >= 0 {
		t.NodeClaim = &x.snap.NodeClaims[first]
	}
	if ps := x.pods[node.Name]; len(ps) > 0 {
		t.Pods = append([]*corev1.Pod(nil), ps...) // callers may append to their own
	}
	t.NodePool = x.pools[fillTarget(&t)]
	return t
}

// Evacuable reports whether a bound pod must move when its node goes: not a DaemonSet pod (it is
// recreated on the node and tolerates its taints), not a mirror (static) pod, not terminal, not
// already terminating.
func Evacuable(p *corev1.Pod) bool {
	if scheduling.IsDaemonSetPod(p) || scheduling.IsTerminal(p) || p.DeletionTimestamp != nil {
		return false
	}
	_, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]
	return !mirror
}

// EvacuationInput returns the solver input that places the evacuable pods of the named nodes
// elsewhere: those nodes and their NodeClaims are left out (so neither their capacity nor
// their pool usage counts), their evacuable pods become pending (unbound copies, in pod-name
// order), and extra marks (e.g. the interrupted offering) are honoured with the snapshot's
// unexpired ones. The snapshot is not modified. It also returns the pods to place.
func EvacuationInput(snap *events.Snapshot, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc, nodes []string,
	extra []events.UnavailableOfferingMark) (provisioning.Input, []*corev1.Pod) {
	leaving := map[string]bool{}
	for _, n := range nodes {
		leaving[n] = true
	}
	// The input points into snap rather than copying it: a copy of every bound pod per
	// evacuated node was most of the preview's time on a 100,000-pod cluster.
	work := *snap
	work.Nodes, work.Pods, work.NodeClaims, work.PendingPods = nil, nil, nil, nil
	work.UnavailableOfferings = append(append([]events.UnavailableOfferingMark(nil), snap.UnavailableOfferings...), extra...)
	in := provisioning.InputFromSnapshot(&work, cat, settings)
	pids := map[string]bool{}
	for i := range snap.Nodes {
		if leaving[snap.Nodes[i].Name] {
			pids[snap.Nodes[i].Spec.ProviderID] = true
			continue
		}
		in.Nodes = append(in.Nodes, &snap.Nodes[i])
	}
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if leaving[nc.Status.NodeName] || (nc.Status.ProviderID != "" && pids[nc.Status.ProviderID]) {
			continue
		}
		in.NodeClaims = append(in.NodeClaims, nc)
	}
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if !leaving[p.Spec.NodeName] {
			in.BoundPods = append(in.BoundPods, p)
			continue
		}
		if !Evacuable(p) {
			continue
		}
		q := p.DeepCopy()
		q.Spec.NodeName = ""
		q.Status = corev1.PodStatus{Phase: corev1.PodPending}
		in.Pods = append(in.Pods, q)
	}
	sort.Slice(in.Pods, func(i, j int) bool {
		return in.Pods[i].Namespace+"/"+in.Pods[i].Name < in.Pods[j].Namespace+"/"+in.Pods[j].Name
	})
	// Pending pods already waiting are placed by the provision function, not here.
	return in, in.Pods
}

// ReadyPlacement reports whether a plan puts every pod on capacity that is already there:
// existing nodes only (no in-flight NodeClaim, no new NodeClaim) and nothing unschedulable.
// This is when a drain can start without any pod waiting for a node.
func ReadyPlacement(p *provisioning.Plan) bool {
	if len(p.NodeClaims) > 0 || len(p.Unschedulable) > 0 {
		return false
	}
	for _, e := range p.ExistingNodes {
		if e.InFlight {
			return false
		}
	}
	return true
}

// PodGracePeriod is the pod's terminationGracePeriodSeconds, DefaultPodGracePeriod when unset.
func PodGracePeriod(p *corev1.Pod) time.Duration {
	if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return DefaultPodGracePeriod
}

// DrainSchedule says when the pods of a node that the cloud reclaims at Deadline must be
// evicted.
//
// The rule: a pod evicted at time t stops by t + grace at the latest, and it must be gone by
// Deadline − margin (margin covers the command's trip and the eviction call). So the pod must be
// evicted no later than Deadline − margin − grace, and the node's drain, which evicts all its pods
// at once, must start by
//
//	Start = Deadline − margin − max(grace of its pods).
//
// Until Start the drain may wait for replacement capacity to become ready (so pods reschedule
// at once instead of waiting pending); at Start it begins whether or not the replacement is ready.
// When Start is already past at now, the drain starts now, and pods whose grace no longer fits
// (now + grace > Deadline − margin) are listed in Unfit: the reclaim will cut them short.
// Example (spot, 2-minute notice at 12:00:00, margin 15 s): pods with the default 30 s grace
// give Start = 12:02:00 − 15 s − 30 s = 12:01:15; one pod with 90 s grace gives 12:00:15; one with
// 120 s grace gives 11:59:45 < now, so the drain starts at 12:00:00 and that pod is Unfit.
type DrainSchedule struct {
	Deadline     time.Time
	Start        time.Time
	LongestGrace time.Duration
	Unfit        []string // "namespace/name (grace 120s)"
}

// PlanDrain applies the DrainSchedule rule to pods. A zero deadline (no reclaim: rebalance,
// drift) gives a zero Start: the drain waits for ready replacement capacity only.
func PlanDrain(pods []*corev1.Pod, deadline, now time.Time, margin time.Duration) DrainSchedule {
	s := DrainSchedule{Deadline: deadline}
	for _, p := range pods {
		if g := PodGracePeriod(p); g > s.LongestGrace {
			s.LongestGrace = g
		}
	}
	if deadline.IsZero() {
		return s
	}
	s.Start = deadline.Add(-margin - s.LongestGrace)
	if s.Start.Before(now) {
		s.Start = now
	}
	for _, p := range pods {
		g := PodGracePeriod(p)
		if now.Add(g + margin).After(deadline) {
			s.Unfit = append(s.Unfit, p.Namespace+"/"+p.Name+" (grace "+g.String()+")")
		}
	}
	return s
}

// MustDrainBy reports whether the drain must start at now under the schedule (now >= Start and
// a deadline exists).
func (s DrainSchedule) MustDrainBy(now time.Time) bool {
	return !s.Deadline.IsZero() && !now.Before(s.Start)
}
