package localdev

import (
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	podsGVR = corev1.SchemeGroupVersion.WithResource("pods")
	pdbsGVR = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
)

// evictionRules give the in-memory API server what client-go's fake clientset skips, so drains
// behave as against a real cluster: the Eviction API (policy/v1) deletes the pod, or answers 429
// Too Many Requests when a PodDisruptionBudget allows no disruption (the disruption controller's
// rule: healthy pods minus the budget's desired healthy; a pod not yet healthy may go while the
// budget holds); and the workload controllers' answer to a controlled pod going (evicted or
// deleted): a ReplicaSet makes a new pod, a StatefulSet the same one again, pending.
func evictionRules(c *kubefake.Clientset, now func() time.Time) {
	tracker := c.Tracker()
	var seq atomic.Int64
	c.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev, ok := a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction)
		if !ok {
			return true, nil, apierrors.NewBadRequest("eviction: not a policy/v1 Eviction")
		}
		obj, err := tracker.Get(podsGVR, a.GetNamespace(), ev.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod)
		if p := ev.DeleteOptions; p != nil && p.Preconditions != nil && p.Preconditions.UID != nil && *p.Preconditions.UID != pod.UID {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), pod.Name, fmt.Errorf("UID precondition failed"))
		}
		if err := pdbsAllow(tracker, pod); err != nil {
			return true, nil, err
		}
		if err := tracker.Delete(podsGVR, pod.Namespace, pod.Name); err != nil {
			return true, nil, err
		}
		return true, ev, recreate(tracker, pod, &seq, now)
	})
	c.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		da := a.(clienttesting.DeleteAction)
		obj, err := tracker.Get(podsGVR, da.GetNamespace(), da.GetName())
		if err != nil {
			return false, nil, nil
		}
		pod := obj.(*corev1.Pod)
		if len(pod.Finalizers) > 0 {
			return false, nil, nil // the finalizer rule of apiServerRules
		}
		if err := tracker.Delete(podsGVR, pod.Namespace, pod.Name); err != nil {
			return true, nil, err
		}
		return true, nil, recreate(tracker, pod, &seq, now)
	})
}

// healthy is a pod the disruption controller counts as available: bound, running, Ready, not
// being deleted.
func healthy(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pdbsAllow returns a 429 when a budget selecting the pod allows no more disruption.
func pdbsAllow(tracker clienttesting.ObjectTracker, pod *corev1.Pod) error {
	list, err := tracker.List(pdbsGVR, policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), pod.Namespace)
	if err != nil {
		return nil
	}
	pods, err := tracker.List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), pod.Namespace)
	if err != nil {
		return err
	}
	for i := range list.(*policyv1.PodDisruptionBudgetList).Items {
		pdb := &list.(*policyv1.PodDisruptionBudgetList).Items[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		expected, current := 0, 0
		for j := range pods.(*corev1.PodList).Items {
			p := &pods.(*corev1.PodList).Items[j]
			if !sel.Matches(labels.Set(p.Labels)) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			expected++
			if healthy(p) {
				current++
			}
		}
		desired := 0
		switch {
		case pdb.Spec.MinAvailable != nil:
			desired, _ = intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, expected, true)
		case pdb.Spec.MaxUnavailable != nil:
			unavailable, _ := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, expected, true)
			desired = expected - unavailable
		}
		if !healthy(pod) && current >= desired {
			continue // an unhealthy pod may go while the budget holds (IfHealthyBudget)
		}
		if current-desired < 1 {
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
	}
	return nil
}

var replicaSuffix = regexp.MustCompile(`-r[0-9]+$`)

// recreate is the pod's controller making it again: a ReplicaSet (or the Deployment the
// in-memory cluster names as owner: it creates no ReplicaSets) a new pod with a new name, a
// StatefulSet the same name; pending, unbound. Other pods are not recreated.
func recreate(tracker clienttesting.ObjectTracker, pod *corev1.Pod, seq *atomic.Int64, now func() time.Time) error {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || (owner.Kind != "ReplicaSet" && owner.Kind != "Deployment" && owner.Kind != "StatefulSet") {
		return nil
	}
	p := &corev1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy(), Spec: *pod.Spec.DeepCopy()}
	p.ResourceVersion, p.DeletionTimestamp, p.CreationTimestamp = "", nil, metav1.NewTime(now())
	n := seq.Add(1)
	p.UID = types.UID(fmt.Sprintf("in-memory-recreated-%d", n))
	if owner.Kind != "StatefulSet" {
		p.Name = replicaSuffix.ReplaceAllString(pod.Name, "") + fmt.Sprintf("-r%d", n)
	}
	p.Spec.NodeName = ""
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return tracker.Create(podsGVR, p, p.Namespace)
}
