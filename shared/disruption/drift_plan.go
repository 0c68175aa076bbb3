package disruption

import (
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/kevents"
)

// ReasonExpired is the reason recorded on commands for expired nodes. Expiry is forceful, as in
// Karpenter v1: an expired NodeClaim is handed to the termination path at once, with no budget,
// no waiting for a replacement and no do-not-disrupt wait beyond its terminationGracePeriod
// (the termination path drains through the Eviction API, then deletes what is left). The drift
// function launches capacity for its pods in the same decision (see functions/drift).
const ReasonExpired = "Expired"

// ReasonCapacityBlockExpiring is the reason recorded for a node in a capacity block that is
// about to end: forceful like expiry (ReservationExpiring), as Karpenter deletes such NodeClaims.
const ReasonCapacityBlockExpiring = "CapacityBlockExpiring"

// DriftCandidate is a node to replace because it drifted or expired.
type DriftCandidate struct {
	Target
	// Reason is apisv1.DisruptionReasonDrifted or ReasonExpired; Drift says what drifted.
	Reason string
	Drift  Drift
	// ExpiredAt is creation + expireAfter for an expired node.
	ExpiredAt time.Time
}

// Why renders the candidate's reason for logs and commands.
func (c *DriftCandidate) Why() string {
	switch c.Reason {
	case ReasonExpired:
		return fmt.Sprintf("expired at %s (expireAfter)", c.ExpiredAt.UTC().Format(time.RFC3339))
	case ReasonCapacityBlockExpiring:
		return fmt.Sprintf("capacity block %s expiring since %s (EC2 reclaims it 30 minutes before its end)",
			c.NodeClaim.Labels[apisv1.LabelCapacityReservationID], c.ExpiredAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s: %s", c.Drift.Kind, c.Drift.Detail)
}

// DriftSkip is a drifted or expired node not disrupted now, with why.
type DriftSkip struct {
	Node   string
	Reason string
	// Blocker is Karpenter's DisruptionBlocked message when a karpenter.sh/do-not-disrupt
	// annotation keeps the node, else "" (OverBudget nodes: the NodePool's event says it).
	Blocker string
	// NodeClaim and NodePool are the node's.
	NodeClaim *apisv1.NodeClaim `json:"-"`
	NodePool  string
	// Kind and Object type Reason: the rule (BlockerDoNotDisrupt, BlockerPDB, BlockerBudget) and
	// the object it names (the Node or Pod annotated, the PodDisruptionBudget, the NodePool).
	Kind   BlockerKind
	Object ObjectRef
}

// DriftPlan is what the drift function acts on in one snapshot.
type DriftPlan struct {
	// Selected start a replacement now: empty nodes first, then oldest first (NodeClaim
	// creation time), then by name; at most the pool's budget minus its nodes already disrupting.
	Selected []DriftCandidate
	// InProgress are nodes already tainted karpenter.sh/disrupted by an earlier decision: their
	// replacement, drain and deletion continue.
	InProgress []DriftCandidate
	// Blocked carry karpenter.sh/do-not-disrupt (node or pod); OverBudget wait for budget.
	Blocked    []DriftSkip
	OverBudget []DriftSkip
	// Expired are NodeClaims past expireAfter or in an expiring capacity block: handed to the
	// termination path now (forceful).
	Expired []DriftCandidate
	// Budgets are the reservations the Selected nodes' taints carry, by NodePool.
	Budgets map[string]*events.BudgetReservation
}

// PlanDrift finds the snapshot's drifted and expired nodes and chooses which to replace now;
// rules are the cloud's NodeClass rules (cloud.RulesOf the provider; nil checks only the
// NodePools).
// Budgets are per NodePool with reason Drifted: AllowedDisruptions over CountPoolNodes (the
// most restrictive active budget minus the pool's nodes already disrupting, for any reason);
// a budget that cannot be evaluated allows nothing. Nodes tainted karpenter.sh/disrupted by
// drift (TaintValueDrifted) are InProgress; nodes another function is disrupting are left
// alone. Nodes without a NodeClaim or NodePool are not Dovetail's to replace. The snapshot's
// time is the clock.
func PlanDrift(snap *events.Snapshot, rules cloud.NodeClassRules) DriftPlan {
	now := snap.Time.Time
	var plan DriftPlan
	nodes := append([]corev1.Node(nil), snap.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	counts := CountPoolNodes(snap)
	var cands []DriftCandidate
	idx := newTargetIndex(snap)
	for i := range nodes {
		n := &nodes[i]
		t := idx.target(n)
		if t.NodeClaim == nil || t.NodePool == nil {
			continue
		}
		if t.Disrupting && t.TaintValue != TaintValueDrifted {
			continue // consolidation's or interruption's node
		}
		if n.DeletionTimestamp != nil || t.NodeClaim.DeletionTimestamp != nil {
			continue
		}
		// A node whose registration has not finished lacks the NodeClaim's labels and would look
		// drifted; like Karpenter, only initialized nodes are candidates.
		if !t.Disrupting && !Initialized(n, t.NodeClaim) {
			continue
		}
		c := DriftCandidate{Target: t}
		if Expired(t.NodeClaim, now) {
			c.Reason = ReasonExpired
			c.ExpiredAt, _ = ExpiresAt(t.NodeClaim)
			plan.Expired = append(plan.Expired, c)
			continue
		}
		class := apisv1.FindNodeClass(snap.NodeClasses, t.NodeClaim.Spec.NodeClassRef)
		if rules != nil {
			if at, ok := rules.ReservationExpiring(t.NodeClaim, class, now); ok {
				c.Reason, c.ExpiredAt = ReasonCapacityBlockExpiring, at
				plan.Expired = append(plan.Expired, c)
				continue
			}
		}
		if d := Drifted(t.NodeClaim, n, t.NodePool, class, rules); d.Kind != "" {
			c.Reason, c.Drift = apisv1.DisruptionReasonDrifted, d
		} else if !t.Disrupting {
			continue
		}
		if t.Disrupting {
			// Continue what an earlier decision started, whatever the reason was.
			plan.InProgress = append(plan.InProgress, c)
			continue
		}
		if why, blocker, obj := doNotDisrupt(n, t.Pods, now); why != "" {
			plan.Blocked = append(plan.Blocked, DriftSkip{Node: n.Name, Reason: why, Blocker: blocker, NodeClaim: t.NodeClaim, NodePool: t.NodePool.Name,
				Kind: BlockerDoNotDisrupt, Object: obj})
			continue
		}
		cands = append(cands, c)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if (len(a.Pods) == 0) != (len(b.Pods) == 0) {
			return len(a.Pods) == 0
		}
		ta, tb := a.NodeClaim.CreationTimestamp.Time, b.NodeClaim.CreationTimestamp.Time
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return a.Name() < b.Name()
	})
	allowed, budgetErr := map[string]int{}, map[string]string{}
	pdbs, evicting := snapshotPDBs(snap), []*corev1.Pod(nil)
	for _, c := range cands {
		pool := c.NodePool.Name
		if _, ok := allowed[pool]; !ok {
			total, err := BudgetTotal(c.NodePool, apisv1.DisruptionReasonDrifted, counts[pool].Nodes, now)
			n := 0
			if err != nil {
				budgetErr[pool] = err.Error()
			} else if n = Unlimited; total != Unlimited {
				n = max(total-counts[pool].Disrupting, 0)
				if plan.Budgets == nil {
					plan.Budgets = map[string]*events.BudgetReservation{}
				}
				plan.Budgets[pool] = &events.BudgetReservation{NodePool: pool, Reason: apisv1.DisruptionReasonDrifted, MaxDisrupting: total}
			}
			allowed[pool] = n
		}
		if allowed[pool] <= 0 {
			why := fmt.Sprintf("NodePool %s: disruption budget for %s allows no more nodes now (%d of %d already disrupting)",
				pool, apisv1.DisruptionReasonDrifted, counts[pool].Disrupting, counts[pool].Nodes)
			if e := budgetErr[pool]; e != "" {
				why = e
			}
			plan.OverBudget = append(plan.OverBudget, DriftSkip{Node: c.Name(), Reason: why, NodeClaim: c.NodeClaim, NodePool: pool,
				Kind: BlockerBudget, Object: poolRef(pool)})
			continue
		}
		// The PodDisruptionBudgets hold for the whole round: a node is chosen only when its pods
		// can be evicted together with those of the nodes chosen before it. Karpenter makes no
		// candidate of a node a PDB keeps from draining (NewCandidate: "pdb prevents pod
		// evictions", sigs.k8s.io/karpenter pkg/controllers/disruption/types.go), except for an
		// eventual disruption such as drift of a NodeClaim with a terminationGracePeriod, which
		// ends the blocked drain when it passes; it then takes no PDB room here either.
		if c.NodeClaim.Spec.TerminationGracePeriod == nil {
			if err := pdbs.Check(append(append([]*corev1.Pod(nil), evicting...), c.Pods...)); err != nil {
				var pe *PDBError
				blocker, obj := "", ObjectRef{}
				if errors.As(err, &pe) {
					blocker, obj = kevents.PDBBlocks(pe.PDBs...), pe.object()
				}
				plan.Blocked = append(plan.Blocked, DriftSkip{Node: c.Name(), Reason: "drift this round: " + err.Error(), Blocker: blocker,
					NodeClaim: c.NodeClaim, NodePool: pool, Kind: BlockerPDB, Object: obj})
				continue
			}
			evicting = append(evicting, c.Pods...)
		}
		allowed[pool]--
		plan.Selected = append(plan.Selected, c)
	}
	return plan
}

// doNotDisrupt returns why the node may not be voluntarily disrupted at now, or "" (the
// karpenter.sh/do-not-disrupt rules of apisv1.ObjectDoNotDisrupt and PodDoNotDisrupt).
func doNotDisrupt(n *corev1.Node, pods []*corev1.Pod, now time.Time) (why, blocker string, obj ObjectRef) {
	if apisv1.ObjectDoNotDisrupt(&n.ObjectMeta, now) {
		return "node has " + apisv1.AnnotationDoNotDisrupt, kevents.DoNotDisruptObject("Node"), ObjectRef{Kind: "Node", Name: n.Name}
	}
	for _, p := range pods {
		if apisv1.PodDoNotDisrupt(p, now) {
			return fmt.Sprintf("pod %s/%s has %s", p.Namespace, p.Name, apisv1.AnnotationDoNotDisrupt), kevents.DoNotDisruptPod(podRef(p)), podObject(p)
		}
	}
	return "", "", ObjectRef{}
}

// GraceExceeded reports whether a node disrupting since tainted has waited out its NodeClaim's
// terminationGracePeriod at now: a drain still blocked then (a PDB, a do-not-disrupt pod) stops
// waiting and the node is deleted. No terminationGracePeriod (or no taint time) means wait forever.
func GraceExceeded(nc *apisv1.NodeClaim, tainted *time.Time, now time.Time) bool {
	if nc == nil || nc.Spec.TerminationGracePeriod == nil || tainted == nil {
		return false
	}
	return !now.Before(tainted.Add(nc.Spec.TerminationGracePeriod.Duration))
}

// snapshotPDBs evaluates the snapshot's PodDisruptionBudgets over its bound and pending pods, as
// NewState does for consolidation.
func snapshotPDBs(snap *events.Snapshot) *PDBs {
	all := make([]*corev1.Pod, 0, len(snap.Pods)+len(snap.PendingPods))
	for i := range snap.Pods {
		all = append(all, &snap.Pods[i])
	}
	for i := range snap.PendingPods {
		all = append(all, &snap.PendingPods[i])
	}
	return NewPDBs(snap.PDBs, all)
}
