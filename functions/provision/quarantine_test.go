package provision

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// gauges remembers the last value of each gauge series.
type gauges struct {
	mu   sync.Mutex
	last map[string]float64
}

func (g *gauges) Record(m *telemetry.Metric, v float64, labels ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last[m.Name+fmt.Sprint(labels)] = v
}

// crashyPod is a pod of Deployment crashy (ReplicaSet crashy-6b7f9) asking 1 CPU.
func crashyPod(name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(snapTime.Add(-time.Minute)),
		Labels:          map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "6b7f9"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "crashy-6b7f9", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
}

// Two pods of crashy crash-loop on node n1 (6 restarts, last exit 20 s before the snapshot: the
// defaults' 3 restarts within 10 minutes), and 10 more replicas are pending, each 1 CPU (an
// m5.large holds one). The allowance (1 pod on trial, none is) admits one: one m5.large is
// launched; the other 9 get FailedScheduling naming the Deployment and the evidence, and the
// gauge reads 9 for NodePool a, 0 for no NodePool.
func TestCrashLoopingDeploymentLaunchesOnlyItsAllowance(t *testing.T) {
	e := newEnv(t)
	g := &gauges{last: map[string]float64{}}
	e.h.Metrics = g
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{apisv1.LabelNodePool: "a"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	var bound, pending []corev1.Pod
	for _, name := range []string{"crashy-a", "crashy-b"} {
		p := crashyPod(name)
		p.Spec.NodeName = "n1"
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(snapTime.Add(-5 * time.Minute))}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 6,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.NewTime(snapTime.Add(-20 * time.Second))}}}}}
		bound = append(bound, p)
	}
	for i := 0; i < 10; i++ {
		pending = append(pending, crashyPod(fmt.Sprintf("crashy-p%d", i)))
	}
	snap := &events.Snapshot{Cluster: cluster, Revision: 7, Time: metav1.NewTime(snapTime), Nodes: []corev1.Node{node}, Pods: bound, PendingPods: pending,
		NodePools: []apisv1.NodePool{pool("a", 10, "m5.large")}}
	d, err := e.h.Decide(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Launched) != 1 || len(d.Launched[0].Pods) != 1 || d.Launched[0].Pods[0] != "default/crashy-p0" {
		t.Fatalf("launched %+v, want one NodeClaim for default/crashy-p0", d.Launched)
	}
	if len(d.Quarantined) != 1 || len(d.Quarantined[0].Held) != 9 {
		t.Fatalf("quarantined %+v", d.Quarantined)
	}
	var held []events.EventRecord
	// CreateNodeClaim, its NominatePods, then the held pods' Events.
	for _, c := range e.waitCommands(t, 3) {
		if c.Kind == events.CommandRecordEvents {
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			held = append(held, c.Events...)
		}
	}
	if len(held) != 9 {
		t.Fatalf("%d Events, want 9", len(held))
	}
	for _, ev := range held {
		if ev.Reason != "FailedScheduling" || ev.Object.Name == "crashy-p0" ||
			!strings.Contains(ev.Message, "Deployment default/crashy is quarantined: 2 of its 2 running pods are sick") ||
			!strings.Contains(ev.Message, "container app: CrashLoopBackOff, 6 restarts, last exit 1 (Error)") {
			t.Fatalf("event %+v", ev)
		}
	}
	if g.last["dovetail_quarantine_held_pods[a]"] != 9 || g.last["dovetail_quarantine_held_pods[]"] != 0 {
		t.Errorf("gauges %v", g.last)
	}
}
