package disruption

import (
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// DriftConditions are the SetNodeClaimStatus commands that keep each NodeClaim's Drifted
// condition as Karpenter v1.14's nodeclaim disruption controller keeps it
// (pkg/controllers/nodeclaim/disruption/drift.go): True with the drift reason as reason and
// message (NodePoolDrifted, RequirementsDrifted, NodeClassRefDrifted, or the cloud's reason such
// as AMIDrift) while the NodeClaim has drifted, removed once it has not. Only NodeClaims whose
// node has initialized are judged (an unregistered node lacks the NodeClaim's labels and would
// look drifted; PlanDrift skips them for the same reason), and NodeClaims being deleted are
// left as they are. A command is made only when the condition must change; IDs derive from the
// NodeClaim, the reason and the snapshot revision. Sorted by NodeClaim name.
func DriftConditions(snap *events.Snapshot, rules cloud.NodeClassRules) []events.Command {
	var out []events.Command
	idx := newTargetIndex(snap)
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		t := idx.target(n)
		nc := t.NodeClaim
		if nc == nil || t.NodePool == nil || nc.DeletionTimestamp != nil || n.DeletionTimestamp != nil || !Initialized(n, nc) {
			continue
		}
		class := apisv1.FindNodeClass(snap.NodeClasses, nc.Spec.NodeClassRef)
		reason := string(Drifted(nc, n, t.NodePool, class, rules).Kind)
		have := findCondition(nc.Status.Conditions, apisv1.ConditionDrifted)
		cmd := events.Command{Kind: events.CommandSetNodeClaimStatus, Cluster: snap.Cluster, SnapshotRevision: snap.Revision,
			NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}}}
		switch {
		case reason == "" && have != nil:
			cmd.ID = events.CommandID(snap.Cluster, "status", nc.Name, string(nc.UID), "not-drifted", strconv.FormatInt(snap.Revision, 10))
			cmd.ClearConditions, cmd.Reason = []string{apisv1.ConditionDrifted}, "no longer drifted"
		case reason != "" && (have == nil || have.Status != metav1.ConditionTrue || have.Reason != reason):
			cmd.ID = events.CommandID(snap.Cluster, "status", nc.Name, string(nc.UID), "drifted", reason, strconv.FormatInt(snap.Revision, 10))
			cmd.NodeClaim.Status.Conditions = []metav1.Condition{{Type: apisv1.ConditionDrifted, Status: metav1.ConditionTrue,
				Reason: reason, Message: reason, LastTransitionTime: snap.Time}}
			if have != nil && have.Status == metav1.ConditionTrue {
				cmd.NodeClaim.Status.Conditions[0].LastTransitionTime = have.LastTransitionTime
			}
			cmd.Reason = "drifted: " + reason
		default:
			continue
		}
		out = append(out, cmd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeClaim.Name < out[j].NodeClaim.Name })
	return out
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
