package events

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The keys follow the rule in OrderingKey's doc: a node's commands of one lifecycle pass share
// the node's key, status writes that name the node join it, the rest key by their object.
func TestOrderingKey(t *testing.T) {
	claim := func(name, node string) *apisv1.NodeClaim {
		nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
		nc.Status.NodeName = node
		return nc
	}
	for _, tc := range []struct {
		name string
		cmd  Command
		want string
	}{
		{"nominate", Command{Kind: CommandNominatePods, NodeName: "ip-10-0-1-5", Pods: []PodRef{{Namespace: "default", Name: "web-0"}}}, "node/ip-10-0-1-5"},
		{"nominate before registration: behind the create", Command{Kind: CommandNominatePods, NodeClaim: claim("default-x7k2p", ""), Pods: []PodRef{{Namespace: "default", Name: "web-0"}}}, "nodeclaim/default-x7k2p"},
		{"register names node and claim", Command{Kind: CommandRegisterNode, NodeName: "ip-10-0-1-5", NodeClaim: claim("default-x7k2p", "")}, "node/ip-10-0-1-5"},
		{"status naming the node", Command{Kind: CommandSetNodeClaimStatus, NodeClaim: claim("default-x7k2p", "ip-10-0-1-5")}, "node/ip-10-0-1-5"},
		{"status before registration", Command{Kind: CommandSetNodeClaimStatus, NodeClaim: claim("default-x7k2p", "")}, "nodeclaim/default-x7k2p"},
		{"create: status.nodeName is not a status write", Command{Kind: CommandCreateNodeClaim, NodeClaim: claim("default-x7k2p", "ip-10-0-1-5")}, "nodeclaim/default-x7k2p"},
		{"delete claim", Command{Kind: CommandDeleteNodeClaim, NodeClaim: claim("default-x7k2p", "")}, "nodeclaim/default-x7k2p"},
		{"taint", Command{Kind: CommandTaintNode, NodeName: "n1", Budget: &BudgetReservation{NodePool: "default"}}, "node/n1"},
		{"drain", Command{Kind: CommandDrainNode, NodeName: "n1"}, "node/n1"},
		{"nodeclass finalizer", Command{Kind: CommandAddFinalizer, NodeClass: &apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}}, "nodeclass/EC2NodeClass/default"},
		{"nodepool status", Command{Kind: CommandSetNodePoolStatus, NodePool: &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}, "nodepool/default"},
		{"overlay status", Command{Kind: CommandSetNodeOverlayStatus, NodeOverlay: &apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}}, "nodeoverlay/gpu"},
		{"provreq status", Command{Kind: CommandSetProvisioningRequestStatus, ProvisioningRequest: &apisv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pr"}}}, "provisioningrequest/ns/pr"},
		{"marks", Command{Kind: CommandMarkUnavailable}, "offerings"},
		{"events", Command{ID: "c-17", Kind: CommandRecordEvents}, "events/c-17"},
		{"unknown", Command{Kind: "Frobnicate"}, ""},
	} {
		if got := tc.cmd.OrderingKey(); got != tc.want {
			t.Errorf("%s: OrderingKey() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
