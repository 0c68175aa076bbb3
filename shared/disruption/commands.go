package disruption

import (
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// A consolidation is carried out across snapshots, each step one Disruption that Sequence turns
// into commands (the function performs them in this order; see the package documentation):
//
//  1. Start: launch the replacements (the function, through shared/launch), recorded with
//     AnnotationDecision and AnnotationReplaces, then taint each candidate
//     karpenter.sh/disrupted=<TaintValue>:NoSchedule, each taint reserving its pool's budget;
//  2. on a later snapshot, once InFlight lists candidates under Drain: Progress.Drained;
//  3. once InFlight lists a candidate under Finish: Progress.Finished hands it to the one
//     termination path (its NodeClaim deleted; the lifecycle function terminates the instance).
//
// Every command carries the snapshot revision it was decided (or validated) on, so the agent
// refuses it when a pod was bound to the node since.

// Start is the decision's first step as a disruption: its replacements launched, then its
// candidates (found in st by name) tainted, at revision rev.
func (d *Decision) Start(st *State, rev int64) Disruption {
	return Disruption{Source: "consolidate", ID: d.ID, Reason: d.Reason, Method: methodTitle(d.Method),
		Why: fmt.Sprintf("consolidation %s (%s): %s", d.ID, d.Reason, d.Why), Candidates: targets(st, d.NodeNames()),
		TaintValue: d.TaintValue(), Replacements: d.Replacements, Budgets: d.Budgets, Revision: rev, Time: d.Time}
}

// methodTitle is a method as Karpenter's decisions are spelled: Delete, Replace.
func methodTitle(m string) string {
	if m == MethodReplace {
		return "Replace"
	}
	return "Delete"
}

// Drained is the in-flight decision's drain step: its Drain candidates (already tainted) drained
// at revision rev. ok is false when none may be drained now.
func (p *Progress) Drained(rev int64, at time.Time) (d Disruption, ok bool) {
	return p.step(p.Drain, rev, at, "replacements ready, every pod has a place"), len(p.Drain) > 0
}

// Finished is the in-flight decision's last step: its drained (Finish) candidates handed to the
// termination path at revision rev, in name order. ok is false when none is drained yet.
func (p *Progress) Finished(rev int64, at time.Time) (d Disruption, ok bool) {
	fin := append([]*Node(nil), p.Finish...)
	sort.Slice(fin, func(i, j int) bool { return fin[i].Name() < fin[j].Name() })
	d = p.step(fin, rev, at, "drained")
	d.Drain, d.HandOff = false, true
	return d, len(fin) > 0
}

func (p *Progress) step(nodes []*Node, rev int64, at time.Time, why string) Disruption {
	d := Disruption{Source: "consolidate", ID: p.ID, Reason: "consolidation", Why: p.ID + ": " + why, Drain: true, Tainted: true, Revision: rev, Time: at}
	for _, n := range nodes {
		d.Candidates = append(d.Candidates, n.Target())
	}
	return d
}

// Target is the node as a disruption candidate.
func (n *Node) Target() Target {
	t := Target{Node: n.Node, NodeClaim: n.Claim, NodePool: n.Pool, Pods: n.Movable, Disrupting: n.Disrupting, TaintValue: n.TaintValue}
	if n.Node != nil {
		t.ProviderID = n.Node.Spec.ProviderID
	}
	return t
}

// targets are the named nodes of st as candidates, in the order given.
func targets(st *State, names []string) []Target {
	out := make([]Target, 0, len(names))
	for _, name := range names {
		if n := st.Node(name); n != nil {
			out = append(out, n.Target())
		}
	}
	return out
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
