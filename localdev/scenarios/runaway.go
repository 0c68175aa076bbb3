package scenarios

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/quarantine"
)

// RunawayResult is what the runaway scenario ends with.
type RunawayResult struct {
	Replicas int // each Deployment's replicas after the scale-up
	// Allowance is the NodePool's quarantine allowance (pods on trial at once).
	Allowance int
	// CrashyGiven counts crashy's pods the provision function planned (on a launched NodeClaim
	// or an existing node) after the scale-up; CrashyNodes the NodeClaims launched with a crashy
	// pod planned on them; CrashySpare crashy's pods the scheduler bound to room left on web's
	// nodes once their planned pods were bound (kube-scheduler binds any pending pod that fits:
	// the quarantine withholds launches, not existing room); CrashyPending those still pending.
	CrashyGiven, CrashyNodes, CrashySpare, CrashyPending int
	// WebBound counts the healthy Deployment's bound pods; Launched every NodeClaim launched.
	WebBound, Launched int
	// Event is the message of a FailedScheduling Event on a held crashy pod.
	Event string
	// Condition is the NodePool's WorkloadsQuarantined condition at the end.
	Condition *metav1.Condition
}

// runawayBootDelay is how long a launched instance takes to register.
const runawayBootDelay = 30 * time.Second

// Runaway is the quarantine of a sick workload (shared/quarantine) end to end: two Deployments,
// crashy (its image exits 5 s after every start: localdev.AnnotationCrash, the kubelet stand-in
// reports its restarts and CrashLoopBackOff with the kubelet's back-off) and web (healthy), each
// with two replicas that have run for ten minutes on an m5.large of their own, are scaled to 200
// replicas.
// The provision function, deciding every 30 s, provisions web's 198 new replicas, and gives
// crashy at most its NodePool's allowance (the default, one pod on trial); the rest of crashy
// stay pending with a FailedScheduling Event naming the Deployment and the evidence, and the
// lifecycle function sets the NodePool's WorkloadsQuarantined condition. It runs until web is
// bound and the functions have nothing left to launch (at most 20 decisions).
func Runaway(ctx context.Context, out io.Writer) (*RunawayResult, error) {
	w := NewWorld(Start, runawayBootDelay, out)
	defer w.Close()
	pool := defaultPool()
	if err := w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{EC2: ptr(defaultClass(OldAMI))}}); err != nil {
		return nil, err
	}
	// Each Deployment's two replicas fill one m5.large (1,930m allocatable; 2 × 900m), so no
	// existing room hides what the functions decide.
	for i, name := range []string{"node-0", "node-1"} {
		if err := launched(ctx, w, &pool, i, name, "m5.large", "us-east-1a"); err != nil {
			return nil, err
		}
	}
	// Running for ten minutes before the scenario opens: crashy's containers have crashed and
	// restarted by the kubelet's back-off since (5 restarts, waiting CrashLoopBackOff).
	started := w.Clock.Now().Add(-10 * time.Minute)
	var pods []corev1.Pod
	for i := 0; i < 2; i++ {
		pods = append(pods, runawayPod("crashy", i, "node-0", started), runawayPod("web", i, "node-1", started))
	}
	if err := w.AddPods(pods...); err != nil {
		return nil, err
	}
	if err := w.Step(ctx, time.Second); err != nil { // registers the nodes; the kubelet reports crashy
		return nil, err
	}
	res := &RunawayResult{Replicas: 200, Allowance: quarantine.DefaultAllowance}
	w.printf("cluster: node-0 and node-1 (m5.large) run 2 crashy and 2 web pods; crashy: %s", crashyState(w))
	var pending []corev1.Pod
	for i := 2; i < res.Replicas; i++ {
		pending = append(pending, runawayPod("crashy", i, "", time.Time{}), runawayPod("web", i, "", time.Time{}))
	}
	// Created as the ReplicaSet controllers would, in batches (the in-memory cluster's watches
	// hold 100 events between the agent's reads).
	for i := 0; i < len(pending); i += 50 {
		if err := w.AddPods(pending[i:min(i+50, len(pending))]...); err != nil {
			return nil, err
		}
	}
	w.printf("scaled crashy and web to %d replicas each (900m, 1Gi per pod)", res.Replicas)
	crashyOn, planned := map[string]bool{}, map[string]bool{}
	for step := 0; step < 20; step++ {
		sent := len(w.Commands)
		d, err := w.Provision(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range d.Launched {
			res.Launched++
			n := 0
			for _, p := range l.Pods {
				if strings.HasPrefix(p, "default/crashy-") {
					n++
					planned[p], crashyOn[l.NodeClaim.Name] = true, true
				}
			}
			w.printf("provision: launched %s (%s) for %d pods, %d of them crashy's", l.NodeClaim.Name, l.Instance.InstanceType, len(l.Pods), n)
		}
		for _, e := range d.Existing {
			for _, p := range e.Pods {
				if p.Labels["app"] == "crashy" {
					planned[p.Namespace+"/"+p.Name] = true
				}
			}
		}
		for _, v := range d.Quarantined {
			w.printChanged("quarantine "+v.Controller.String(), fmt.Sprint(len(v.Held), v.Evidence.OnTrial),
				"provision: %s: %d pending replicas held, %d admitted, %d pods on trial", v.Controller, len(v.Held), len(v.Admitted), v.Evidence.OnTrial)
		}
		if res.Event == "" {
			res.Event = heldEvent(w.Commands[sent:])
		}
		if err := w.Step(ctx, 30*time.Second); err != nil {
			return nil, err
		}
		res.WebBound = boundOf(w, "web")
		if res.WebBound == res.Replicas && len(d.Launched) == 0 && step > 0 {
			break
		}
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	res.CrashyNodes, res.CrashyGiven = len(crashyOn), len(planned)
	res.CrashySpare = boundOf(w, "crashy") - 2 - bound(w, planned)
	res.CrashyPending = res.Replicas - boundOf(w, "crashy")
	res.Condition = poolCondition(w, pool.Name)
	w.printf("after: web %d/%d bound; crashy: %d pods planned by provision (allowance %d) on %d launched nodes, %d bound by the scheduler to spare room of web's nodes, %d pending; %d NodeClaims launched",
		res.WebBound, res.Replicas, res.CrashyGiven, res.Allowance, res.CrashyNodes, res.CrashySpare, res.CrashyPending, res.Launched)
	w.printf("crashy's pods: %s", crashyState(w))
	w.printf("Event on a held pod: %s %s", kevents.FailedScheduling, res.Event)
	if c := res.Condition; c != nil {
		w.printf("NodePool %s: %s=%s (%s) %s", pool.Name, c.Type, c.Status, c.Reason, c.Message)
	}
	return res, nil
}

// runawayPod is replica i of Deployment dep (ReplicaSet dep-6d4cf56db6, the Deployment
// controller's "<name>-<pod-template-hash>"): 900m and 1Gi, bound to node when node is set
// (scheduled and started at started), crashing when dep is crashy.
func runawayPod(dep string, i int, node string, started time.Time) corev1.Pod {
	const hash = "6d4cf56db6"
	created := Start.Add(time.Duration(i) * time.Millisecond)
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", dep, i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%s-%d", dep, i)),
		CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{"app": dep, appsv1.DefaultDeploymentUniqueLabelKey: hash},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: dep + "-" + hash, UID: types.UID("rs-" + dep), Controller: ptr(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/" + dep + ":1.0", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if dep == "crashy" {
		p.Annotations = map[string]string{localdev.AnnotationCrash: localdev.CrashError}
	}
	if node != "" {
		st := metav1.NewTime(started)
		p.CreationTimestamp = st
		p.Spec.NodeName = node
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &st, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: st}, {Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: st}}}
	}
	return p
}

// boundOf counts a Deployment's bound pods.
func boundOf(w *World, dep string) int {
	n := 0
	for _, p := range w.Snapshot().Pods {
		if p.Labels["app"] == dep {
			n++
		}
	}
	return n
}

// bound counts the pods of keys ("namespace/name") that are bound.
func bound(w *World, keys map[string]bool) int {
	n := 0
	for _, p := range w.Snapshot().Pods {
		if keys[p.Namespace+"/"+p.Name] {
			n++
		}
	}
	return n
}

// crashyState describes crashy's bound pods as the kubelet stand-in reports them.
func crashyState(w *World) string {
	var out []string
	for _, p := range w.Snapshot().Pods {
		if p.Labels["app"] != "crashy" || len(p.Status.ContainerStatuses) == 0 {
			continue
		}
		cs := p.Status.ContainerStatuses[0]
		state := "running"
		if cs.State.Waiting != nil {
			state = cs.State.Waiting.Reason
		}
		out = append(out, fmt.Sprintf("%s %s (%d restarts)", p.Name, state, cs.RestartCount))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// heldEvent is the message of the first FailedScheduling Event on a crashy pod among commands.
func heldEvent(cmds []events.Command) string {
	for _, c := range cmds {
		for _, e := range c.Events {
			if e.Reason == kevents.FailedScheduling && strings.HasPrefix(e.Object.Name, "crashy-") {
				return e.Message
			}
		}
	}
	return ""
}

// poolCondition reads a NodePool's WorkloadsQuarantined condition from the cluster.
func poolCondition(w *World, name string) *metav1.Condition {
	for _, np := range w.Snapshot().NodePools {
		if np.Name == name {
			return meta.FindStatusCondition(np.Status.Conditions, quarantine.ConditionWorkloadsQuarantined)
		}
	}
	return nil
}
