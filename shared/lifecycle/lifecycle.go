// Package lifecycle decides, from one snapshot, what Karpenter's NodeClaim and Node controllers
// do after a launch (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle,
// node/termination, nodeclaim/termination): register the Node against its NodeClaim,
// initialize it, reap a launch that never registers, and terminate a NodeClaim or Node that is
// being deleted. It is pure: no I/O, and the snapshot's time is the only clock. The lifecycle
// function (functions/lifecycle) publishes the commands and makes the cloud calls; the agent
// applies the commands.
//
// Every decision is re-derived from the snapshot, so a redelivered or repeated snapshot gives
// the same commands (their IDs derive from the objects and the step), and a function killed at
// any step simply leaves the next snapshot to carry on from where the cluster is.
package lifecycle

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
	"github.com/dovetail-dev/dovetail/shared/drain"
	"github.com/dovetail-dev/dovetail/shared/quarantine"
	"github.com/dovetail-dev/dovetail/shared/repair"
	"github.com/dovetail-dev/dovetail/shared/static"
)

// DefaultRegistrationTTL is how long a launched NodeClaim may go without its Node registering
// before it is deleted and its offering marked unavailable: 15 minutes, Karpenter's liveness
// registration TTL (pkg/controllers/nodeclaim/lifecycle/liveness.go).
const DefaultRegistrationTTL = 15 * time.Minute

// Condition reasons Dovetail writes (Karpenter's where it has one).
const (
	ReasonRegistered        = "Registered"
	ReasonInitialized       = "Initialized"
	ReasonNotInitialized    = "NotInitialized"
	ReasonReady             = "Ready"
	ReasonRegistrationTTL   = "RegistrationTimeout"
	ReasonNodeNotReady      = "NodeNotReady"
	ReasonStartupTaints     = "StartupTaintsExist"
	ReasonResourcesNotReady = "ResourceNotRegistered"
	// ReasonDraining is the Drained=False reason while pods are left (Karpenter drain.go).
	ReasonDraining = "Draining"
	// ReasonAwaitingVolumeDetachment is the VolumesDetached=False reason while attachments are
	// left (Karpenter volumedetachment.go).
	ReasonAwaitingVolumeDetachment = "AwaitingVolumeDetachment"
)

// Taints a node carries before its kubelet and cloud provider are done; initialization waits
// for them to go (Karpenter's KnownEphemeralTaints).
var ephemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute},
}

// DefaultRegistrationWindow is how long the first Nodes of one decision wait for the others
// before they are registered anyway: nodes that become schedulable one by one let the first
// ready one take pods planned elsewhere, so the NodeClaims of one decision register together.
const DefaultRegistrationWindow = time.Minute

// Options tune the decisions.
type Options struct {
	// RegistrationTTL overrides DefaultRegistrationTTL (tests shorten it).
	RegistrationTTL time.Duration
	// RegistrationWindow overrides DefaultRegistrationWindow.
	RegistrationWindow time.Duration
	// PricePerHour, when set, prices a NodeClaim's offering (USD per hour, by its instance type,
	// zone and capacity type labels) so a NodePool's price guardrail shows in its
	// SpendWithinLimits condition; nil leaves the price out.
	PricePerHour func(labels map[string]string) float64
	// RepairPolicies are the cloud's repair policies (cloud.Repairer; nil when repair is off): a
	// node being deleted that is due for repair is terminated without waiting for its pods.
	RepairPolicies []repair.Policy
	// Catalog, when set, is the catalog NodeOverlays are resolved against for their status
	// conditions (which overlays conflict depends on the instance types they select); nil
	// writes no NodeOverlay status.
	Catalog *catalog.Catalog
	// Vanished are the provider IDs whose instance the cloud no longer lists, confirmed on two
	// complete snapshots (the lifecycle function's garbage collection): a node of one that is
	// not Ready is terminated without waiting for its pods.
	Vanished map[string]bool
}

// Decision is what one snapshot asks for.
type Decision struct {
	// Commands are for the agent, in order.
	Commands []events.Command
	// Terminate are instances to terminate now: their NodeClaim or Node is being deleted and
	// no pod that must move is left on the node.
	Terminate []Termination
	// Transitions say what changed, for logs and local dev's progress lines.
	Transitions []Transition
	// NodeClasses are the NodeClasses to resolve or release (the function calls the cloud).
	NodeClasses []NodeClassAction
}

// Termination is one instance to terminate. The function terminates it (only instances tagged
// for the cluster can be) and, once the cloud reports it shutting down or gone, publishes Finish.
type Termination struct {
	ProviderID string
	NodeClaim  string // "" when the Node has no NodeClaim
	Node       string // "" when no Node registered
	// Finish deletes the Node and removes the finalizers, the Node's first.
	Finish []events.Command
}

// Transition is one step of a NodeClaim's life.
type Transition struct {
	NodeClaim string
	Node      string
	// Phase is Registered, Initialized, Draining, AwaitingVolumeDetachment, Terminating or
	// RegistrationTimeout.
	Phase  string
	Detail string
}

// Decide makes the lifecycle decisions of a snapshot.
func Decide(snap *events.Snapshot, o Options) Decision {
	if o.RegistrationTTL <= 0 {
		o.RegistrationTTL = DefaultRegistrationTTL
	}
	if o.RegistrationWindow <= 0 {
		o.RegistrationWindow = DefaultRegistrationWindow
	}
	d := &decider{snap: snap, now: snap.Time.Time, o: o, byProvider: map[string]*corev1.Node{}, pods: map[string][]*corev1.Pod{},
		pending: map[string]*corev1.Pod{}, claimed: map[string]bool{}}
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Spec.ProviderID != "" {
			d.byProvider[n.Spec.ProviderID] = n
		}
	}
	for i := range snap.Pods {
		p := &snap.Pods[i]
		d.pods[p.Spec.NodeName] = append(d.pods[p.Spec.NodeName], p)
	}
	for i := range snap.PendingPods {
		p := &snap.PendingPods[i]
		d.pending[p.Namespace+"/"+p.Name] = p
	}
	claims := make([]*apisv1.NodeClaim, 0, len(snap.NodeClaims))
	for i := range snap.NodeClaims {
		claims = append(claims, &snap.NodeClaims[i])
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	for _, nc := range claims {
		d.claim(nc)
		d.flushConsistency(nc)
	}
	// A Node of ours being deleted whose NodeClaim is already gone still has an instance.
	nodes := make([]*corev1.Node, 0, len(snap.Nodes))
	for i := range snap.Nodes {
		nodes = append(nodes, &snap.Nodes[i])
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		if !d.claimed[n.Name] && n.DeletionTimestamp != nil && hasFinalizer(n.Finalizers) {
			d.terminate(nil, n)
		}
	}
	d.nodeClasses()
	d.nodePools()
	d.nodeOverlays()
	d.scaleDownStatic()
	return d.out
}

// scaleDownStatic deletes what static NodePools hold beyond their spec.replicas, as
// static.Decide chooses it (Karpenter's static deprovisioning controller deletes those
// NodeClaims; the termination path above then drains each node). Scale-up launches, so the
// provision function does it.
func (d *decider) scaleDownStatic() {
	dec := static.Decide(d.snap)
	for _, c := range dec.Commands(d.snap.Cluster, d.snap.Revision) {
		d.cmd(c)
	}
	for _, p := range dec.Pools {
		for _, r := range p.Remove {
			d.transition(r.NodeClaim.Name, r.Node, "ScaleDown", r.Why)
		}
	}
}

type decider struct {
	snap       *events.Snapshot
	now        time.Time
	o          Options
	byProvider map[string]*corev1.Node
	pods       map[string][]*corev1.Pod // by node name
	pending    map[string]*corev1.Pod   // by namespace/name
	claimed    map[string]bool          // node names that have a NodeClaim
	// standing is the snapshot compiled for the disruption rules that need no catalog (its
	// PDBs over the snapshot's pods serve the consistency check too), made on first use.
	standing   *disruption.Standing
	consistent *pendingConsistency // the NodeClaim being decided: its ConsistentStateFound to write
	// registrations are this snapshot's registration outcomes by NodePool, in NodeClaim order.
	registrations map[string][]outcome
	// quarantine is the quarantine rule's result on snap (quarantined), made on first use.
	quarantine *quarantine.Result
	out        Decision
}

func (d *decider) cmd(c events.Command) {
	c.Cluster, c.SnapshotRevision = d.snap.Cluster, d.snap.Revision
	d.out.Commands = append(d.out.Commands, c)
}

func (d *decider) transition(nc, node, phase, detail string) {
	d.out.Transitions = append(d.out.Transitions, Transition{NodeClaim: nc, Node: node, Phase: phase, Detail: detail})
}

// claim decides one NodeClaim's next step.
func (d *decider) claim(nc *apisv1.NodeClaim) {
	var node *corev1.Node
	if pid := nc.Status.ProviderID; pid != "" {
		node = d.byProvider[pid]
	}
	if node != nil {
		d.claimed[node.Name] = true
	}
	switch {
	case nc.DeletionTimestamp != nil || (node != nil && node.DeletionTimestamp != nil):
		d.consistency(nc, node) // first: the termination path's status writes carry it
		d.terminate(nc, node)
	case node == nil:
		d.liveness(nc)
	case !isTrue(nc, apisv1.ConditionRegistered) && d.waitForSiblings(nc):
		d.transition(nc.Name, node.Name, "Waiting", "the other NodeClaims of its decision have no node yet")
	default:
		// Nominations go first: they are on the pods before the registration clears the
		// node's taint, so the scheduler's first look at the node already prefers it for them.
		d.consistency(nc, node) // first: the status writes below carry it
		d.nominate(nc, node)
		d.register(nc, node)
		d.releasePlanned(nc, node)
		d.initialize(nc, node)
		d.consolidatable(nc)
		d.disruptionBlocked(nc, node)
	}
}

// pendingPlanned counts the NodeClaim's planned pods that are still pending.
func (d *decider) pendingPlanned(nc *apisv1.NodeClaim) int {
	planned := nc.Annotations[apisv1.AnnotationPlannedPods]
	if planned == "" {
		return 0
	}
	n := 0
	for _, key := range strings.Split(planned, ",") {
		if d.pending[key] != nil {
			n++
		}
	}
	return n
}

// releasePlanned removes the node's dovetail.dev/planned taint once no pod planned onto it is
// pending (they are bound, or gone), or the registration window has passed since it registered,
// so its spare room serves every pod.
func (d *decider) releasePlanned(nc *apisv1.NodeClaim, node *corev1.Node) {
	if !hasTaintKey(node.Spec.Taints, apisv1.TaintKeyPlanned) {
		return
	}
	reg := condition(nc, apisv1.ConditionRegistered)
	windowOver := reg != nil && reg.Status == metav1.ConditionTrue && !reg.LastTransitionTime.IsZero() &&
		d.now.Sub(reg.LastTransitionTime.Time) >= d.o.RegistrationWindow
	if n := d.pendingPlanned(nc); n > 0 && !windowOver {
		return
	}
	t := apisv1.PlannedTaint(nc.Name)
	d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "release-planned", nc.Name, string(node.UID)), Kind: events.CommandUntaintNode,
		NodeName: node.Name, Taint: &t, Reason: "the pods planned onto NodeClaim " + nc.Name + " are bound"})
}

// waitForSiblings reports whether a NodeClaim whose Node is there should wait for the other
// NodeClaims of its decision (same apisv1.AnnotationSnapshotRevision) to have theirs, so their
// nodes become schedulable together; never longer than the registration window from its launch.
func (d *decider) waitForSiblings(nc *apisv1.NodeClaim) bool {
	rev := nc.Annotations[apisv1.AnnotationSnapshotRevision]
	if rev == "" || d.now.Sub(nc.CreationTimestamp.Time) >= d.o.RegistrationWindow {
		return false
	}
	for i := range d.snap.NodeClaims {
		s := &d.snap.NodeClaims[i]
		if s.Name == nc.Name || s.DeletionTimestamp != nil || s.Annotations[apisv1.AnnotationSnapshotRevision] != rev || isTrue(s, apisv1.ConditionRegistered) {
			continue
		}
		if s.Status.ProviderID == "" || d.byProvider[s.Status.ProviderID] == nil {
			return true
		}
	}
	return false
}

// liveness deletes a NodeClaim launched RegistrationTTL ago whose Node never registered, and
// marks its offering unavailable, as Karpenter does for a launch that fails.
func (d *decider) liveness(nc *apisv1.NodeClaim) {
	if isTrue(nc, apisv1.ConditionRegistered) || !isTrue(nc, apisv1.ConditionLaunched) {
		return
	}
	since := nc.CreationTimestamp.Time
	if c := condition(nc, apisv1.ConditionLaunched); c != nil && c.LastTransitionTime.After(since) {
		since = c.LastTransitionTime.Time
	}
	if d.now.Sub(since) < d.o.RegistrationTTL {
		return
	}
	why := fmt.Sprintf("no node registered within %s of the launch", d.o.RegistrationTTL)
	d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "liveness", nc.Name, string(nc.UID)), Kind: events.CommandDeleteNodeClaim,
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}}, Reason: why})
	key := events.OfferingKey{InstanceType: nc.Labels[corev1.LabelInstanceTypeStable], Zone: nc.Labels[corev1.LabelTopologyZone],
		CapacityType: nc.Labels[apisv1.LabelCapacityType]}
	if key.InstanceType != "" && key.Zone != "" && key.CapacityType != "" {
		d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "liveness-unavailable", nc.Name, string(nc.UID)), Kind: events.CommandMarkUnavailable,
			Unavailable: []events.UnavailableOfferingMark{events.MarkUnavailable(key, ReasonRegistrationTTL, d.now)}, Reason: why})
	}
	d.recordRegistration(nc, false)
	d.transition(nc.Name, "", ReasonRegistrationTTL, why)
}

// register syncs the NodeClaim onto its Node (labels, annotations, taints; startup taints only
// at the first registration, as Karpenter does, so a startup taint a daemon removed does not
// come back), clears karpenter.sh/unregistered, adds the termination finalizer, and records
// status.nodeName and Registered=True.
func (d *decider) register(nc *apisv1.NodeClaim, node *corev1.Node) {
	done := isTrue(nc, apisv1.ConditionRegistered)
	if !done {
		d.recordRegistration(nc, true)
	}
	if done && node.Labels[apisv1.LabelNodeRegistered] == "true" && !hasTaintKey(node.Spec.Taints, apisv1.TaintKeyUnregistered) &&
		hasFinalizer(node.Finalizers) && nc.Status.NodeName == node.Name {
		return
	}
	labels := map[string]string{apisv1.LabelNodeRegistered: "true"}
	for k, v := range nc.Labels {
		// The agent's ownership mark is the NodeClaim's alone: a Node is Dovetail's through its
		// NodeClaim's providerID, and the agent refuses any command that writes the mark.
		if k != apisv1.LabelManagedBy {
			labels[k] = v
		}
	}
	taints := append([]corev1.Taint(nil), nc.Spec.Taints...)
	if !done {
		taints = append(taints, nc.Spec.StartupTaints...)
		// Until its planned pods are bound the node takes only them: kube-scheduler treats a
		// nomination as a preference, and a pod whose planned node is not schedulable yet would
		// land on a sibling that is, pushing that node's own pods elsewhere.
		if d.pendingPlanned(nc) > 0 {
			taints = append(taints, apisv1.PlannedTaint(nc.Name))
		}
	}
	d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "register", nc.Name, string(node.UID)), Kind: events.CommandRegisterNode,
		NodeName: node.Name, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}},
		Labels: labels, Annotations: copyMap(nc.Annotations), Taints: taints, Finalizer: events.FinalizerTermination,
		Reason: "node " + node.Name + " registered for NodeClaim " + nc.Name})
	conds := []metav1.Condition{d.cond(nc, apisv1.ConditionRegistered, metav1.ConditionTrue, ReasonRegistered, "")}
	if condition(nc, apisv1.ConditionInitialized) == nil {
		conds = append(conds, d.cond(nc, apisv1.ConditionInitialized, metav1.ConditionUnknown, ReasonNotInitialized, "node not initialized yet"))
	}
	if condition(nc, apisv1.ConditionReady) == nil {
		conds = append(conds, d.cond(nc, apisv1.ConditionReady, metav1.ConditionUnknown, ReasonNotInitialized, "Initialized=Unknown"))
	}
	d.setStatus(nc, "registered", node.Name, conds)
	if !done {
		d.transition(nc.Name, node.Name, ReasonRegistered, "node "+node.Name)
	}
}

// initialize records Initialized=True and Ready=True (and labels the node
// karpenter.sh/initialized) once the node is Ready, its startup and ephemeral taints are gone
// and every resource the NodeClaim was sized for (GPUs and accelerators included) is allocatable.
func (d *decider) initialize(nc *apisv1.NodeClaim, node *corev1.Node) {
	if isTrue(nc, apisv1.ConditionInitialized) && node.Labels[apisv1.LabelNodeInitialized] == "true" {
		return
	}
	if why := notInitialized(nc, node); why != "" {
		if c := condition(nc, apisv1.ConditionInitialized); c == nil || c.Message != why {
			if isTrue(nc, apisv1.ConditionRegistered) {
				d.setStatus(nc, "not-initialized-"+why, "", []metav1.Condition{
					d.cond(nc, apisv1.ConditionInitialized, metav1.ConditionUnknown, ReasonNotInitialized, why)})
			}
		}
		return
	}
	d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "initialized", nc.Name, string(node.UID)), Kind: events.CommandLabelNode,
		NodeName: node.Name, Labels: map[string]string{apisv1.LabelNodeInitialized: "true"}, Reason: "node initialized"})
	d.setStatus(nc, "initialized", node.Name, []metav1.Condition{
		d.cond(nc, apisv1.ConditionInitialized, metav1.ConditionTrue, ReasonInitialized, ""),
		d.cond(nc, apisv1.ConditionReady, metav1.ConditionTrue, ReasonReady, ""),
	})
	if !isTrue(nc, apisv1.ConditionInitialized) {
		d.transition(nc.Name, node.Name, ReasonInitialized, "Ready: the node is Ready, its startup taints are gone, its requested resources are registered")
	}
}

// notInitialized says why the node is not initialized yet, or "" when it is.
func notInitialized(nc *apisv1.NodeClaim, node *corev1.Node) string {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "node is not Ready"
	}
	for _, t := range append(append([]corev1.Taint(nil), nc.Spec.StartupTaints...), ephemeralTaints...) {
		for _, nt := range node.Spec.Taints {
			if nt.Key == t.Key && nt.Effect == t.Effect {
				return "taint " + nt.Key + ":" + string(nt.Effect) + " is still on the node"
			}
		}
	}
	// The kubelet reports an extended resource as 0 until its device plugin registers it, so
	// every resource the NodeClaim was sized for must be allocatable (Karpenter's
	// RequestedResourcesRegistered).
	names := make([]string, 0, len(nc.Spec.Resources.Requests))
	for name, q := range nc.Spec.Resources.Requests {
		if !q.IsZero() {
			names = append(names, string(name))
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if q, ok := node.Status.Allocatable[corev1.ResourceName(name)]; !ok || q.IsZero() {
			return "resource " + name + " is not registered"
		}
	}
	return ""
}

// nominate gives the planned pods that are still pending the registered node's planned-taint
// toleration, so they, and at first only they, fit the node (design note "Planned pods
// tolerate, they are not nominated").
func (d *decider) nominate(nc *apisv1.NodeClaim, node *corev1.Node) {
	planned := nc.Annotations[apisv1.AnnotationPlannedPods]
	if planned == "" {
		return
	}
	var refs []events.PodRef
	for _, key := range strings.Split(planned, ",") {
		p := d.pending[key]
		if p == nil || apisv1.HasPlannedToleration(p, nc.Name) {
			continue
		}
		refs = append(refs, events.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)})
	}
	if len(refs) == 0 {
		return
	}
	keys := []string{d.snap.Cluster, "nominate", nc.Name, string(node.UID)}
	for _, r := range refs {
		keys = append(keys, r.Namespace+"/"+r.Name)
	}
	tol := apisv1.PlannedToleration(nc.Name)
	d.cmd(events.Command{ID: events.CommandID(keys...), Kind: events.CommandNominatePods, NodeName: node.Name, Pods: refs, Toleration: &tol,
		Reason: "planned onto NodeClaim " + nc.Name})
}

// terminate carries a NodeClaim or Node that is being deleted one step towards gone, in the
// order of Karpenter v1.14's termination controller (pkg/controllers/node/termination): delete
// the other object too, taint the node karpenter.sh/disrupted:NoSchedule, drain it group by
// group (drain.Next), wait for its VolumeAttachments to be gone, and terminate the instance.
// The NodeClaim's Drained, VolumesDetached and InstanceTerminating conditions record each step.
// Once the NodeClaim's terminationGracePeriod has elapsed the instance is terminated whatever
// is left, as Karpenter's instance termination does.
func (d *decider) terminate(nc *apisv1.NodeClaim, node *corev1.Node) {
	name, nodeName := "", ""
	if nc != nil {
		name = nc.Name
		if nc.DeletionTimestamp == nil {
			d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "terminate-claim", nc.Name, string(nc.UID)), Kind: events.CommandDeleteNodeClaim,
				NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}}, Reason: "its node " + node.Name + " is being deleted"})
		}
	}
	deadline, hasDeadline := d.deadline(nc, node)
	elapsed := hasDeadline && !d.now.Before(deadline)
	if node != nil {
		nodeName = node.Name
		if waiting := d.drain(nc, node); waiting > 0 && !elapsed {
			d.transition(name, nodeName, "Draining", fmt.Sprintf("%d pods to move", waiting))
			return
		}
		if attached := d.volumesDetached(nc, node); attached > 0 && !elapsed {
			d.transition(name, nodeName, ReasonAwaitingVolumeDetachment, fmt.Sprintf("%d VolumeAttachments left", attached))
			return
		}
	}
	t := Termination{NodeClaim: name, Node: nodeName}
	if nc != nil {
		t.ProviderID = nc.Status.ProviderID
		if !isTrue(nc, apisv1.ConditionInstanceTerminating) {
			d.setStatus(nc, "instance-terminating", "", []metav1.Condition{
				d.cond(nc, apisv1.ConditionInstanceTerminating, metav1.ConditionTrue, apisv1.ConditionInstanceTerminating, "")})
		}
	}
	if t.ProviderID == "" && node != nil {
		t.ProviderID = node.Spec.ProviderID
	}
	if node != nil {
		if node.DeletionTimestamp == nil {
			t.Finish = append(t.Finish, events.Command{ID: events.CommandID(d.snap.Cluster, "terminate-node", node.Name, string(node.UID)),
				Kind: events.CommandDeleteNode, NodeName: node.Name, Reason: "instance terminated"})
		}
		if hasFinalizer(node.Finalizers) {
			t.Finish = append(t.Finish, events.Command{ID: events.CommandID(d.snap.Cluster, "finalize-node", node.Name, string(node.UID)),
				Kind: events.CommandRemoveFinalizer, NodeName: node.Name, Finalizer: events.FinalizerTermination, Reason: "instance terminated"})
		}
	}
	if nc != nil && hasFinalizer(nc.Finalizers) {
		t.Finish = append(t.Finish, events.Command{ID: events.CommandID(d.snap.Cluster, "finalize-claim", nc.Name, string(nc.UID)),
			Kind: events.CommandRemoveFinalizer, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}},
			Finalizer: events.FinalizerTermination, Reason: "instance terminated"})
	}
	for i := range t.Finish {
		t.Finish[i].Cluster, t.Finish[i].SnapshotRevision = d.snap.Cluster, d.snap.Revision
	}
	d.out.Terminate = append(d.out.Terminate, t)
	d.transition(name, nodeName, "Terminating", "terminating instance "+t.ProviderID)
}

// drain taints and drains the node and, once the grace deadline leaves a pod no more than its
// own terminationGracePeriodSeconds, deletes it with the time that is left (Karpenter's
// DeleteExpiringPods). It returns how many pods the drain still waits for (drain.Waiting) and
// records the NodeClaim's Drained condition: False, reason Draining, while any is left; True
// once none is.
func (d *decider) drain(nc *apisv1.NodeClaim, node *corev1.Node) int {
	if !hasTaintKey(node.Spec.Taints, apisv1.TaintKeyDisrupted) {
		at := metav1.NewTime(d.now)
		d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "terminate-taint", node.Name, string(node.UID), fmt.Sprint(d.snap.Revision)), Kind: events.CommandTaintNode,
			NodeName: node.Name, Taint: &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at},
			Reason: "node is being terminated"})
	}
	step := drain.Next(d.pods[node.Name], d.now)
	if step.Drained() {
		if nc != nil && !isTrue(nc, apisv1.ConditionDrained) {
			d.setStatus(nc, "drained", "", []metav1.Condition{d.cond(nc, apisv1.ConditionDrained, metav1.ConditionTrue, apisv1.ConditionDrained, "")})
		}
		return 0
	}
	if len(step.Evict) > 0 {
		d.cmd(events.Command{ID: events.CommandID(d.snap.Cluster, "terminate-drain", node.Name, string(node.UID), fmt.Sprint(d.snap.Revision)),
			Kind: events.CommandDrainNode, NodeName: node.Name, Reason: fmt.Sprintf("node is being terminated: evicting its %s pods", step.Group)})
	}
	if nc != nil {
		if c := condition(nc, apisv1.ConditionDrained); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonDraining {
			d.setStatus(nc, "draining", "", []metav1.Condition{d.cond(nc, apisv1.ConditionDrained, metav1.ConditionFalse, ReasonDraining, ReasonDraining)})
		}
	}
	if deadline, ok := d.deadline(nc, node); ok {
		var force []events.PodRef
		for _, p := range step.Waiting {
			own := int64(corev1.DefaultTerminationGracePeriodSeconds)
			if p.Spec.TerminationGracePeriodSeconds != nil {
				own = *p.Spec.TerminationGracePeriodSeconds
			}
			left := int64(deadline.Sub(d.now) / time.Second)
			if left > own {
				continue // its own grace still fits before the deadline
			}
			grace := max(left, 0)
			if p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds <= grace {
				continue // already deleted with a grace that fits
			}
			force = append(force, events.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), GracePeriodSeconds: &grace})
		}
		if len(force) > 0 {
			keys := []string{d.snap.Cluster, "terminate-delete-pods", node.Name, fmt.Sprint(d.snap.Revision)}
			for _, r := range force {
				keys = append(keys, r.Namespace+"/"+r.Name)
			}
			d.cmd(events.Command{ID: events.CommandID(keys...), Kind: events.CommandDeletePods, NodeName: node.Name, Pods: force,
				Reason: fmt.Sprintf("terminationGracePeriod of NodeClaim %s ends at %s", nc.Name, deadline.UTC().Format(time.RFC3339))})
		}
	}
	return len(step.Waiting)
}

// volumesDetached returns how many of the node's VolumeAttachments still block its termination
// (drain.BlockingAttachments) and records the NodeClaim's VolumesDetached condition: False,
// reason AwaitingVolumeDetachment, while any is left; True once none is. As in Karpenter, once
// the grace period has elapsed the condition is left as it was and the instance goes anyway.
func (d *decider) volumesDetached(nc *apisv1.NodeClaim, node *corev1.Node) int {
	pvcs := make(map[string]string, len(d.snap.PVCs))
	for i := range d.snap.PVCs {
		c := &d.snap.PVCs[i]
		pvcs[c.Namespace+"/"+c.Name] = c.Spec.VolumeName
	}
	blocking := drain.BlockingAttachments(node.Name, d.snap.VolumeAttachments, d.pods[node.Name], pvcs, d.now)
	if nc == nil {
		return len(blocking)
	}
	if deadline, ok := d.deadline(nc, node); ok && !d.now.Before(deadline) {
		return len(blocking)
	}
	switch c := condition(nc, apisv1.ConditionVolumesDetached); {
	case len(blocking) == 0 && !isTrue(nc, apisv1.ConditionVolumesDetached):
		d.setStatus(nc, "volumes-detached", "", []metav1.Condition{
			d.cond(nc, apisv1.ConditionVolumesDetached, metav1.ConditionTrue, apisv1.ConditionVolumesDetached, "")})
	case len(blocking) > 0 && (c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonAwaitingVolumeDetachment):
		d.setStatus(nc, "awaiting-volume-detachment", "", []metav1.Condition{
			d.cond(nc, apisv1.ConditionVolumesDetached, metav1.ConditionFalse, ReasonAwaitingVolumeDetachment, ReasonAwaitingVolumeDetachment)})
	}
	return len(blocking)
}

// graceDeadline is when the NodeClaim's terminationGracePeriod ends: its deletion time plus the
// period. No deadline without a period (pods blocking eviction then block for good, as in
// Karpenter) or before the NodeClaim is being deleted.
func graceDeadline(nc *apisv1.NodeClaim) (time.Time, bool) {
	if nc == nil || nc.DeletionTimestamp == nil || nc.Spec.TerminationGracePeriod == nil {
		return time.Time{}, false
	}
	return nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration), true
}

// setStatus publishes a SetNodeClaimStatus command; step names it in the command ID.
func (d *decider) setStatus(nc *apisv1.NodeClaim, step, nodeName string, conds []metav1.Condition) {
	st := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}}
	st.Status.NodeName = nodeName
	st.Status.Conditions = conds
	c := events.Command{ID: events.CommandID(d.snap.Cluster, "status", nc.Name, string(nc.UID), step), Kind: events.CommandSetNodeClaimStatus,
		NodeClaim: st, Reason: step}
	if p := d.consistent; p != nil { // ConsistentStateFound rides on the first status write
		st.Status.Conditions = append(append([]metav1.Condition(nil), conds...), p.cond)
		c.Events, d.consistent = p.events, nil
	}
	d.cmd(c)
}

// cond builds a condition, keeping the transition time of an unchanged status.
func (d *decider) cond(nc *apisv1.NodeClaim, typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: nc.Generation,
		LastTransitionTime: metav1.NewTime(d.now)}
	if old := condition(nc, typ); old != nil && old.Status == status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

func condition(nc *apisv1.NodeClaim, typ string) *metav1.Condition {
	for i := range nc.Status.Conditions {
		if nc.Status.Conditions[i].Type == typ {
			return &nc.Status.Conditions[i]
		}
	}
	return nil
}

func isTrue(nc *apisv1.NodeClaim, typ string) bool {
	c := condition(nc, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

func hasFinalizer(fs []string) bool {
	for _, f := range fs {
		if f == events.FinalizerTermination {
			return true
		}
	}
	return false
}

func hasTaintKey(ts []corev1.Taint, key string) bool {
	for _, t := range ts {
		if t.Key == key {
			return true
		}
	}
	return false
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// CatalogPrice prices a NodeClaim by its labels from cat (Options.PricePerHour): the dearest
// offering matching its instance type, zone and capacity type.
func CatalogPrice(cat *catalog.Catalog) func(labels map[string]string) float64 {
	return func(l map[string]string) float64 {
		return cat.DearestPrice(l[corev1.LabelInstanceTypeStable], l[corev1.LabelTopologyZone], l[apisv1.LabelCapacityType])
	}
}
