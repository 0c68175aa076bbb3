package main

import (
	"context"
	"fmt"
	"log"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

const (
	sideDovetail  = "Dovetail"
	sideKarpenter = "Karpenter"
)

// Phase bounds and the consolidation cut of one run (flags).
type Phase struct {
	BindTimeout        time.Duration
	ConsolidateTimeout time.Duration
	// Quiet is how long Nodes and NodeClaims must stay unchanged (and every pod bound) for the
	// scale-down to count as converged; the convergence time is the last change's.
	Quiet time.Duration
	Cut   float64 // fraction of replicas removed; 0 skips the phase
}

// Bounder computes the fit-cut lower bound (USD per hour) of placing pods on new nodes of the
// scenario's NodePool: provisioning.Solve's LowerBoundPerHour (package lowerbound, FitCut).
type Bounder struct {
	Catalog     *catalog.Catalog
	NodePools   []*apisv1.NodePool
	NodeClasses []apisv1.NodeClass
	Settings    provisioning.NodeSettingsFunc
}

// Bound solves the pods the workloads ws run, replicas(w) of each, built from their pod
// templates as pending pods. From the templates, not the live pods: the same input on both
// sides. Dovetail adds a toleration of each planned node's taint to the pods it nominates, so
// the live pods of its run fall into more scheduling signatures (one per planned node) than
// the same pods on Karpenter's side, and the solver's pattern bound, which it computes only up
// to 64 pod classes, was skipped on Dovetail's side alone (issue 28: 1.99 against 2.14 USD/h
// for the same 200 pods).
func (b Bounder) Bound(ws []Workload, replicas func(Workload) int) (float64, error) {
	pods := TemplatePods(ws, replicas)
	plan, err := provisioning.Solve(provisioning.Input{Pods: pods, NodePools: b.NodePools, NodeClasses: b.NodeClasses,
		Catalog: b.Catalog, NodeSettings: b.Settings, Time: time.Now()})
	if err != nil {
		return 0, fmt.Errorf("lower bound: %w", err)
	}
	if len(plan.Unschedulable) > 0 {
		return 0, fmt.Errorf("lower bound: %d of %d pods do not fit the NodePool (first: %s: %s)", len(plan.Unschedulable), len(pods),
			plan.Unschedulable[0].Pod.Name, plan.Unschedulable[0].Reason)
	}
	return plan.LowerBoundPerHour, nil
}

// TemplatePods is replicas(w) pending pods of each workload's pod template, named
// <workload>-<i> in Namespace.
func TemplatePods(ws []Workload, replicas func(Workload) int) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, w := range ws {
		tmpl := w.Template()
		for i := range replicas(w) {
			p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy(), Status: corev1.PodStatus{Phase: corev1.PodPending}}
			p.Name, p.Namespace, p.UID = fmt.Sprintf("%s-%d", w.Name, i), Namespace, types.UID(fmt.Sprintf("%s-%d", w.Name, i))
			pods = append(pods, p)
		}
	}
	return pods
}

// Pricer prices a Node from its labels (instance type, zone, capacity type) at the catalog's
// offering price, the price both sides were given.
func Pricer(cat *catalog.Catalog) func(n *corev1.Node) (float64, error) {
	return func(n *corev1.Node) (float64, error) {
		typ, zone, ct := n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone], n.Labels[karpv1.CapacityTypeLabelKey]
		it := cat.Get(typ)
		if it == nil {
			return 0, fmt.Errorf("node %s: instance type %q is not in the catalog", n.Name, typ)
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == ct {
				return o.PricePerHour, nil
			}
		}
		return 0, fmt.Errorf("node %s: %s has no %s offering in zone %q", n.Name, typ, ct, zone)
	}
}

// Measure creates the workloads of n pods, waits until every pod is bound, then (Phase.Cut)
// scales them down and waits for the nodes to settle; it fills r from what it saw. sched is
// kube-scheduler's URL (realcluster.ControlPlane.SchedulerURL).
func Measure(ctx context.Context, r *Result, kc kubernetes.Interface, dc dynamic.Interface, sched string, ph Phase, price func(*corev1.Node) (float64, error), b Bounder) error {
	rec := newRecorder()
	if err := rec.Start(ctx, kc, dc); err != nil {
		return err
	}
	before, err := APIRequests(ctx, kc)
	if err != nil {
		return err
	}
	schedBefore, err := SchedulerCounts(ctx, sched)
	if err != nil {
		return err
	}
	ws, err := Workloads(r.N)
	if err != nil {
		return err
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	start := time.Now()
	for _, w := range ws {
		if err := createWorkload(ctx, kc, w); err != nil {
			return err
		}
	}
	log.Printf("%s N=%d: created %d workloads in %s", r.Side, r.N, len(ws), time.Since(start).Round(time.Millisecond))
	if err := waitBound(ctx, rec, r.N, ph.BindTimeout, fmt.Sprintf("%s N=%d", r.Side, r.N)); err != nil {
		_, bound := rec.Progress()
		r.Unbound = r.N - bound
		r.Notes = append(r.Notes, err.Error())
	}
	after, err := APIRequests(ctx, kc)
	if err != nil {
		return err
	}
	r.Requests, r.Reads, r.Writes = DiffRequests(before, after)
	schedAfter, err := SchedulerCounts(ctx, sched)
	if err != nil {
		return err
	}
	r.Scheduler = DiffCounts(schedBefore, schedAfter)
	toClaim, toReady, toBound, lastBound := rec.Latencies(start)
	r.ToClaim, r.ToReady, r.ToBound = DistOf(toClaim), DistOf(toReady), DistOf(toBound)
	if r.Unbound == 0 {
		r.AllBound = lastBound.Sub(start) // from the first workload's creation
	}
	var rows []NodeTimeline
	rows, r.Stages = rec.Timeline(start)
	for _, row := range rows {
		log.Printf("%s N=%d: timeline %s", r.Side, r.N, row)
	}
	if r.Nodes, r.PricePerHour, err = countNodes(ctx, kc, price); err != nil {
		return err
	}
	if r.LowerBound, err = b.Bound(ws, func(w Workload) int { return w.Replicas }); err != nil {
		return err
	}
	if ph.Cut <= 0 || r.Unbound > 0 {
		return nil
	}
	c := &Consolidation{Cut: ph.Cut}
	r.Consolidation = c
	cutAt := time.Now()
	for _, w := range ws {
		after := ScaledDown(w.Replicas, ph.Cut)
		c.PodsAfter += after
		if err := scaleWorkload(ctx, kc, w, after); err != nil {
			return err
		}
	}
	log.Printf("%s N=%d: scaled down to %d pods; waiting for the nodes to settle (quiet %s, at most %s)", r.Side, r.N, c.PodsAfter, ph.Quiet, ph.ConsolidateTimeout)
	c.Converged = waitSettled(ctx, rec, c.PodsAfter, cutAt, ph)
	c.Converge = ph.ConsolidateTimeout
	if c.Converged {
		c.Converge = max(rec.LastChange().Sub(cutAt), 0)
	}
	c.NodesAdded, c.NodesDeleted = rec.NodeChanges(cutAt)
	if c.NodesAfter, c.PricePerHour, err = countNodes(ctx, kc, price); err != nil {
		return err
	}
	if c.LowerBound, err = b.Bound(ws, func(w Workload) int { return ScaledDown(w.Replicas, ph.Cut) }); err != nil {
		return err
	}
	return nil
}

func createWorkload(ctx context.Context, kc kubernetes.Interface, w Workload) error {
	var err error
	switch {
	case w.Deployment != nil:
		_, err = kc.AppsV1().Deployments(Namespace).Create(ctx, w.Deployment, metav1.CreateOptions{})
	case w.StatefulSet != nil:
		_, err = kc.AppsV1().StatefulSets(Namespace).Create(ctx, w.StatefulSet, metav1.CreateOptions{})
	case w.Job != nil:
		_, err = kc.BatchV1().Jobs(Namespace).Create(ctx, w.Job, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating %s %s: %w", w.Kind, w.Name, err)
	}
	return nil
}

// scaleWorkload sets a Deployment's or StatefulSet's replicas, or a Job's parallelism, to n
// (a JSON merge patch of the one field).
func scaleWorkload(ctx context.Context, kc kubernetes.Interface, w Workload, n int) error {
	var err error
	switch {
	case w.Deployment != nil:
		_, err = kc.AppsV1().Deployments(Namespace).Patch(ctx, w.Name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n), metav1.PatchOptions{})
	case w.StatefulSet != nil:
		_, err = kc.AppsV1().StatefulSets(Namespace).Patch(ctx, w.Name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n), metav1.PatchOptions{})
	case w.Job != nil:
		_, err = kc.BatchV1().Jobs(Namespace).Patch(ctx, w.Name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"parallelism":%d}}`, n), metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("scaling %s %s to %d: %w", w.Kind, w.Name, n, err)
	}
	return nil
}

// waitBound polls the recorder until n live pods are seen and bound, logging progress every 10 s.
func waitBound(ctx context.Context, rec *Recorder, n int, timeout time.Duration, what string) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		seen, bound := rec.Progress()
		if seen >= n && bound >= n {
			log.Printf("%s: all %d pods bound", what, n)
			return nil
		}
		if time.Since(lastLog) > 10*time.Second {
			log.Printf("%s: %d pods seen, %d bound", what, seen, bound)
			lastLog = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods bound after %s", bound, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// waitSettled waits until exactly want live pods exist, all bound, and no Node or NodeClaim
// was added or deleted for ph.Quiet; false when ph.ConsolidateTimeout passes first.
func waitSettled(ctx context.Context, rec *Recorder, want int, from time.Time, ph Phase) bool {
	deadline := from.Add(ph.ConsolidateTimeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastLog := time.Now()
	for time.Now().Before(deadline) {
		seen, bound := rec.Progress()
		last := rec.LastChange()
		if last.Before(from) {
			last = from
		}
		quiet := time.Since(last)
		if seen == want && bound == want && quiet >= ph.Quiet {
			return true
		}
		if time.Since(lastLog) > 30*time.Second {
			log.Printf("settling: %d pods (want %d), %d bound, nodes unchanged for %s", seen, want, bound, quiet.Round(time.Second))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return false
}
