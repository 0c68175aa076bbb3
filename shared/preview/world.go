package preview

import (
	"fmt"
	"sort"
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
// the functions' commands and the cluster would settle. It never touches the caller's snapshot.
type world struct {
	snap     *events.Snapshot
	cat      *catalog.Catalog
	settings provisioning.NodeSettingsFunc
	launched int
	// leaving are the nodes removed at the end of the round (their decisions are done).
	leaving map[string]bool
}

func newWorld(snap *events.Snapshot, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc) *world {
	return &world{snap: cloneSnapshot(snap), cat: cat, settings: settings, leaving: map[string]bool{}}
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
	for i := range w.snap.Nodes {
		if w.snap.Nodes[i].Name == name {
			return i
		}
	}
	return -1
}

// claimOf returns the node's NodeClaim (by status.nodeName, then provider ID), or nil.
func (w *world) claimOf(n *corev1.Node) *apisv1.NodeClaim {
	for i := range w.snap.NodeClaims {
		nc := &w.snap.NodeClaims[i]
		if nc.Status.NodeName == n.Name || (nc.Status.ProviderID != "" && nc.Status.ProviderID == n.Spec.ProviderID) {
			return nc
		}
	}
	return nil
}

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

// evict makes the node's evacuable pods (disruption.Evacuable) pending, except those keep
// says stay (a drain that waits for them); it returns the evicted pods' names.
func (w *world) evict(node string, keep map[string]bool) []string {
	var names []string
	rest := w.snap.Pods[:0]
	for _, p := range w.snap.Pods {
		if p.Spec.NodeName != node || !disruption.Evacuable(&p) || keep[podKey(&p)] {
			rest = append(rest, p)
			continue
		}
		p.Spec.NodeName = ""
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		w.snap.PendingPods = append(w.snap.PendingPods, p)
		names = append(names, podKey(&p))
	}
	w.snap.Pods = rest
	sort.Strings(names)
	return names
}

// bind puts a pod (pending or bound elsewhere) on node: Running and Ready, started now (so
// consolidateAfter counts from the move, as it would for the controller's new pod).
func (w *world) bind(pod, node string) {
	set := func(p *corev1.Pod) {
		now := metav1.NewTime(w.now())
		p.Spec.NodeName = node
		p.CreationTimestamp, p.Status.StartTime = now, &now
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	}
	for i := range w.snap.Pods {
		if podKey(&w.snap.Pods[i]) == pod {
			set(&w.snap.Pods[i])
			w.touch(node)
			return
		}
	}
	for i := range w.snap.PendingPods {
		if podKey(&w.snap.PendingPods[i]) == pod {
			p := w.snap.PendingPods[i]
			w.snap.PendingPods = append(w.snap.PendingPods[:i], w.snap.PendingPods[i+1:]...)
			set(&p)
			w.snap.Pods = append(w.snap.Pods, p)
			w.touch(node)
			return
		}
	}
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
func (w *world) remove(node string) {
	i := w.nodeIndex(node)
	if i < 0 {
		return
	}
	n := w.snap.Nodes[i]
	nc := w.claimOf(&n)
	w.snap.Nodes = append(w.snap.Nodes[:i], w.snap.Nodes[i+1:]...)
	if nc != nil {
		claims := w.snap.NodeClaims[:0]
		for _, c := range w.snap.NodeClaims {
			if c.Name != nc.Name {
				claims = append(claims, c)
			}
		}
		w.snap.NodeClaims = claims
	}
	rest := w.snap.Pods[:0]
	for _, p := range w.snap.Pods {
		switch {
		case p.Spec.NodeName != node:
			rest = append(rest, p)
		case disruption.Evacuable(&p) && metav1.GetControllerOf(&p) != nil:
			p.Spec.NodeName = ""
			p.Status = corev1.PodStatus{Phase: corev1.PodPending}
			w.snap.PendingPods = append(w.snap.PendingPods, p)
		}
	}
	w.snap.Pods = rest
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
	for _, n := range names {
		w.remove(n)
	}
	w.leaving = map[string]bool{}
}

// pods returns the pods bound to the node.
func (w *world) pods(node string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range w.snap.Pods {
		if p := &w.snap.Pods[i]; p.Spec.NodeName == node && !scheduling.IsTerminal(p) {
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
