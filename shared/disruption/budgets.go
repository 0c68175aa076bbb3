package disruption

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Unlimited is what AllowedDisruptions returns when no active budget applies to the reason.
const Unlimited = math.MaxInt32

// BudgetActive reports whether a budget is in force at now. A budget without schedule and
// duration is always active. A scheduled budget is active for Duration after each time its
// cron schedule (UTC, 5 fields or @hourly/@daily...) fires: it is active when the first firing
// after now−duration is not after now (Karpenter's rule, kubernetes-sigs/karpenter
// pkg/apis/v1/nodepool.go Budget.IsActive). The error names the field; callers fail closed.
func BudgetActive(b apisv1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return false, fmt.Errorf("schedule and duration must be set together")
	}
	sched, err := cron.ParseStandard(strings.TrimSpace(*b.Schedule))
	if err != nil {
		return false, fmt.Errorf("schedule: %q is not a cron schedule: %w", *b.Schedule, err)
	}
	now = now.UTC()
	next := sched.Next(now.Add(-b.Duration.Duration))
	return !next.After(now), nil
}

// BudgetNodes is how many nodes the budget allows disrupted among nodesInPool: a count
// ("5"), or a percentage ("10%") of nodesInPool rounded up, as Karpenter does
// (intstr.GetScaledValueFromIntOrPercent with roundUp=true, so 10% of 5 nodes is 1, never 0).
func BudgetNodes(b apisv1.Budget, nodesInPool int) (int, error) {
	v := intstr.FromString(b.Nodes)
	if n, err := strconv.Atoi(b.Nodes); err == nil {
		v = intstr.FromInt32(int32(n))
	} else if !strings.HasSuffix(b.Nodes, "%") {
		return 0, fmt.Errorf("nodes: %q is neither a count nor a percentage", b.Nodes)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, nodesInPool, true)
	if err != nil {
		return 0, fmt.Errorf("nodes: %q: %w", b.Nodes, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("nodes: %q is negative", b.Nodes)
	}
	return n, nil
}

// AllowedDisruptions is how many more nodes of the pool may be disrupted for reason
// (apisv1.DisruptionReasonEmpty, Underutilized or Drifted) at now: the smallest BudgetNodes
// over the budgets active at now whose reasons include reason (a budget without reasons applies
// to every reason), minus the nodes already disrupting, never below 0. A pool without budgets
// gets Karpenter's default budget (nodes: 10%). nodesInPool and disrupting are counted as
// CountPoolNodes does.
//
// A budget that cannot be evaluated (bad nodes value or schedule) fails closed: the result is 0
// and the error names the budget's field path (spec.disruption.budgets[i].schedule).
func AllowedDisruptions(pool *apisv1.NodePool, reason string, nodesInPool, disrupting int, now time.Time) (int, error) {
	total, err := BudgetTotal(pool, reason, nodesInPool, now)
	if err != nil || total == Unlimited {
		return total, err
	}
	return max(total-disrupting, 0), nil
}

// BudgetTotal is how many of the pool's nodes its budgets allow disrupting at once for reason
// at now: the smallest BudgetNodes over the active budgets that apply to reason, Unlimited when
// none does (a pool without budgets gets Karpenter's default, nodes: 10%). It is what every
// voluntary disruption reserves against (events.BudgetReservation). A budget that cannot be
// evaluated fails closed: 0 and an error naming the budget's field path.
func BudgetTotal(pool *apisv1.NodePool, reason string, nodesInPool int, now time.Time) (int, error) {
	budgets := pool.Spec.Disruption.Budgets
	if budgets == nil {
		budgets = []apisv1.Budget{{Nodes: apis.DefaultBudgetNodes}}
	}
	allowed := Unlimited
	for i, b := range budgets {
		if len(b.Reasons) > 0 && !hasString(b.Reasons, reason) {
			continue
		}
		path := fmt.Sprintf("nodepool %q: spec.disruption.budgets[%d]", pool.Name, i)
		active, err := BudgetActive(b, now)
		if err != nil {
			return 0, fmt.Errorf("%s.%w", path, err)
		}
		if !active {
			continue
		}
		n, err := BudgetNodes(b, nodesInPool)
		if err != nil {
			return 0, fmt.Errorf("%s.%w", path, err)
		}
		allowed = min(allowed, n)
	}
	return allowed, nil
}

// Reservation is what a taint starting a voluntary disruption of the pool's node for reason
// reserves: the budget total at the state's time (0 when a budget cannot be evaluated: fail
// closed); nil when no budget limits the reason.
func (s *State) Reservation(pool, reason string) *events.BudgetReservation {
	np := s.Pools[pool]
	if np == nil {
		return &events.BudgetReservation{NodePool: pool, Reason: reason}
	}
	total, err := BudgetTotal(np, reason, s.Counts[pool].Nodes, s.Now)
	if err == nil && total == Unlimited {
		return nil
	}
	return &events.BudgetReservation{NodePool: pool, Reason: reason, MaxDisrupting: total}
}

// PoolCount is what a NodePool's budgets are computed over.
type PoolCount struct {
	// Nodes counts the pool's initialized nodes (Karpenter leaves uninitialized nodes out, so a
	// replacement still booting does not raise a percentage budget).
	Nodes int
	// Disrupting counts those of them that are NotReady, being deleted, or tainted
	// karpenter.sh/disrupted: each holds one unit of the budget until it is gone.
	Disrupting int
}

// CountPoolNodes counts each NodePool's nodes as Karpenter's BuildDisruptionBudgetMapping does
// (kubernetes-sigs/karpenter pkg/controllers/disruption/helpers.go): only nodes labelled with a
// NodePool and initialized (see Initialized) count; those NotReady or marked for deletion are
// disrupting.
func CountPoolNodes(snap *events.Snapshot) map[string]PoolCount {
	claims := claimsByNode(snap)
	out := map[string]PoolCount{}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		pool := BudgetPool(n, claims[n.Name])
		if pool == "" {
			continue
		}
		c := out[pool]
		c.Nodes++
		if Disrupting(n, claims[n.Name]) {
			c.Disrupting++
		}
		out[pool] = c
	}
	return out
}

// BudgetPool is the NodePool whose budgets a node counts against: its karpenter.sh/nodepool
// label once it is initialized, "" otherwise. The agent counts with it too, so the functions'
// and the agent's ledgers agree.
func BudgetPool(n *corev1.Node, nc *apisv1.NodeClaim) string {
	if pool := n.Labels[apisv1.LabelNodePool]; pool != "" && Initialized(n, nc) {
		return pool
	}
	return ""
}

// Disrupting reports whether a node holds a unit of its pool's budget: NotReady, or marked for
// deletion (MarkedForDeletion).
func Disrupting(n *corev1.Node, nc *apisv1.NodeClaim) bool {
	return !nodeReady(n) || MarkedForDeletion(n, nc)
}

// MarkedForDeletion reports whether a node is on its way out: being deleted, its NodeClaim
// being deleted, or tainted karpenter.sh/disrupted.
func MarkedForDeletion(n *corev1.Node, nc *apisv1.NodeClaim) bool {
	if n.DeletionTimestamp != nil || (nc != nil && nc.DeletionTimestamp != nil) {
		return true
	}
	_, ok := disruptedTaint(n)
	return ok
}

func disruptedTaint(n *corev1.Node) (string, bool) {
	for _, t := range n.Spec.Taints {
		if t.Key == apisv1.TaintKeyDisrupted {
			return t.Value, true
		}
	}
	return "", false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ephemeralTaints are set while a node boots and removed when it is ready.
var ephemeralTaints = map[string]bool{
	corev1.TaintNodeNotReady:                         true,
	corev1.TaintNodeUnreachable:                      true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	apisv1.TaintKeyUnregistered:                      true,
	apisv1.TaintKeyPlanned:                           true,
}

// Initialized reports whether a node is ready for pods as Karpenter's lifecycle controller would
// mark it: labelled karpenter.sh/initialized=true, or its NodeClaim has Initialized=True, or
// (no such controller runs yet in Dovetail) the node is Ready and carries none of the boot
// taints (not-ready, unreachable, uninitialized, unregistered) nor its NodeClaim's startup taints.
func Initialized(n *corev1.Node, nc *apisv1.NodeClaim) bool {
	if n.Labels[apisv1.LabelNodeInitialized] == "true" {
		return true
	}
	if nc != nil {
		for _, c := range nc.Status.Conditions {
			if c.Type == apisv1.ConditionInitialized && c.Status == "True" {
				return true
			}
		}
	}
	if !nodeReady(n) {
		return false
	}
	for _, t := range n.Spec.Taints {
		if ephemeralTaints[t.Key] {
			return false
		}
		if nc != nil {
			for _, s := range nc.Spec.StartupTaints {
				if s.Key == t.Key && s.Effect == t.Effect {
					return false
				}
			}
		}
	}
	return true
}

// claimsByNode maps node names to their NodeClaims (by status.nodeName, then provider ID).
func claimsByNode(snap *events.Snapshot) map[string]*apisv1.NodeClaim {
	byPID := map[string]*apisv1.NodeClaim{}
	out := map[string]*apisv1.NodeClaim{}
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		if nc.Status.NodeName != "" {
			out[nc.Status.NodeName] = nc
		}
		if nc.Status.ProviderID != "" {
			byPID[nc.Status.ProviderID] = nc
		}
	}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if _, ok := out[n.Name]; !ok && n.Spec.ProviderID != "" {
			if nc := byPID[n.Spec.ProviderID]; nc != nil {
				out[n.Name] = nc
			}
		}
	}
	return out
}

func hasString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
