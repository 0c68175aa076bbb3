package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Ownership, the one rule every command that touches a Node or a NodeClaim checks (DESIGN
// invariant 8: the agent applies a command only to an object Dovetail owns):
//
//   - a NodeClaim is Dovetail's when it carries apisv1.LabelManagedBy=apisv1.ManagedByAgent (the
//     agent writes it on the NodeClaims it creates and refuses any command that would write it)
//     and a karpenter.sh/nodepool label;
//   - a Node is Dovetail's when it has a spec.providerID and a NodeClaim that is Dovetail's
//     records that providerID in status.providerID (and, once it names one, this node in
//     status.nodeName).
//
// Karpenter (kubernetes-sigs/karpenter, pkg/utils/node IsManaged) calls a node managed when it
// carries the label of a NodeClass kind its cloud provider supports (karpenter.k8s.aws/
// ec2nodeclass on AWS), and its cluster state pairs Nodes with NodeClaims by providerID.
// Dovetail is stricter: a label alone (that one, or karpenter.sh/nodepool) never makes a node
// Dovetail's, because a label is something other writers can set (a kubelet may label its own
// Node at registration; anyone with nodes/patch can), and Dovetail's agent takes commands over a
// queue rather than deciding itself, so a node "adopted" by a label would let a command drain or
// delete someone else's node. The providerID is set once by the kubelet or cloud controller and
// the NodeClaim's status only by the agent, from the instance a function launched.

// ownedClaimReason returns "" when nc is Dovetail's, else why not.
func ownedClaimReason(nc *apisv1.NodeClaim) string {
	switch {
	case nc.Labels[apisv1.LabelManagedBy] != apisv1.ManagedByAgent:
		return fmt.Sprintf("NodeClaim %s was not created by the agent (no %s=%s label)", nc.Name, apisv1.LabelManagedBy, apisv1.ManagedByAgent)
	case nc.Labels[apisv1.LabelNodePool] == "":
		return fmt.Sprintf("NodeClaim %s has no %s label", nc.Name, apisv1.LabelNodePool)
	}
	return ""
}

// nodeOwner returns the NodeClaim that makes n Dovetail's, or nil and why n is not.
func (a *Applier) nodeOwner(n *corev1.Node) (*apisv1.NodeClaim, string) {
	if n.Spec.ProviderID == "" {
		return nil, fmt.Sprintf("node %s has no spec.providerID, so no NodeClaim vouches for it", n.Name)
	}
	why := fmt.Sprintf("no NodeClaim the agent created records node %s's spec.providerID %q (a %s label alone does not make a node Dovetail's)",
		n.Name, n.Spec.ProviderID, apisv1.LabelNodePool)
	for _, obj := range a.state.nodeClaims.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		nc := &apisv1.NodeClaim{}
		if FromUnstructured(u, nc) != nil || nc.Status.ProviderID != n.Spec.ProviderID {
			continue
		}
		switch r := ownedClaimReason(nc); {
		case r != "":
			why = r
		case nc.Status.NodeName != "" && nc.Status.NodeName != n.Name:
			// Two Nodes claiming one instance: only the one the NodeClaim registered is it.
			why = fmt.Sprintf("NodeClaim %s with providerID %q records node %s, not %s", nc.Name, n.Spec.ProviderID, nc.Status.NodeName, n.Name)
		default:
			return nc, ""
		}
	}
	return nil, why
}

// refuseUnownedNode refuses cmd (an Event on the node, a *RefusedError) unless n is Dovetail's.
// A Node being deleted whose NodeClaim the agent already released (a tombstone records its
// providerID) is still Dovetail's: its NodeClaim's termination finalizer went first, and its own
// must not be stuck for want of a NodeClaim.
func (a *Applier) refuseUnownedNode(ctx context.Context, cmd *events.Command, n *corev1.Node) error {
	_, why := a.nodeOwner(n)
	if why == "" {
		return nil
	}
	if n.DeletionTimestamp != nil && n.Spec.ProviderID != "" {
		released, err := a.releasedClaimOf(ctx, n.Spec.ProviderID)
		if err != nil {
			return err
		}
		if released != "" {
			return nil
		}
	}
	return a.refuse(ctx, cmd, a.nodeRef(n.Name), "not Dovetail's: "+why)
}

// refuseUnownedClaim refuses cmd (an Event on the NodeClaim) unless nc is Dovetail's.
func (a *Applier) refuseUnownedClaim(ctx context.Context, cmd *events.Command, nc *apisv1.NodeClaim) error {
	if why := ownedClaimReason(nc); why != "" {
		ref := corev1.ObjectReference{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim", Name: nc.Name, UID: nc.UID}
		return a.refuse(ctx, cmd, ref, "not Dovetail's: "+why)
	}
	return nil
}

// currentNode returns the node from the cache, or, when the cache does not hold it (yet), from
// the API server; nil when it does not exist. Ownership is judged on what exists now, never on
// a cache miss.
func (a *Applier) currentNode(ctx context.Context, name string) (*corev1.Node, error) {
	if n := a.state.Node(name); n != nil {
		return n, nil
	}
	n, err := a.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return n, nil
}

// currentNodeClaim is currentNode for a NodeClaim.
func (a *Applier) currentNodeClaim(ctx context.Context, name string) (*apisv1.NodeClaim, error) {
	nc, err := a.state.NodeClaim(name)
	if err != nil || nc != nil {
		return nc, err
	}
	u, err := a.dyn.Resource(NodeClaimGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get NodeClaim %s: %w", name, err)
	}
	nc = &apisv1.NodeClaim{}
	if err := FromUnstructured(u, nc); err != nil {
		return nil, fmt.Errorf("NodeClaim %s in cluster: %w", name, err)
	}
	return nc, nil
}

// ownershipLabels are the labels no LabelNode may write: they say whose a node is and how far
// its registration went, which only the NodeClaim's registration (RegisterNode, its labels
// checked against the NodeClaim) sets.
var ownershipLabels = []string{apisv1.LabelManagedBy, apisv1.LabelNodePool, apisv1.LabelNodeRegistered, apisv1.LabelNodeClaim, apisv1.TagNodeClaim}

// terminationEvidenceReason returns "" when the termination finalizer may leave an object
// (deleting says whether it is being deleted, providerID is its recorded instance), else why not.
func terminationEvidenceReason(cmd *events.Command, deleting bool, providerID string) string {
	if !deleting {
		return "it is not being deleted: the termination finalizer is released only at the end of a deletion"
	}
	ev := cmd.Instance
	if ev == nil {
		return "the command carries no evidence that the instance is gone (command.instance)"
	}
	switch ev.State {
	case events.InstanceTerminated, events.InstanceShuttingDown, events.InstanceNotFound:
	default:
		return fmt.Sprintf("command.instance.state %q is not %s, %s or %s", ev.State, events.InstanceTerminated, events.InstanceShuttingDown, events.InstanceNotFound)
	}
	if ev.ProviderID != providerID {
		return fmt.Sprintf("command.instance.providerID %q is not the object's instance %q", ev.ProviderID, providerID)
	}
	return ""
}

// claimedInstanceReason returns "" when a CreateNodeClaim of nc may record its
// status.providerID, else why not. Recording it makes the instance's Node Dovetail's
// (nodeOwner), so a CreateNodeClaim naming an instance that is already someone else's would
// adopt it, and every later command on its Node would pass. Refused, from the agent's caches:
//
//   - an instance another NodeClaim records (Karpenter's beside Dovetail, or another decision's);
//   - an instance whose Node was created before nc's decision (metadata.creationTimestamp, less
//     events.MaxClockSkew): the instance a decision launches boots after it, so that Node is
//     another provisioner's;
//   - an instance whose Node does not carry nc's karpenter.sh/nodepool label, which the launched
//     instance's kubelet registers with (shared/launch puts it in the NodeClaim's labels, the
//     user data gives them to the kubelet as --node-labels, cloud.NodeSpec.Labels).
//
// A NodeClaim of nc's name already there is left to createNodeClaim's AlreadyExists path (a
// redelivery records nothing new; someone else's is refused as not Dovetail's).
// A Node that registered before its CreateNodeClaim arrived (an agent restarted during a
// scale-up) passes both Node rules. None of this is proof (a decision's time is the command's
// word), but together they keep a forged command from adopting a node without a second forgery.
func (a *Applier) claimedInstanceReason(nc *apisv1.NodeClaim) string {
	if _, exists, _ := a.state.nodeClaims.GetStore().GetByKey(nc.Name); exists {
		return "" // a redelivery, or a name someone else took: createNodeClaim's AlreadyExists path judges it
	}
	pid := nc.Status.ProviderID
	for _, obj := range a.state.nodeClaims.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetName() == nc.Name {
			continue
		}
		other := &apisv1.NodeClaim{}
		if FromUnstructured(u, other) == nil && other.Status.ProviderID == pid {
			return fmt.Sprintf("command.nodeClaim.status.providerID: %q is already NodeClaim %s's instance", pid, other.Name)
		}
	}
	for _, obj := range a.state.nodes.GetStore().List() {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Spec.ProviderID != pid {
			continue
		}
		// events.MaxClockSkew of slack: the decision's time is the snapshot's, from the agent's
		// clock, the Node's the API server's.
		if n.CreationTimestamp.Time.Before(nc.CreationTimestamp.Add(-events.MaxClockSkew)) {
			return fmt.Sprintf("command.nodeClaim.status.providerID: %q is node %s's, created at %s, more than %s before the decision at %s",
				pid, n.Name, n.CreationTimestamp.UTC().Format(time.RFC3339), events.MaxClockSkew, nc.CreationTimestamp.UTC().Format(time.RFC3339))
		}
		if got, want := n.Labels[apisv1.LabelNodePool], nc.Labels[apisv1.LabelNodePool]; got != want {
			return fmt.Sprintf("command.nodeClaim.status.providerID: %q is node %s's, whose %s label is %q, not the NodeClaim's %q",
				pid, n.Name, apisv1.LabelNodePool, got, want)
		}
	}
	return ""
}
