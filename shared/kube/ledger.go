package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/kevents"
)

// grantTTL is how long a budget unit the agent granted counts without its caches showing it:
// far longer than a watch event takes to arrive, short enough that a taint that never landed
// (the node deleted meanwhile) frees its unit.
const grantTTL = time.Minute

// ledger remembers the karpenter.sh/disrupted taints the agent applied until its caches show
// them, so two reservations applied back to back both see the first (events.BudgetReservation),
// and a drain right behind its taint finds the node disrupting.
type ledger struct {
	mu      sync.Mutex
	granted map[string]grant // node → grant
}

type grant struct {
	pool string
	at   time.Time
}

// DisruptingNodes lists the names of the pool's nodes that hold a unit of its disruption budget
// by the caches (disruption.BudgetPool and disruption.Disrupting, the rule every function counts
// with), sorted.
func (w *Watcher) DisruptingNodes(pool string) []string {
	claims := map[string]*apisv1.NodeClaim{}
	for _, obj := range w.nodeClaims.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		nc := &apisv1.NodeClaim{}
		if FromUnstructured(u, nc) != nil {
			continue
		}
		if nc.Status.NodeName != "" {
			claims[nc.Status.NodeName] = nc
		}
		if nc.Status.ProviderID != "" {
			claims[nc.Status.ProviderID] = nc
		}
	}
	var out []string
	for _, obj := range w.nodes.GetStore().List() {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Labels[apisv1.LabelNodePool] != pool {
			continue
		}
		nc := claims[n.Name]
		if nc == nil {
			nc = claims[n.Spec.ProviderID]
		}
		if disruption.BudgetPool(n, nc) == pool && disruption.Disrupting(n, nc) {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// reserve grants the unit of the budget a TaintNode asks for, or refuses the command (an Event
// names the budget and the nodes that hold it). A node already tainted karpenter.sh/disrupted
// holds its unit already.
func (a *Applier) reserve(ctx context.Context, cmd *events.Command, node *corev1.Node) error {
	b := cmd.Budget
	if b == nil || node == nil || hasDisruptedTaint(node) {
		return nil
	}
	a.ledger.mu.Lock()
	defer a.ledger.mu.Unlock()
	now := a.opts.Clock.Now()
	holding := map[string]bool{}
	for _, n := range a.state.DisruptingNodes(b.NodePool) {
		holding[n] = true
	}
	for name, g := range a.ledger.granted {
		cached := a.state.Node(name)
		if now.Sub(g.at) > grantTTL || cached == nil {
			delete(a.ledger.granted, name) // lapsed, or the node is gone
			continue
		}
		// Counted even when the caches have just come to show it: the count above may have
		// been taken a moment before.
		if g.pool == b.NodePool {
			holding[name] = true
		}
		if hasDisruptedTaint(cached) {
			delete(a.ledger.granted, name)
		}
	}
	delete(holding, cmd.NodeName)
	if len(holding) >= b.MaxDisrupting {
		names := make([]string, 0, len(holding))
		for n := range holding {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) > 5 {
			names = append(names[:5], "...")
		}
		// Karpenter's NodePool event for a budget that allows nothing more now.
		pool := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodePool", Name: b.NodePool}
		if err := a.recordEvent(ctx, cmd.ID, kevents.BudgetBlocked(pool, b.Reason)); err != nil {
			return err // retried: the refusal is recorded with it
		}
		return a.refuse(ctx, cmd, a.nodeRef(cmd.NodeName), fmt.Sprintf("the disruption budget of NodePool %s for %s allows %d disrupting node(s), %d already are (%s)",
			b.NodePool, b.Reason, b.MaxDisrupting, len(holding), strings.Join(names, ", ")))
	}
	return nil
}

// note records a karpenter.sh/disrupted taint just applied to node (of pool).
func (l *ledger) note(node, pool string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.granted == nil {
		l.granted = map[string]grant{}
	}
	l.granted[node] = grant{pool: pool, at: now}
}

// disrupting reports whether the node is tainted karpenter.sh/disrupted by the caches or by a
// taint the agent applied within grantTTL.
func (a *Applier) disrupting(node *corev1.Node) bool {
	if hasDisruptedTaint(node) {
		return true
	}
	a.ledger.mu.Lock()
	defer a.ledger.mu.Unlock()
	g, ok := a.ledger.granted[node.Name]
	return ok && a.opts.Clock.Now().Sub(g.at) <= grantTTL
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == apisv1.TaintKeyDisrupted {
			return true
		}
	}
	return false
}

// graceOver reports whether a node's disruption has outlived its NodeClaim's
// terminationGracePeriod: counted from the karpenter.sh/disrupted taint's timeAdded, as every
// drain is bounded by it (Karpenter v1). A node without that taint, time or grace period waits.
func (a *Applier) graceOver(n *corev1.Node) bool {
	var tainted *metav1.Time
	for _, t := range n.Spec.Taints {
		if t.Key == apisv1.TaintKeyDisrupted && t.TimeAdded != nil {
			tainted = t.TimeAdded
		}
	}
	if tainted == nil {
		return false
	}
	nc := a.nodeClaimOf(n)
	if nc == nil {
		return false
	}
	grace := nc.Spec.TerminationGracePeriod
	return grace != nil && !a.opts.Clock.Now().Before(tainted.Add(grace.Duration))
}
