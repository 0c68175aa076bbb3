//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/drain"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

const terminationNS = "e2e-termination"

// checkTerminationOrderAndVolumes deletes the NodeClaim of a running node that holds, besides
// its workloads, a normal pod using a PersistentVolume, a critical pod (system-cluster-critical),
// a DaemonSet pod and a pod tolerating karpenter.sh/disrupted:NoSchedule, plus a
// VolumeAttachment of that volume which the test controls (no CSI driver runs here: the test
// stands in for the attach/detach controller). It asserts Karpenter's termination:
//   - pods leave in drain groups (non-critical, non-critical DaemonSet, critical, critical
//     DaemonSet): no pod of a later group is deleted before every pod of the earlier ones;
//   - the tolerating pod is never evicted;
//   - once drained, the instance keeps running (VolumesDetached=False,
//     AwaitingVolumeDetachment) while the attachment exists, and is terminated once the test
//     deletes it.
func checkTerminationOrderAndVolumes(ctx context.Context, t *testing.T, env *localdev.Env) {
	kc := env.Cluster.Kube
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: terminationNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The victim must not be on its way out already: consolidation runs meanwhile, and a node
	// it tainted karpenter.sh/disrupted gets no DaemonSet pod. The do-not-disrupt annotation
	// keeps it from choosing the node later (a TaintNode decided before the annotation is
	// refused as stale, since the node changed after its snapshot); deleting the NodeClaim still
	// terminates it, as in Karpenter.
	claim := func(node string) apisv1.NodeClaim {
		for _, nc := range nodeClaims(ctx, t, env) {
			if nc.Status.NodeName == node {
				return nc
			}
		}
		return apisv1.NodeClaim{}
	}
	// Cordoned as well: kube-scheduler places no other pod there once the test counted the room
	// its pods need (pods a consolidation elsewhere evicts meanwhile would otherwise fill it, and
	// the DaemonSet's pod, which goes through kube-scheduler, would find no room). The DaemonSet
	// controller gives its pods the node.kubernetes.io/unschedulable toleration, and bare pods
	// name their node, so the test's own pods still land.
	hold := func(node string, on bool) error {
		patch := []byte(`{"metadata":{"annotations":{"` + apisv1.AnnotationDoNotDisrupt + `":"true"}},"spec":{"unschedulable":true}}`)
		if !on {
			patch = []byte(`{"metadata":{"annotations":{"` + apisv1.AnnotationDoNotDisrupt + `":null}},"spec":{"unschedulable":null}}`)
		}
		_, err := kc.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	// The test adds 4 pods and a DaemonSet pod: a c6g.medium admits 8 in all.
	const room = 5
	take := func(nc apisv1.NodeClaim) bool {
		if freePodSlots(ctx, t, env, nc.Status.NodeName) < room || hold(nc.Status.NodeName, true) != nil {
			return false
		}
		time.Sleep(2 * time.Second) // a command already published lands, or is refused, by then
		n, err := kc.CoreV1().Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
		if err == nil && n.DeletionTimestamp == nil && !tainted(n) && freePodSlots(ctx, t, env, nc.Status.NodeName) >= room {
			return true
		}
		_ = hold(nc.Status.NodeName, false)
		return false
	}
	var victim apisv1.NodeClaim
	for _, nc := range nodeClaims(ctx, t, env) {
		if nc.Status.NodeName != "" && nc.DeletionTimestamp == nil && take(nc) {
			victim = nc
			break
		}
	}
	if victim.Name == "" {
		// No node has room: a node of its own (c6g.xlarge on demand admits 58 pods).
		host := deploy(ctx, t, env, "termination-host", map[string]string{corev1.LabelInstanceTypeStable: "c6g.xlarge", apisv1.LabelCapacityType: apisv1.CapacityTypeOnDemand})
		if victim = claim(host); victim.Name == "" || !take(victim) {
			t.Fatalf("no NodeClaim with room on its node that is not being disrupted already (node %s)", host)
		}
	}
	node := victim.Status.NodeName
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}
	bare := func(ns, name string, edit func(*corev1.Pod)) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"e2e": "termination"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: small}}}}
		if edit != nil {
			edit(p)
		}
		if _, err := kc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The volume: a PV statically bound to a claim (no provisioner runs here).
	pvName := "e2e-termination-data"
	if _, err := kc.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0e2e0000000000001"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: terminationNS, Name: "data"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := ""
	if _, err := kc.CoreV1().PersistentVolumeClaims(terminationNS).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &empty, VolumeName: pvName, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bare(terminationNS, "with-volume", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	})
	bare(terminationNS, "normal", nil)
	bare("kube-system", "e2e-critical", func(p *corev1.Pod) { p.Spec.PriorityClassName = drain.PriorityClassClusterCritical })
	bare(terminationNS, "tolerant", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: apisv1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	})
	labels := map[string]string{"e2e": "termination-ds"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: terminationNS, Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers:   []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10", Resources: small}}}}}}
	if _, err := kc.AppsV1().DaemonSets(terminationNS).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		bg := context.Background()
		_ = kc.AppsV1().DaemonSets(terminationNS).Delete(bg, "agent", metav1.DeleteOptions{})
		_ = kc.CoreV1().Pods("kube-system").Delete(bg, "e2e-critical", metav1.DeleteOptions{})
		_ = kc.CoreV1().PersistentVolumeClaims(terminationNS).Delete(bg, "data", metav1.DeleteOptions{})
		_ = kc.CoreV1().PersistentVolumes().Delete(bg, pvName, metav1.DeleteOptions{})
	}()
	// Every test pod runs on the node (the DaemonSet's one included).
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, nil
		}
		running := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running[p.Namespace+"/"+p.Name] = true
				if len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Name == "agent" {
					running["ds"] = true
				}
			}
		}
		return running[terminationNS+"/with-volume"] && running[terminationNS+"/normal"] && running["kube-system/e2e-critical"] &&
			running[terminationNS+"/tolerant"] && running["ds"], nil
	}); err != nil {
		var state []string
		if pods, lerr := kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}); lerr == nil {
			for _, p := range pods.Items {
				state = append(state, fmt.Sprintf("%s/%s %s %s", p.Namespace, p.Name, p.Status.Phase, p.Status.Reason))
			}
		}
		// The DaemonSet's pod names no node until kube-scheduler binds it: say why it waits.
		if pods, lerr := kc.CoreV1().Pods(terminationNS).List(ctx, metav1.ListOptions{LabelSelector: "e2e=termination-ds"}); lerr == nil {
			for _, p := range pods.Items {
				state = append(state, fmt.Sprintf("DaemonSet pod %s on %q %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase, schedulerWords(ctx, t, env, &p)))
			}
		}
		t.Fatalf("test pods not running on %s: %v; pods there: %v", node, err, state)
	}
	attacher := "ebs.csi.aws.com"
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-e2e-termination"}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: attacher, NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}}}
	if _, err := kc.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = kc.StorageV1().VolumeAttachments().Delete(context.Background(), va.Name, metav1.DeleteOptions{})
	}()

	// Watch the node's pods: the order in which each is first seen terminating (or gone).
	order := watchLeaving(ctx, t, env, node)
	if err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Drained: no pod but the tolerating one (and static ones) waits; then the attachment holds.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		nc, err := getNodeClaim(ctx, env, victim.Name)
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(nc.Status.Conditions, apisv1.ConditionVolumesDetached)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "AwaitingVolumeDetachment", nil
	}); err != nil {
		t.Fatalf("NodeClaim %s never waited for its volume: %v", victim.Name, err)
	}
	// Held for a while: the instance still runs and the Node is still there.
	time.Sleep(3 * time.Second)
	if inst, err := env.Cloud.Get(ctx, victim.Status.ProviderID); err != nil || inst.State != cloud.StateRunning {
		t.Fatalf("instance %s terminated while its volume was attached: %+v %v", victim.Status.ProviderID, inst, err)
	}
	seen := order.snapshot()
	for _, e := range seen {
		if e.name == terminationNS+"/tolerant" {
			t.Errorf("the pod tolerating karpenter.sh/disrupted was evicted")
		}
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].group < seen[i-1].group {
			t.Errorf("drain order: %s (%s) left after %s (%s): %v", seen[i-1].name, seen[i-1].group, seen[i].name, seen[i].group, seen)
		}
	}
	want := map[string]bool{terminationNS + "/with-volume": false, terminationNS + "/normal": false, "kube-system/e2e-critical": false}
	dsSeen := false
	for _, e := range seen {
		if _, ok := want[e.name]; ok {
			want[e.name] = true
		}
		dsSeen = dsSeen || e.group == drain.NonCriticalDaemon
	}
	for name, ok := range want {
		if !ok {
			t.Errorf("pod %s was not drained", name)
		}
	}
	if !dsSeen {
		t.Error("the DaemonSet pod was not drained")
	}
	// Detached: the instance is terminated and Node and NodeClaim go.
	begin := time.Now()
	if err := kc.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, nerr := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		_, cerr := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(nerr) && apierrors.IsNotFound(cerr), nil
	}); err != nil {
		t.Fatalf("Node %s / NodeClaim %s not gone after the attachment was deleted: %v", node, victim.Name, err)
	}
	if inst, err := env.Cloud.Get(ctx, victim.Status.ProviderID); err == nil && inst.State != cloud.StateShuttingDown && inst.State != cloud.StateTerminated {
		t.Errorf("instance %s is %s after termination", victim.Status.ProviderID, inst.State)
	}
	t.Logf("drain order %v; terminated %s after the VolumeAttachment was deleted", seen, time.Since(begin).Round(100*time.Millisecond))
}

func getNodeClaim(ctx context.Context, env *localdev.Env, name string) (*apisv1.NodeClaim, error) {
	u, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	nc := &apisv1.NodeClaim{}
	return nc, kube.FromUnstructured(u, nc)
}

type leaving struct {
	name  string
	group drain.Group
}

type leavingLog struct {
	mu   sync.Mutex
	seen map[string]bool
	log  []leaving
}

func (l *leavingLog) add(p *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := p.Namespace + "/" + p.Name
	if l.seen[key] || drain.ToleratesDisrupted(p) && key != terminationNS+"/tolerant" || drain.IsStatic(p) {
		return
	}
	l.seen[key] = true
	l.log = append(l.log, leaving{key, drain.GroupOf(p)})
}

func (l *leavingLog) snapshot() []leaving {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]leaving(nil), l.log...)
}

// watchLeaving records, in order, each pod of node first seen terminating or deleted.
func watchLeaving(ctx context.Context, t *testing.T, env *localdev.Env, node string) *leavingLog {
	t.Helper()
	l := &leavingLog{seen: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(env.Cluster.Kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + node
	}))
	inf := f.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
				l.add(p)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				l.add(p)
			}
		},
	})
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	f.Start(wctx.Done())
	f.WaitForCacheSync(wctx.Done())
	return l
}

// freePodSlots is how many more pods node admits: its allocatable pods less the pods bound to it
// that have not ended (the kubelet refuses one more with OutOfpods).
func freePodSlots(ctx context.Context, t *testing.T, env *localdev.Env, node string) int {
	t.Helper()
	n, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0
	}
	pods, err := env.Cluster.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0
	}
	used, milliCPU := 0, int64(0)
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			used++
			for _, c := range p.Spec.Containers {
				milliCPU += c.Resources.Requests.Cpu().MilliValue()
			}
		}
	}
	// The DaemonSet's pod goes through kube-scheduler, which also checks CPU: count the 10m
	// pods the node's free CPU admits too, not only its pod slots.
	return min(int(n.Status.Allocatable.Pods().Value())-used, int((n.Status.Allocatable.Cpu().MilliValue()-milliCPU)/10))
}
