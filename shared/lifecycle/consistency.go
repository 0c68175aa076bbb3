package lifecycle

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/drain"
	"github.com/dovetail-dev/dovetail/shared/kevents"
)

// Karpenter v1.14's NodeClaim consistency controller (pkg/controllers/nodeclaim/consistency):
// the condition type, its False reason and message, and the Warning event per issue found.
const (
	ConditionConsistentStateFound = "ConsistentStateFound"
	ReasonConsistencyCheckFailed  = "ConsistencyCheckFailed"
	MessageConsistencyCheckFailed = "Consistency Check Failed"
	ReasonFailedConsistencyCheck  = "FailedConsistencyCheck"
)

// ShapeTolerance is the node shape check's bound: a Node whose capacity of a resource the
// NodeClaim requests is below 90 % of the NodeClaim's status.capacity is an issue (Karpenter's
// NodeShape check, "launched with 10% or less of any resource than was expected").
const ShapeTolerance = 0.90

// ConsistencyIssues are Karpenter's consistency checks of a NodeClaim and its Node, in its
// order (termination, then node shape), each issue spelled as Karpenter logs it:
//   - termination: a NodeClaim being deleted whose drain waits for a pod that a
//     PodDisruptionBudget allows no disruption of: `can't drain node, PDB "ns/name" is
//     blocking evictions` (one issue, the first such PDB by pod name, as Karpenter's
//     pdb.Limits.CanEvictPods stops at the first);
//   - node shape: an Initialized NodeClaim not being deleted, for each resource it requests
//     (spec.resources.requests non-zero) whose expected capacity (status.capacity) is non-zero:
//     the Node's status.capacity below ShapeTolerance of it: `expected 4 of resource cpu, but
//     found 2 (50.0% of expected)`, sorted by resource name.
//
// pdbs are the snapshot's PodDisruptionBudgets evaluated over its pods; pods are the Node's;
// now is the snapshot's time (karpenter.sh/do-not-disrupt durations).
func ConsistencyIssues(nc *apisv1.NodeClaim, node *corev1.Node, pods []*corev1.Pod, pdbs *disruption.PDBs, now time.Time) []string {
	var issues []string
	if nc.DeletionTimestamp != nil {
		if pdb := blockingPDB(pods, pdbs, now); pdb != "" {
			issues = append(issues, fmt.Sprintf("can't drain node, PDB %q is blocking evictions", pdb))
		}
		return issues
	}
	if !isTrue(nc, apisv1.ConditionInitialized) {
		return nil
	}
	names := make([]string, 0, len(nc.Spec.Resources.Requests))
	for name := range nc.Spec.Resources.Requests {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		requested := nc.Spec.Resources.Requests[corev1.ResourceName(name)]
		expected := nc.Status.Capacity[corev1.ResourceName(name)]
		if requested.IsZero() || expected.IsZero() {
			continue
		}
		got := node.Status.Capacity[corev1.ResourceName(name)]
		if pct := got.AsApproximateFloat64() / expected.AsApproximateFloat64(); pct < ShapeTolerance {
			issues = append(issues, fmt.Sprintf("expected %s of resource %s, but found %s (%0.1f%% of expected)",
				expected.String(), name, got.String(), pct*100))
		}
	}
	return issues
}

// blockingPDB is the first PDB (by pod name) allowing no disruption of a pod the drain waits
// for and could evict, "" when none.
func blockingPDB(pods []*corev1.Pod, pdbs *disruption.PDBs, now time.Time) string {
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool {
		return sorted[i].Namespace+"/"+sorted[i].Name < sorted[j].Namespace+"/"+sorted[j].Name
	})
	for _, p := range sorted {
		if !drain.Evictable(p, now) {
			continue
		}
		if err := pdbs.Check([]*corev1.Pod{p}); err != nil {
			if e, ok := err.(*disruption.PDBError); ok && len(e.PDBs) > 0 {
				return e.PDBs[0]
			}
		}
	}
	return ""
}

// consistency keeps the NodeClaim's ConsistentStateFound condition as Karpenter's consistency
// controller does: False (ConsistencyCheckFailed, "Consistency Check Failed") while
// ConsistencyIssues finds any, with a FailedConsistencyCheck Warning event on the NodeClaim per
// issue (recorded as it turns False); True otherwise. Like Karpenter it runs only for a
// NodeClaim with a providerID and a Node. The condition rides on the NodeClaim's next status
// write of this decision (flushConsistency writes it alone when there is none), so a snapshot
// that changes nothing writes nothing and one that does writes once.
func (d *decider) consistency(nc *apisv1.NodeClaim, node *corev1.Node) {
	if nc.Status.ProviderID == "" || node == nil {
		return
	}
	issues := ConsistencyIssues(nc, node, d.pods[node.Name], d.standingState().PDBs(), d.now)
	old := condition(nc, ConditionConsistentStateFound)
	p := &pendingConsistency{}
	switch {
	case len(issues) == 0 && (old == nil || old.Status != metav1.ConditionTrue):
		p.cond = d.cond(nc, ConditionConsistentStateFound, metav1.ConditionTrue, ConditionConsistentStateFound, "")
	case len(issues) > 0 && (old == nil || old.Status != metav1.ConditionFalse || old.Reason != ReasonConsistencyCheckFailed):
		p.cond = d.cond(nc, ConditionConsistentStateFound, metav1.ConditionFalse, ReasonConsistencyCheckFailed, MessageConsistencyCheckFailed)
		ref := kevents.NodeClaimRef(nc)
		for _, issue := range issues {
			p.events = append(p.events, events.EventRecord{Object: ref, Type: corev1.EventTypeWarning, Reason: ReasonFailedConsistencyCheck,
				Message: issue, Key: issue})
		}
	default:
		return
	}
	d.consistent = p
}

// pendingConsistency is the ConsistentStateFound condition (and its events) the NodeClaim being
// decided still needs written.
type pendingConsistency struct {
	cond   metav1.Condition
	events []events.EventRecord
}

// flushConsistency writes the pending ConsistentStateFound condition on its own when no other
// status write of the NodeClaim carried it.
func (d *decider) flushConsistency(nc *apisv1.NodeClaim) {
	if d.consistent == nil {
		return
	}
	d.setStatus(nc, "consistency-"+string(d.consistent.cond.Status)+"-"+fmt.Sprint(d.snap.Revision), "", nil)
}
