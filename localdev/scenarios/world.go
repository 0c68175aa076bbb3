// Package scenarios runs the disruption scenarios of local dev mode — consolidation after a
// scale-down, a spot interruption (EC2, or an Azure preemption) and an AMI roll-out — on one
// machine, deterministically: the real functions decide, the real agent applies their commands
// to the in-memory cluster `dovetail dev` uses, and the fake cloud boots and reclaims instances
// over the real catalog, all on one fake clock (World). Each scenario prints what was decided
// and why, and returns figures a test can check.
package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/agent"
	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Cluster is the scenarios' cluster name.
const Cluster = "dev"

// agentNamespace is the agent's namespace (its ConfigMap of unavailable offerings), as in
// `dovetail dev` with the in-memory cluster.
const agentNamespace = "kube-system"

// settleTimeout bounds one wait for the agent's informers (real time). It only ends a run whose
// counting went wrong, so it is generous for a loaded 2-core machine.
const settleTimeout = 30 * time.Second

// World is a scenario's cluster: the in-memory Kubernetes API of `dovetail dev`
// (localdev.NewInMemoryClusterAt: client-go's fakes with the API server's finalizer and
// timestamp rules, the Eviction API with PodDisruptionBudgets, the workload controllers'
// re-creation of evicted pods, and its stand-ins for kube-scheduler and the DaemonSet
// controller), watched and changed by the real agent (agent.New: its informers, its snapshot
// builder and its kube.Applier, with every validation, ownership, staleness and budget rule),
// and the fake cloud, whose booted instances register their Nodes here. Everything runs on one
// fake clock.
//
// World is the queue.Publisher the functions publish their commands to: each is handed to the
// agent's command handler at once, as its consumer would, once the agent's caches hold every
// earlier write. The functions decide on World.Snapshot, the snapshot the agent would publish.
type World struct {
	Catalog *catalog.Catalog
	// NodeSettings is the NodeClass → node settings rule the functions plan with.
	NodeSettings provisioning.NodeSettingsFunc
	Cloud        *fake.Cloud
	// Provider is what the functions launch and delete through: Cloud itself, or the Azure
	// provider against Cloud's Azure face (NewAzureWorld).
	Provider cloud.Provider
	Clock    *clocktesting.FakeClock
	Out      io.Writer
	// Cluster is the in-memory cluster; Agent the agent applying commands to it.
	Cluster *localdev.Cluster
	Agent   *agent.Agent
	// Blobs is the claim-check store the agent reads large command payloads from.
	Blobs *events.MemoryBlobStore

	mu        sync.Mutex
	kind      string // the NodeClass kind of the cluster's cloud
	builder   *kube.SnapshotBuilder
	standIns  *localdev.StandIns
	watches   *watchCounter
	stopAgent context.CancelFunc
	agentDone chan error
	// err is the first failure of the World itself (the agent did not start, its caches did not
	// catch up): every later step returns it.
	err     error
	bound   int               // pods the scheduler stand-in bound
	printed map[string]string // the last state printChanged printed per subject

	// Registered is when each node registered.
	Registered map[string]time.Time
	// Lost counts pods still on a node when its instance went away (not drained first).
	Lost []string
	// Evictions counts pods the agent's drains evicted, Forced those it deleted at the end of a
	// terminationGracePeriod; Commands every command published, in order; Refused the
	// agent's refusals (the message of its DovetailCommandRefused Event) and Failed the
	// commands it could not apply (dead-lettered or to be retried), in order.
	Evictions, Forced int
	Commands          []events.Command
	Refused, Failed   []string
}

// NewWorld returns an empty AWS world at start with a fake cloud booting instances after
// bootDelay. A World that could not start records why: its steps return the error.
func NewWorld(start time.Time, bootDelay time.Duration, out io.Writer) *World {
	cat := catalog.MustAWS()
	w := newWorld(start, cat, apisv1.KindEC2NodeClass, out)
	// The fake stands for EC2 here: it repairs by AWS's policies.
	w.Cloud = fake.New(fake.Options{Catalog: cat, Cluster: Cluster, Clock: w.Clock, BootDelay: bootDelay, Registrar: w, RepairPolicies: dvaws.RepairPolicies()})
	w.Provider = w.Cloud
	return w
}

// newWorld starts the agent on an empty in-memory cluster of the cloud whose NodeClass kind is
// kind; the caller adds the fake cloud and the provider.
func newWorld(start time.Time, cat *catalog.Catalog, kind string, out io.Writer) *World {
	w := &World{Catalog: cat, NodeSettings: cloud.NodeSettingsFor, Clock: clocktesting.NewFakeClock(start), Out: out, kind: kind,
		Blobs: &events.MemoryBlobStore{}, Registered: map[string]time.Time{}, printed: map[string]string{}}
	w.err = w.startAgent()
	return w
}

// startAgent runs the agent as `dovetail dev` does (localdev's startAgent), less its queue:
// no command consumer (World.Publish hands it each command) and no snapshot timers (the
// scenario decides when the functions look). Its pending-pod batches go nowhere: the
// scenarios run the provision function themselves.
func (w *World) startAgent() error {
	w.Cluster = localdev.NewInMemoryClusterAt(w.Clock.Now)
	w.watches = &watchCounter{}
	for _, c := range []any{w.Cluster.Kube, w.Cluster.Dynamic} {
		fc, ok := c.(fakeClient)
		if !ok {
			return fmt.Errorf("in-memory cluster: %T is not a client-go fake", c)
		}
		w.watches.install(fc)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := agent.New(agent.Config{Cluster: Cluster, Namespace: agentNamespace, NodeClassKind: w.kind,
		Kube: w.Cluster.Kube, Dynamic: w.Cluster.Dynamic, Publisher: discard{}, Blobs: w.Blobs, Clock: w.Clock,
		SnapshotInterval: -1, ChangeSnapshotInterval: -1, Logger: quiet})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.Agent, w.stopAgent, w.agentDone = a, cancel, make(chan error, 1)
	go func() { w.agentDone <- a.Run(ctx) }()
	// A twin holds at most 100 events and the tracker panics past that: one pass of the
	// scheduler stand-in or one NominatePods command writes a pod per replica (hundreds in the
	// runaway scenario), so the twins are drained continuously too, not only when settling.
	go func() {
		for ctx.Err() == nil {
			w.watches.drain()
			time.Sleep(100 * time.Microsecond)
		}
	}()
	select {
	case <-a.Synced():
	case err := <-w.agentDone:
		return fmt.Errorf("agent: %w", err)
	case <-time.After(settleTimeout):
		return fmt.Errorf("agent: informer caches not synced after %s", settleTimeout)
	}
	if err := w.watches.watching(settleTimeout); err != nil {
		return err
	}
	w.builder = kube.NewSnapshotBuilder(a.Watcher(), Cluster, w.Clock)
	w.builder.Logger = quiet
	w.standIns = w.Cluster.StandIns(func(string, string) { w.bound++ })
	return nil
}

// Close stops the agent.
func (w *World) Close() {
	if w.stopAgent != nil {
		w.stopAgent()
		<-w.agentDone
		w.stopAgent = nil
	}
}

// discard is the agent's publisher in a scenario: its events are not read.
type discard struct{}

func (discard) Publish(context.Context, string, string, []byte) error { return nil }

// settle waits until the agent's caches hold every write made so far, recording a failure.
func (w *World) settle() error {
	if w.err != nil {
		return w.err
	}
	if err := w.watches.settle(context.Background(), w.Agent.Watcher().Revisions(), settleTimeout); err != nil {
		w.err = err
	}
	return w.err
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
	if last, ok := w.printed[subject]; ok && last == state {
		return
	}
	w.printed[subject] = state
	w.printf(format, args...)
}

// apply creates a set of objects in the cluster (as `kubectl apply` of their manifests would)
// and waits for the agent to see them.
func (w *World) apply(set *manifests.Set) error {
	if w.err != nil {
		return w.err
	}
	if _, err := w.Cluster.Apply(context.Background(), set); err != nil {
		return err
	}
	return w.settle()
}

// AddPools creates NodePools and NodeClasses. An error names the object the API refused.
func (w *World) AddPools(pools []apisv1.NodePool, classes []apisv1.NodeClass) error {
	set := &manifests.Set{NodeClasses: classes}
	for i := range pools {
		set.NodePools = append(set.NodePools, &pools[i])
	}
	return w.apply(set)
}

// AddPods creates pods (pending, or bound when spec.nodeName is set).
func (w *World) AddPods(pods ...corev1.Pod) error {
	set := &manifests.Set{}
	for i := range pods {
		set.Pods = append(set.Pods, &pods[i])
	}
	return w.apply(set)
}

// SetNodeClassAMIs replaces an EC2NodeClass's resolved AMIs (a new AMI published behind its
// alias), as a status write of the NodeClass controller would.
func (w *World) SetNodeClassAMIs(class string, amis []apisv1.AMI) error {
	if w.err != nil {
		return w.err
	}
	ctx := context.Background()
	gvr, err := kube.NodeClassGVR(apisv1.KindEC2NodeClass)
	if err != nil {
		return err
	}
	u, err := w.Cluster.Dynamic.Resource(gvr).Get(ctx, class, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("EC2NodeClass %s: %w", class, err)
	}
	nc := &apisv1.EC2NodeClass{}
	if err := kube.FromUnstructured(u, nc); err != nil {
		return fmt.Errorf("EC2NodeClass %s: %w", class, err)
	}
	nc.Status.AMIs = amis
	if u, err = kube.ToUnstructured(nc, apisv1.AWSGroupVersion, apisv1.KindEC2NodeClass); err != nil {
		return err
	}
	if _, err := w.Cluster.Dynamic.Resource(gvr).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("EC2NodeClass %s status: %w", class, err)
	}
	return w.settle()
}

// DeleteNodeClass deletes a NodeClass as `kubectl delete` would: the API server marks it for
// deletion while it has finalizers, and removes it when it has none.
func (w *World) DeleteNodeClass(name string) error {
	if w.err != nil {
		return w.err
	}
	gvr, err := kube.NodeClassGVR(w.kind)
	if err != nil {
		return err
	}
	if err := w.Cluster.Dynamic.Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s: %w", w.kind, name, err)
	}
	return w.settle()
}

// Snapshot returns the snapshot the agent would publish now, built by its own builder from its
// caches once they hold every write. When the World has failed (Err) it returns an empty,
// incomplete snapshot at the clock's time: a decision on it changes nothing.
func (w *World) Snapshot() *events.Snapshot {
	if w.settle() == nil {
		snap, err := w.builder.Build()
		if err == nil {
			return snap
		}
		w.err = fmt.Errorf("agent snapshot: %w", err)
	}
	return &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: Cluster, Time: metav1.NewTime(w.Clock.Now())}
}

// Err returns the World's own first failure, if any.
func (w *World) Err() error { return w.err }

// Publish hands a published command event to the agent's command handler, as its consumer does
// (queue.Publisher). The queue accepted it, so Publish fails only for data that is not a
// command event; what the agent made of it is in Commands, Refused, Failed and the cluster.
func (w *World) Publish(ctx context.Context, subject, id string, data []byte) error {
	env, err := events.Decode(data)
	if err != nil {
		return err
	}
	c, err := events.Codec{Blobs: w.Blobs}.Command(ctx, env)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Commands = append(w.Commands, *c)
	if err := w.settle(); err != nil {
		return nil // recorded: every later step returns it
	}
	kc := w.kubeFake()
	kc.ClearActions()
	herr := w.Agent.HandleCommand(ctx, queue.Message{ID: id, Subject: subject, Data: data, Attempt: 1})
	w.observe(c, kc.Actions())
	kc.ClearActions()
	if herr != nil {
		w.Failed = append(w.Failed, fmt.Sprintf("%s (%s): %v", c.ID, c.Kind, herr))
		w.printf("agent: %s %s not applied: %v", c.Kind, target(c), herr)
	}
	_ = w.settle()
	return nil
}

func (w *World) kubeFake() *kubefake.Clientset {
	kc, _ := w.Cluster.Kube.(*kubefake.Clientset) // NewInMemoryClusterAt's; startAgent checked it is a fake
	return kc
}

// observe reads what the agent did for c from the API requests it made: the pods its Eviction
// API calls (and, for DeletePods, its deletes) took away, and its refusal Events.
func (w *World) observe(c *events.Command, actions []clienttesting.Action) {
	for _, a := range actions {
		switch {
		case a.GetVerb() == "create" && a.GetResource().Resource == "pods" && a.GetSubresource() == "eviction":
			if ev, ok := a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction); ok && w.podGone(ev.Namespace, ev.Name, ev.DeleteOptions) {
				w.Evictions++
			}
		case a.GetVerb() == "delete" && a.GetResource().Resource == "pods" && c.Kind == events.CommandDeletePods:
			if da, ok := a.(clienttesting.DeleteAction); ok && w.podGone(da.GetNamespace(), da.GetName(), nil) {
				w.Forced++
			}
		case a.GetVerb() == "create" && a.GetResource().Resource == "events":
			if ev, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Event); ok && ev.Reason == kube.ReasonCommandRefused {
				w.Refused = append(w.Refused, ev.Message)
				w.printChanged("refused "+ev.InvolvedObject.Kind+"/"+ev.InvolvedObject.Name+" "+string(c.Kind), refusal(ev.Message),
					"agent: refused %s on %s/%s: %s", c.Kind, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, refusal(ev.Message))
			}
		}
	}
}

// refusal is the reason part of a DovetailCommandRefused Event's message (kube.Applier writes
// "command <id> (<kind>, snapshot revision <n>) refused: <reason>[; command reason: ...]").
func refusal(msg string) string {
	if _, after, ok := strings.Cut(msg, ") refused: "); ok {
		msg = after
	}
	before, _, _ := strings.Cut(msg, "; command reason: ")
	return before
}

// podGone reports whether the pod an API call named is gone: absent, or another pod (its
// controller's replacement) under the name when the call had a UID precondition.
func (w *World) podGone(ns, name string, opts *metav1.DeleteOptions) bool {
	p, err := w.Cluster.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && opts != nil && opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != p.UID
}

func target(c *events.Command) string {
	switch {
	case c.NodeName != "":
		return c.NodeName
	case c.NodeClaim != nil:
		return c.NodeClaim.Name
	case c.NodeClass != nil:
		return c.NodeClass.Name()
	}
	return c.ID
}

// RegisterNode creates a booted instance's Node, as its kubelet does (fake.NodeRegistrar).
func (w *World) RegisterNode(ctx context.Context, n *corev1.Node) error {
	if _, err := w.Cluster.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	w.Registered[n.Name] = w.Clock.Now()
	// A Node registers with its kubelet's labels only; its offering is its NodeClaim's.
	offering := offeringOf(n)
	if nc := w.claimOf(ctx, n.Spec.ProviderID); nc != nil {
		offering = offeringOfLabels(nc.Labels)
	}
	w.printf("node %s registered (%s)", n.Name, offering)
	return w.settle()
}

// claimOf returns the NodeClaim recording providerID, or nil.
func (w *World) claimOf(ctx context.Context, providerID string) *apisv1.NodeClaim {
	list, err := w.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for i := range list.Items {
		nc := &apisv1.NodeClaim{}
		if kube.FromUnstructured(&list.Items[i], nc) == nil && nc.Status.ProviderID == providerID {
			return nc
		}
	}
	return nil
}

// DeregisterNode deletes the Node of a terminated instance, as the cloud's node lifecycle
// controller does (fake.NodeDeregistrar): the API server keeps it while it has finalizers. Pods
// a drain would have moved that are still bound to it are counted Lost.
func (w *World) DeregisterNode(ctx context.Context, name string) error {
	pods, err := w.Cluster.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName == name && disruption.Evacuable(p) {
			w.Lost = append(w.Lost, p.Namespace+"/"+p.Name)
		}
	}
	err = w.Cluster.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	w.printf("instance of node %s terminated", name)
	return w.settle()
}

// Schedule runs the in-memory cluster's DaemonSet controller and kube-scheduler stand-ins once:
// every pending pod that fits a Ready node it tolerates is bound. It returns how many were bound.
func (w *World) Schedule() int {
	if w.settle() != nil {
		return 0
	}
	before := w.bound
	if _, err := w.standIns.Pass(context.Background()); err != nil {
		w.err = fmt.Errorf("scheduler stand-in: %w", err)
		return w.bound - before
	}
	_ = w.settle()
	return w.bound - before
}

// Provision runs the provision function's decision on the current snapshot.
func (w *World) Provision(ctx context.Context) (provision.Decision, error) {
	if w.err != nil {
		return provision.Decision{}, w.err
	}
	h := &provision.Handler{Cluster: Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Provider, Publisher: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: w.Clock.Now}
	d, err := h.Decide(ctx, w.Snapshot())
	return d, errors.Join(err, w.err)
}

// Step advances the clock by d, lets the cloud act (boots, reclaims), runs the lifecycle
// function (registration, initialization, termination) and the scheduler stand-in.
func (w *World) Step(ctx context.Context, d time.Duration) error {
	if w.err != nil {
		return w.err
	}
	w.Clock.Step(d)
	if err := w.Cloud.Tick(ctx); err != nil {
		return err
	}
	if err := w.Lifecycle(ctx); err != nil {
		return err
	}
	w.Schedule()
	return w.err
}

// Lifecycle runs the lifecycle function's decision on the current snapshot.
func (w *World) Lifecycle(ctx context.Context) error {
	if w.err != nil {
		return w.err
	}
	h := &lifecycle.Handler{Cluster: Cluster, Provider: w.Provider, Publisher: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: w.Clock.Now}
	_, err := h.Decide(ctx, w.Snapshot())
	return errors.Join(err, w.err)
}

// PodsBound counts bound and total pods.
func (w *World) PodsBound() (bound, total int) {
	pods, err := w.Cluster.Kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0, 0
	}
	for _, p := range pods.Items {
		total++
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return bound, total
}

// Node returns a copy of a node, or nil.
func (w *World) Node(name string) *corev1.Node {
	n, err := w.Cluster.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return n
}

// SetNodeCondition sets a condition of a Node's status as its kubelet, the node lifecycle
// controller (Ready Unknown when the kubelet stops reporting) or a node problem detector would,
// lastTransitionTime from the World's clock when the status changes.
func (w *World) SetNodeCondition(name string, typ corev1.NodeConditionType, status corev1.ConditionStatus) error {
	if w.err != nil {
		return w.err
	}
	ctx := context.Background()
	n, err := w.Cluster.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	now := metav1.NewTime(w.Clock.Now())
	c := corev1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: now, LastTransitionTime: now}
	found := false
	for i := range n.Status.Conditions {
		if old := &n.Status.Conditions[i]; old.Type == typ {
			if old.Status == status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			*old, found = c, true
		}
	}
	if !found {
		n.Status.Conditions = append(n.Status.Conditions, c)
	}
	if _, err := w.Cluster.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	return w.settle()
}

// Nodes returns the cluster's nodes by name.
func (w *World) Nodes() []corev1.Node {
	list, err := w.Cluster.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// DeleteNodeClaim deletes a NodeClaim as `kubectl delete nodeclaim` does: through the API, not
// through the agent (a command is a function's, and carries the snapshot it was decided on). Its
// termination finalizer keeps it until the lifecycle function has terminated its instance.
func (w *World) DeleteNodeClaim(name string) error {
	if w.err != nil {
		return w.err
	}
	if err := w.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("NodeClaim %s: %w", name, err)
	}
	return w.settle()
}
