package localdev

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

// Cluster is the Kubernetes API Dovetail runs against: an in-memory one (client-go's fake
// clientset and dynamic client, with local stand-ins for the controllers and the scheduler) or
// a real one from a kubeconfig.
type Cluster struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// InMemory is true for the fake clientset: the stand-ins must run, as nothing else creates
	// controllers' pods, runs DaemonSets or binds pods.
	InMemory bool
	// AgentKube and AgentDynamic, when set, are the agent's own clients (its service account's
	// credentials in a real control plane); nil means the agent uses Kube and Dynamic.
	AgentKube    kubernetes.Interface
	AgentDynamic dynamic.Interface

	// now is the in-memory cluster's clock (nil for a real cluster).
	now func() time.Time
}

// NewInMemoryCluster returns an empty in-memory cluster. Mind what client-go's fake clientset
// does not do: it ignores field selectors, binding and resourceVersion conflicts (Dovetail's agent
// relies on none of them; the real-control-plane e2e checks them). The Eviction API with
// PodDisruptionBudgets and the controllers' re-creation of evicted pods are given to it here
// (evictionRules), as drains depend on them.
func NewInMemoryCluster() *Cluster { return NewInMemoryClusterAt(time.Now) }

// NewInMemoryClusterAt is NewInMemoryCluster on the clock now: the API server's timestamps
// (creation, deletion) and the controllers' (a re-created pod's creation) are read from it, so a
// scenario on a fake clock sees the times its functions decide with.
func NewInMemoryClusterAt(now func() time.Time) *Cluster {
	kc := kubefake.NewClientset()
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kube.ListKinds)
	apiServerRules(kc, now)
	evictionRules(kc, now)
	apiServerRules(dc, now)
	return &Cluster{Kube: kc, Dynamic: dc, InMemory: true, now: now}
}

// Apply creates the scenario's objects. In an in-memory cluster the controllers' pods are
// created too (as the Deployment/Job controllers would); in a real cluster the controllers do it.
// It returns the workload pods it created.
func (c *Cluster) Apply(ctx context.Context, set *manifests.Set) (int, error) {
	for _, ns := range namespacesOf(set) {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	for _, nc := range set.NodeClasses {
		var err error
		switch {
		case nc.EC2 != nil:
			err = c.createCR(ctx, nc.EC2, apisv1.AWSGroupVersion, apisv1.KindEC2NodeClass)
		case nc.AKS != nil:
			err = c.createCR(ctx, nc.AKS, apisv1.AzureGroupVersion, apisv1.KindAKSNodeClass)
		}
		if err != nil {
			return 0, err
		}
	}
	for _, np := range set.NodePools {
		if err := c.createCR(ctx, np, apisv1.GroupVersion, "NodePool"); err != nil {
			return 0, err
		}
	}
	for _, o := range set.NodeOverlays {
		if err := c.createCR(ctx, o, apisv1.NodeOverlayGroupVersion, apisv1.KindNodeOverlay); err != nil {
			return 0, err
		}
	}
	for _, n := range set.Nodes {
		if _, err := c.Kube.CoreV1().Nodes().Create(ctx, n.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, ds := range set.DaemonSets {
		if _, err := c.Kube.AppsV1().DaemonSets(ds.Namespace).Create(ctx, ds.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
		}
	}
	for _, pdb := range set.PDBs {
		if _, err := c.Kube.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, pdb.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("pdb %s/%s: %w", pdb.Namespace, pdb.Name, err)
		}
	}
	if !c.InMemory {
		return c.applyWorkloads(ctx, set)
	}
	n := 0
	for _, p := range set.ExpandPods() {
		if _, err := c.Kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return n, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if p.Spec.NodeName == "" {
			n++
		}
	}
	return n, nil
}

// applyWorkloads creates the controllers in a real cluster (its controller-manager makes pods).
func (c *Cluster) applyWorkloads(ctx context.Context, set *manifests.Set) (int, error) {
	n := 0
	for _, w := range set.Workloads {
		if err := c.createWorkload(ctx, w.Object); err != nil && !apierrors.IsAlreadyExists(err) {
			return n, fmt.Errorf("%s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
		}
		n += int(w.Replicas)
	}
	for _, p := range set.Pods {
		if _, err := c.Kube.CoreV1().Pods(p.Namespace).Create(ctx, p.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return n, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if p.Spec.NodeName == "" {
			n++
		}
	}
	return n, nil
}

func (c *Cluster) createCR(ctx context.Context, obj any, apiVersion, kind string) error {
	u, err := kube.ToUnstructured(obj, apiVersion, kind)
	if err != nil {
		return err
	}
	var gvr schema.GroupVersionResource
	switch kind {
	case "NodePool":
		gvr = kube.NodePoolGVR
	case apisv1.KindNodeOverlay:
		gvr = kube.NodeOverlayGVR
	default:
		if gvr, err = kube.NodeClassGVR(kind); err != nil {
			return err
		}
	}
	if _, err := c.Dynamic.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s %s: %w", kind, u.GetName(), err)
	}
	return nil
}

func namespacesOf(set *manifests.Set) []string {
	seen := map[string]bool{"default": true, "kube-system": true}
	out := []string{"default", "kube-system"}
	add := func(ns string) {
		if ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	for _, ns := range set.Namespaces {
		add(ns.Name)
	}
	for _, w := range set.Workloads {
		add(w.Namespace)
	}
	for _, p := range set.Pods {
		add(p.Namespace)
	}
	for _, d := range set.DaemonSets {
		add(d.Namespace)
	}
	return out
}

// createWorkload creates a pod controller through its typed client.
func (c *Cluster) createWorkload(ctx context.Context, obj runtime.Object) error {
	var err error
	switch o := obj.DeepCopyObject().(type) {
	case *appsv1.Deployment:
		_, err = c.Kube.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.StatefulSet:
		_, err = c.Kube.AppsV1().StatefulSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.ReplicaSet:
		_, err = c.Kube.AppsV1().ReplicaSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *batchv1.Job:
		_, err = c.Kube.BatchV1().Jobs(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *batchv1.CronJob:
		_, err = c.Kube.BatchV1().CronJobs(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("unsupported workload type %T", o)
	}
	return err
}
