package disruption

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kevents"
)

// The order of a consolidation's effects (the function performs them in this order, across
// snapshots; see the package documentation):
//
//  1. launch the replacements (the function, through shared/launch), record them
//     (CreateNodeClaim, annotated with AnnotationDecision and AnnotationReplaces);
//  2. TaintCommands: taint each candidate karpenter.sh/disrupted=<TaintValue>:NoSchedule;
//  3. on a later snapshot, once InFlight lists the candidates under Drain: DrainCommands;
//  4. once InFlight lists a candidate under Finish: FinishCommands hand it to the one
//     termination path (a DeleteNodeClaim); the lifecycle function terminates the instance.
//
// Every command carries the snapshot revision it was decided (or validated) on, so the agent
// refuses it when a pod was bound to the node since.

// TaintCommands taints the decision's candidates.
func (d *Decision) TaintCommands(cluster string, revision int64) []events.Command {
	out := make([]events.Command, 0, len(d.Candidates))
	// timeAdded is what InFlight measures ConsolidationTimeout and DrainDeficitTimeout from: a
	// taint without it could never be rolled back.
	at := metav1.NewTime(d.Time)
	taint := corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: d.TaintValue(), Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at}
	for _, c := range d.Candidates {
		t := taint
		// The revision is part of the ID: a taint the agent refused (its budget spent by another
		// decision) may be asked for again by a later decision.
		out = append(out, events.Command{
			ID: events.CommandID(cluster, "consolidate-taint", d.ID, c.Node, strconv.FormatInt(revision, 10)), Kind: events.CommandTaintNode,
			Cluster: cluster, SnapshotRevision: revision, NodeName: c.Node, Taint: &t, Budget: d.Budgets[c.NodePool],
			Reason: fmt.Sprintf("consolidation %s (%s): %s", d.ID, d.Reason, d.Why),
			// Karpenter's DisruptionTerminating, recorded once the taint is granted.
			Events: kevents.Disrupting(kevents.NamedNodeClaim(c.NodeClaim, types.UID(c.NodeClaimUID)), kevents.NamedNode(c.Node, ""),
				d.Reason+"/"+methodTitle(d.Method)),
		})
	}
	return out
}

// methodTitle is a method as Karpenter's decisions are spelled: Delete, Replace.
func methodTitle(m string) string {
	if m == MethodReplace {
		return "Replace"
	}
	return "Delete"
}

// DrainCommands asks for the Drain nodes' pods to be evicted. The revision is part of the ID:
// a drain blocked by a PDB is asked for again on a later snapshot.
func (p *Progress) DrainCommands(cluster string, revision int64) []events.Command {
	out := make([]events.Command, 0, len(p.Drain))
	for _, n := range p.Drain {
		out = append(out, events.Command{
			ID: events.CommandID(cluster, "consolidate-drain", p.ID, n.Name(), strconv.FormatInt(revision, 10)), Kind: events.CommandDrainNode,
			Cluster: cluster, SnapshotRevision: revision, NodeName: n.Name(),
			Reason: fmt.Sprintf("consolidation %s: replacements ready, every pod has a place", p.ID),
		})
	}
	return out
}

// FinishCommands hands a drained candidate to the one termination path: its NodeClaim is
// deleted (its finalizer keeps it until the lifecycle function has terminated the instance); a
// node without a NodeClaim is deleted itself.
func FinishCommands(cluster, id string, n *Node, revision int64) []events.Command {
	return []events.Command{HandOff(cluster, revision, n.Name(), n.Claim, fmt.Sprintf("consolidation %s: drained", id), "consolidate", id)}
}

// HandOff is the command that hands a node to the one termination path (shared/lifecycle): its
// NodeClaim is deleted, and the NodeClaim's finalizer keeps it until the lifecycle function has
// drained the node, terminated the instance and removed the finalizers. A node without a
// NodeClaim is deleted itself (its own finalizer, when it has one, runs the same path). The
// command ID derives from the cluster, the object and idParts (the decision).
func HandOff(cluster string, revision int64, node string, claim *apisv1.NodeClaim, why string, idParts ...string) events.Command {
	if claim == nil {
		return events.Command{ID: events.CommandID(append([]string{cluster, "hand-off-node", node}, idParts...)...), Kind: events.CommandDeleteNode,
			Cluster: cluster, SnapshotRevision: revision, NodeName: node, Reason: why}
	}
	return events.Command{ID: events.CommandID(append([]string{cluster, "hand-off-nodeclaim", claim.Name}, idParts...)...), Kind: events.CommandDeleteNodeClaim,
		Cluster: cluster, SnapshotRevision: revision, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim.Name}}, Reason: why}
}
