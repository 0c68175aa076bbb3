//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// dovetailEvents lists the Events the agent recorded (reporting controller dovetail.dev/agent)
// in every namespace: kube-scheduler records FailedScheduling too, under its own name.
func dovetailEvents(ctx context.Context, t *testing.T, env *localdev.Env) []corev1.Event {
	t.Helper()
	list, err := env.Cluster.Kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.ReportingController == "dovetail.dev/agent" {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent polls until an Event of the agent's matches, or fails after timeout.
func waitEvent(ctx context.Context, t *testing.T, env *localdev.Env, what string, timeout time.Duration, match func(corev1.Event) bool) corev1.Event {
	t.Helper()
	var found corev1.Event
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, e := range dovetailEvents(ctx, t, env) {
			if match(e) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var seen []string
		for _, e := range dovetailEvents(ctx, t, env) {
			seen = append(seen, fmt.Sprintf("%s %s/%s %s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Message))
		}
		t.Fatalf("no %s Event within %s; the agent's Events:\n%s", what, timeout, strings.Join(seen, "\n"))
	}
	return found
}

// checkSeedEvents: every seed NodeClaim has Karpenter's Launched and Registered Events (Normal,
// operatorpkg's transition messages, in "default" where kubectl describe finds them), and the
// planned pods were Nominated to their NodeClaim in their own namespace ("Pod should schedule
// on: nodeclaim/<name>"): Nominated Events pass Karpenter's rate limit (a burst of
// kube.NominationBurst, then kube.NominationQPS per second), so at least the burst's worth of
// planned pods (or all of them, when fewer) were Nominated, and no Nomination names a NodeClaim
// that did not plan the pod.
func checkSeedEvents(ctx context.Context, t *testing.T, env *localdev.Env) {
	evs := dovetailEvents(ctx, t, env)
	type key struct{ kind, ns, name, reason string }
	byObj := map[key][]corev1.Event{}
	for _, e := range evs {
		k := key{e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Reason}
		byObj[k] = append(byObj[k], e)
	}
	claims := nodeClaims(ctx, t, env)
	nominated, planned := 0, 0
	for _, c := range claims {
		for reason, msg := range map[string]string{
			apisv1.ConditionLaunched:   "Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched",
			apisv1.ConditionRegistered: "Status condition transitioned, Type: Registered, Status: Unknown -> True, Reason: Registered",
		} {
			got := byObj[key{"NodeClaim", "", c.Name, reason}]
			if len(got) != 1 || got[0].Message != msg || got[0].Type != corev1.EventTypeNormal || got[0].Namespace != metav1.NamespaceDefault ||
				got[0].InvolvedObject.UID != c.UID {
				t.Errorf("NodeClaim %s: %s Events %v, want one Normal in default: %q", c.Name, reason, messages(got), msg)
			}
		}
		list := c.Annotations[apisv1.AnnotationPlannedPods]
		if list == "" {
			continue
		}
		hit := 0
		for _, p := range strings.Split(list, ",") {
			ns, name, _ := strings.Cut(p, "/")
			planned++
			for _, e := range byObj[key{"Pod", ns, name, kevents.Nominated}] {
				if e.Message == "Pod should schedule on: nodeclaim/"+c.Name && e.Namespace == ns {
					hit++
				}
			}
		}
		nominated += hit
	}
	if want := min(planned, kube.NominationBurst); nominated < want {
		t.Errorf("%d of %d planned pods Nominated to their NodeClaim, want at least %d (the rate limit's burst)", nominated, planned, want)
	}
	for _, e := range evs {
		if e.Reason != kevents.Nominated {
			continue
		}
		claim := strings.TrimPrefix(e.Message, "Pod should schedule on: nodeclaim/")
		if !plannedOn(claims, claim, e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name) && claimExists(claims, claim) {
			t.Errorf("pod %s/%s Nominated to %s, which did not plan it", e.InvolvedObject.Namespace, e.InvolvedObject.Name, claim)
		}
	}
	t.Logf("Events: %d NodeClaims Launched and Registered; %d of %d planned pods Nominated to their NodeClaim", len(claims), nominated, planned)
}

func plannedOn(claims []apisv1.NodeClaim, claim, pod string) bool {
	for _, c := range claims {
		if c.Name == claim {
			for _, p := range strings.Split(c.Annotations[apisv1.AnnotationPlannedPods], ",") {
				if p == pod {
					return true
				}
			}
		}
	}
	return false
}

func claimExists(claims []apisv1.NodeClaim, name string) bool {
	for _, c := range claims {
		if c.Name == name {
			return true
		}
	}
	return false
}

func messages(evs []corev1.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s (x%d)", e.Message, e.Count))
	}
	return out
}

// checkFailedScheduling: a pod no instance type can hold (4,000 vCPUs) gets Dovetail's
// FailedScheduling Warning in its namespace, with the plan's reason; the pod is deleted after.
func checkFailedScheduling(ctx context.Context, t *testing.T, env *localdev.Env) {
	const ns = "e2e-events"
	kc := env.Cluster.Kube
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: ns}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4000")}}}}}}
	created, err := kc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kc.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), p.Name, metav1.DeleteOptions{}) }()
	e := waitEvent(ctx, t, env, "FailedScheduling on "+ns+"/too-big", 90*time.Second, func(e corev1.Event) bool {
		return e.Reason == kevents.FailedScheduling && e.InvolvedObject.Name == "too-big" && e.InvolvedObject.Namespace == ns
	})
	if e.Type != corev1.EventTypeWarning || e.Namespace != ns || e.InvolvedObject.UID != created.UID ||
		!strings.HasPrefix(e.Message, "Failed to schedule pod, ") || len(e.Message) <= len("Failed to schedule pod, ") {
		t.Errorf("FailedScheduling Event %+v: want a Warning in %s on the pod, with the plan's reason", e, ns)
	}
	t.Logf("FailedScheduling: %s", e.Message)
}

// checkDisruptionBlocked: the node of the guarded pods, whose PodDisruptionBudget allows fewer
// evictions than the node holds pods, gets Karpenter's DisruptionBlocked Event naming the PDB
// from the consolidate function, on the Node and on its NodeClaim.
func checkDisruptionBlocked(ctx context.Context, t *testing.T, env *localdev.Env, node, pdb string) {
	want := kevents.PDBBlocks(pdb)
	e := waitEvent(ctx, t, env, "DisruptionBlocked on node "+node, 90*time.Second, func(e corev1.Event) bool {
		return e.Reason == kevents.DisruptionBlocked && e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node && e.Message == want
	})
	if e.Namespace != metav1.NamespaceDefault || e.Type != corev1.EventTypeNormal {
		t.Errorf("DisruptionBlocked %+v: want Normal in default", e)
	}
	var claim string
	for _, c := range nodeClaims(ctx, t, env) {
		if c.Status.NodeName == node {
			claim = c.Name
		}
	}
	waitEvent(ctx, t, env, "DisruptionBlocked on the NodeClaim of "+node, 30*time.Second, func(e corev1.Event) bool {
		return e.Reason == kevents.DisruptionBlocked && e.InvolvedObject.Kind == "NodeClaim" && e.InvolvedObject.Name == claim && e.Message == want
	})
	t.Logf("DisruptionBlocked on node %s and NodeClaim %s: %s", node, claim, want)
}

// checkDisrupting: a drifted NodeClaim the drift function starts replacing gets Karpenter's
// DisruptionTerminating Event ("Disrupting NodeClaim: Drifted/Replace" or ".../Delete").
// Drift shares the pool's budget with consolidation: a consolidation whose drain lacks room holds
// it until disruption.DrainDeficitTimeout rolls it back, so the wait allows for that and a
// consolidation after it on a loaded machine.
func checkDisrupting(ctx context.Context, t *testing.T, env *localdev.Env) {
	e := waitEvent(ctx, t, env, "DisruptionTerminating (Drifted) on a NodeClaim", 5*time.Minute, func(e corev1.Event) bool {
		return e.Reason == kevents.DisruptionTerminating && e.InvolvedObject.Kind == "NodeClaim" &&
			strings.HasPrefix(e.Message, "Disrupting NodeClaim: Drifted/")
	})
	t.Logf("DisruptionTerminating on NodeClaim %s: %s", e.InvolvedObject.Name, e.Message)
}
