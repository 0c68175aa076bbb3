// Package static decides the size of static NodePools (spec.replicas), as Karpenter v1.14's
// static provisioning and deprovisioning controllers do (kubernetes-sigs/karpenter
// pkg/controllers/static/provisioning and .../deprovisioning, designs/static-capacity.md): a
// static NodePool holds exactly spec.replicas NodeClaims, whatever its pods need. It is pure:
// the snapshot in, how many NodeClaims each static pool launches and which it deletes out; the
// provision function launches (shared/launch), the lifecycle function publishes the deletions.
package static

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// ReasonOverprovisioned is the reason of a scale-down deletion: Karpenter's static
// deprovisioning TerminationReason.
const ReasonOverprovisioned = "overprovisioned"

// IsStatic reports whether the NodePool is static: spec.replicas is set (Karpenter's
// nodepoolutils.IsStatic).
func IsStatic(np *apisv1.NodePool) bool { return np != nil && np.Spec.Replicas != nil }

// Pool is one static NodePool's decision.
type Pool struct {
	NodePool *apisv1.NodePool
	// Replicas is spec.replicas.
	Replicas int64
	// Active counts the pool's NodeClaims that are neither being deleted nor tainted
	// karpenter.sh/disrupted (launched ones whose Node has not registered included);
	// PendingDisruption those tainted karpenter.sh/disrupted by a disruption in progress (drift
	// replacing them); Deleting those whose NodeClaim or Node is being deleted. Karpenter's
	// NodePoolState Active, PendingDisruption and Deleting sets.
	Active, PendingDisruption, Deleting int
	// NodeLimit is spec.limits.nodes (math.MaxInt64 without one).
	NodeLimit int64
	// Launch is how many NodeClaims to create now (0 when none).
	Launch int
	// LimitReached: the pool is short of its replicas but limits.nodes leaves no room.
	LimitReached bool
	// Remove are the NodeClaims to delete now to come down to spec.replicas, in Karpenter's
	// order (see Decide).
	Remove []Removal
	// Skipped says why the pool is left alone ("" when it was decided on).
	Skipped string
}

// Removal is one NodeClaim a scale-down deletes.
type Removal struct {
	NodeClaim *apisv1.NodeClaim
	// Node is the NodeClaim's Node ("" before it registers).
	Node string
	// Why is the one-line explanation the command carries.
	Why string
}

// Decision is every static NodePool's decision, by NodePool name.
type Decision struct {
	Pools []Pool
}

// Launches returns the pools that launch NodeClaims now.
func (d Decision) Launches() []Pool {
	var out []Pool
	for _, p := range d.Pools {
		if p.Launch > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Decide decides every static NodePool of the snapshot (sorted by name; dynamic pools are not
// listed):
//
//   - A pool being deleted, or one whose spec fails validation with the CRD's defaults applied
//     (apis.ValidateNodePool: a negative replicas, weight or a limit other than limits.nodes;
//     its NodePool status says so), is skipped.
//   - Scale up: when Active + PendingDisruption < replicas, Launch = replicas − Active, capped so
//     that Active + Deleting + PendingDisruption + Launch stays within limits.nodes (Karpenter's
//     static provisioning Reconcile with NodePoolState.ReserveNodeCount). A drifted node being
//     replaced counts as present, so its replacement is not launched twice.
//   - Scale down: when Active > replicas, Active − replicas NodeClaims are deleted, chosen as
//     Karpenter's static deprovisioning chooses them: first NodeClaims not launched yet (no
//     provider ID), then empty nodes (no pod, or only DaemonSet pods none of which carries
//     karpenter.sh/do-not-disrupt), then the others with nodes holding a do-not-disrupt pod
//     last and otherwise the lowest rescheduling cost first (the sum of the node's pods'
//     eviction costs × the share of the NodeClaim's lifetime left, disruption.EvictionCost and
//     disruption.LifetimeRemaining). Ties go by NodeClaim name (Karpenter's own order is its
//     informer's). A scale-down is user-driven: it takes no disruption budget (the design's
//     "automated forceful" method, like expiry), and the termination path drains each node
//     through the Eviction API, so PodDisruptionBudgets and terminationGracePeriod still hold.
//
// A static pool's NodeClaims are never consolidated (package disruption leaves them out); drift
// replaces them one for one within the Drifted budget (DriftReplacements); an expired one is
// deleted, and the next decision launches its successor.
func Decide(snap *events.Snapshot) Decision {
	var d Decision
	nodes := nodesByClaim(snap)
	podsOn := map[string][]*corev1.Pod{}
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
		}
	}
	pools := make([]*apisv1.NodePool, 0, len(snap.NodePools))
	for i := range snap.NodePools {
		if IsStatic(&snap.NodePools[i]) {
			pools = append(pools, &snap.NodePools[i])
		}
	}
	slices.SortFunc(pools, func(a, b *apisv1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	for _, np := range pools {
		d.Pools = append(d.Pools, decidePool(snap, np, nodes, podsOn))
	}
	return d
}

// member is one of a static pool's NodeClaims with its Node.
type member struct {
	nc   *apisv1.NodeClaim
	node *corev1.Node
}

func decidePool(snap *events.Snapshot, np *apisv1.NodePool, nodes map[*apisv1.NodeClaim]*corev1.Node, podsOn map[string][]*corev1.Pod) Pool {
	p := Pool{NodePool: np, Replicas: *np.Spec.Replicas, NodeLimit: NodeLimit(np)}
	// A drift replacement names the node it replaces (disruption.AnnotationReplaces); from its
	// launch on, that node is pending disruption, even in a snapshot taken before its taint is
	// applied, so the replacement is never taken for a surplus NodeClaim.
	replaced := map[string]bool{}
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if nc.Labels[apisv1.LabelNodePool] == np.Name && nc.DeletionTimestamp == nil {
			for _, n := range strings.Split(nc.Annotations[disruption.AnnotationReplaces], ",") {
				replaced[n] = n != ""
			}
		}
	}
	var active []member
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if nc.Labels[apisv1.LabelNodePool] != np.Name {
			continue
		}
		node := nodes[nc]
		switch {
		case nc.DeletionTimestamp != nil || (node != nil && node.DeletionTimestamp != nil):
			p.Deleting++
		case node != nil && (disruption.MarkedForDeletion(node, nc) || replaced[node.Name]):
			p.PendingDisruption++
		default:
			p.Active++
			active = append(active, member{nc: nc, node: node})
		}
	}
	if np.DeletionTimestamp != nil {
		p.Skipped = "the NodePool is being deleted"
		return p
	}
	// Validated with the CRD's defaults applied, as the API server stores it (an in-memory
	// cluster or a manifest may leave consolidationPolicy and consolidateAfter unset).
	defaulted := np.DeepCopy()
	apis.SetDefaults(defaulted)
	if errs := apis.ValidateNodePool(defaulted); len(errs) > 0 {
		p.Skipped = "the NodePool is not valid: " + errs.ToAggregate().Error()
		return p
	}
	switch {
	case int64(p.Active)+int64(p.PendingDisruption) < p.Replicas:
		want := p.Replicas - int64(p.Active)
		room := p.NodeLimit - int64(p.Active+p.Deleting+p.PendingDisruption)
		p.Launch = int(max(0, min(want, room)))
		p.LimitReached = p.Launch == 0
	case int64(p.Active) > p.Replicas:
		p.Remove = removals(snap.Time.Time, np, active, int(int64(p.Active)-p.Replicas), podsOn)
	}
	return p
}

// NodeLimit is the NodePool's spec.limits.nodes, or math.MaxInt64 without one.
func NodeLimit(np *apisv1.NodePool) int64 {
	if q, ok := np.Spec.Limits["nodes"]; ok {
		return q.Value()
	}
	return math.MaxInt64
}

// removals picks n of the active members in Karpenter's scale-down order (see Decide).
func removals(now time.Time, np *apisv1.NodePool, active []member, n int, podsOn map[string][]*corev1.Pod) []Removal {
	type ranked struct {
		member
		rank int     // 0 not launched, 1 empty, 2 with pods, 3 with a do-not-disrupt pod
		cost float64 // rescheduling cost × lifetime remaining
	}
	rs := make([]ranked, 0, len(active))
	for _, m := range active {
		r := ranked{member: m}
		var pods []*corev1.Pod
		if m.node != nil {
			pods = podsOn[m.node.Name]
		}
		switch {
		case m.nc.Status.ProviderID == "":
			r.rank = 0
		case empty(pods):
			r.rank = 1
		case slices.ContainsFunc(pods, doNotDisrupt):
			r.rank = 3
		default:
			r.rank = 2
		}
		for _, pod := range pods {
			r.cost += disruption.EvictionCost(pod)
		}
		r.cost *= disruption.LifetimeRemaining(m.nc, now)
		rs = append(rs, r)
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		if a.rank >= 2 {
			if c := cmp.Compare(a.cost, b.cost); c != 0 {
				return c
			}
		}
		return strings.Compare(a.nc.Name, b.nc.Name)
	})
	out := make([]Removal, 0, n)
	for _, r := range rs[:min(n, len(rs))] {
		node := ""
		if r.node != nil {
			node = r.node.Name
		}
		out = append(out, Removal{NodeClaim: r.nc, Node: node,
			Why: fmt.Sprintf("NodePool %s has %d NodeClaims and spec.replicas %d: %s (%s)", np.Name, len(active), *np.Spec.Replicas, ReasonOverprovisioned, rankWhy[r.rank])})
	}
	return out
}

var rankWhy = [...]string{"not launched yet", "empty node", "lowest rescheduling cost", "every other node holds a do-not-disrupt pod too"}

// empty reports whether a node's pods leave it empty for a scale-down: none, or only DaemonSet
// pods none of which carries karpenter.sh/do-not-disrupt (Karpenter's deprovisioning emptiness,
// which counts a mirror pod as a pod).
func empty(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if !ownedByDaemonSet(p) || doNotDisrupt(p) {
			return false
		}
	}
	return true
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

func doNotDisrupt(p *corev1.Pod) bool { return p.Annotations[apisv1.AnnotationDoNotDisrupt] == "true" }

// nodesByClaim maps each NodeClaim to its Node, by provider ID (the Node's spec.providerID is
// what registration matches on, shared/lifecycle).
func nodesByClaim(snap *events.Snapshot) map[*apisv1.NodeClaim]*corev1.Node {
	byPID := map[string]*corev1.Node{}
	for i := range snap.Nodes {
		if pid := snap.Nodes[i].Spec.ProviderID; pid != "" {
			byPID[pid] = &snap.Nodes[i]
		}
	}
	out := map[*apisv1.NodeClaim]*corev1.Node{}
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if n := byPID[nc.Status.ProviderID]; nc.Status.ProviderID != "" && n != nil {
			out[nc] = n
		}
	}
	return out
}

// Commands are the scale-down's DeleteNodeClaim commands (disruption.HandOff: the termination
// path drains, terminates and releases), one per removal, their IDs derived from the cluster,
// the NodeClaim and its UID so a redelivered decision repeats them exactly.
func (d Decision) Commands(cluster string, revision int64) []events.Command {
	var out []events.Command
	for _, p := range d.Pools {
		for _, r := range p.Remove {
			out = append(out, disruption.HandOff(cluster, revision, r.Node, r.NodeClaim, r.Why, "static-scale-down", string(r.NodeClaim.UID)))
		}
	}
	return out
}

// GateDrift applies Karpenter's static drift rules (StaticDrift, kubernetes-sigs/karpenter
// pkg/controllers/disruption/staticdrift.go) to a drift plan: a static NodePool's drifted
// nodes are replaced one for one, a new NodeClaim from its template launched before the old
// one goes, within the Drifted budget PlanDrift already applied, and further only while the
// pool is not above its replicas (Active + PendingDisruption > replicas: the scale-down goes
// first) and within limits.nodes (at most NodeLimit − (Active + Deleting + PendingDisruption)
// replacements at once). The nodes held back move to OverBudget with the reason. Dynamic pools'
// candidates pass unchanged.
func GateDrift(snap *events.Snapshot, plan disruption.DriftPlan) disruption.DriftPlan {
	pools := map[string]Pool{}
	for _, p := range Decide(snap).Pools {
		pools[p.NodePool.Name] = p
	}
	granted := map[string]int64{}
	selected := plan.Selected[:0:0]
	for _, c := range plan.Selected {
		p, ok := pools[c.NodePool.Name]
		if !ok {
			selected = append(selected, c)
			continue
		}
		room := p.NodeLimit - int64(p.Active+p.Deleting+p.PendingDisruption) - granted[p.NodePool.Name]
		why := ""
		switch {
		case int64(p.Active+p.PendingDisruption) > p.Replicas:
			why = fmt.Sprintf("static NodePool %s holds %d NodeClaims for spec.replicas %d: its scale-down goes before drift", p.NodePool.Name, p.Active+p.PendingDisruption, p.Replicas)
		case room <= 0:
			why = fmt.Sprintf("static NodePool %s: limits.nodes %d leaves no room for a replacement", p.NodePool.Name, p.NodeLimit)
		}
		if why != "" {
			plan.OverBudget = append(plan.OverBudget, disruption.DriftSkip{Node: c.Name(), Reason: why, NodeClaim: c.NodeClaim, NodePool: p.NodePool.Name})
			continue
		}
		granted[p.NodePool.Name]++
		selected = append(selected, c)
	}
	plan.Selected = selected
	return plan
}
