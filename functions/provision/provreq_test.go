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
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/provreq"
)

// trainer is a PodTemplate whose pod asks 1500m CPU and 2Gi: an m5.large (2 vCPU, 1930m
// allocatable under the EKS kube-reserved formula: 2000 − 70) holds one, so a request for 16
// needs 16 nodes of a pool limited to m5.large.
func trainer() corev1.PodTemplate {
	return corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "trainer"}, Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}}}}}}}
}

func request(name, class string, count int32, params map[string]apisv1.Parameter) apisv1.ProvisioningRequest {
	return apisv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-ml-" + name),
		CreationTimestamp: metav1.NewTime(snapTime.Add(-5e9))},
		Spec: apisv1.ProvisioningRequestSpec{ProvisioningClassName: class, Parameters: params,
			PodSets: []apisv1.PodSet{{PodTemplateRef: apisv1.Reference{Name: "trainer"}, Count: count}}}}
}

func provreqSnapshot(prs []apisv1.ProvisioningRequest, nodes []corev1.Node, pending []corev1.Pod) *events.Snapshot {
	return &events.Snapshot{Cluster: cluster, Revision: 11, Time: metav1.NewTime(snapTime), NodePools: []apisv1.NodePool{pool("batch", 10, "m5.large")},
		ProvisioningRequests: prs, PodTemplates: []corev1.PodTemplate{trainer()}, Nodes: nodes, PendingPods: pending}
}

// commandsOf splits the commands by kind.
func commandsOf(cmds []events.Command) map[events.CommandKind][]events.Command {
	out := map[events.CommandKind][]events.Command{}
	for _, c := range cmds {
		out[c.Kind] = append(out[c.Kind], c)
	}
	return out
}

func condition(t *testing.T, c *events.Command, typ string) *metav1.Condition {
	t.Helper()
	if c == nil || c.ProvisioningRequest == nil {
		t.Fatalf("no SetProvisioningRequestStatus command")
	}
	return meta.FindStatusCondition(c.ProvisioningRequest.Status.Conditions, typ)
}

// A 16-node atomic request whose fleet can launch only 10 m5.large: the 10 launched are
// terminated within the decision, no NodeClaim is recorded, m5.large is marked, and Failed is
// set (ValidUntilSeconds 0: no retry past the first attempt).
func TestAtomicRequestPartialFleetLeavesNothing(t *testing.T) {
	e := newEnv(t)
	if err := e.cloud.LimitCapacity(fake.Pattern{InstanceType: "m5.large"}, 10); err != nil {
		t.Fatal(err)
	}
	pr := request("train", apisv1.ProvisioningClassBestEffortAtomicScaleUp, 16, map[string]apisv1.Parameter{apisv1.ParameterValidUntilSeconds: "0"})
	d, err := e.h.Decide(context.Background(), provreqSnapshot([]apisv1.ProvisioningRequest{pr}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if st := e.cloud.Stats(); st.Launches != 10 || st.Deletes != 10 {
		t.Fatalf("launches %d deletes %d, want 10 launched and the same 10 terminated", st.Launches, st.Deletes)
	}
	insts, _ := e.cloud.List(context.Background(), cluster)
	for _, i := range insts {
		if i.State == cloud.StatePending || i.State == cloud.StateRunning {
			t.Errorf("instance %s left %s", i.ProviderID, i.State)
		}
	}
	if len(d.Launched) != 0 {
		t.Errorf("decision launched %d NodeClaims, want none", len(d.Launched))
	}
	// The answer names the 10 instances terminated: distinct, each one the fake launched and
	// now shows terminated (or shutting down).
	if len(d.Requests) != 1 || len(d.Requests[0].RolledBack) != 10 || len(d.Requests[0].Launched) != 0 {
		t.Errorf("answers %+v, want one that rolled back 10 instances and kept none", d.Requests)
	} else {
		seen := map[string]bool{}
		for _, id := range d.Requests[0].RolledBack {
			inst, err := e.cloud.Get(context.Background(), id)
			if err != nil || seen[id] || (inst.State != cloud.StateTerminated && inst.State != cloud.StateShuttingDown) {
				t.Errorf("rolled back %s: %+v, %v (repeated: %t); want a distinct instance the cloud launched, now terminating", id, inst, err, seen[id])
			}
			seen[id] = true
		}
	}
	cmds := commandsOf(e.waitCommands(t, 2))
	if len(cmds[events.CommandCreateNodeClaim]) != 0 || len(cmds[events.CommandMarkUnavailable]) != 1 || len(cmds[events.CommandSetProvisioningRequestStatus]) != 1 {
		t.Fatalf("commands %v: want one MarkOfferingsUnavailable and one SetProvisioningRequestStatus, no CreateNodeClaim", cmds)
	}
	status := &cmds[events.CommandSetProvisioningRequestStatus][0]
	if f := condition(t, status, apisv1.ProvisioningRequestFailed); f == nil || f.Status != metav1.ConditionTrue || f.Reason != provreq.ReasonCapacityIsNotFound {
		t.Errorf("Failed = %+v, want True CapacityIsNotFound", f)
	}
	if a := condition(t, status, apisv1.ProvisioningRequestAccepted); a == nil || a.Status != metav1.ConditionTrue {
		t.Errorf("Accepted = %+v, want True", a)
	}
}

// With capacity, the same request launches all 16 nodes in one decision and turns Provisioned.
func TestAtomicRequestLaunchesEveryNode(t *testing.T) {
	e := newEnv(t)
	pr := request("train", apisv1.ProvisioningClassBestEffortAtomicScaleUp, 16, nil)
	d, err := e.h.Decide(context.Background(), provreqSnapshot([]apisv1.ProvisioningRequest{pr}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if st := e.cloud.Stats(); st.Launches != 16 || st.Deletes != 0 {
		t.Fatalf("launches %d deletes %d, want 16 and 0", st.Launches, st.Deletes)
	}
	cmds := commandsOf(e.waitCommands(t, 17))
	creates := cmds[events.CommandCreateNodeClaim]
	if len(creates) != 16 || len(d.Requests) != 1 || len(d.Requests[0].Launched) != 16 {
		t.Fatalf("%d CreateNodeClaim, answers %+v; want 16 for the request", len(creates), d.Requests)
	}
	for _, c := range creates {
		nc := c.NodeClaim
		if nc.Annotations[provreq.AnnotationProvisioningRequest] != "ml/train" || nc.Annotations[provreq.AnnotationProvisioningRequestNodes] != "16" ||
			nc.Annotations[apisv1.AnnotationPlannedPods] != "" || c.SnapshotRevision != 11 {
			t.Fatalf("NodeClaim %s annotations %v", nc.Name, nc.Annotations)
		}
	}
	status := &cmds[events.CommandSetProvisioningRequestStatus][0]
	if p := condition(t, status, apisv1.ProvisioningRequestProvisioned); p == nil || p.Status != metav1.ConditionTrue || p.Reason != provreq.ReasonCapacityIsProvisioned {
		t.Errorf("Provisioned = %+v, want True CapacityIsProvisioned", p)
	}
}

// node is a registered 4-CPU, 16Gi node with room for two trainer pods (2 × 1500m ≤ 4000m).
func node(name string) corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func consumer(name, req string) corev1.Pod {
	t := trainer()
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("u-" + name),
		Annotations: map[string]string{apisv1.AnnotationConsumeProvisioningRequest: req}}, Spec: t.Template.Spec}
	return p
}

func timeSeconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// check-capacity answers without launching: 4 pods fit two nodes (two each) → Provisioned True;
// a second request for 2 more finds the room booked by the first → Provisioned False; its
// consumer pod, pending, is held back (nothing launched for it); an ordinary pod that would fit
// the booked room gets a new node instead.
func TestCheckCapacityBooksWithoutLaunching(t *testing.T) {
	e := newEnv(t)
	first := request("fits", apisv1.ProvisioningClassCheckCapacity, 4, nil)
	second := request("late", apisv1.ProvisioningClassCheckCapacity, 2, nil)
	second.CreationTimestamp = metav1.NewTime(first.CreationTimestamp.Add(1e9))
	ordinary := consumer("ordinary", "")
	delete(ordinary.Annotations, apisv1.AnnotationConsumeProvisioningRequest)
	snap := provreqSnapshot([]apisv1.ProvisioningRequest{first, second}, []corev1.Node{node("n1"), node("n2")},
		[]corev1.Pod{consumer("late-0", "late"), ordinary})
	d, err := e.h.Decide(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Requests) != 2 {
		t.Fatalf("answers %+v, want both requests", d.Requests)
	}
	got := map[string]metav1.ConditionStatus{}
	for _, a := range d.Requests {
		if p := meta.FindStatusCondition(a.Conditions, apisv1.ProvisioningRequestProvisioned); p != nil {
			got[a.Request] = p.Status
		}
	}
	if got["ml/fits"] != metav1.ConditionTrue || got["ml/late"] != metav1.ConditionFalse {
		t.Errorf("Provisioned %v, want ml/fits True, ml/late False", got)
	}
	// One launch: the ordinary pod's (the nodes' room is booked); none for late-0, held back.
	if st := e.cloud.Stats(); st.Launches != 1 || len(d.Launched) != 1 || len(d.Launched[0].Pods) != 1 || d.Launched[0].Pods[0] != "ml/ordinary" {
		t.Fatalf("launches %d, decision %+v; want one node for ml/ordinary", st.Launches, d.Launched)
	}
}

// The booking window: Provisioned True 10 minutes ago is BookingExpired (CA's
// defaultReservationTime); 9m59s ago it is still booked.
func TestBookingExpiresAfterTenMinutes(t *testing.T) {
	pr := request("b", apisv1.ProvisioningClassCheckCapacity, 1, nil)
	at := func(ago float64) {
		pr.Status.Conditions = []metav1.Condition{{Type: apisv1.ProvisioningRequestProvisioned, Status: metav1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(snapTime.Add(-timeSeconds(ago)))}}
	}
	at(599)
	if s := provreq.StateOf(&pr, snapTime); s != provreq.StateBooked || provreq.Expire(&pr, snapTime) != nil {
		t.Errorf("599 s after Provisioned: %s, want Booked and no expiry", s)
	}
	at(600)
	if c := provreq.Expire(&pr, snapTime); c == nil || c.Type != apisv1.ProvisioningRequestBookingExpired || c.Reason != provreq.ReasonBookingExpired {
		t.Errorf("600 s after Provisioned: %+v, want BookingExpired", c)
	}
}

// Consumers created before their request exists are held back, not provisioned for as ordinary
// pods (Cluster Autoscaler's ProvisioningRequestPodsFilter drops every pod carrying the consume
// annotation, processors/provreq pods_filter.go): 16 consumers of the atomic request "train",
// which the snapshot does not hold yet, and one of a Failed request launch nothing; each gets a
// FailedScheduling Event naming its request; the one ordinary pod gets the only NodeClaim.
func TestConsumersBeforeTheirRequestAreHeld(t *testing.T) {
	e := newEnv(t)
	failed := request("failed", apisv1.ProvisioningClassBestEffortAtomicScaleUp, 1, nil)
	failed.Status.Conditions = []metav1.Condition{{Type: apisv1.ProvisioningRequestFailed, Status: metav1.ConditionTrue, Reason: provreq.ReasonCapacityIsNotFound, Message: "no room"}}
	var pending []corev1.Pod
	for i := 0; i < 16; i++ {
		p := consumer(fmt.Sprintf("train-%d", i), "train")
		p.Annotations[apisv1.AnnotationProvisioningClass] = apisv1.ProvisioningClassBestEffortAtomicScaleUp
		pending = append(pending, p)
	}
	ordinary := consumer("ordinary", "")
	delete(ordinary.Annotations, apisv1.AnnotationConsumeProvisioningRequest)
	pending = append(pending, consumer("after-failure", "failed"), ordinary)
	d, err := e.h.Decide(context.Background(), provreqSnapshot([]apisv1.ProvisioningRequest{failed}, nil, pending))
	if err != nil {
		t.Fatal(err)
	}
	if st := e.cloud.Stats(); st.Launches != 1 || len(d.Launched) != 1 || len(d.Launched[0].Pods) != 1 || d.Launched[0].Pods[0] != "ml/ordinary" {
		t.Fatalf("launches %d, decision %+v; want one node, for ml/ordinary only", st.Launches, d.Launched)
	}
	if len(d.Held) != 17 || d.Held[0].Request != "ml/train" || d.Held[0].Found || d.Held[16].Request != "ml/failed" || d.Held[16].State != provreq.StateDone {
		t.Fatalf("held %d: %+v", len(d.Held), d.Held)
	}
	var evs []events.EventRecord
	for _, c := range e.waitCommands(t, 2) {
		if c.Kind == events.CommandRecordEvents {
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, c.Events...)
		}
	}
	if len(evs) != 17 {
		t.Fatalf("%d Events, want one per held consumer (17)", len(evs))
	}
	if ev := evs[0]; ev.Reason != "FailedScheduling" || ev.Type != corev1.EventTypeWarning || ev.Object.Name != "train-0" ||
		ev.Message != "Failed to schedule pod, waits for ProvisioningRequest ml/train (best-effort-atomic-scale-up.autoscaling.x-k8s.io), which is not found: "+
			"pods that consume a ProvisioningRequest are not provisioned for on their own, as Cluster Autoscaler keeps them out of scale-up" {
		t.Errorf("event %+v", ev)
	}
	if ev := evs[16]; ev.Object.Name != "after-failure" || !strings.Contains(ev.Message, "ml/failed (best-effort-atomic-scale-up.autoscaling.x-k8s.io), which is done (Failed=True CapacityIsNotFound: no room)") {
		t.Errorf("event %+v", ev)
	}
}
