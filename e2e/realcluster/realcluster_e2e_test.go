//go:build e2e

package realcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestControlPlane starts the control plane and checks what the e2e suite relies on: RBAC is
// enforced, kwok makes a bare Node Ready and runs a pod bound to it, the Eviction API refuses
// (429) an eviction a PodDisruptionBudget forbids and accepts it once the budget allows, and kwok
// removes the evicted pod.
func TestControlPlane(t *testing.T) {
	if _, _, _, err := (&Options{}).Binaries(); err != nil {
		t.Fatalf("this test needs the control-plane binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	begin := time.Now()
	cp, err := Start(ctx, Options{Logf: t.Logf, Dir: os.Getenv("DOVETAIL_E2E_DIR")}) // set: keep the logs
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	t.Logf("timing: control plane started in %s", time.Since(begin).Round(100*time.Millisecond))
	kc, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}

	// RBAC: kube-scheduler's identity (bootstrap ClusterRole system:kube-scheduler) reads pods,
	// not secrets.
	sc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(cp.Dir, "scheduler.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	skc := kubernetes.NewForConfigOrDie(sc)
	if _, err := skc.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("scheduler list pods: %v, want allowed", err)
	}
	if _, err := skc.CoreV1().Secrets("").List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
		t.Errorf("scheduler list secrets: %v, want 403 Forbidden", err)
	}

	// kwok: a Node created without status becomes Ready (stage node-ready) and gets a Lease.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1"}}}
	if _, err := kc.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "node n1 Ready and its Lease", func(ctx context.Context) bool {
		n, err := kc.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil || !nodeReady(n) {
			return false
		}
		_, err = kc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{})
		return err == nil
	})

	// A pod bound to n1 runs (stage pod-running); a PDB with minAvailable 1 then allows 0
	// disruptions (1 healthy - 1).
	labels := map[string]string{"app": "one"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}}}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	if _, err := kc.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "PDB status currentHealthy 1, disruptionsAllowed 0", func(ctx context.Context) bool {
		p, err := kc.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "one", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1 && p.Status.DisruptionsAllowed == 0
	})

	// The refusal is a 429 (Kubernetes docs, "API-initiated Eviction"). Should client-go retry it
	// (it does when the answer carries Retry-After, for ~100 s), the call's own deadline ends it,
	// as in the agent's Applier. The eviction that succeeds returns at once; its deadline only
	// ends a failing test, so it is generous for a loaded machine.
	evict := func(within time.Duration) error {
		ctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		return kc.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default"}})
	}
	refusedAt := time.Now()
	if err := evict(3 * time.Second); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction under a PDB allowing 0: %v, want 429 TooManyRequests", err)
	}
	t.Logf("eviction refused with 429 in %s", time.Since(refusedAt).Round(time.Millisecond))
	if _, err := kc.CoreV1().Pods("default").Get(ctx, "p1", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod p1 gone after a refused eviction: %v", err)
	}
	if err := kc.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := evict(30 * time.Second); err != nil {
		t.Fatalf("eviction without a PDB: %v", err)
	}
	poll(ctx, t, "evicted pod removed (stage pod-delete)", func(ctx context.Context) bool {
		_, err := kc.CoreV1().Pods("default").Get(ctx, "p1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// A deleted pod that a finalizer holds (a Job's pods carry batch.kubernetes.io/job-tracking)
	// goes to a terminal phase first, as the kubelet moves it, so the finalizer's owner can let
	// it go (stages pod-stop, then pod-delete); before, it stayed Running and Terminating.
	const hold = "example.com/hold"
	held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: "default", Finalizers: []string{hold}},
		Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "held pod Running", func(ctx context.Context) bool {
		p, err := kc.CoreV1().Pods("default").Get(ctx, "p2", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	if err := kc.CoreV1().Pods("default").Delete(ctx, "p2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "deleted held pod Failed with its container terminated (stage pod-stop)", func(ctx context.Context) bool {
		p, err := kc.CoreV1().Pods("default").Get(ctx, "p2", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodFailed && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Terminated != nil && p.Status.ContainerStatuses[0].State.Terminated.ExitCode == 143
	})
	if _, err := kc.CoreV1().Pods("default").Patch(ctx, "p2", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "released pod removed", func(ctx context.Context) bool {
		_, err := kc.CoreV1().Pods("default").Get(ctx, "p2", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if msg := cp.Exited(); msg != "" {
		t.Fatal(msg)
	}
	dir := cp.Dir
	cp.Stop()
	if _, err := os.Stat(dir); os.Getenv("DOVETAIL_E2E_DIR") == "" && !os.IsNotExist(err) {
		t.Errorf("Stop left %s behind (err %v)", dir, err)
	}
}

func poll(ctx context.Context, t *testing.T, what string, ok func(context.Context) bool) {
	t.Helper()
	begin := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return ok(ctx), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	t.Logf("%s after %s", what, time.Since(begin).Round(100*time.Millisecond))
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
