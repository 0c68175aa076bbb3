package scenarios

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/consolidate"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// ConsolidationResult is what the consolidation scenario ends with.
type ConsolidationResult struct {
	Before, After float64 // cluster $/h
	Decisions     int
	PodsBefore    int
	PodsAfter     int // workload pods bound at the end (none may be lost)
	// Instances is every instance the fake cloud ran, terminated ones included, sorted by ID:
	// the offering each Node (PrivateDNSName; a seed node's name is its apisv1.TagNodeClaim tag)
	// ran on, independent of the audit records' prices.
	Instances []fake.InstanceRecord
}

// consolidationBootDelay is how long a replacement takes to register in the consolidation
// scenario.
const consolidationBootDelay = 30 * time.Second

// Consolidation scales a 24-replica web Deployment on six m5.xlarge nodes down to 6 replicas,
// then runs the consolidate function on a snapshot every 30 s until it has nothing left to do
// and every node it handed off is gone, printing what it decided and why and the cluster's $/h
// before and after. The function, the agent applying its commands, the lifecycle function
// (registration, termination) and the fake cloud are the real ones (World).
func Consolidation(ctx context.Context, out io.Writer) (*ConsolidationResult, error) {
	return ConsolidationAudited(ctx, out, io.Discard)
}

// ConsolidationAudited is Consolidation with the consolidate function's log (slog JSON, its
// decision audit records among it) written to audit: the stream `dovetail cost` reads.
func ConsolidationAudited(ctx context.Context, out, audit io.Writer) (*ConsolidationResult, error) {
	return ConsolidationLogged(ctx, out, slog.New(slog.NewJSONHandler(audit, nil)))
}

// ConsolidationLogged is Consolidation with log as the consolidate function's logger, so its
// decision audit records go where log sends them: a telemetry.AuditHandler publishing with
// qnats.PublishAudit puts them on the cluster's NATS audit subject, as a NATS worker does
// (shared/runtime).
func ConsolidationLogged(ctx context.Context, out io.Writer, log *slog.Logger) (*ConsolidationResult, error) {
	w := NewWorld(Start, consolidationBootDelay, out)
	defer w.Close()
	pool := defaultPool()
	if err := w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{EC2: ptr(defaultClass(OldAMI))}}); err != nil {
		return nil, err
	}
	for i := 0; i < 6; i++ {
		if err := launched(ctx, w, &pool, i, fmt.Sprintf("node-%d", i), "m5.xlarge", "us-east-1a"); err != nil {
			return nil, err
		}
	}
	var pods []corev1.Pod
	for i := 0; i < 24; i++ {
		pods = append(pods, runningWebPod(fmt.Sprintf("web-%02d", i), fmt.Sprintf("node-%d", i%6), w.Clock.Now()))
	}
	if err := w.AddPods(pods...); err != nil {
		return nil, err
	}
	// The lifecycle function registers and initializes the six nodes.
	if err := w.Step(ctx, time.Second); err != nil {
		return nil, err
	}
	res := &ConsolidationResult{Before: price(w)}
	w.printf("cluster: %d nodes, %d web pods (700m, 1Gi each), %.4f $/h", len(w.Nodes()), len(pods), res.Before)
	// kubectl scale deployment web --replicas=6: the ReplicaSet deletes the newest 18 pods.
	if err := scaleDown(ctx, w, pods[6:]); err != nil {
		return nil, err
	}
	res.PodsBefore = 6
	w.printf("scaled web down to %d replicas; consolidating", res.PodsBefore)

	h := &consolidate.Handler{Cluster: Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Provider, Publisher: w,
		Codec: events.Codec{Blobs: w.Blobs}, Log: log, Now: w.Clock.Now}
	for step := 0; step < 60; step++ {
		if err := w.Step(ctx, 30*time.Second); err != nil {
			return nil, err
		}
		snap := w.Snapshot()
		data, err := h.Codec.NewEvent(ctx, Cluster, "agent", events.TypeSnapshot, fmt.Sprintf("snapshot-%d", snap.Revision), snap)
		if err != nil {
			return nil, err
		}
		var o consolidate.Outcome
		h.OnOutcome = func(x consolidate.Outcome) { o = x }
		sent := len(w.Commands)
		if err := h.Handle(ctx, queue.Message{Data: data, Attempt: 1}); err != nil {
			return nil, err
		}
		if o.Decision != nil && o.Abandoned == "" {
			res.Decisions++
			w.printf("consolidation: decided %s", o.Decision)
			w.printf("  why: %s", o.Decision.Why)
		}
		for _, p := range o.Progress {
			if p.Waiting != "" {
				w.printChanged("consolidation "+p.ID, p.Waiting, "consolidation %s waits: %s", p.ID, p.Waiting)
			}
		}
		for _, c := range w.Commands[sent:] {
			w.printf("  %s %s", c.Kind, target(&c))
		}
		if o.Decision == nil && len(o.Progress) == 0 && len(w.Commands) == sent && settled(snap) {
			w.printf("nothing more to consolidate (%v)", o.Report.Tried)
			break
		}
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	res.After = price(w)
	res.PodsAfter, _ = w.PodsBound()
	res.Instances = w.Cloud.Records()
	w.printf("after: %d nodes, %d web pods bound, %.4f $/h (was %.4f $/h, saves %.4f $/h)", len(w.Nodes()), res.PodsAfter, res.After, res.Before, res.Before-res.After)
	return res, nil
}

// settled reports whether the termination path has finished: no node or NodeClaim is being
// deleted and no pod waits for a node.
func settled(snap *events.Snapshot) bool {
	for _, n := range snap.Nodes {
		if n.DeletionTimestamp != nil {
			return false
		}
	}
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp != nil {
			return false
		}
	}
	return len(snap.PendingPods) == 0
}

func defaultPool() apisv1.NodePool {
	after := apisv1.MustParseNillableDuration("0s")
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "np-default"}}
	np.Spec.Template.Spec.NodeClassRef = &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: apisv1.KindEC2NodeClass, Name: "default"}
	np.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceGeneration, Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
	}
	np.Spec.Disruption = apisv1.Disruption{ConsolidationPolicy: apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: &after,
		Budgets: []apisv1.Budget{{Nodes: "50%"}}}
	return np
}

// launched records an on-demand instance Dovetail launched before the scenario, as the launch
// step leaves one (shared/launch): the instance runs in the fake cloud with the cluster's tags,
// its NodeClaim is created by the agent from a CreateNodeClaim command (so it carries the
// agent's ownership mark and the termination finalizer), and its kubelet registers the Node
// with the NodePool's label and the karpenter.sh/unregistered taint, for the lifecycle function
// to register.
func launched(ctx context.Context, w *World, pool *apisv1.NodePool, i int, name, instanceType, zone string) error {
	it := w.Catalog.Get(instanceType)
	if it == nil {
		return fmt.Errorf("instance type %q: not in the catalog", instanceType)
	}
	inst := cloud.Instance{ID: fmt.Sprintf("i-%017x", i+1), Zone: zone, InstanceType: instanceType, CapacityType: apisv1.CapacityTypeOnDemand,
		Tags: map[string]string{apisv1.TagCluster: Cluster, apisv1.TagNodePool: pool.Name, apisv1.TagNodeClaim: name}}
	if err := w.Cloud.AddInstance(inst); err != nil {
		return err
	}
	inst.ProviderID = cloud.AWSProviderID(zone, inst.ID)
	now := metav1.NewTime(w.Clock.Now())
	labels := map[string]string{apisv1.LabelNodePool: pool.Name, corev1.LabelTopologyZone: zone, apisv1.LabelCapacityType: inst.CapacityType}
	for k, v := range it.Labels {
		labels[k] = v
	}
	nc := &apisv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: []string{events.FinalizerTermination}, CreationTimestamp: now,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apisv1.GroupVersion, Kind: "NodePool", Name: pool.Name, UID: pool.UID, BlockOwnerDeletion: ptr(true)}}},
		Spec: apisv1.NodeClaimSpec{NodeClassRef: pool.Spec.Template.Spec.NodeClassRef, Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{instanceType}}}}},
		Status: apisv1.NodeClaimStatus{ProviderID: inst.ProviderID, Capacity: it.Capacity, Allocatable: it.Allocatable(), ImageID: OldAMI,
			Conditions: []metav1.Condition{{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: now}}},
	}
	cmd := events.Command{ID: "seed-launch-" + name, Kind: events.CommandCreateNodeClaim, Cluster: Cluster, NodeClaim: nc,
		Reason: "launched before the scenario"}
	data, err := events.NewEvent(Cluster, "provision", events.TypeCommand, cmd.ID, &cmd)
	if err != nil {
		return err
	}
	if err := w.Publish(ctx, queue.CommandsSubject(Cluster), cmd.ID, data); err != nil {
		return err
	}
	if len(w.Failed) > 0 || len(w.Refused) > 0 {
		return fmt.Errorf("NodeClaim %s: the agent did not record it: %v %v", name, w.Failed, w.Refused)
	}
	node, err := cloud.NodeFor(it, inst, cloud.NodeSpec{Name: name, Region: w.Catalog.Region, Labels: map[string]string{apisv1.LabelNodePool: pool.Name},
		Taints: []corev1.Taint{{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}, Now: w.Clock.Now()})
	if err != nil {
		return err
	}
	return w.RegisterNode(ctx, node)
}

// runningWebPod is a pod of the web Deployment (700m, 1 GiB) running and Ready on node.
func runningWebPod(name, node string, now time.Time) corev1.Pod {
	st := metav1.NewTime(now.Add(-time.Hour))
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), CreationTimestamp: st, Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: ptr(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("700m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &st, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: st}, {Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: st}}}}
}

// scaleDown deletes pods as their ReplicaSet does when its replicas shrink. The in-memory
// cluster's controller stand-in re-creates every controlled pod that goes (localdev's
// evictionRules: it cannot tell a scale-down from an eviction), so the pods are released from
// the ReplicaSet first, which leaves it nothing to replace.
func scaleDown(ctx context.Context, w *World, pods []corev1.Pod) error {
	pc := w.Cluster.Kube.CoreV1().Pods("default")
	for i := range pods {
		p, err := pc.Get(ctx, pods[i].Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.OwnerReferences = nil
		if _, err := pc.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if err := pc.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		if err := w.settle(); err != nil {
			return err
		}
	}
	return nil
}

// price is the cluster's $/h: the catalog price of every node's offering.
func price(w *World) float64 {
	var t float64
	for _, n := range w.Nodes() {
		it := w.Catalog.Get(n.Labels[corev1.LabelInstanceTypeStable])
		if it == nil {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == n.Labels[corev1.LabelTopologyZone] && o.CapacityType == n.Labels[apisv1.LabelCapacityType] {
				t += o.PricePerHour
			}
		}
	}
	return t
}
