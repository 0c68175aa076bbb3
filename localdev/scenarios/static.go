package scenarios

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/drift"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/static"
)

// StaticResult is what the static NodePool scenario observed.
type StaticResult struct {
	Replicas int
	// NodesBefore are the pool's Ready nodes once it first reached its replicas.
	NodesBefore int
	// Deleted is the node deleted; NodesAfterDeletion the pool's Ready nodes once it recovered,
	// Replaced whether the deleted node is gone from them.
	Deleted            string
	NodesAfterDeletion int
	Replaced           bool
	// MostNodeClaims is the most NodeClaims of the pool not being deleted at any one step.
	MostNodeClaims int
	// BigPodPending: the pod no node of the pool can hold stayed pending the whole run.
	BigPodPending bool
	// DriftRolled are the nodes replaced after the new AMI, MaxDriftDisrupting the most tainted
	// by drift at once (the pool's Drifted budget is 1).
	DriftRolled, MaxDriftDisrupting int
	// ScaledTo is the replicas the pool was scaled to, NodesAfterScaleDown its Ready nodes then,
	// ScaleDownDeletes the DeleteNodeClaim commands the scale-down published.
	ScaledTo            int
	NodesAfterScaleDown int
	ScaleDownDeletes    int
	// Launches are the fake cloud's launches over the whole run.
	Launches     int
	Lost         int
	Bound, Total int
}

// staticPoolName is the scenario's static NodePool.
const staticPoolName = "static"

// Static runs the static NodePool scenario: a NodePool with spec.replicas 3 (m5.large on
// demand) and two small pods (500m) and one big one (4 CPU, more than an m5.large's 1930m
// allocatable) that select it. By hand: the pool launches 3 NodeClaims whatever the pods need;
// the small pods run on its nodes, the big one stays pending (pods do not size a static pool).
// A node is then deleted (kubectl delete node): the termination path drains it and terminates
// its instance, and the next provision decision launches one NodeClaim in its place (3 − 2
// active = 1), so the pool holds 3 nodes again after 4 launches in all. A new AMI then drifts
// every node, and the drift function replaces them one for one within the budget (staticDrift).
// Finally spec.replicas
// goes from 3 to 1: the lifecycle function deletes 3 − 1 = 2 NodeClaims, empty nodes first, and
// the small pods (2 × 500m ≤ 1930m) end on the one node left.
func Static(ctx context.Context, out io.Writer) (*StaticResult, error) {
	const bootDelay = 30 * time.Second
	w := NewWorld(Start, bootDelay, out)
	defer w.Close()
	res := &StaticResult{Replicas: 3, ScaledTo: 1}
	pool := staticNodePool(int64(res.Replicas))
	if err := w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{EC2: ptr(defaultClass(OldAMI))}}); err != nil {
		return nil, err
	}
	pods := append(webPods(2, "500m", "512Mi", 30), webPods(1, "4", "1Gi", 30)...)
	pods[2].Name, pods[2].UID = "big-0", "uid-big-0"
	for i := range pods {
		pods[i].Spec.NodeSelector = map[string]string{apisv1.LabelNodePool: staticPoolName}
	}
	if err := w.AddPods(pods...); err != nil {
		return nil, err
	}
	res.BigPodPending = true
	seen := 0
	step := func() error {
		if _, err := w.Provision(ctx); err != nil {
			return err
		}
		if err := w.Step(ctx, 10*time.Second); err != nil {
			return err
		}
		// What the functions decided for the pool, as its commands say it.
		for _, c := range w.Commands[seen:] {
			switch {
			case c.Kind == events.CommandCreateNodeClaim && strings.HasPrefix(c.Reason, "static NodePool"):
				w.printf("provision: NodeClaim %s launched (%s)", c.NodeClaim.Name, c.Reason)
			case c.Kind == events.CommandDeleteNodeClaim && strings.Contains(c.Reason, static.ReasonOverprovisioned):
				w.printf("lifecycle: NodeClaim %s deleted (%s)", c.NodeClaim.Name, c.Reason)
			}
		}
		seen = len(w.Commands)
		_, claims := w.staticCounts()
		res.MostNodeClaims = max(res.MostNodeClaims, claims)
		if w.podNode("default", "big-0") != "" {
			res.BigPodPending = false
		}
		return nil
	}
	// until steps (10 s each, at most 10 simulated minutes) until done holds.
	until := func(what string, done func(ready []string) bool) ([]string, error) {
		for range 60 {
			if err := step(); err != nil {
				return nil, err
			}
			if ready, _ := w.staticCounts(); done(ready) {
				return ready, nil
			}
		}
		ready, _ := w.staticCounts()
		return ready, fmt.Errorf("static scenario: %s not reached in 10 minutes (ready nodes %v)", what, ready)
	}
	ready, err := until("3 ready nodes", func(r []string) bool { return len(r) == res.Replicas })
	if err != nil {
		return res, err
	}
	res.NodesBefore = len(ready)
	res.Deleted = ready[0]
	w.printf("static NodePool %s holds %d nodes %v; deleting node %s", staticPoolName, len(ready), ready, res.Deleted)
	if err := w.DeleteNode(res.Deleted); err != nil {
		return res, err
	}
	ready, err = until("a replacement for "+res.Deleted, func(r []string) bool {
		return len(r) == res.Replicas && !strings.Contains(strings.Join(r, ","), res.Deleted)
	})
	if err != nil {
		return res, err
	}
	res.NodesAfterDeletion, res.Replaced = len(ready), true
	if err := w.staticDrift(ctx, res, step); err != nil {
		return res, err
	}
	ready, _ = w.staticCounts()
	w.printf("static NodePool %s holds %d nodes %v; scaling spec.replicas %d → %d", staticPoolName, len(ready), ready, res.Replicas, res.ScaledTo)
	before := len(w.Commands)
	if err := w.SetReplicas(staticPoolName, int64(res.ScaledTo)); err != nil {
		return res, err
	}
	ready, err = until("1 node", func(r []string) bool {
		_, claims := w.staticCounts()
		return len(r) == res.ScaledTo && claims == res.ScaledTo
	})
	if err != nil {
		return res, err
	}
	// Let the evicted pods find the node left.
	for range 6 {
		if err := step(); err != nil {
			return res, err
		}
	}
	res.NodesAfterScaleDown = len(ready)
	for _, c := range w.Commands[before:] {
		if c.Kind == events.CommandDeleteNodeClaim && strings.Contains(c.Reason, static.ReasonOverprovisioned) {
			res.ScaleDownDeletes++
		}
	}
	res.Launches = w.Cloud.Stats().Launches
	res.Lost = len(w.Lost)
	res.Bound, res.Total = w.PodsBound()
	w.printf("result: %d nodes, then %d after deleting %s; %d rolled by drift (at most %d at once); %d launches in all, at most %d NodeClaims at once; %d nodes after scaling to %d (%d NodeClaims deleted); big pod pending %v; %d/%d pods bound, %d lost",
		res.NodesBefore, res.NodesAfterDeletion, res.Deleted, res.DriftRolled, res.MaxDriftDisrupting, res.Launches, res.MostNodeClaims, res.NodesAfterScaleDown, res.ScaledTo,
		res.ScaleDownDeletes, res.BigPodPending, res.Bound, res.Total, res.Lost)
	return res, nil
}

// staticDrift publishes a new AMI behind the class's alias: every node of the pool drifts, and
// the drift function replaces them one for one within the pool's Drifted budget (nodes: "1"),
// each replacement launched from the template and initialized before the old node goes. By
// hand: 3 rolled, at most 1 tainted at once, never more than replicas + 1 = 4 NodeClaims.
func (w *World) staticDrift(ctx context.Context, res *StaticResult, step func() error) error {
	old := map[string]bool{}
	ready, _ := w.staticCounts()
	for _, n := range ready {
		old[n] = true
	}
	w.printf("publishing %s behind al2023@latest: the pool's %d nodes drift", NewAMI, len(old))
	if err := w.SetNodeClassAMIs("default", defaultClass(NewAMI).Status.AMIs); err != nil {
		return err
	}
	h := &drift.Handler{Cluster: Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Provider, Publisher: w,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: w.Clock.Now}
	for range 120 {
		d, err := h.Decide(ctx, w.Snapshot())
		if err != nil {
			return err
		}
		for _, l := range d.Lines() {
			w.printChanged("drift "+l.Node, l.State, "drift: %s", l.Text)
		}
		if err := step(); err != nil {
			return err
		}
		remaining, disrupting := driftProgress(w.Snapshot(), old)
		res.MaxDriftDisrupting = max(res.MaxDriftDisrupting, disrupting)
		if remaining == 0 {
			res.DriftRolled = len(old)
			return nil
		}
	}
	return fmt.Errorf("static scenario: drifted nodes not all replaced in 20 minutes")
}

// staticNodePool is a static NodePool of m5.large on-demand nodes.
func staticNodePool(replicas int64) apisv1.NodePool {
	np := spotPool()
	np.Name, np.UID = staticPoolName, types.UID("uid-"+staticPoolName)
	np.Spec.Replicas = &replicas
	np.Spec.Template.ObjectMeta.Labels = nil
	np.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{apisv1.CapacityTypeOnDemand}}},
	}
	return np
}

// staticCounts returns the static pool's Ready nodes not being deleted (by name) and its
// NodeClaims not being deleted.
func (w *World) staticCounts() (ready []string, claims int) {
	snap := w.Snapshot()
	for _, n := range snap.Nodes {
		if n.Labels[apisv1.LabelNodePool] != staticPoolName || n.DeletionTimestamp != nil {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	for _, nc := range snap.NodeClaims {
		if nc.Labels[apisv1.LabelNodePool] == staticPoolName && nc.DeletionTimestamp == nil {
			claims++
		}
	}
	return ready, claims
}

// podNode is the node a pod is bound to ("" while pending or absent).
func (w *World) podNode(ns, name string) string {
	p, err := w.Cluster.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return p.Spec.NodeName
}

// DeleteNode deletes a Node as `kubectl delete node` does: the API server marks it for deletion
// while its termination finalizer holds it, and the lifecycle function runs the termination path.
func (w *World) DeleteNode(name string) error {
	if w.err != nil {
		return w.err
	}
	if err := w.Cluster.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	return w.settle()
}

// SetReplicas sets a NodePool's spec.replicas, as `kubectl scale nodepool --replicas` does.
func (w *World) SetReplicas(pool string, replicas int64) error {
	if w.err != nil {
		return w.err
	}
	ctx := context.Background()
	u, err := w.Cluster.Dynamic.Resource(kube.NodePoolGVR).Get(ctx, pool, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("NodePool %s: %w", pool, err)
	}
	np := &apisv1.NodePool{}
	if err := kube.FromUnstructured(u, np); err != nil {
		return fmt.Errorf("NodePool %s: %w", pool, err)
	}
	np.Spec.Replicas = &replicas
	if u, err = kube.ToUnstructured(np, apisv1.GroupVersion, "NodePool"); err != nil {
		return err
	}
	if _, err := w.Cluster.Dynamic.Resource(kube.NodePoolGVR).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("NodePool %s: %w", pool, err)
	}
	return w.settle()
}
