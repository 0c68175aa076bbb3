package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

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
	// The reservations in the cluster: a previous leader's, whose taints this agent's caches
	// may not show yet, count as this agent's own do.
	cm, kept, err := a.loadLedger(ctx, now)
	if err != nil {
		return err // retried: no unit is granted without reading the ledger
	}
	for name, e := range kept {
		if e.NodePool == b.NodePool {
			holding[name] = true
		}
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
	// Written before the taint: a leader that dies between the two leaves a reservation that
	// counts until LedgerEntryTTL (safe), never a taint the ledger does not know of.
	kept[cmd.NodeName] = LedgerEntry{NodePool: b.NodePool, Reason: b.Reason, Command: cmd.ID, At: now.UTC().Truncate(time.Second)}
	return a.saveLedger(ctx, cm, kept)
}

// DisruptionLedgerConfigMap is the ConfigMap, in the agent's namespace, that holds the budget
// units the leading agent granted (events.BudgetReservation) until its caches show their taints:
// one key per node, the value a JSON LedgerEntry. Every grant is a read and a compare-and-swap
// write of this one object (the API server refuses an update carrying a stale
// metadata.resourceVersion with 409 Conflict), so a new leader resumes every reservation of the
// old one, and two agents that both believe they lead cannot both spend the same free unit.
const DisruptionLedgerConfigMap = "dovetail-disruption-ledger"

// LedgerEntryTTL is how long a reservation counts without the caches showing its taint (grantTTL).
const LedgerEntryTTL = grantTTL

// LedgerEntry is one reservation of DisruptionLedgerConfigMap.
type LedgerEntry struct {
	NodePool string `json:"nodePool"`
	Reason   string `json:"reason"`
	// Command is the ID of the TaintNode that reserved the unit.
	Command string `json:"command"`
	// At is when the unit was granted (the granting agent's clock, whole seconds).
	At time.Time `json:"at"`
}

// loadLedger reads DisruptionLedgerConfigMap from the API server (never from a cache: a new
// leader must see its predecessor's last write) and returns it (nil when it does not exist yet)
// with the entries that still count: younger than LedgerEntryTTL, on a node the caches know and
// do not yet show tainted karpenter.sh/disrupted (once they do, the taint itself counts). An
// unreadable entry is dropped with a log line naming it: it names no pool to count against.
func (a *Applier) loadLedger(ctx context.Context, now time.Time) (*corev1.ConfigMap, map[string]LedgerEntry, error) {
	cm, err := a.kube.CoreV1().ConfigMaps(a.opts.Namespace).Get(ctx, DisruptionLedgerConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, map[string]LedgerEntry{}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the disruption ledger (ConfigMap %s/%s): %w", a.opts.Namespace, DisruptionLedgerConfigMap, err)
	}
	kept := map[string]LedgerEntry{}
	for node, v := range cm.Data {
		var e LedgerEntry
		if err := json.Unmarshal([]byte(v), &e); err != nil || e.NodePool == "" {
			a.opts.Logger.Warn("dropping an unreadable disruption ledger entry", "configMap", DisruptionLedgerConfigMap, "node", node, "err", err)
			continue
		}
		cached := a.state.Node(node)
		if now.Sub(e.At) > LedgerEntryTTL || cached == nil || hasDisruptedTaint(cached) {
			continue
		}
		kept[node] = e
	}
	return cm, kept, nil
}

// saveLedger writes entries as the whole of DisruptionLedgerConfigMap: created when cm is nil,
// else updated with cm's resourceVersion, so a write racing another agent's fails with 409 (or
// AlreadyExists) and the command is retried on a fresh read.
func (a *Applier) saveLedger(ctx context.Context, cm *corev1.ConfigMap, entries map[string]LedgerEntry) error {
	data := make(map[string]string, len(entries))
	for node, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		data[node] = string(b)
	}
	cms := a.kube.CoreV1().ConfigMaps(a.opts.Namespace)
	var err error
	if cm == nil {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DisruptionLedgerConfigMap, Namespace: a.opts.Namespace}, Data: data},
			metav1.CreateOptions{FieldManager: a.opts.Component})
	} else {
		next := cm.DeepCopy()
		next.Data = data
		_, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: a.opts.Component})
	}
	if err != nil {
		return fmt.Errorf("write the disruption ledger (ConfigMap %s/%s): %w", a.opts.Namespace, DisruptionLedgerConfigMap, err)
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

// RevisionFloorAnnotation, on DisruptionLedgerConfigMap, is the lowest snapshot revision the next
// leading agent may use (a decimal int64): the end of the revisions the last leader reserved.
const RevisionFloorAnnotation = "dovetail.dev/revision-floor"

// RevisionTerm is how many snapshot revisions one leading agent reserves (ReserveRevisions):
// 2^40, one per informer event, more than 3 years of 10,000 events a second.
const RevisionTerm int64 = 1 << 40

// ReserveRevisions makes this agent's revisions higher than every revision an earlier leader
// published, before it publishes any. Revisions count the process's own informer events from a
// base taken from its clock (Revisions), so a standby that takes over counts on its own scale:
// where it is lower than the old leader's, the functions keep the old leader's snapshots as the
// freshest (emit.Freshest, interruption.LatestSnapshot follow the highest revision), a revision
// reused names a different cluster state in event IDs, client tokens and NodeClaim names derived
// from it, and an old command's revision could fall inside the new leader's own history and be
// judged against it. The reservation is a compare-and-swap (resourceVersion) on
// RevisionFloorAnnotation of DisruptionLedgerConfigMap: read the floor F, start at
// max(F, current + 1) (Revisions.Advance) and write the floor start + RevisionTerm. Commands
// made from an earlier leader's snapshots then predate this agent's history and are refused as
// stale (Apply), except the kinds that are never stale. It returns the first revision and the end
// of the reservation (exclusive); the leader must stop before it reaches the end.
func (a *Applier) ReserveRevisions(ctx context.Context) (from, end int64, err error) {
	cms := a.kube.CoreV1().ConfigMaps(a.opts.Namespace)
	revs := a.state.Revisions()
	err = retry.OnError(retry.DefaultRetry, func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }, func() error {
		cm, err := cms.Get(ctx, DisruptionLedgerConfigMap, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read the revision floor (ConfigMap %s/%s): %w", a.opts.Namespace, DisruptionLedgerConfigMap, err)
		}
		var floor int64
		if err == nil {
			if v, ok := cm.Annotations[RevisionFloorAnnotation]; ok {
				if floor, err = strconv.ParseInt(v, 10, 64); err != nil || floor < 0 {
					return fmt.Errorf("ConfigMap %s/%s: metadata.annotations[%s]: %q is not a non-negative integer", a.opts.Namespace, DisruptionLedgerConfigMap, RevisionFloorAnnotation, v)
				}
			}
		} else {
			cm = nil
		}
		from = max(floor, revs.Current()+1)
		if from > math.MaxInt64-RevisionTerm {
			return fmt.Errorf("ConfigMap %s/%s: metadata.annotations[%s]: %d leaves no room for %d more revisions", a.opts.Namespace, DisruptionLedgerConfigMap, RevisionFloorAnnotation, floor, RevisionTerm)
		}
		end = from + RevisionTerm
		if cm == nil {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DisruptionLedgerConfigMap, Namespace: a.opts.Namespace,
				Annotations: map[string]string{RevisionFloorAnnotation: strconv.FormatInt(end, 10)}}}, metav1.CreateOptions{FieldManager: a.opts.Component})
		} else {
			next := cm.DeepCopy()
			if next.Annotations == nil {
				next.Annotations = map[string]string{}
			}
			next.Annotations[RevisionFloorAnnotation] = strconv.FormatInt(end, 10)
			_, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: a.opts.Component})
		}
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("write the revision floor (ConfigMap %s/%s): %w", a.opts.Namespace, DisruptionLedgerConfigMap, err)
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	// Events counted since the read only raise the start a little; the reservation covers it.
	return revs.Advance(from), end, nil
}
