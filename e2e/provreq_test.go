//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/provreq"
)

const (
	provReqNS = "e2e-provreq"
	// provReqCount is the gang: 16 pods, one node each.
	provReqCount = 16
	// provReqShortPool allows only c5d.large on demand, whose fake capacity is limited to
	// provReqShortCapacity instances (fewer than 16); provReqPool allows only m5.large on demand,
	// with the fake cloud's unlimited capacity. Separate types keep the short pool's exhausted
	// offerings (marked unavailable for 3 minutes) out of the second request's way. The limit
	// counts every launch of the type, so it is one no other e2e pool launches (c5.large is:
	// drift replacements took 9 of 10 in a full run).
	provReqShortPool     = "provreq-short"
	provReqShortCapacity = 10
	provReqPool          = "provreq"
	// provReqValidUntil is the short request's ValidUntilSeconds: Provisioned=False
	// (CapacityIsNotFound) until then, Failed=True after (docs/batch.md).
	provReqValidUntil = 10 * time.Second
	// provReqTaint keeps the request pools' nodes for the requests' pods, as a dedicated gang pool
	// is in practice: the booking reserves room in Dovetail's decisions only (as in Cluster
	// Autoscaler), and kube-scheduler's default scoring (NodeResourcesFit, LeastAllocated) sends
	// other flows' pods, such as those drift drains from the default pool meanwhile, to the
	// emptiest nodes: the 16 new ones, where a consumer of 1200m then no longer fits.
	provReqTaint = "e2e.dovetail.dev/gang"
)

// checkProvisioningRequests drives both of Cluster Autoscaler's classes through the deployed
// path (the agent watches the requests and PodTemplates, the provision function answers them,
// the agent writes the conditions through /status) on the real API server:
//
//  1. a best-effort-atomic-scale-up request for 16 pods whose fleet can launch only 10 of the 16
//     nodes (fake.LimitCapacity: InsufficientInstanceCapacity beyond them) ends with no instance,
//     NodeClaim or Node of its pool, Provisioned=False CapacityIsNotFound, then Failed=True
//     CapacityIsNotFound once its ValidUntilSeconds ran out;
//  2. the same request in a pool with capacity launches all 16 NodeClaims in one decision
//     (one RequestAnswer names all 16; each NodeClaim carries the request and the count 16),
//     Provisioned=True CapacityIsProvisioned, and its 16 consuming pods are bound, one per node;
//  3. check-capacity: 16 pods of 500m fit in the room left on those 16 nodes (Provisioned=True
//     CapacityIsFound, booked); a second request for 17 more with noRetry finds nothing (the
//     first booking holds the room) and is Failed=True CapacityIsNotFound; neither launches
//     anything.
func checkProvisioningRequests(ctx context.Context, t *testing.T, env *localdev.Env, plans *planRecorder) {
	kc := env.Cluster.Kube
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: provReqNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createProvReqPool(ctx, t, env, provReqShortPool, "c5d.large")
	createProvReqPool(ctx, t, env, provReqPool, "m5.large")
	// 1200m: one pod a node. c5d.large and m5.large have 2 vCPU, 1930m allocatable (2000m less
	// kube-reserved's 70m for 2 cores, the EKS AMI's formula), less the seed DaemonSets' 125m
	// (aws-node 25m, kube-proxy 100m): 1805m, under two pods' 2400m.
	createTemplate(ctx, t, env, "gang-short", provReqShortPool, "1200m")
	createTemplate(ctx, t, env, "gang", provReqPool, "1200m")

	if err := env.Cloud.LimitCapacity(fake.Pattern{InstanceType: "c5d.large", CapacityType: "on-demand"}, provReqShortCapacity); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Cloud.ClearICE)

	t.Run("AtomicPartialFleetLeavesNothing", func(t *testing.T) {
		begin := time.Now()
		createProvReq(ctx, t, env, "short", apisv1.ProvisioningClassBestEffortAtomicScaleUp, "gang-short", provReqCount,
			map[string]any{apisv1.ParameterValidUntilSeconds: strconv.Itoa(int(provReqValidUntil / time.Second))})
		c := waitCondition(ctx, t, env, "short", apisv1.ProvisioningRequestProvisioned, time.Minute)
		if c.Status != metav1.ConditionFalse || c.Reason != provreq.ReasonCapacityIsNotFound {
			t.Errorf("short: Provisioned %s/%s, want False/%s (the fleet launched %d of %d)", c.Status, c.Reason,
				provreq.ReasonCapacityIsNotFound, provReqShortCapacity, provReqCount)
		}
		// The decision that answered rolled back exactly what the fleet launched.
		if a, ok := plans.awaitAnswer(ctx, provReqNS+"/short"); !ok {
			t.Errorf("no decision answered %s/short", provReqNS)
		} else if len(a.RolledBack) != provReqShortCapacity || len(a.Launched) != 0 {
			t.Errorf("short: rolled back %d instances and kept %d NodeClaims, want %d and 0", len(a.RolledBack), len(a.Launched), provReqShortCapacity)
		}
		t.Logf("timing: partial atomic launch rolled back %s after the request", time.Since(begin).Round(100*time.Millisecond))
		assertNothingOf(ctx, t, env, provReqShortPool)
	})

	t.Run("AtomicLaunchesAllInOneDecision", func(t *testing.T) {
		begin := time.Now()
		// Creating this request also starts a decision after the short one's ValidUntilSeconds.
		createProvReq(ctx, t, env, "gang", apisv1.ProvisioningClassBestEffortAtomicScaleUp, "gang", provReqCount, nil)
		c := waitCondition(ctx, t, env, "gang", apisv1.ProvisioningRequestProvisioned, time.Minute)
		if c.Status != metav1.ConditionTrue || c.Reason != provreq.ReasonCapacityIsProvisioned {
			t.Fatalf("gang: Provisioned %s/%s (%s), want True/%s", c.Status, c.Reason, c.Message, provreq.ReasonCapacityIsProvisioned)
		}
		// The consumers come once the request is Provisioned, as Kueue creates a workload's pods
		// once its admission check is Ready; the booking keeps their room, so the provision
		// function launches nothing more for them.
		for i := range provReqCount {
			createConsumer(ctx, t, env, fmt.Sprintf("gang-%02d", i), "gang", provReqPool)
		}
		a, ok := plans.awaitAnswer(ctx, provReqNS+"/gang")
		if !ok || len(a.Launched) != provReqCount || len(a.RolledBack) != 0 {
			t.Errorf("gang: the answering decision launched %d NodeClaims and rolled back %d, want all %d in one decision and none",
				len(a.Launched), len(a.RolledBack), provReqCount)
		}
		claims := 0
		for _, nc := range nodeClaims(ctx, t, env) {
			if nc.Labels[poolLabel] != provReqPool {
				continue
			}
			claims++
			if !slices.Contains(a.Launched, nc.Name) {
				t.Errorf("NodeClaim %s of pool %s is not one the answering decision launched", nc.Name, provReqPool)
			}
			if got, want := nc.Annotations[provreq.AnnotationProvisioningRequest], provReqNS+"/gang"; got != want {
				t.Errorf("NodeClaim %s: %s=%q, want %q", nc.Name, provreq.AnnotationProvisioningRequest, got, want)
			}
			if got := nc.Annotations[provreq.AnnotationProvisioningRequestNodes]; got != strconv.Itoa(provReqCount) {
				t.Errorf("NodeClaim %s: %s=%q, want %q", nc.Name, provreq.AnnotationProvisioningRequestNodes, got, strconv.Itoa(provReqCount))
			}
		}
		if claims != provReqCount {
			t.Errorf("%d NodeClaims of pool %s, want %d", claims, provReqPool, provReqCount)
		}
		// kube-scheduler binds the consumers once the nodes register: one per node.
		var pods *corev1.PodList
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			if pods, err = kc.CoreV1().Pods(provReqNS).List(ctx, metav1.ListOptions{}); err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" {
					return false, nil
				}
			}
			return len(pods.Items) == provReqCount, nil
		}); err != nil {
			t.Fatalf("the %d consumers are not all bound: %v\n%s", provReqCount, err, whyUnbound(ctx, env, pods))
		}
		onNode := map[string]int{}
		for _, p := range pods.Items {
			onNode[p.Spec.NodeName]++
		}
		if len(onNode) != provReqCount {
			t.Errorf("consumers on %d nodes, want one on each of %d: %v", len(onNode), provReqCount, onNode)
		}
		t.Logf("timing: 16 atomic nodes provisioned and consumers bound %s after the request", time.Since(begin).Round(100*time.Millisecond))
		assertNothingOf(ctx, t, env, provReqShortPool)
		// The short request ran out its ValidUntilSeconds: Failed, with Provisioned still False.
		if c := waitCondition(ctx, t, env, "short", apisv1.ProvisioningRequestFailed, time.Minute); c.Status != metav1.ConditionTrue ||
			c.Reason != provreq.ReasonCapacityIsNotFound {
			t.Errorf("short: Failed %s/%s, want True/%s after ValidUntilSeconds %s", c.Status, c.Reason, provreq.ReasonCapacityIsNotFound, provReqValidUntil)
		}
	})

	t.Run("CheckCapacityLaunchesNothing", func(t *testing.T) {
		// Other flows of the shared cluster still launch and delete (drift replaces nodes of the
		// default pool meanwhile): compare what is new in the pool the probe's pods select.
		before := claimNames(ctx, t, env, provReqPool)
		insts := instanceIDs(ctx, t, env, provReqPool)
		// Two 300m pods fit in the 1805m - 1200m = 605m each of the 16 m5.large nodes has left: 32
		// in all (provReqTaint keeps other flows' pods off), so 16 fit, and after their booking
		// 16 remain, too few for the next request of 17.
		createTemplate(ctx, t, env, "probe", provReqPool, "300m")
		createProvReq(ctx, t, env, "fits", apisv1.ProvisioningClassCheckCapacity, "probe", provReqCount, nil)
		if c := waitCondition(ctx, t, env, "fits", apisv1.ProvisioningRequestProvisioned, time.Minute); c.Status != metav1.ConditionTrue ||
			c.Reason != provreq.ReasonCapacityIsFound {
			t.Errorf("fits: Provisioned %s/%s (%s), want True/%s", c.Status, c.Reason, c.Message, provreq.ReasonCapacityIsFound)
		}
		// The first booking holds that room: 17 more find none, and noRetry fails at once.
		createProvReq(ctx, t, env, "no-room", apisv1.ProvisioningClassCheckCapacity, "probe", provReqCount+1,
			map[string]any{apisv1.ParameterNoRetry: "true"})
		if c := waitCondition(ctx, t, env, "no-room", apisv1.ProvisioningRequestFailed, time.Minute); c.Status != metav1.ConditionTrue ||
			c.Reason != provreq.ReasonCapacityIsNotFound {
			t.Errorf("no-room: Failed %s/%s (%s), want True/%s", c.Status, c.Reason, c.Message, provreq.ReasonCapacityIsNotFound)
		}
		// A launch would follow within the decision that answered; give the agent time to apply it.
		time.Sleep(3 * time.Second)
		for name := range claimNames(ctx, t, env, provReqPool) {
			if !before[name] {
				t.Errorf("NodeClaim %s created during check-capacity: it must launch nothing", name)
			}
		}
		for id := range instanceIDs(ctx, t, env, provReqPool) {
			if !insts[id] {
				t.Errorf("instance %s launched during check-capacity: it must launch nothing", id)
			}
		}
	})
}

// awaitAnswer returns answer(req) once a decision launched or rolled back something for the
// request, or after 10 s. The provision function hands a decision to OnDecision after it
// published the decision's commands, so the agent may write the request's condition first.
func (r *planRecorder) awaitAnswer(ctx context.Context, req string) (provisionAnswer, bool) {
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		a, ok := r.answer(req)
		return ok && len(a.Launched)+len(a.RolledBack) > 0, nil
	})
	return r.answer(req)
}

// answer returns the latest answer any decision gave the request "namespace/name".
func (r *planRecorder) answer(req string) (out provisionAnswer, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.decisions {
		for _, a := range d.Requests {
			if a.Request == req && (len(a.Launched) > 0 || len(a.RolledBack) > 0 || !ok) {
				out, ok = provisionAnswer{Launched: a.Launched, RolledBack: a.RolledBack}, true
			}
		}
	}
	return out, ok
}

// provisionAnswer is what a decision did for one request: the NodeClaims it kept and the
// instances it terminated.
type provisionAnswer struct {
	Launched   []string
	RolledBack []string
}

// whyUnbound says, for a failure, each unbound consumer's PodScheduled message (kube-scheduler's
// reason) and the pods of other namespaces bound to the request pool's nodes.
func whyUnbound(ctx context.Context, env *localdev.Env, consumers *corev1.PodList) string {
	var out strings.Builder
	if consumers != nil {
		for _, p := range consumers.Items {
			if p.Spec.NodeName != "" {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					fmt.Fprintf(&out, "consumer %s: PodScheduled=%s %s: %s\n", p.Name, c.Status, c.Reason, c.Message)
				}
			}
		}
	}
	nodes, err := env.Cluster.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: poolLabel + "=" + provReqPool})
	if err != nil {
		return out.String() + err.Error()
	}
	for _, n := range nodes.Items {
		pods, err := env.Cluster.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return out.String() + err.Error()
		}
		for _, p := range pods.Items {
			if p.Namespace != provReqNS {
				fmt.Fprintf(&out, "node %s (taints %v) holds %s/%s\n", n.Name, n.Spec.Taints, p.Namespace, p.Name)
			}
		}
	}
	return out.String()
}

// createProvReqPool creates a NodePool of one on-demand instance type whose nodes carry
// poolLabel=name and the taint provReqTaint, which only the requests' pods tolerate; its nodes
// are never consolidated, so empty atomic nodes wait for their pods.
func createProvReqPool(ctx context.Context, t *testing.T, env *localdev.Env, name, instanceType string) {
	t.Helper()
	req := func(key, value string) map[string]any {
		return map[string]any{"key": key, "operator": "In", "values": []any{value}}
	}
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"disruption": map[string]any{"consolidateAfter": "Never"},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{poolLabel: name}},
				"spec": map[string]any{
					"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
					"requirements": []any{req(corev1.LabelInstanceTypeStable, instanceType), req(apisv1.LabelCapacityType, "on-demand")},
					"taints":       []any{map[string]any{"key": provReqTaint, "effect": string(corev1.TaintEffectNoSchedule)}},
				}}}}}
	if _, err := env.Cluster.Dynamic.Resource(kube.NodePoolGVR).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func provReqPodSpec(pool, cpu string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector: map[string]string{poolLabel: pool},
		Tolerations:  []corev1.Toleration{{Key: provReqTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
}

func createTemplate(ctx context.Context, t *testing.T, env *localdev.Env, name, pool, cpu string) {
	t.Helper()
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: provReqNS},
		Template: corev1.PodTemplateSpec{Spec: provReqPodSpec(pool, cpu)}}
	if _, err := env.Cluster.Kube.CoreV1().PodTemplates(provReqNS).Create(ctx, pt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createConsumer(ctx context.Context, t *testing.T, env *localdev.Env, name, request, pool string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: provReqNS,
		Annotations: map[string]string{apisv1.AnnotationConsumeProvisioningRequest: request}}, Spec: provReqPodSpec(pool, "1200m")}
	if _, err := env.Cluster.Kube.CoreV1().Pods(provReqNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createProvReq(ctx context.Context, t *testing.T, env *localdev.Env, name, class, template string, count int, params map[string]any) {
	t.Helper()
	spec := map[string]any{
		"provisioningClassName": class,
		"podSets":               []any{map[string]any{"podTemplateRef": map[string]any{"name": template}, "count": int64(count)}},
	}
	if params != nil {
		spec["parameters"] = params
	}
	pr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.x-k8s.io/v1", "kind": kube.KindProvisioningRequest,
		"metadata": map[string]any{"name": name, "namespace": provReqNS}, "spec": spec}}
	if _, err := env.Cluster.Dynamic.Resource(kube.ProvisioningRequestGVR).Namespace(provReqNS).Create(ctx, pr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitCondition waits for the request's condition typ to be set, and returns it; every answer
// also carries Accepted=True, which it checks.
func waitCondition(ctx context.Context, t *testing.T, env *localdev.Env, name, typ string, timeout time.Duration) metav1.Condition {
	t.Helper()
	var pr apisv1.ProvisioningRequest
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		u, err := env.Cluster.Dynamic.Resource(kube.ProvisioningRequestGVR).Namespace(provReqNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pr = apisv1.ProvisioningRequest{}
		if err := kube.FromUnstructured(u, &pr); err != nil {
			return false, err
		}
		return meta.FindStatusCondition(pr.Status.Conditions, typ) != nil, nil
	}); err != nil {
		t.Fatalf("ProvisioningRequest %s/%s has no %s condition: %v; conditions %+v", provReqNS, name, typ, err, pr.Status.Conditions)
	}
	if !meta.IsStatusConditionTrue(pr.Status.Conditions, apisv1.ProvisioningRequestAccepted) {
		t.Errorf("ProvisioningRequest %s/%s: Accepted is not True: %+v", provReqNS, name, pr.Status.Conditions)
	}
	return *meta.FindStatusCondition(pr.Status.Conditions, typ)
}

// assertNothingOf asserts no NodeClaim or Node of the pool and no instance of it running (one
// shutting down is a termination under way).
func assertNothingOf(ctx context.Context, t *testing.T, env *localdev.Env, pool string) {
	t.Helper()
	for _, nc := range nodeClaims(ctx, t, env) {
		if nc.Labels[poolLabel] == pool {
			t.Errorf("NodeClaim %s of pool %s left", nc.Name, pool)
		}
	}
	nodes, err := env.Cluster.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: poolLabel + "=" + pool})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		t.Errorf("Node %s of pool %s left", n.Name, pool)
	}
	insts, err := env.Cloud.List(ctx, env.Options.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range insts {
		if i.Tags[apisv1.TagNodePool] == pool && i.State != cloud.StateShuttingDown {
			t.Errorf("instance %s of pool %s is %s, want none left running", i.ProviderID, pool, i.State)
		}
	}
}

func claimNames(ctx context.Context, t *testing.T, env *localdev.Env, pool string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, nc := range nodeClaims(ctx, t, env) {
		if nc.Labels[poolLabel] == pool {
			out[nc.Name] = true
		}
	}
	return out
}

// instanceIDs returns the provider IDs of the instances of pool (by their NodePool tag) not terminated.
func instanceIDs(ctx context.Context, t *testing.T, env *localdev.Env, pool string) map[string]bool {
	t.Helper()
	insts, err := env.Cloud.List(ctx, env.Options.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, i := range insts {
		if i.Tags[apisv1.TagNodePool] == pool {
			out[i.ProviderID] = true
		}
	}
	return out
}
