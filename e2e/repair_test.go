//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/kube"
	core "github.com/dovetail-dev/dovetail/shared/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/repair"
)

// repairPool is the NodePool of TestNodeRepairAndVanishedInstances.
const repairPool = "repair"

// repairNodes is how many nodes the repair scenario runs: ten, so the breaker's arithmetic is
// Karpenter's example (20 % of 10 is 2: one unhealthy node is repaired, three hold repair).
const repairNodes = 10

// repairScenario: ten replicas that each need a node of their own (required anti-affinity on the
// hostname), so the provision function launches ten nodes of one pool. The pool never
// consolidates (WhenEmpty, consolidateAfter Never), so every node that goes is repair's or
// garbage collection's doing.
var repairScenario = fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m"]
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
---
`+devEC2NodeClass+`---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: spread
  namespace: default
spec:
  replicas: %[2]d
  selector:
    matchLabels:
      app: spread
  template:
    metadata:
      labels:
        app: spread
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  app: spread
      containers:
        - name: app
          image: registry.k8s.io/pause:3.10
          resources:
            requests:
              cpu: 500m
              memory: 256Mi
`, repairPool, repairNodes)

// repairSnapshotInterval is the agent's periodic snapshot in this test (30 s by default): garbage
// collection acts on the second complete snapshot that lacks an instance, and nothing else
// changes in the cluster to cause one sooner.
const repairSnapshotInterval = 10 * time.Second

// annotationKubeletStopped makes kwok's node-ready stage leave a node's Ready condition alone
// (e2e/realcluster/stages.yaml): the node's kubelet is taken to have stopped.
const annotationKubeletStopped = "e2e.dovetail.dev/kubelet-stopped"

// TestNodeRepairAndVanishedInstances runs issue 27's node repair and cloud garbage collection on
// the real control plane (kube-apiserver, kube-controller-manager, kube-scheduler, kwok) with the
// real AWS provider against the fake cloud's EC2 face, in its own environment:
//   - Repair: one of the pool's ten nodes has Ready Unknown past the AWS policy's 30 minutes; its
//     NodeClaim and Node are deleted, a new NodeClaim takes its pod, the NodeClaim gets Karpenter's
//     DisruptionTerminating Event ("Unhealthy") and karpenter_nodeclaims_unhealthy_disrupted_total
//     counts it.
//   - Breaker: three of the ten have Ready Unknown past the policy; 3 > 2 (20 % of 10, rounded
//     up) so none is repaired, and each gets NodeRepairBlocked.
//   - Vanished instances: the test terminates instances in the fake EC2 behind Dovetail's back.
//     A registered node's: the fake cloud deletes its Node as the cloud-controller-manager does
//     for a terminated instance, and the termination path removes NodeClaim and Node. A launched
//     NodeClaim's whose node never registered: garbage collection deletes the NodeClaim (counted
//     as reason garbage_collected). Either is gone within two of the agent's periodic snapshots.
func TestNodeRepairAndVanishedInstances(t *testing.T) {
	if _, _, _, err := (&realcluster.Options{}).Binaries(); err != nil {
		t.Fatalf("the e2e suite needs the control-plane binaries: %v", err)
	}
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	scenario := filepath.Join(dir, "repair.yaml")
	if err := os.WriteFile(scenario, []byte(repairScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	env, err := localdev.Start(ctx, localdev.Options{
		Cluster: "repair", ControlPlane: localdev.ControlPlaneReal, Manifests: []string{scenario},
		BootDelay: time.Second, CloudProvider: localdev.CloudAWS, SnapshotInterval: repairSnapshotInterval, Out: logs,
		Log:              slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		RealControlPlane: realcluster.Options{Dir: t.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	defer func() {
		if t.Failed() {
			t.Logf("agent and function logs (warnings, errors, repairs):\n%s",
				logs.filter("level=WARN", "level=ERROR", "repair", "garbage", "vanished"))
		}
	}()
	if err := env.WaitAllBound(ctx); err != nil {
		t.Fatalf("%v\ncontrol plane: %s", err, env.ControlPlane.Exited())
	}
	waitFor(ctx, t, 60*time.Second, fmt.Sprintf("%d Ready NodeClaims of pool %s with every pod Running", repairNodes, repairPool),
		func(ctx context.Context) bool { return poolSettled(ctx, t, env, nil) })
	t.Logf("timing: %d nodes Ready after %s", repairNodes, time.Since(begin).Round(100*time.Millisecond))

	t.Run("UnknownNodeReplaced", func(t *testing.T) { checkRepair(ctx, t, env) })
	t.Run("BreakerHoldsAtThreeOfTen", func(t *testing.T) { checkRepairBreaker(ctx, t, env) })
	t.Run("VanishedInstanceOfNodeGone", func(t *testing.T) { checkVanished(ctx, t, env) })
	t.Run("VanishedInstanceWithoutNodeCollected", func(t *testing.T) { checkVanishedUnregistered(ctx, t, env) })
	t.Logf("timing: whole test %s", time.Since(begin).Round(100*time.Millisecond))
}

// poolClaims are the pool's NodeClaims by name.
func poolClaims(ctx context.Context, t *testing.T, env *localdev.Env) map[string]apisv1.NodeClaim {
	t.Helper()
	out := map[string]apisv1.NodeClaim{}
	for _, nc := range nodeClaims(ctx, t, env) {
		if nc.Labels[apisv1.LabelNodePool] == repairPool {
			out[nc.Name] = nc
		}
	}
	return out
}

// poolSettled: the pool has repairNodes Ready NodeClaims none of which is being deleted, none
// named in exclude, and every replica of the Deployment is Running on one of their nodes.
func poolSettled(ctx context.Context, t *testing.T, env *localdev.Env, exclude map[string]bool) bool {
	nodes := map[string]bool{}
	for _, nc := range poolClaims(ctx, t, env) {
		if exclude[nc.Name] || nc.DeletionTimestamp != nil {
			return false
		}
		if !ready(nc) || nc.Status.NodeName == "" {
			return false
		}
		nodes[nc.Status.NodeName] = true
	}
	if len(nodes) != repairNodes {
		return false
	}
	pods, err := env.Cluster.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=spread"})
	if err != nil {
		return false
	}
	running := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && nodes[p.Spec.NodeName] {
			running++
		}
	}
	return running == repairNodes
}

// stopKubelet plays a kubelet that stopped posting status: the node is annotated so kwok leaves
// its Ready condition alone, then Ready is written Unknown through the /status subresource with
// lastTransitionTime since, as kube-controller-manager's node lifecycle controller writes it
// (reason NodeStatusUnknown). A since in the past stands for the passage of time: repair counts
// the toleration from lastTransitionTime (shared/repair.Find), so a condition dated 31 minutes ago
// is what the node would show after 31 minutes of silence. It changes no rule and no duration.
func stopKubelet(ctx context.Context, t *testing.T, env *localdev.Env, node string, since time.Time) {
	t.Helper()
	kc := env.Cluster.Kube
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, annotationKubeletStopped)
	if _, err := kc.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate node %s: %v", node, err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		found := false
		for i := range n.Status.Conditions {
			c := &n.Status.Conditions[i]
			if c.Type != corev1.NodeReady {
				continue
			}
			found = true
			c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
			c.LastTransitionTime = metav1.NewTime(since)
		}
		if !found {
			return fmt.Errorf("node %s has no Ready condition", node)
		}
		_, err = kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("set node %s Ready Unknown since %s: %v", node, since.Format(time.RFC3339), err)
	}
}

// overdue is a lastTransitionTime past the AWS Ready=Unknown toleration (30 minutes) by a minute.
func overdue() time.Time { return time.Now().Add(-31 * time.Minute) }

func gone(ctx context.Context, env *localdev.Env, claim, node string) bool {
	_, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Get(ctx, claim, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return false
	}
	_, err = env.Cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// sortedClaims are the pool's NodeClaims sorted by name.
func sortedClaims(ctx context.Context, t *testing.T, env *localdev.Env) []apisv1.NodeClaim {
	m := poolClaims(ctx, t, env)
	out := make([]apisv1.NodeClaim, 0, len(m))
	for _, nc := range m {
		out = append(out, nc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// checkRepair: one node of ten Unknown past its toleration is repaired (1 ≤ 2, the breaker's
// threshold) and replaced.
func checkRepair(ctx context.Context, t *testing.T, env *localdev.Env) {
	claims := sortedClaims(ctx, t, env)
	victim := claims[0]
	start := time.Now()
	stopKubelet(ctx, t, env, victim.Status.NodeName, overdue())
	waitFor(ctx, t, 60*time.Second, fmt.Sprintf("NodeClaim %s and Node %s repaired away", victim.Name, victim.Status.NodeName),
		func(ctx context.Context) bool { return gone(ctx, env, victim.Name, victim.Status.NodeName) })
	t.Logf("timing: NodeClaim %s (node %s, Ready Unknown) deleted %s after the condition was written", victim.Name,
		victim.Status.NodeName, time.Since(start).Round(100*time.Millisecond))
	waitFor(ctx, t, 60*time.Second, "a new NodeClaim taking the repaired node's pod", func(ctx context.Context) bool {
		return poolSettled(ctx, t, env, map[string]bool{victim.Name: true})
	})
	before := map[string]bool{}
	for _, nc := range claims {
		before[nc.Name] = true
	}
	var fresh []string
	for name := range poolClaims(ctx, t, env) {
		if !before[name] {
			fresh = append(fresh, name)
		}
	}
	if len(fresh) != 1 {
		t.Errorf("new NodeClaims after the repair: %v, want exactly one replacement", fresh)
	}
	e := waitEvent(ctx, t, env, "DisruptionTerminating (Unhealthy) on the repaired NodeClaim", 30*time.Second, func(e corev1.Event) bool {
		return e.Reason == "DisruptionTerminating" && e.InvolvedObject.Kind == "NodeClaim" && e.InvolvedObject.Name == victim.Name &&
			strings.HasPrefix(e.Message, "Disrupting NodeClaim: Unhealthy")
	})
	t.Logf("event on NodeClaim %s: %s", victim.Name, e.Message)
	// The AWS policy's condition is Ready: Karpenter's label value is its snake case, "ready".
	if got := counter(t, env, "karpenter_nodeclaims_unhealthy_disrupted_total", map[string]string{"condition": "ready", "nodepool": repairPool}); got != 1 {
		t.Errorf("karpenter_nodeclaims_unhealthy_disrupted_total{condition=ready,nodepool=%s} = %v, want 1", repairPool, got)
	}
	if got := counter(t, env, "karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "unhealthy", "nodepool": repairPool}); got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=unhealthy,nodepool=%s} = %v, want 1", repairPool, got)
	}
}

// checkRepairBreaker: three of the pool's ten nodes Unknown past the toleration is more than
// repair.Threshold(10) = 2, so the breaker holds every one of them. All three are made Unknown
// with a fresh lastTransitionTime first (unhealthy, counted by the breaker, not yet due), then
// dated back: otherwise the first overdue node, alone unhealthy for a snapshot, would be repaired.
func checkRepairBreaker(ctx context.Context, t *testing.T, env *localdev.Env) {
	claims := sortedClaims(ctx, t, env)
	if len(claims) != repairNodes {
		t.Fatalf("pool %s has %d NodeClaims, want %d", repairPool, len(claims), repairNodes)
	}
	held := claims[:3]
	for _, nc := range held {
		stopKubelet(ctx, t, env, nc.Status.NodeName, time.Now())
	}
	for _, nc := range held {
		stopKubelet(ctx, t, env, nc.Status.NodeName, overdue())
	}
	threshold := repair.Threshold(repairNodes)
	want := fmt.Sprintf("more than %d%% nodes are unhealthy in the nodepool (3 of %d; at most %d may be)",
		repair.AllowedUnhealthyPercent, repairNodes, threshold)
	for _, nc := range held {
		e := waitEvent(ctx, t, env, "NodeRepairBlocked on node "+nc.Status.NodeName, 30*time.Second, func(e corev1.Event) bool {
			return e.Reason == lifecycle.ReasonNodeRepairBlocked && e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == nc.Status.NodeName
		})
		if e.Type != corev1.EventTypeWarning || e.Message != want {
			t.Errorf("NodeRepairBlocked on %s: %s %q, want Warning %q", nc.Status.NodeName, e.Type, e.Message, want)
		}
	}
	waitEvent(ctx, t, env, "NodeRepairBlocked on NodePool "+repairPool, 30*time.Second, func(e corev1.Event) bool {
		return e.Reason == lifecycle.ReasonNodeRepairBlocked && e.InvolvedObject.Kind == "NodePool" && e.InvolvedObject.Name == repairPool
	})
	// The Events come from the snapshots in which all three were due; a further few seconds of
	// snapshots (one a second while nodes change) must repair none of them either.
	time.Sleep(5 * time.Second)
	now := poolClaims(ctx, t, env)
	for _, nc := range held {
		cur, ok := now[nc.Name]
		if !ok || cur.DeletionTimestamp != nil {
			t.Errorf("NodeClaim %s was repaired although the breaker holds (3 of %d unhealthy, at most %d may be)", nc.Name, repairNodes, threshold)
		}
	}
	if got := counter(t, env, "karpenter_nodeclaims_unhealthy_disrupted_total", map[string]string{"condition": "ready", "nodepool": repairPool}); got != 1 {
		t.Errorf("karpenter_nodeclaims_unhealthy_disrupted_total{condition=ready,nodepool=%s} = %v after the breaker, want still 1", repairPool, got)
	}
}

// vanishedBound is "within two snapshots": two of the agent's periodic snapshots after the
// NodeClaim is old enough to be judged (lifecycle.VanishedGrace after Launched; the second
// sighting acts), plus a margin for the function's round trip and the deletions on a loaded
// machine.
const vanishedBound = 2*repairSnapshotInterval + 20*time.Second

// checkVanished: a healthy node's instance terminated in the fake EC2 (what TerminateInstances
// does, outside Dovetail) takes its NodeClaim and Node with it within two snapshots. The fake
// cloud deletes the Node of a terminated instance (the cloud-controller-manager's node lifecycle
// controller does so on EKS); the termination path then finds the instance gone.
func checkVanished(ctx context.Context, t *testing.T, env *localdev.Env) {
	var target apisv1.NodeClaim
	for _, nc := range sortedClaims(ctx, t, env) {
		n, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
		if err == nil && n.Annotations[annotationKubeletStopped] == "" && nc.DeletionTimestamp == nil {
			target = nc
			break
		}
	}
	if target.Name == "" {
		t.Fatal("no healthy NodeClaim in the pool to terminate")
	}
	start := time.Now()
	prev, err := env.Cloud.Terminate(ctx, target.Status.ProviderID)
	if err != nil {
		t.Fatalf("terminate %s: %v", target.Status.ProviderID, err)
	}
	t.Logf("terminated instance %s (was %s) of NodeClaim %s behind Dovetail's back", target.Status.ProviderID, prev, target.Name)
	waitFor(ctx, t, vanishedBound, fmt.Sprintf("NodeClaim %s and Node %s gone after their instance vanished", target.Name, target.Status.NodeName),
		func(ctx context.Context) bool { return gone(ctx, env, target.Name, target.Status.NodeName) })
	t.Logf("timing: NodeClaim %s and Node %s gone %s after the instance was terminated (garbage_collected count %v)", target.Name,
		target.Status.NodeName, time.Since(start).Round(100*time.Millisecond),
		counter(t, env, "karpenter_nodeclaims_disrupted_total", map[string]string{"reason": lifecycle.ReasonGarbageCollected, "nodepool": repairPool}))
}

// checkVanishedUnregistered: a NodeClaim whose instance launched but never registered a Node (a
// boot failure injected in the fake cloud) and which the test then terminates behind Dovetail's
// back is deleted by garbage collection within two snapshots, and counted in
// karpenter_nodeclaims_disrupted_total{reason="garbage_collected"}: no Node is there to delete,
// and the registration timeout (15 minutes) is far off.
func checkVanishedUnregistered(ctx context.Context, t *testing.T, env *localdev.Env) {
	before := poolClaims(ctx, t, env)
	if err := env.Cloud.InjectBootFailure(fake.Pattern{}); err != nil {
		t.Fatal(err)
	}
	scale := fmt.Sprintf(`{"spec":{"replicas":%d}}`, repairNodes+1)
	if _, err := env.Cluster.Kube.AppsV1().Deployments("default").Patch(ctx, "spread", types.MergePatchType, []byte(scale), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale Deployment spread: %v", err)
	}
	var target apisv1.NodeClaim
	waitFor(ctx, t, 60*time.Second, "a launched NodeClaim for the extra replica", func(ctx context.Context) bool {
		for name, nc := range poolClaims(ctx, t, env) {
			if _, old := before[name]; !old && nc.Status.ProviderID != "" && launched(nc) {
				target = nc
				return true
			}
		}
		return false
	})
	// Instances launched from now on boot normally (the replica's next NodeClaim included).
	env.Cloud.ClearBootFailures()
	start := time.Now()
	if _, err := env.Cloud.Terminate(ctx, target.Status.ProviderID); err != nil {
		t.Fatalf("terminate %s: %v", target.Status.ProviderID, err)
	}
	t.Logf("terminated instance %s of NodeClaim %s (no node registered) behind Dovetail's back", target.Status.ProviderID, target.Name)
	waitFor(ctx, t, core.VanishedGrace+vanishedBound, fmt.Sprintf("NodeClaim %s garbage collected after its instance vanished", target.Name),
		func(ctx context.Context) bool {
			_, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Get(ctx, target.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	t.Logf("timing: NodeClaim %s gone %s after its instance was terminated", target.Name, time.Since(start).Round(100*time.Millisecond))
	if got := counter(t, env, "karpenter_nodeclaims_disrupted_total", map[string]string{"reason": lifecycle.ReasonGarbageCollected, "nodepool": repairPool}); got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=garbage_collected,nodepool=%s} = %v, want 1", repairPool, got)
	}
}

func launched(nc apisv1.NodeClaim) bool {
	for _, c := range nc.Status.Conditions {
		if c.Type == apisv1.ConditionLaunched {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// counter is the value of the functions' counter name whose labels include want (0 if none).
func counter(t *testing.T, env *localdev.Env, name string, want map[string]string) float64 {
	t.Helper()
	if env.FunctionMetrics == nil {
		t.Fatal("the environment records no function metrics")
	}
	mfs, err := env.FunctionMetrics.Registry().Gather()
	if err != nil {
		t.Fatalf("gather function metrics: %v", err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n := 0
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
					n++
				}
			}
			if n == len(want) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
