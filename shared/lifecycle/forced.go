package lifecycle

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/repair"
)

// deadline is when the pods of a node being terminated are deleted rather than waited for. It
// is the NodeClaim's deletion time (no wait at all) when waiting cannot help:
//   - the node is due for repair (Karpenter's health controller sets the NodeClaim's
//     karpenter.sh/nodeclaim-termination-timestamp to the repair time before deleting it), or
//   - its instance has vanished from the cloud and the node is not Ready (Karpenter's
//     termination controller then removes the finalizer without draining: no kubelet is left to
//     stop the pods);
//
// otherwise the end of its terminationGracePeriod (graceDeadline).
func (d *decider) deadline(nc *apisv1.NodeClaim, node *corev1.Node) (time.Time, bool) {
	if nc != nil && nc.DeletionTimestamp != nil && node != nil {
		gone := d.o.Vanished[nc.Status.ProviderID] && !nodeReady(node)
		if gone || repair.DueAt(node, d.o.RepairPolicies, d.now) {
			return nc.DeletionTimestamp.Time, true
		}
	}
	return graceDeadline(nc)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// VanishedGrace is how long after its Launched condition turned True a NodeClaim must be before
// the cloud's not listing its instance counts (Karpenter's NodeClaim garbage collection: 10
// seconds, for the cloud's eventually consistent list).
const VanishedGrace = 10 * time.Second

// Vanished returns the snapshot's NodeClaims whose instance the cloud no longer lists, by name:
// Launched=True at least VanishedGrace before the snapshot's time, a providerID, not being
// deleted, not in listed (the provider IDs of the cluster's instances the cloud lists), and no
// Ready Node (a Ready Node means its kubelet still runs, whatever the list says; Karpenter's rule,
// after the cloud node lifecycle controller's). The caller acts only on a complete snapshot and
// after the absence held on two of them.
func Vanished(snap *events.Snapshot, listed map[string]bool) []*apisv1.NodeClaim {
	nodes := map[string]*corev1.Node{}
	for i := range snap.Nodes {
		if n := &snap.Nodes[i]; n.Spec.ProviderID != "" {
			nodes[n.Spec.ProviderID] = n
		}
	}
	var out []*apisv1.NodeClaim
	for i := range snap.NodeClaims {
		nc := &snap.NodeClaims[i]
		pid := nc.Status.ProviderID
		if pid == "" || nc.DeletionTimestamp != nil || listed[pid] {
			continue
		}
		l := condition(nc, apisv1.ConditionLaunched)
		if l == nil || l.Status != metav1.ConditionTrue || snap.Time.Sub(l.LastTransitionTime.Time) < VanishedGrace {
			continue
		}
		if n := nodes[pid]; n != nil && nodeReady(n) {
			continue
		}
		out = append(out, nc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// VanishedCommand deletes a NodeClaim whose instance is gone; the termination path then deletes
// its Node and releases both (Karpenter's garbage collection deletes the NodeClaim alone too).
func VanishedCommand(snap *events.Snapshot, nc *apisv1.NodeClaim) events.Command {
	return events.Command{ID: events.CommandID(snap.Cluster, "vanished", nc.Name, string(nc.UID)), Kind: events.CommandDeleteNodeClaim,
		Cluster: snap.Cluster, SnapshotRevision: snap.Revision, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}},
		Reason: "instance " + nc.Status.ProviderID + " no longer exists in the cloud (garbage collected)"}
}
