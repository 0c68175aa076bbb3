package localdev

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// The stand-ins below replace, in the in-memory cluster only, the parts of a control plane
// client-go's fake clientset does not have: the DaemonSet controller and kube-scheduler. They
// decide with the same scheduling package the solver uses (resources, taints, node selectors and
// affinity, required hostname anti-affinity), so they are a check of what Dovetail launched, not
// an independent one; the real-control-plane e2e runs the real kube-scheduler instead.

// StandIns are the in-memory cluster's DaemonSet controller and kube-scheduler, run one pass at
// a time: `dovetail dev` every 100 ms (Env.runStandIns), the scenarios once per step of their
// fake clock (localdev/scenarios).
type StandIns struct {
	ds *daemonSets
	b  *binder
	k  *kubelet
}

// StandIns returns the stand-ins of an in-memory cluster; onBind (optional) is told of every
// binding, as "namespace/name" and the node.
func (c *Cluster) StandIns(onBind func(pod, node string)) *StandIns {
	now := c.now
	if now == nil {
		now = time.Now
	}
	return &StandIns{ds: &daemonSets{kube: c.Kube}, b: &binder{kube: c.Kube, marked: map[string]bool{}, onBind: onBind, now: now},
		k: &kubelet{kube: c.Kube, now: now}}
}

// Pass runs the DaemonSet controller (a pod of each DaemonSet on every node it selects), then
// kube-scheduler (every pending pod that fits a Ready node is bound), then the kubelets'
// container statuses of the pods that crash (AnnotationCrash). It returns how many workload
// pods are still unbound, and the first API error.
func (s *StandIns) Pass(ctx context.Context) (int, error) {
	if err := s.ds.pass(ctx); err != nil {
		return 0, err
	}
	n, err := s.b.pass(ctx)
	if err != nil {
		return n, err
	}
	return n, s.k.pass(ctx)
}

// binder is the local stand-in for kube-scheduler.
type binder struct {
	kube kubernetes.Interface
	// onBind is told of every binding (for the progress display).
	onBind func(pod, node string)
	// marked remembers pods already marked Unschedulable, so they are not re-updated each pass.
	marked map[string]bool
	// now stamps the pod conditions it writes.
	now func() time.Time
}

// nodeState is one node's free capacity and residents during a binding pass.
type nodeState struct {
	node      *corev1.Node
	free      scheduling.Resources
	residents []*corev1.Pod
	terms     [][]scheduling.AntiAffinityTerm
}

// pass binds every pending pod that fits a Ready node (nodes in name order, pods by creation
// order then name), and marks the rest PodScheduled=False/Unschedulable as kube-scheduler does.
// It returns how many pods are still unbound (DaemonSet pods excluded).
func (b *binder) pass(ctx context.Context) (int, error) {
	nodes, err := b.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	pods, err := b.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	states := map[string]*nodeState{}
	var order []*nodeState
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !nodeReady(n) || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
			continue
		}
		s := &nodeState{node: n, free: scheduling.FromList(n.Status.Allocatable)}
		states[n.Name] = s
		order = append(order, s)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].node.Name < order[j].node.Name })
	var pending []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if scheduling.IsTerminal(p) {
			continue
		}
		if p.Spec.NodeName == "" {
			if p.DeletionTimestamp == nil {
				pending = append(pending, p)
			}
			continue
		}
		if s := states[p.Spec.NodeName]; s != nil {
			s.free = s.free.Sub(scheduling.PodRequests(p))
			terms, _ := scheduling.RequiredAntiAffinity(p)
			s.residents = append(s.residents, p)
			s.terms = append(s.terms, terms)
		}
	}
	sort.Slice(pending, func(i, j int) bool {
		ti, tj := pending[i].CreationTimestamp, pending[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return pending[i].Namespace+"/"+pending[i].Name < pending[j].Namespace+"/"+pending[j].Name
	})
	left := 0
	for _, p := range pending {
		node, why := pickNode(p, order)
		if node == nil {
			if !scheduling.IsDaemonSetPod(p) {
				left++
			}
			if err := b.markUnschedulable(ctx, p, why); err != nil {
				return left, err
			}
			continue
		}
		if err := b.bind(ctx, p, node.node.Name); err != nil {
			return left, err
		}
		terms, _ := scheduling.RequiredAntiAffinity(p)
		node.free = node.free.Sub(scheduling.PodRequests(p))
		node.residents = append(node.residents, p)
		node.terms = append(node.terms, terms)
	}
	return left, nil
}

// pickNode returns the first node that passes kube-scheduler's filters for the pod, or why none does.
func pickNode(p *corev1.Pod, nodes []*nodeState) (*nodeState, string) {
	req := scheduling.PodRequests(p)
	alts, err := scheduling.PodNodeRequirements(p)
	if err != nil {
		return nil, err.Error()
	}
	terms, err := scheduling.RequiredAntiAffinity(p)
	if err != nil {
		return nil, err.Error()
	}
	if len(nodes) == 0 {
		return nil, "0/0 nodes are available"
	}
	// Feasible nodes are scored like kube-scheduler's InterPodAffinity score: each preferred
	// hostname anti-affinity term that a resident matches costs its weight; the lowest cost
	// wins, the first node on ties.
	var prefTerms []scheduling.AntiAffinityTerm
	var prefWeights []int32
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if w.PodAffinityTerm.TopologyKey != corev1.LabelHostname {
				continue
			}
			if ts, err := scheduling.AntiAffinityTerms(p, []corev1.PodAffinityTerm{w.PodAffinityTerm}); err == nil && len(ts) == 1 {
				prefTerms = append(prefTerms, ts[0])
				prefWeights = append(prefWeights, w.Weight)
			}
		}
	}
	var best *nodeState
	bestCost := int32(-1)
	reasons := map[string]int{}
	for _, n := range nodes {
		switch {
		case !req.Fits(n.free):
			reasons["Insufficient "+strings.SplitN(req.Exceeding(n.free), " ", 2)[0]]++
		case scheduling.UntoleratedTaint(p.Spec.Tolerations, n.node.Spec.Taints) != nil:
			reasons["node(s) had untolerated taint"]++
		case !matchesAny(alts, n.node.Labels):
			reasons["node(s) didn't match Pod's node affinity/selector"]++
		case scheduling.HostnameAntiAffinityConflict(p, terms, n.residents, n.terms):
			reasons["node(s) didn't match pod anti-affinity rules"]++
		default:
			// kube-scheduler evaluates a pod's nominated node first and binds it there when it
			// fits (its own preemption nominates; Dovetail's planned pods carry a toleration).
			if p.Status.NominatedNodeName != "" && n.node.Name == p.Status.NominatedNodeName {
				return n, ""
			}
			var cost int32
			for i := range prefTerms {
				for _, r := range n.residents {
					if prefTerms[i].Matches(r) {
						cost += prefWeights[i]
						break
					}
				}
			}
			if best == nil || cost < bestCost {
				best, bestCost = n, cost
			}
		}
	}
	if best != nil {
		return best, ""
	}
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, fmt.Sprintf("%d %s", reasons[k], k))
	}
	sort.Strings(keys)
	return nil, fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), strings.Join(keys, ", "))
}

func matchesAny(alts []scheduling.Requirements, labels map[string]string) bool {
	for _, a := range alts {
		if a.MatchLabels(labels) == nil {
			return true
		}
	}
	return false
}

// bind sets spec.nodeName and marks the pod Running (the fake clientset has no binding
// subresource and no kubelet).
func (b *binder) bind(ctx context.Context, p *corev1.Pod, node string) error {
	p = p.DeepCopy()
	p.Spec.NodeName = node
	now := metav1.NewTime(b.now())
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = setCondition(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now})
	p.Status.Conditions = setCondition(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
	if _, err := b.kube.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("binding %s/%s to %s: %w", p.Namespace, p.Name, node, err)
	}
	delete(b.marked, p.Namespace+"/"+p.Name)
	if b.onBind != nil {
		b.onBind(p.Namespace+"/"+p.Name, node)
	}
	return nil
}

func (b *binder) markUnschedulable(ctx context.Context, p *corev1.Pod, why string) error {
	key := p.Namespace + "/" + p.Name
	if b.marked[key] {
		return nil
	}
	p = p.DeepCopy()
	p.Status.Conditions = setCondition(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: why, LastTransitionTime: metav1.NewTime(b.now())})
	if _, err := b.kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking %s unschedulable: %w", key, err)
	}
	b.marked[key] = true
	return nil
}

func setCondition(cs []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == c.Type {
			cs[i] = c
			return cs
		}
	}
	return append(cs, c)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// daemonSets is the local stand-in for the DaemonSet controller: every node that a DaemonSet's
// pod would run on (selectors, affinity, tolerations) gets one pod of it.
type daemonSets struct {
	kube kubernetes.Interface
}

func (d *daemonSets) pass(ctx context.Context) error {
	dss, err := d.kube.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes, err := d.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := d.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, p := range pods.Items {
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" {
				have[p.Namespace+"/"+o.Name+"@"+p.Spec.NodeName] = true
			}
		}
	}
	for i := range dss.Items {
		ds := &dss.Items[i]
		tmpl := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		alts, err := scheduling.PodNodeRequirements(tmpl)
		if err != nil {
			continue
		}
		for j := range nodes.Items {
			n := &nodes.Items[j]
			if have[ds.Namespace+"/"+ds.Name+"@"+n.Name] || n.DeletionTimestamp != nil ||
				scheduling.UntoleratedTaint(ds.Spec.Template.Spec.Tolerations, n.Spec.Taints) != nil || !matchesAny(alts, n.Labels) {
				continue
			}
			if err := d.create(ctx, ds, n.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *daemonSets) create(ctx context.Context, ds *appsv1.DaemonSet, node string) error {
	suffix := node
	if i := strings.IndexByte(suffix, '.'); i > 0 {
		suffix = suffix[:i]
	}
	ctrl := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: ds.Name + "-" + suffix, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &ctrl}},
		},
		Spec:   *ds.Spec.Template.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	p.Spec.NodeName = node
	if _, err := d.kube.CoreV1().Pods(ds.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("daemonset pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
