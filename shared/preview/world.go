package preview

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// world is the cluster as the preview changes it: a snapshot of its own that each decision's
// effects are applied to (nodes launched, pods moved, nodes removed), as the agent would apply
// the functions' commands and the cluster would settle. It touches the caller's snapshot only
// when the caller handed it over (Options.Owned).
type world struct {
	snap     *events.Snapshot
	cat      *catalog.Catalog
	settings provisioning.NodeSettingsFunc
	launched int
	// leaving are the nodes removed at the end of the round (their decisions are done).
	leaving map[string]bool
	// The indexes below answer nodeIndex, claimOf and bind without scanning the snapshot (a
	// 5,000-node, 95,000-pod dump asks these questions hundreds of thousands of times). Each is
	// built on first use and dropped (nil) by whatever changes the slice it indexes.
	nodeIdx map[string]int // node name → its first index in snap.Nodes
	// claimByNode and claimByPID map status.nodeName and status.providerID to the claim's
	// first index in snap.NodeClaims.
	claimByNode, claimByPID map[string]int
	podIdx                  map[podRef]int // bound pod → its index in snap.Pods
}

// podRef names a pod without building its "namespace/name" key.
type podRef struct{ namespace, name string }

// newWorld makes a world of snap itself: the caller gives it a copy (cloneSnapshot) unless
// the snapshot is its to change.
func newWorld(snap *events.Snapshot, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc) *world {
	return &world{snap: snap, cat: cat, settings: settings, leaving: map[string]bool{}}
}

// cloneSnapshot copies every object the preview may change.
func cloneSnapshot(s *events.Snapshot) *events.Snapshot {
	c := *s
	c.Nodes = make([]corev1.Node, len(s.Nodes))
	for i := range s.Nodes {
		s.Nodes[i].DeepCopyInto(&c.Nodes[i])
	}
	c.Pods = make([]corev1.Pod, len(s.Pods))
	for i := range s.Pods {
		s.Pods[i].DeepCopyInto(&c.Pods[i])
	}
	c.PendingPods = make([]corev1.Pod, len(s.PendingPods))
	for i := range s.PendingPods {
		s.PendingPods[i].DeepCopyInto(&c.PendingPods[i])
	}
	c.NodeClaims = make([]apisv1.NodeClaim, len(s.NodeClaims))
	for i := range s.NodeClaims {
		s.NodeClaims[i].DeepCopyInto(&c.NodeClaims[i])
	}
	c.NodePools = make([]apisv1.NodePool, len(s.NodePools))
	for i := range s.NodePools {
		s.NodePools[i].DeepCopyInto(&c.NodePools[i])
	}
	c.NodeClasses = append([]apisv1.NodeClass(nil), s.NodeClasses...)
	return &c
}

func (w *world) now() time.Time { return w.snap.Time.Time }

func (w *world) nodeIndex(name string) int {
	if w.nodeIdx == nil {
		w.nodeIdx = make(map[string]int, len(w.snap.Nodes))
		for i := len(w.snap.Nodes) - 1; i >= 0; i-- { // backwards: the first index wins
			w.nodeIdx[w.snap.Nodes[i].Name] = i
		}
	}
	if i, ok := w.nodeIdx[name]; ok {
		return i
	}
	return -1
}

// claimOf returns the node's NodeClaim, or nil: the first NodeClaim whose status.nodeName is
// the node's name or whose status.providerID is the node's provider ID.
func (w *world) claimOf(n *corev1.Node) *apisv1.NodeClaim {
	if w.claimByNode == nil {
		w.claimByNode = make(map[string]int, len(w.snap.NodeClaims))
		w.claimByPID = make(map[string]int, len(w.snap.NodeClaims))
		for i := len(w.snap.NodeClaims) - 1; i >= 0; i-- {
			st := &w.snap.NodeClaims[i].Status
			w.claimByNode[st.NodeName] = i
			if st.ProviderID != "" {
				w.claimByPID[st.ProviderID] = i
			}
		}
	}
	best := -1
	if i, ok := w.claimByNode[n.Name]; ok {
		best = i
	}
	if i, ok := w.claimByPID[n.Spec.ProviderID]; ok && n.Spec.ProviderID != "" && (best < 0 || i < best) {
		best = i
	}
	if best < 0 {
		return nil
	}
	return &w.snap.NodeClaims[best]
}

// nodesChanged and claimsChanged drop the indexes of a slice that changed.
func (w *world) nodesChanged()  { w.nodeIdx = nil }
func (w *world) claimsChanged() { w.claimByNode, w.claimByPID = nil, nil }

// ref describes a node for a decision.
func (w *world) ref(name string) NodeRef {
	i := w.nodeIndex(name)
	if i < 0 {
		return NodeRef{Name: name}
	}
	n := &w.snap.Nodes[i]
	key := NodeOffering(n, w.claimOf(n))
	r := NodeRef{Name: name, InstanceType: key.InstanceType, Zone: key.Zone, CapacityType: key.CapacityType}
	r.PricePerHour, r.PriceSource, _ = OfferingPrice(w.cat, key)
	return r
}

// taint marks a node as being disrupted (karpenter.sh/disrupted=value:NoSchedule, dated now),
// and, for a node handed to the termination path, its NodeClaim as being deleted.
func (w *world) taint(name, value string, deleting bool) {
	i := w.nodeIndex(name)
	if i < 0 {
		return
	}
	n := &w.snap.Nodes[i]
	at := metav1.NewTime(w.now())
	found := false
	for j := range n.Spec.Taints {
		if n.Spec.Taints[j].Key == apisv1.TaintKeyDisrupted {
			found = true
		}
	}
	if !found {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: value, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at})
	}
	if nc := w.claimOf(n); deleting && nc != nil && nc.DeletionTimestamp == nil {
		nc.DeletionTimestamp = &at
	}
}

// evict makes the nodes' evacuable pods (disruption.Evacuable) pending, except those keep says
// stay (a drain that waits for them), in one pass over the pods: they join the pending pods in
// the order they were bound in.
func (w *world) evict(keep map[string]bool, nodes ...string) {
	draining := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		draining[n] = true
	}
	w.filterPods(func(p *corev1.Pod) bool {
		if !draining[p.Spec.NodeName] || !disruption.Evacuable(p) || keep[podKey(p)] {
			return true
		}
		q := *p
		q.Spec.NodeName = ""
		q.Status = corev1.PodStatus{Phase: corev1.PodPending}
		w.snap.PendingPods = append(w.snap.PendingPods, q)
		return false
	})
}

// filterPods keeps the bound pods keep says stay, in order, without copying a pod that does not
// move (a Pod is about a kilobyte, the world may hold 100,000 of them).
func (w *world) filterPods(keep func(*corev1.Pod) bool) {
	pods := w.snap.Pods
	k := 0
	for i := range pods {
		if !keep(&pods[i]) {
			continue
		}
		if k != i {
			pods[k] = pods[i]
		}
		k++
	}
	if k == len(pods) {
		return
	}
	clear(pods[k:]) // let the collector have what the removed pods point to
	w.snap.Pods = pods[:k]
	w.podIdx = nil
}

// bindAll puts each move's pod (pending or bound elsewhere) on its node, in the moves' order:
// Running and Ready, started now (so consolidateAfter counts from the move, as it would for the
// controller's new pod). A bound pod is moved in place; a pending one (the first pending pod of that name not taken by
// an earlier move) leaves the pending pods and is appended to the bound ones. The pending pods
// are indexed and compacted once for all the moves: a drain's pods bound one by one removed
// each from the middle of the pending slice, a copy of every later Pod per move (thousands of
// kilobyte-sized Pods after a round's expiries).
func (w *world) bindAll(moves []PodMove) {
	now := metav1.NewTime(w.now())
	set := func(p *corev1.Pod, node string) {
		p.Spec.NodeName = node
		p.CreationTimestamp, p.Status.StartTime = now, &now
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	}
	if w.podIdx == nil {
		w.podIdx = make(map[podRef]int, len(w.snap.Pods))
		for i := len(w.snap.Pods) - 1; i >= 0; i-- { // backwards: the first index wins
			w.podIdx[refOfPod(&w.snap.Pods[i])] = i
		}
	}
	var pending map[podRef][]int // pending pod → its indexes in PendingPods, in order
	taken := map[int]bool{}
	for _, m := range moves {
		ref := refOf(m.Pod)
		if i, ok := w.podIdx[ref]; ok {
			set(&w.snap.Pods[i], m.To)
			w.touch(m.To)
			continue
		}
		if pending == nil {
			pending = make(map[podRef][]int, len(w.snap.PendingPods))
			for i := range w.snap.PendingPods {
				r := refOfPod(&w.snap.PendingPods[i])
				pending[r] = append(pending[r], i)
			}
		}
		idx := pending[ref]
		if len(idx) == 0 {
			continue // neither bound nor pending: nothing to bind
		}
		i := idx[0]
		pending[ref] = idx[1:]
		taken[i] = true
		p := w.snap.PendingPods[i]
		set(&p, m.To)
		w.snap.Pods = append(w.snap.Pods, p)
		w.podIdx[ref] = len(w.snap.Pods) - 1 // not bound before this move (else podIdx had it)
		w.touch(m.To)
	}
	if len(taken) == 0 {
		return
	}
	left := w.snap.PendingPods[:0]
	for i := range w.snap.PendingPods {
		if !taken[i] {
			left = append(left, w.snap.PendingPods[i])
		}
	}
	clear(w.snap.PendingPods[len(left):])
	w.snap.PendingPods = left
}

// refOf splits a podKey.
func refOf(key string) podRef {
	ns, name, _ := strings.Cut(key, "/")
	return podRef{namespace: ns, name: name}
}

// refOfPod is podKey as a podRef.
func refOfPod(p *corev1.Pod) podRef {
	if p.Namespace == "" {
		return podRef{namespace: metav1.NamespaceDefault, name: p.Name}
	}
	return podRef{namespace: p.Namespace, name: p.Name}
}

// touch records a pod event on the node's NodeClaim (status.lastPodEventTime), as Karpenter does.
func (w *world) touch(node string) {
	if i := w.nodeIndex(node); i >= 0 {
		if nc := w.claimOf(&w.snap.Nodes[i]); nc != nil {
			t := metav1.NewTime(w.now())
			nc.Status.LastPodEventTime = &t
		}
	}
}

// remove deletes a node, its NodeClaim and the pods left on it (DaemonSet and mirror pods, and
// pods a forced termination deletes: their controllers recreate them pending).
func (w *world) remove(node string) { w.removeAll([]string{node}) }

// removeAll removes the nodes as remove would one after the other, in the order given, in one
// pass over the pods: the pods recreated pending are appended node by node in that order.
func (w *world) removeAll(nodes []string) {
	gone := map[string]int{} // node → its place in nodes
	for _, node := range nodes {
		i := w.nodeIndex(node)
		if i < 0 {
			continue
		}
		if _, dup := gone[node]; dup {
			continue
		}
		n := &w.snap.Nodes[i]
		if nc := w.claimOf(n); nc != nil {
			name := nc.Name
			claims := w.snap.NodeClaims[:0]
			for j := range w.snap.NodeClaims {
				if w.snap.NodeClaims[j].Name != name {
					claims = append(claims, w.snap.NodeClaims[j])
				}
			}
			clear(w.snap.NodeClaims[len(claims):])
			w.snap.NodeClaims = claims
			w.claimsChanged()
		}
		w.snap.Nodes = append(w.snap.Nodes[:i], w.snap.Nodes[i+1:]...)
		w.nodesChanged()
		gone[node] = len(gone)
	}
	if len(gone) == 0 {
		return
	}
	recreated := make([][]corev1.Pod, len(gone))
	w.filterPods(func(p *corev1.Pod) bool {
		at, ok := gone[p.Spec.NodeName]
		if !ok {
			return true
		}
		if disruption.Evacuable(p) && metav1.GetControllerOf(p) != nil {
			q := *p
			q.Spec.NodeName = ""
			q.Status = corev1.PodStatus{Phase: corev1.PodPending}
			recreated[at] = append(recreated[at], q)
		}
		return false
	})
	for _, ps := range recreated {
		w.snap.PendingPods = append(w.snap.PendingPods, ps...)
	}
}

// launch registers a node for a planned NodeClaim, as it would be once launched, registered and
// initialized: the NodeClaim's labels (the plan's, the pool's, the offering's and the instance
// type's), its taints, the allocatable of the instance type with the NodeClass's node settings,
// Ready, created now; and its NodeClaim, Initialized, expiring after the pool template's
// expireAfter. It returns the node's name ("<nodepool>-preview-<n>") and the offering.
func (w *world) launch(plan *provisioning.NodeClaimPlan) (string, provisioning.Offering, error) {
	off := plan.Cheapest()
	it := off.InstanceType
	w.launched++
	name := fmt.Sprintf("%s-preview-%d", plan.NodePool.Name, w.launched)
	settings := catalog.NodeSettings{}
	if w.settings != nil {
		var err error
		if settings, err = w.settings(apisv1.FindNodeClass(w.snap.NodeClasses, plan.NodeClassRef)); err != nil {
			return "", off, fmt.Errorf("nodepool %s: %w", plan.NodePool.Name, err)
		}
	}
	capacity, alloc := it.ResourcesWith(settings)
	labels := map[string]string{}
	for k, v := range it.Labels {
		labels[k] = v
	}
	for k, v := range plan.Labels {
		labels[k] = v
	}
	labels[apisv1.LabelNodePool] = plan.NodePool.Name
	labels[corev1.LabelInstanceTypeStable] = it.Name
	labels[corev1.LabelTopologyZone] = off.Zone
	labels[apisv1.LabelCapacityType] = off.CapacityType
	labels[corev1.LabelHostname] = name
	labels[apisv1.LabelNodeRegistered] = "true"
	labels[apisv1.LabelNodeInitialized] = "true"
	now := metav1.NewTime(w.now())
	pid := "preview:///" + off.Zone + "/" + name
	w.nodesChanged()
	w.claimsChanged()
	w.snap.Nodes = append(w.snap.Nodes, corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: now},
		Spec:       corev1.NodeSpec{ProviderID: pid, Taints: append([]corev1.Taint(nil), plan.Taints...)},
		Status: corev1.NodeStatus{Capacity: capacity.List(), Allocatable: alloc.List(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}},
	})
	tmpl := plan.NodePool.Spec.Template.Spec
	w.snap.NodeClaims = append(w.snap.NodeClaims, apisv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: now},
		Spec: apisv1.NodeClaimSpec{NodeClassRef: plan.NodeClassRef, Taints: plan.Taints, ExpireAfter: tmpl.ExpireAfter,
			TerminationGracePeriod: tmpl.TerminationGracePeriod},
		Status: apisv1.NodeClaimStatus{NodeName: name, ProviderID: pid, Capacity: capacity.List(), Allocatable: alloc.List(),
			Conditions: []metav1.Condition{{Type: apisv1.ConditionInitialized, Status: metav1.ConditionTrue, LastTransitionTime: now, Reason: "Initialized"}}},
	})
	return name, off, nil
}

// endRound removes the nodes whose decisions are done.
func (w *world) endRound() {
	names := make([]string, 0, len(w.leaving))
	for n := range w.leaving {
		names = append(names, n)
	}
	sort.Strings(names)
	w.removeAll(names)
	w.leaving = map[string]bool{}
}

// pods returns the pods bound to the nodes, in the order they are bound in.
func (w *world) pods(nodes ...string) []*corev1.Pod {
	on := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		on[n] = true
	}
	var out []*corev1.Pod
	for i := range w.snap.Pods {
		if p := &w.snap.Pods[i]; on[p.Spec.NodeName] && !scheduling.IsTerminal(p) {
			out = append(out, p)
		}
	}
	return out
}

func podKey(p *corev1.Pod) string {
	ns := p.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return ns + "/" + p.Name
}
