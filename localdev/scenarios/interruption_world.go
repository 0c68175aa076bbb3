// Package scenarios runs the disruption scenarios of local dev mode — a spot interruption and an
// AMI roll-out — on one machine, deterministically: the fake cloud over the real catalog on a fake
// clock, the real provision, interruption and drift handlers, and a small in-memory cluster (World)
// that stands in for the agent (it applies the functions' commands) and for kube-scheduler and
// the workload controllers (evicted pods come back pending and are bound to nodes with room).
// Each scenario prints what was decided and why, and returns figures a test can check.
package scenarios

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/functions/provision"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// Cluster is the scenarios' cluster name.
const Cluster = "dev"

// World is an in-memory cluster: nodes, pods, NodeClaims, NodePools, NodeClasses and offering
// marks, with a revision that grows on every change. It implements queue.Publisher (commands
// published to it are applied at once, as the agent would) and the fake cloud's registrar.
type World struct {
	Catalog *catalog.Catalog
	// NodeSettings is the AWS NodeClass → node settings rule the functions plan with.
	NodeSettings provisioning.NodeSettingsFunc
	Cloud        *fake.Cloud
	// Provider is what the functions launch and delete through: Cloud itself, or the Azure
	// provider against Cloud's Azure face (NewAzureWorld).
	Provider cloud.Provider
	Clock    *clocktesting.FakeClock
	Out      io.Writer

	mu      sync.Mutex
	rev     int64
	nodes   map[string]*corev1.Node
	pods    map[string]*corev1.Pod // by namespace/name
	claims  map[string]*apisv1.NodeClaim
	pools   []apisv1.NodePool
	classes []apisv1.NodeClass
	marks   []events.UnavailableOfferingMark
	printed map[string]string // the last state printChanged printed per subject

	// Registered is when each node registered.
	Registered map[string]time.Time
	// Lost counts pods still on a node when its instance went away (not drained first).
	Lost []string
	// Evictions counts pods evicted by drains, Forced those deleted at the end of a
	// terminationGracePeriod; Commands every command applied, in order.
	Evictions, Forced int
	Commands          []events.Command
}

// NewWorld returns an empty world at start with a fake cloud booting instances after bootDelay.
func NewWorld(start time.Time, bootDelay time.Duration, out io.Writer) *World {
	cat := catalog.MustAWS()
	w := &World{Catalog: cat, NodeSettings: cloud.NodeSettingsFor, Clock: clocktesting.NewFakeClock(start), Out: out,
		nodes: map[string]*corev1.Node{}, pods: map[string]*corev1.Pod{}, claims: map[string]*apisv1.NodeClaim{}, Registered: map[string]time.Time{}}
	w.Cloud = fake.New(fake.Options{Catalog: cat, Cluster: Cluster, Clock: w.Clock, BootDelay: bootDelay, Registrar: w})
	w.Provider = w.Cloud
	return w
}

func (w *World) printf(format string, args ...any) {
	if w.Out != nil {
		fmt.Fprintf(w.Out, "[%s] %s\n", w.Clock.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// printChanged prints a line about subject (a node, a notice) only when its state differs from
// the last one printed for it: a function re-deciding every few seconds while it waits (a
// replacement booting, a budget spent) says so once, not on every pass.
func (w *World) printChanged(subject, state, format string, args ...any) {
	if w.printed == nil {
		w.printed = map[string]string{}
	}
	if last, ok := w.printed[subject]; ok && last == state {
		return
	}
	w.printed[subject] = state
	w.printf(format, args...)
}

// AddPools adds NodePools and NodeClasses.
func (w *World) AddPools(pools []apisv1.NodePool, classes []apisv1.NodeClass) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pools = append(w.pools, pools...)
	w.classes = append(w.classes, classes...)
	w.rev++
}

// SetNodeClassAMIs replaces a NodeClass's resolved AMIs (a new AMI published behind its alias).
func (w *World) SetNodeClassAMIs(class string, amis []apisv1.AMI) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.classes {
		if w.classes[i].Name() == class && w.classes[i].EC2 != nil {
			w.classes[i].EC2.Status.AMIs = amis
		}
	}
	w.rev++
}

// AddPods adds pending pods.
func (w *World) AddPods(pods ...corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range pods {
		p := pods[i]
		w.pods[p.Namespace+"/"+p.Name] = &p
	}
	w.rev++
}

// Snapshot returns the world as the agent would publish it, at the clock's time.
func (w *World) Snapshot() *events.Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: Cluster, Revision: w.rev, Time: metav1.NewTime(w.Clock.Now()),
		NodePools: append([]apisv1.NodePool(nil), w.pools...), NodeClasses: append([]apisv1.NodeClass(nil), w.classes...)}
	for _, k := range sortedKeys(w.nodes) {
		s.Nodes = append(s.Nodes, *w.nodes[k].DeepCopy())
	}
	for _, k := range sortedKeys(w.pods) {
		p := w.pods[k].DeepCopy()
		if p.Spec.NodeName == "" {
			s.PendingPods = append(s.PendingPods, *p)
		} else {
			s.Pods = append(s.Pods, *p)
		}
	}
	for _, k := range sortedKeys(w.claims) {
		s.NodeClaims = append(s.NodeClaims, *w.claims[k].DeepCopy())
	}
	for _, m := range w.marks {
		if s.Time.Before(&m.Expires) {
			s.UnavailableOfferings = append(s.UnavailableOfferings, m)
		}
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Publish applies a published command event (queue.Publisher).
func (w *World) Publish(ctx context.Context, subject, id string, data []byte) error {
	env, err := events.Decode(data)
	if err != nil {
		return err
	}
	c, err := events.Codec{}.Command(ctx, env)
	if err != nil {
		return err
	}
	w.apply(c)
	return nil
}

func (w *World) apply(c *events.Command) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Commands = append(w.Commands, *c)
	w.rev++
	switch c.Kind {
	case events.CommandCreateNodeClaim:
		nc := c.NodeClaim.DeepCopy()
		for _, n := range w.nodes {
			if n.Spec.ProviderID == nc.Status.ProviderID {
				nc.Status.NodeName = n.Name
			}
		}
		w.claims[nc.Name] = nc
	case events.CommandDeleteNodeClaim:
		if nc := w.claims[c.NodeClaim.Name]; nc != nil {
			if len(nc.Finalizers) == 0 {
				delete(w.claims, nc.Name)
			} else if nc.DeletionTimestamp == nil {
				now := metav1.NewTime(w.Clock.Now())
				nc.DeletionTimestamp = &now
			}
		}
	case events.CommandRegisterNode:
		if n := w.nodes[c.NodeName]; n != nil {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			for k, v := range c.Labels {
				n.Labels[k] = v
			}
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			for k, v := range c.Annotations {
				n.Annotations[k] = v
			}
			var taints []corev1.Taint
			for _, t := range n.Spec.Taints {
				if t.Key != apisv1.TaintKeyUnregistered {
					taints = append(taints, t)
				}
			}
			for _, t := range c.Taints {
				if !hasTaint(taints, t) {
					taints = append(taints, t)
				}
			}
			n.Spec.Taints = taints
			if !contains(n.Finalizers, c.Finalizer) {
				n.Finalizers = append(n.Finalizers, c.Finalizer)
			}
		}
	case events.CommandSetNodeClaimStatus:
		if nc := w.claims[c.NodeClaim.Name]; nc != nil {
			if c.NodeClaim.Status.NodeName != "" {
				nc.Status.NodeName = c.NodeClaim.Status.NodeName
			}
			for _, cond := range c.NodeClaim.Status.Conditions {
				replaced := false
				for i := range nc.Status.Conditions {
					if nc.Status.Conditions[i].Type == cond.Type {
						nc.Status.Conditions[i], replaced = cond, true
					}
				}
				if !replaced {
					nc.Status.Conditions = append(nc.Status.Conditions, cond)
				}
			}
		}
	case events.CommandLabelNode:
		if n := w.nodes[c.NodeName]; n != nil {
			for k, v := range c.Labels {
				n.Labels[k] = v
			}
		}
	case events.CommandRemoveFinalizer:
		// As the agent (shared/kube ownership.go): the termination finalizer leaves only an
		// object being deleted, on the cloud's word that its instance is gone or going.
		released := func(deleting *metav1.Time) bool {
			return c.Finalizer != events.FinalizerTermination || deleting != nil && c.Instance != nil
		}
		if c.NodeName != "" {
			if n := w.nodes[c.NodeName]; n != nil && released(n.DeletionTimestamp) {
				n.Finalizers = without(n.Finalizers, c.Finalizer)
				if n.DeletionTimestamp != nil && len(n.Finalizers) == 0 {
					w.dropNode(n.Name)
				}
			}
		} else if c.NodeClaim != nil {
			if nc := w.claims[c.NodeClaim.Name]; nc != nil && released(nc.DeletionTimestamp) {
				nc.Finalizers = without(nc.Finalizers, c.Finalizer)
				if nc.DeletionTimestamp != nil && len(nc.Finalizers) == 0 {
					delete(w.claims, nc.Name)
				}
			}
		} else if m := w.class(c.NodeClass); m != nil {
			m.Finalizers = without(m.Finalizers, c.Finalizer)
			if m.DeletionTimestamp != nil && len(m.Finalizers) == 0 {
				w.dropClass(m.Name)
			}
		}
	case events.CommandAddFinalizer:
		if m := w.class(c.NodeClass); m != nil && m.DeletionTimestamp == nil && !contains(m.Finalizers, c.Finalizer) {
			m.Finalizers = append(m.Finalizers, c.Finalizer)
		}
	case events.CommandSetNodeClassStatus:
		for i := range w.classes {
			switch {
			case c.NodeClass == nil || w.classes[i].Name() != c.NodeClass.Name():
			case c.NodeClass.EC2 != nil && w.classes[i].EC2 != nil:
				w.classes[i].EC2.Status = c.NodeClass.EC2.DeepCopy().Status
			case c.NodeClass.AKS != nil && w.classes[i].AKS != nil:
				w.classes[i].AKS.Status = c.NodeClass.AKS.DeepCopy().Status
			}
		}
	case events.CommandSetNodePoolStatus:
		for i := range w.pools {
			if c.NodePool != nil && w.pools[i].Name == c.NodePool.Name {
				w.pools[i].Status = c.NodePool.DeepCopy().Status
			}
		}
	case events.CommandNominatePods:
		for _, r := range c.Pods {
			if p := w.pods[r.Namespace+"/"+r.Name]; p != nil && p.Spec.NodeName == "" {
				p.Status.NominatedNodeName = c.NodeName
				if c.Toleration != nil {
					p.Spec.Tolerations = append(p.Spec.Tolerations, *c.Toleration)
				}
			}
		}
	case events.CommandUntaintNode:
		if n := w.nodes[c.NodeName]; n != nil && c.Taint != nil {
			keep := n.Spec.Taints[:0]
			for _, t := range n.Spec.Taints {
				if t.Key != c.Taint.Key || (c.Taint.Effect != "" && t.Effect != c.Taint.Effect) {
					keep = append(keep, t)
				}
			}
			n.Spec.Taints = keep
		}
	case events.CommandDeletePods:
		// Deleted past the NodeClaim's terminationGracePeriod; their controllers recreate them.
		for _, r := range c.Pods {
			if p := w.pods[r.Namespace+"/"+r.Name]; p != nil && p.Spec.NodeName == c.NodeName {
				p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
				w.Forced++
			}
		}
	case events.CommandTaintNode:
		if n := w.nodes[c.NodeName]; n != nil {
			n.Spec.Taints, _ = disruption.ApplyTaint(n.Spec.Taints, *c.Taint)
		}
	case events.CommandDrainNode:
		// The Eviction API deletes the pods; their controllers recreate them pending. Pods
		// marked do-not-disrupt wait for the NodeClaim's terminationGracePeriod, as the agent's
		// drain leaves them.
		for _, k := range sortedKeys(w.pods) {
			p := w.pods[k]
			if p.Spec.NodeName == c.NodeName && disruption.Evacuable(p) && p.Annotations[apisv1.AnnotationDoNotDisrupt] != "true" {
				p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
				w.Evictions++
			}
		}
	case events.CommandDeleteNode:
		if n := w.nodes[c.NodeName]; n != nil && len(n.Finalizers) > 0 {
			if n.DeletionTimestamp == nil {
				now := metav1.NewTime(w.Clock.Now())
				n.DeletionTimestamp = &now
			}
		} else {
			w.dropNode(c.NodeName)
		}
	case events.CommandMarkUnavailable:
		w.marks = append(w.marks, c.Unavailable...)
	}
}

// DeleteNodeClass deletes a NodeClass as the API server does: marked for deletion while it has
// finalizers, gone when it has none.
func (w *World) DeleteNodeClass(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rev++
	for i := range w.classes {
		if m := w.classes[i].Meta(); m.Name == name {
			if len(m.Finalizers) == 0 {
				w.dropClass(name)
				return
			}
			now := metav1.NewTime(w.Clock.Now())
			m.DeletionTimestamp = &now
			return
		}
	}
}

// dropClass removes a NodeClass. Locked.
func (w *World) dropClass(name string) {
	out := w.classes[:0]
	for _, c := range w.classes {
		if c.Name() != name {
			out = append(out, c)
		}
	}
	w.classes = out
}

// class returns the metadata of the World's NodeClass a command names, or nil. Locked.
func (w *World) class(ref *apisv1.NodeClass) *metav1.ObjectMeta {
	if ref == nil {
		return nil
	}
	for i := range w.classes {
		if w.classes[i].Kind() == ref.Kind() && w.classes[i].Name() == ref.Name() {
			return w.classes[i].Meta()
		}
	}
	return nil
}

// dropNode removes a node; pods still on it are lost (they go pending, recreated). Locked.
func (w *World) dropNode(name string) {
	if _, ok := w.nodes[name]; !ok {
		return
	}
	delete(w.nodes, name)
	for _, k := range sortedKeys(w.pods) {
		if p := w.pods[k]; p.Spec.NodeName == name {
			if disruption.Evacuable(p) {
				w.Lost = append(w.Lost, k)
			}
			p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
		}
	}
}

// RegisterNode records a booted instance's Node (fake.NodeRegistrar).
func (w *World) RegisterNode(_ context.Context, n *corev1.Node) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nodes[n.Name] = n.DeepCopy()
	w.Registered[n.Name] = w.Clock.Now()
	for _, nc := range w.claims {
		if nc.Status.ProviderID == n.Spec.ProviderID {
			nc.Status.NodeName = n.Name
		}
	}
	w.rev++
	// A Node registers with its kubelet's labels only; its offering is its NodeClaim's.
	offering := n.Labels[corev1.LabelInstanceTypeStable] + "/" + n.Labels[corev1.LabelTopologyZone]
	for _, nc := range w.claims {
		if nc.Status.ProviderID == n.Spec.ProviderID {
			offering = offeringOfLabels(nc.Labels)
		}
	}
	w.printf("node %s registered (%s)", n.Name, offering)
	return nil
}

// DeregisterNode removes the Node of a terminated instance (fake.NodeDeregistrar).
func (w *World) DeregisterNode(_ context.Context, name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.nodes[name]; ok {
		w.printf("instance of node %s terminated", name)
	}
	w.dropNode(name)
	w.rev++
	return nil
}

// Schedule binds pending pods to nodes with room, as kube-scheduler would (the solver's
// placements on existing, untainted nodes). It returns how many it bound.
func (w *World) Schedule() int {
	snap := w.Snapshot()
	if len(snap.PendingPods) == 0 {
		return 0
	}
	in := provisioning.InputFromSnapshot(snap, w.Catalog, w.NodeSettings)
	in.NodeClaims = nil // only registered nodes can run pods
	// kube-scheduler keeps off a node still tainted karpenter.sh/unregistered (NoExecute), which
	// the solver, planning ahead, looks through.
	in.Nodes = in.Nodes[:0:0]
	for i := range snap.Nodes {
		if !hasTaintKey(snap.Nodes[i].Spec.Taints, apisv1.TaintKeyUnregistered) {
			in.Nodes = append(in.Nodes, &snap.Nodes[i])
		}
	}
	plan, err := provisioning.Solve(in)
	if err != nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range plan.ExistingNodes {
		if e.InFlight {
			continue
		}
		for _, p := range e.Pods {
			if q := w.pods[p.Namespace+"/"+p.Name]; q != nil && q.Spec.NodeName == "" {
				q.Spec.NodeName, q.Status.Phase = e.Name, corev1.PodRunning
				n++
			}
		}
	}
	if n > 0 {
		w.rev++
	}
	return n
}

// Provision runs the provision function's decision on the current snapshot.
func (w *World) Provision(ctx context.Context) (provision.Decision, error) {
	h := &provision.Handler{Cluster: Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Provider, Publisher: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: w.Clock.Now}
	return h.Decide(ctx, w.Snapshot())
}

// Step advances the clock by d, lets the cloud act (boots, reclaims), runs the lifecycle
// function (registration, initialization, termination) and schedules.
func (w *World) Step(ctx context.Context, d time.Duration) error {
	w.Clock.Step(d)
	if err := w.Cloud.Tick(ctx); err != nil {
		return err
	}
	if err := w.Lifecycle(ctx); err != nil {
		return err
	}
	w.Schedule()
	return nil
}

// Lifecycle runs the lifecycle function's decision on the current snapshot.
func (w *World) Lifecycle(ctx context.Context) error {
	h := &lifecycle.Handler{Cluster: Cluster, Provider: w.Provider, Publisher: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: w.Clock.Now}
	_, err := h.Decide(ctx, w.Snapshot())
	return err
}

func hasTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

func hasTaintKey(ts []corev1.Taint, key string) bool {
	for _, x := range ts {
		if x.Key == key {
			return true
		}
	}
	return false
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func without(xs []string, s string) []string {
	var out []string
	for _, x := range xs {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// PodsBound counts bound and total pods.
func (w *World) PodsBound() (bound, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.pods {
		total++
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return bound, total
}

// Node returns a copy of a node, or nil.
func (w *World) Node(name string) *corev1.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.nodes[name]; n != nil {
		return n.DeepCopy()
	}
	return nil
}
