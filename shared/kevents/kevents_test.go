package kevents

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The messages are Karpenter v1's, written out by hand from its source
// (pkg/controllers/provisioning/scheduling/events.go, pkg/controllers/disruption/events,
// pkg/utils/pdb and pod, operatorpkg status/controller.go) and as its users see them in
// `kubectl get events`.
func TestKarpenterMessages(t *testing.T) {
	pod := corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-0"}
	claim := corev1.ObjectReference{Kind: "NodeClaim", Name: "default-x7k2p"}
	node := corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-1-7.ec2.internal"}
	for _, c := range []struct{ got, want string }{
		{NominatedEvent(pod, "default-x7k2p", "").Message, "Pod should schedule on: nodeclaim/default-x7k2p"},
		{NominatedEvent(pod, "default-x7k2p", "ip-10-0-1-7.ec2.internal").Message, "Pod should schedule on: nodeclaim/default-x7k2p, node/ip-10-0-1-7.ec2.internal"},
		{FailedSchedulingEvent(pod, "no instance type fits").Message, "Failed to schedule pod, no instance type fits"},
		{Disrupting(claim, node, "underutilized/Delete")[0].Message, "Disrupting NodeClaim: Underutilized/Delete"},
		{Disrupting(claim, node, "Drifted/Replace")[1].Message, "Disrupting Node: Drifted/Replace"},
		{PDBBlocks("kube-system/coredns"), "Pdb prevents pod evictions (PodDisruptionBudget=[kube-system/coredns])"},
		{DoNotDisruptPod("shop/report-0"), `Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=shop/report-0)`},
		{BudgetBlocked(corev1.ObjectReference{Kind: "NodePool", Name: "default"}, "Drifted").Message, "No allowed disruptions for disruption reason Drifted due to blocking budget"},
		{ConditionTransition(claim, "", metav1.Condition{Type: "Launched", Status: metav1.ConditionTrue, Reason: "Launched"}).Message,
			"Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched"},
		{ConditionTransition(claim, metav1.ConditionTrue, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NodeNotReady", Message: "kubelet stopped"}).Message,
			"Status condition transitioned, Type: Ready, Status: True -> False, Reason: NodeNotReady, Message: kubelet stopped"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
	// Types and objects: Nominated and the disruption events are Normal, FailedScheduling a Warning.
	if e := FailedSchedulingEvent(pod, "x"); e.Type != corev1.EventTypeWarning || e.Reason != "FailedScheduling" || e.Object != pod {
		t.Errorf("FailedScheduling %+v", e)
	}
	if evs := Disrupting(claim, corev1.ObjectReference{}, "Expired/Delete"); len(evs) != 1 || evs[0].Type != corev1.EventTypeNormal || evs[0].Reason != "DisruptionTerminating" {
		t.Errorf("Disrupting without a node %+v, want one Normal event on the NodeClaim", evs)
	}
	if evs := Blocked(claim, node, "m"); len(evs) != 2 || evs[0].Object != claim || evs[1].Object != node || evs[0].Reason != "DisruptionBlocked" {
		t.Errorf("Blocked %+v", evs)
	}
	if p := PodRef(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}); p.Namespace != "default" || p.Kind != "Pod" || p.APIVersion != "v1" {
		t.Errorf("PodRef of a pod without namespace %+v", p)
	}
}
