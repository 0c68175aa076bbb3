package provision

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/guardrails"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// The anomaly hold through the function, over the embedded JetStream server and the fake cloud.
// The NodePool "burst" has one m5.large NodeClaim made 2 h ago (0.096 USD/h, its whole trailing
// hour): trailing average 0.096, price 0.096. Three pods of 3 vCPU each need an m5.xlarge each
// (3920m allocatable; 0.192 USD/h): after the plan 0.096 + 3 × 0.192 = 0.672 USD/h, above
// 3 × 0.096 = 0.288. The plan waits: no launch, ScaleUpHeld True naming the hold, a Warning
// Event, FailedScheduling on the pods. The next snapshot carries the condition the agent wrote
// and the approval annotation naming the hold: the three m5.xlarge launch, and the condition
// turns False (Approved) with a Normal Event.
func TestAnomalyHoldReleasesOnApproval(t *testing.T) {
	e := newEnv(t)
	np := pool("burst", 10, "m5.large", "m5.xlarge")
	np.UID = "np-uid"
	np.Annotations = map[string]string{guardrails.AnnotationAnomalyHold: `{multiple: 3, window: 1h}`}
	old := apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "burst-old", CreationTimestamp: metav1.NewTime(snapTime.Add(-2 * time.Hour)),
		Labels: map[string]string{apisv1.LabelNodePool: "burst", corev1.LabelInstanceTypeStable: "m5.large", apisv1.LabelCapacityType: "on-demand",
			corev1.LabelTopologyZone: "us-east-1a", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"}}}
	var pending []corev1.Pod
	for i := range 3 {
		pending = append(pending, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("train-%d", i), Namespace: "ml", UID: types.UID(fmt.Sprint("u", i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	}
	decide := func(rev int64, np apisv1.NodePool) {
		t.Helper()
		snap := &events.Snapshot{Cluster: cluster, Revision: rev, Time: metav1.NewTime(snapTime), PendingPods: pending,
			NodePools: []apisv1.NodePool{np}, NodeClaims: []apisv1.NodeClaim{old}}
		data, err := events.NewEvent(cluster, "agent", events.TypePodsPending, fmt.Sprintf("pods-pending-%d", rev), &events.PodsPending{Pods: []string{"ml/train-0", "ml/train-1", "ml/train-2"}, Snapshot: snap})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.h.Handle(context.Background(), queue.Message{Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	decide(7, np)
	if insts, _ := e.cloud.List(context.Background(), cluster); len(insts) != 0 {
		t.Fatalf("launched %d instances while held", len(insts))
	}
	// SetNodePoolStatus, the NodePool's Event, the pods' FailedScheduling.
	cmds := e.waitCommands(t, 3)
	id := guardrails.HoldID(snapTime)
	cond, evs := heldState(t, cmds)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != guardrails.ReasonSpendAnomaly ||
		!cond.LastTransitionTime.Time.Equal(snapTime) ||
		!strings.Contains(cond.Message, "3 new nodes raising the NodePool's price from 0.0960 to 0.6720 USD/h, above 3× its trailing 1h0m0s average of 0.0960 USD/h") ||
		!strings.Contains(cond.Message, "kubectl annotate nodepool burst dovetail.dev/approve-scale-up="+id) {
		t.Fatalf("condition %+v", cond)
	}
	if ev := evs[guardrails.EventScaleUpHeld]; ev == nil || ev.Type != corev1.EventTypeWarning || ev.Object.Kind != "NodePool" || ev.Object.Name != "burst" {
		t.Fatalf("ScaleUpHeld event %+v", ev)
	}
	if ev := evs["FailedScheduling"]; ev == nil || !strings.Contains(ev.Message, `nodepool "burst": scale-up held: `+id) {
		t.Fatalf("FailedScheduling %+v", ev)
	}

	// The agent wrote the condition; the user approves the hold it names.
	np.Status.Conditions = []metav1.Condition{*cond}
	np.Annotations[guardrails.AnnotationApproveScaleUp] = id
	n := len(e.cmds.All())
	decide(8, np)
	insts, _ := e.cloud.List(context.Background(), cluster)
	if len(insts) != 3 {
		t.Fatalf("%d instances after approval, want 3", len(insts))
	}
	for _, in := range insts {
		if in.InstanceType != "m5.xlarge" {
			t.Errorf("launched %s, want m5.xlarge", in.InstanceType)
		}
	}
	cmds = e.waitCommands(t, n+8)[n:] // 3 CreateNodeClaim, their 3 NominatePods, SetNodePoolStatus, the Event
	cond, evs = heldState(t, cmds)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != guardrails.ReasonApproved || !strings.HasPrefix(cond.Message, id+" approved by dovetail.dev/approve-scale-up") {
		t.Fatalf("condition after approval %+v", cond)
	}
	if ev := evs[guardrails.EventScaleUpReleased]; ev == nil || ev.Type != corev1.EventTypeNormal {
		t.Fatalf("ScaleUpReleased event %+v", ev)
	}
}

// heldState returns the ScaleUpHeld condition the commands write and their Events by reason;
// every command must validate.
func heldState(t *testing.T, cmds []events.Command) (*metav1.Condition, map[string]*events.EventRecord) {
	t.Helper()
	var cond *metav1.Condition
	evs := map[string]*events.EventRecord{}
	for i := range cmds {
		c := &cmds[i]
		if err := c.Validate(); err != nil {
			t.Fatalf("command %s does not validate: %v", c.Kind, err)
		}
		switch c.Kind {
		case events.CommandSetNodePoolStatus:
			cond = meta.FindStatusCondition(c.NodePool.Status.Conditions, guardrails.ConditionScaleUpHeld)
		case events.CommandRecordEvents:
			for j := range c.Events {
				evs[c.Events[j].Reason] = &c.Events[j]
			}
		}
	}
	return cond, evs
}
