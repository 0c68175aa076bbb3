//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// The PDB-protected Deployment: 3 replicas, minAvailable 2, so the disruption controller allows
// one disruption at a time (disruptionsAllowed = currentHealthy - minAvailable = 3 - 2 = 1, the
// PodDisruptionBudget rule in the Kubernetes docs, "Specifying a Disruption Budget").
const (
	guardedNS           = "e2e-pdb"
	guardedApp          = "guarded"
	guardedReplicas     = 3
	guardedMinAvailable = 2
	// poolLabel is set by the "guarded" NodePool's template and required by the Deployment, so the
	// guarded pods get nodes of their own (launched for them, and again for their replacements).
	poolLabel = "e2e.dovetail.dev/pool"
)

// checkPDBDrain drains the node running the guarded pods the way consolidation does: taint it
// karpenter.sh/disrupted:NoSchedule, then DrainNode until no guarded pod is left, both as
// commands over the queue to the agent, whose Applier evicts through the real Eviction API. A
// watch on the pods checks the number of available guarded pods never drops below minAvailable.
//
// The test stands in for a disruption decision (functions/consolidate's, or Karpenter's: the
// taint has no value and no timeAdded, so consolidation may date it as a stray, which changes
// nothing here) and publishes the commands it would; everything after the queue is the real path.
func checkPDBDrain(ctx context.Context, t *testing.T, env *localdev.Env, logs *syncBuffer) {
	kc := env.Cluster.Kube
	if err := createGuarded(ctx, env); err != nil {
		t.Fatal(err)
	}
	// Wait for the guarded pods to run on a node launched for them and the PDB to allow exactly
	// one disruption.
	var pdb *policyv1.PodDisruptionBudget
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pdb, err = kc.PolicyV1().PodDisruptionBudgets(guardedNS).Get(ctx, guardedApp, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return pdb.Status.ObservedGeneration >= pdb.Generation && pdb.Status.CurrentHealthy == guardedReplicas, nil
	}); err != nil {
		t.Fatalf("guarded pods not all healthy: %v (pdb status %+v)", err, pdb.Status)
	}
	if want := int32(guardedReplicas - guardedMinAvailable); pdb.Status.DisruptionsAllowed != want {
		t.Fatalf("PDB disruptionsAllowed = %d, want %d", pdb.Status.DisruptionsAllowed, want)
	}
	onNode := guardedByNode(ctx, t, env)
	node := ""
	for _, n := range sortedKeys(onNode) {
		if node == "" || len(onNode[n]) > len(onNode[node]) {
			node = n
		}
	}
	t.Logf("guarded pods by node: %v; draining %s", onNode, node)
	if len(onNode[node]) > guardedReplicas-guardedMinAvailable {
		checkDisruptionBlocked(ctx, t, env, node, guardedNS+"/"+guardedApp)
	} else {
		t.Errorf("node %s holds %d guarded pods, no more than the PDB allows evicting: nothing to check DisruptionBlocked with", node, len(onNode[node]))
	}

	mon, stop := watchAvailability(ctx, t, env)
	defer stop()

	nc, err := dnats.Connect(env.NATSURL, "e2e-consolidation-stand-in", env.NATS.ClientOptions(natsauth.RoleFunction)...) // commands, as a function publishes them
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	send := func(kind events.CommandKind, round int, taint *corev1.Taint) {
		rev := env.Agent.Watcher().Revision()
		cmd := events.Command{ID: events.CommandID(env.Options.Cluster, "e2e-consolidation", string(kind), node, strconv.Itoa(round)),
			Kind: kind, Cluster: env.Options.Cluster, SnapshotRevision: rev, Reason: "e2e: consolidation stand-in", NodeName: node, Taint: taint}
		data, err := events.Codec{}.NewEvent(ctx, env.Options.Cluster, "e2e-consolidation", events.TypeCommand, cmd.ID, &cmd)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(ctx, queue.CommandsSubject(env.Options.Cluster), cmd.ID, data); err != nil {
			t.Fatal(err)
		}
	}

	begin := time.Now()
	send(events.CommandTaintNode, 0, &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule})
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == apisv1.TaintKeyDisrupted {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("node %s never got the %s taint: %v", node, apisv1.TaintKeyDisrupted, err)
	}

	// DrainNode again every 10 s while guarded pods remain (as consolidation re-decides on each
	// snapshot); the agent acknowledges a drain the PDB holds, so nothing queues behind it.
	round, last := 0, time.Time{}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if len(guardedByNode(ctx, t, env)[node]) == 0 {
			return true, nil
		}
		if time.Since(last) >= 10*time.Second {
			round++
			last = time.Now()
			send(events.CommandDrainNode, round, nil)
		}
		return false, nil
	}); err != nil {
		t.Fatalf("node %s still runs guarded pods after %d DrainNode commands: %v", node, round, err)
	}
	drained := time.Since(begin)

	// The replacements run elsewhere (a node Dovetail launched for them once the drained node was
	// tainted), all available again.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return mon.current() == guardedReplicas, nil
	}); err != nil {
		t.Fatalf("guarded pods not all available again after the drain: %d of %d", mon.current(), guardedReplicas)
	}
	after := guardedByNode(ctx, t, env)
	minSeen, changes := mon.result()
	refusals := strings.Count(logs.String(), "eviction refused (429")
	t.Logf("drained %s in %s with %d DrainNode command(s); guarded pods now by node: %v", node, drained.Round(100*time.Millisecond), round, after)
	t.Logf("availability watched over %d pod changes: minimum %d available (minAvailable %d); evictions refused by the PDB (429): %d",
		changes, minSeen, guardedMinAvailable, refusals)
	if minSeen < guardedMinAvailable {
		t.Errorf("available guarded pods dropped to %d during the drain, below the PDB's minAvailable %d\n%s", minSeen, guardedMinAvailable, mon.timeline())
	}
	if len(after[node]) != 0 {
		t.Errorf("drained node %s still runs %v", node, after[node])
	}
	// With k guarded pods on the node and one disruption allowed at a time, the first drain pass
	// can evict one and must be refused for the other k-1.
	if k := len(onNode[node]); k > guardedReplicas-guardedMinAvailable && refusals == 0 {
		t.Errorf("%d guarded pods were on %s but no eviction was refused with 429: the PDB was not exercised", k, node)
	}
}

// createGuarded creates the "guarded" NodePool, and the Deployment and PDB in guardedNS.
func createGuarded(ctx context.Context, env *localdev.Env) error {
	kc := env.Cluster.Kube
	req := func(key, op string, values ...string) map[string]any {
		vs := make([]any, len(values))
		for i, v := range values {
			vs[i] = v
		}
		return map[string]any{"key": key, "operator": op, "values": vs}
	}
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": guardedApp},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{poolLabel: guardedApp}},
			"spec": map[string]any{
				"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
				"requirements": []any{
					req("kubernetes.io/arch", "In", "amd64", "arm64"),
					req("karpenter.sh/capacity-type", "In", "on-demand"),
					req("karpenter.k8s.aws/instance-category", "In", "c", "m", "r"),
					req("karpenter.k8s.aws/instance-generation", "Gt", "5"),
					req("kubernetes.io/os", "In", "linux"),
				},
			},
		}},
	}}
	if _, err := env.Cluster.Dynamic.Resource(kube.NodePoolGVR).Create(ctx, np, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("NodePool %s: %w", guardedApp, err)
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: guardedNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := map[string]string{"app": guardedApp}
	replicas, grace := int32(guardedReplicas), int64(5)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: guardedApp, Namespace: guardedNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{poolLabel: guardedApp},
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
				},
			},
		},
	}
	if _, err := kc.AppsV1().Deployments(guardedNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	minAvailable := intstr.FromInt32(guardedMinAvailable)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: guardedApp, Namespace: guardedNS},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := kc.PolicyV1().PodDisruptionBudgets(guardedNS).Create(ctx, pdb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// guardedByNode lists the guarded pods not being deleted, by node.
func guardedByNode(ctx context.Context, t *testing.T, env *localdev.Env) map[string][]string {
	pods, err := env.Cluster.Kube.CoreV1().Pods(guardedNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + guardedApp})
	if err != nil {
		t.Errorf("listing guarded pods: %v", err)
		return nil
	}
	out := map[string][]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Name)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// availability follows the guarded pods through a watch (an informer: every change, in the API
// server's order) and keeps the minimum number available: Running, Ready and not being deleted
// (what the disruption controller counts as healthy).
type availability struct {
	mu      sync.Mutex
	avail   map[string]bool
	armed   bool
	min     int
	changes int
	log     []string
}

func watchAvailability(ctx context.Context, t *testing.T, env *localdev.Env) (*availability, func()) {
	m := &availability{avail: map[string]bool{}}
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(env.Cluster.Kube, 0, informers.WithNamespace(guardedNS),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=" + guardedApp }))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.update,
		UpdateFunc: func(_, obj any) { m.update(obj) },
		DeleteFunc: m.remove,
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	m.mu.Lock()
	m.armed, m.min = true, m.countLocked()
	m.mu.Unlock()
	if m.min != guardedReplicas {
		t.Fatalf("%d guarded pods available before the drain, want %d", m.min, guardedReplicas)
	}
	return m, func() { cancel(); f.Shutdown() }
}

func (m *availability) update(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	m.set(p.Name, p.Spec.NodeName, ready && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil)
}

func (m *availability) remove(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		m.set(p.Name, p.Spec.NodeName, false)
	}
}

func (m *availability) set(name, node string, available bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.avail[name] == available {
		return
	}
	m.avail[name] = available
	n := m.countLocked()
	if m.armed {
		m.changes++
		if n < m.min {
			m.min = n
		}
	}
	m.log = append(m.log, fmt.Sprintf("%s %s on %s available=%v -> %d available", time.Now().Format("15:04:05.000"), name, node, available, n))
}

func (m *availability) countLocked() int {
	n := 0
	for _, a := range m.avail {
		if a {
			n++
		}
	}
	return n
}

func (m *availability) current() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.countLocked()
}

func (m *availability) result() (min, changes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.min, m.changes
}

func (m *availability) timeline() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.log, "\n")
}
