// Package repair decides node repair from one snapshot, as Karpenter v1's node health controller
// does (kubernetes-sigs/karpenter pkg/controllers/node/health): a Node of ours whose condition
// matches one of the cloud's repair policies for longer than the policy's toleration duration is
// repaired (its NodeClaim deleted and the node forcefully terminated, no drain wait), unless more
// than 20 % of its NodePool's nodes are unhealthy (the breaker). It is pure: no I/O, no clock but
// the snapshot's time; the policies come from the cloud provider (cloud.Repairer).
package repair

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Policy is one repair policy of a cloud (Karpenter's cloudprovider.RepairPolicy): a Node whose
// condition ConditionType has had status ConditionStatus for TolerationDuration is unhealthy
// beyond repair in place.
type Policy struct {
	ConditionType      corev1.NodeConditionType
	ConditionStatus    corev1.ConditionStatus
	TolerationDuration time.Duration
}

// AllowedUnhealthyPercent is the breaker: repair stops in a NodePool where more than this share
// of nodes is unhealthy (Karpenter's allowedUnhealthyPercent, "20%").
const AllowedUnhealthyPercent = 20

// Threshold is how many of total nodes may be unhealthy while repair goes on: 20 % of total,
// rounded up, as intstr.GetScaledValueFromIntOrPercent(…, roundUp=true) gives Karpenter (the PDB
// rounding: 1 of 3 nodes may be unhealthy although that is 33 %). Repair holds when the unhealthy
// count is greater than Threshold. 10 nodes → 2; 3 nodes → 1; 0 nodes → 0.
func Threshold(total int) int {
	if total <= 0 {
		return 0
	}
	return (total*AllowedUnhealthyPercent + 99) / 100
}

// Match is the policy a node's condition matches, and when its toleration ends.
type Match struct {
	Condition corev1.NodeCondition
	Policy    Policy
	// Due is the condition's lastTransitionTime plus the policy's toleration duration.
	Due time.Time
}

// Find returns the condition of node that matches a policy and whose toleration ends first
// (Karpenter's findUnhealthyConditions), and false when none matches. A matching condition with
// no lastTransitionTime matches (it counts towards the breaker) but is never due: how long it has
// held cannot be told, and repair is a disruption.
func Find(node *corev1.Node, policies []Policy) (Match, bool) {
	var best Match
	found := false
	for _, p := range policies {
		for _, c := range node.Status.Conditions {
			if c.Type != p.ConditionType || c.Status != p.ConditionStatus {
				continue
			}
			due := farFuture
			if !c.LastTransitionTime.IsZero() {
				due = c.LastTransitionTime.Add(p.TolerationDuration)
			}
			if !found || due.Before(best.Due) {
				best, found = Match{Condition: c, Policy: p, Due: due}, true
			}
		}
	}
	return best, found
}

// farFuture stands for "never due".
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// DueAt reports whether node is unhealthy past a policy's toleration at now.
func DueAt(node *corev1.Node, policies []Policy, now time.Time) bool {
	m, ok := Find(node, policies)
	return ok && !now.Before(m.Due)
}

// Repair is one node to repair: its NodeClaim is deleted and its node terminated without waiting
// for its pods.
type Repair struct {
	Node      *corev1.Node
	NodeClaim *apisv1.NodeClaim
	NodePool  string
	Match     Match
}

// Blocked is one node due for repair that the breaker holds.
type Blocked struct {
	Node      *corev1.Node
	NodeClaim *apisv1.NodeClaim
	// NodePool is the pool whose nodes were counted ("" for a NodeClaim without one: then every
	// node of the cluster was counted, as Karpenter does for a standalone NodeClaim).
	NodePool string
	// Unhealthy of Total nodes match a policy; Threshold is what the breaker allows.
	Unhealthy, Total, Threshold int
}

// Decision is what the snapshot asks of repair.
type Decision struct {
	Repairs []Repair
	Blocked []Blocked
}

// Decide finds the snapshot's nodes due for repair at its time, sorted by node name. A node is a
// candidate when a NodeClaim names it (by providerID), neither is being deleted, and a policy's
// toleration has passed. The breaker counts, among the nodes labelled with the candidate's
// karpenter.sh/nodepool (all nodes of the cluster when its NodeClaim has no pool), those matching
// any policy regardless of duration, and holds when that count exceeds Threshold. No policies:
// no repair.
func Decide(snap *events.Snapshot, policies []Policy) Decision {
	var d Decision
	if len(policies) == 0 {
		return d
	}
	now := snap.Time.Time
	claims := map[string]*apisv1.NodeClaim{}
	for i := range snap.NodeClaims {
		if nc := &snap.NodeClaims[i]; nc.Status.ProviderID != "" {
			claims[nc.Status.ProviderID] = nc
		}
	}
	nodes := make([]*corev1.Node, 0, len(snap.Nodes))
	for i := range snap.Nodes {
		nodes = append(nodes, &snap.Nodes[i])
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	health := poolHealth(nodes, policies)
	for _, n := range nodes {
		nc := claims[n.Spec.ProviderID]
		if nc == nil || n.Spec.ProviderID == "" || n.DeletionTimestamp != nil || nc.DeletionTimestamp != nil {
			continue
		}
		m, ok := Find(n, policies)
		if !ok || now.Before(m.Due) {
			continue
		}
		pool, hasPool := nc.Labels[apisv1.LabelNodePool]
		key := pool
		if !hasPool {
			key = allNodes
		}
		h := health[key]
		if h.unhealthy > Threshold(h.total) {
			d.Blocked = append(d.Blocked, Blocked{Node: n, NodeClaim: nc, NodePool: pool, Unhealthy: h.unhealthy, Total: h.total, Threshold: Threshold(h.total)})
			continue
		}
		d.Repairs = append(d.Repairs, Repair{Node: n, NodeClaim: nc, NodePool: pool, Match: m})
	}
	return d
}

// allNodes keys the cluster-wide count ("" and every pool name are label values; this is not).
const allNodes = "\x00all"

type count struct{ unhealthy, total int }

// poolHealth counts, per karpenter.sh/nodepool label value and for the whole cluster, the nodes
// and those matching a policy.
func poolHealth(nodes []*corev1.Node, policies []Policy) map[string]count {
	out := map[string]count{}
	for _, n := range nodes {
		_, bad := Find(n, policies)
		keys := []string{allNodes}
		if pool, ok := n.Labels[apisv1.LabelNodePool]; ok {
			keys = append(keys, pool)
		}
		for _, k := range keys {
			c := out[k]
			c.total++
			if bad {
				c.unhealthy++
			}
			out[k] = c
		}
	}
	return out
}
