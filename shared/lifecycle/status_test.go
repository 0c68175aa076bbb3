package lifecycle

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// pool is a NodePool as the API server serves it: the CRD's defaults applied.
func pool() apisv1.NodePool {
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 2}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: apisv1.KindEC2NodeClass, Name: "default"}}}}}
	if errs := apis.DefaultAndValidate(&np); len(errs) > 0 {
		panic(errs.ToAggregate())
	}
	return np
}

func class(ready metav1.ConditionStatus) *apisv1.EC2NodeClass {
	c := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-class", Generation: 4,
		Finalizers: []string{events.FinalizerNodeClassTermination}}}
	if ready != "" {
		c.Status.Conditions = []metav1.Condition{{Type: apisv1.ConditionReady, Status: ready, Reason: apisv1.ReasonUnhealthyDependents,
			Message: "SubnetsReady=False", ObservedGeneration: 4}}
	}
	return c
}

func commandsOf(d Decision, kind events.CommandKind) []events.Command {
	var out []events.Command
	for _, c := range d.Commands {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

func TestNodePoolStatusCountsNodesAndFollowsItsNodeClass(t *testing.T) {
	a, b := claim(), claim()
	b.Name = "default-def"
	// c6g.large: 2 vCPU, 4 GiB; two of them hold 4 CPUs and 8 GiB.
	for _, c := range []*apisv1.NodeClaim{&a, &b} {
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
			corev1.ResourcePods: resource.MustParse("29")}
	}
	other := claim()
	other.Name, other.Labels = "other-1", map[string]string{apisv1.LabelNodePool: "other"}
	snap := &events.Snapshot{Cluster: "c", Revision: 7, Time: metav1.NewTime(t0), NodePools: []apisv1.NodePool{pool()},
		NodeClasses: []apisv1.NodeClass{apisv1.NodeClassOf(class(metav1.ConditionFalse))}, NodeClaims: []apisv1.NodeClaim{a, b, other}}
	cmds := commandsOf(Decide(snap, Options{}), events.CommandSetNodePoolStatus)
	if len(cmds) != 1 {
		t.Fatalf("%d SetNodePoolStatus commands, want 1", len(cmds))
	}
	st := cmds[0].NodePool.Status
	if *st.Nodes != 2 || st.Resources.Cpu().Cmp(resource.MustParse("4")) != 0 || st.Resources.Memory().Cmp(resource.MustParse("8Gi")) != 0 ||
		st.Resources.Pods().Value() != 58 || st.NodeClassObservedGeneration != 4 {
		t.Errorf("status nodes %d resources %v observed %d, want 2 nodes, 4 CPU, 8Gi, 58 pods, generation 4", *st.Nodes, st.Resources, st.NodeClassObservedGeneration)
	}
	ncr := meta.FindStatusCondition(st.Conditions, apisv1.ConditionNodeClassReady)
	if ncr == nil || ncr.Status != metav1.ConditionFalse || ncr.Reason != apisv1.ReasonNodeClassNotReady || ncr.ObservedGeneration != 2 {
		t.Errorf("NodeClassReady %+v", ncr)
	}
	ready := meta.FindStatusCondition(st.Conditions, apisv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Message != "NodeClassReady=False" {
		t.Errorf("Ready %+v", ready)
	}
	for _, c := range st.Conditions {
		if !c.LastTransitionTime.IsZero() {
			t.Errorf("%s carries a lastTransitionTime: the core reads no clock", c.Type)
		}
	}
	if v := meta.FindStatusCondition(st.Conditions, apisv1.ConditionValidationSucceeded); v == nil || v.Status != metav1.ConditionTrue {
		t.Errorf("ValidationSucceeded %+v", v)
	}

	// Once the status is written, the same snapshot asks for nothing more.
	snap.NodePools[0].Status = st
	if n := len(commandsOf(Decide(snap, Options{}), events.CommandSetNodePoolStatus)); n != 0 {
		t.Errorf("%d SetNodePoolStatus commands for a pool whose status is current", n)
	}
	// A Ready class makes the pool Ready.
	snap.NodeClasses = []apisv1.NodeClass{apisv1.NodeClassOf(class(metav1.ConditionTrue))}
	cmds = commandsOf(Decide(snap, Options{}), events.CommandSetNodePoolStatus)
	if len(cmds) != 1 || !meta.IsStatusConditionTrue(cmds[0].NodePool.Status.Conditions, apisv1.ConditionReady) {
		t.Errorf("with a Ready class: %+v, want one command making the pool Ready", cmds)
	}
	// No class at all: NodeClassNotFound.
	snap.NodeClasses = nil
	cmds = commandsOf(Decide(snap, Options{}), events.CommandSetNodePoolStatus)
	if c := meta.FindStatusCondition(cmds[0].NodePool.Status.Conditions, apisv1.ConditionNodeClassReady); c.Reason != apisv1.ReasonNodeClassNotFound {
		t.Errorf("missing class: NodeClassReady %+v", c)
	}
}

func TestNodeClassFinalizerAndRelease(t *testing.T) {
	fresh := class("")
	fresh.Finalizers = nil
	snap := &events.Snapshot{Cluster: "c", Revision: 3, Time: metav1.NewTime(t0), NodeClasses: []apisv1.NodeClass{apisv1.NodeClassOf(fresh)}}
	d := Decide(snap, Options{})
	if adds := commandsOf(d, events.CommandAddFinalizer); len(adds) != 1 || adds[0].Finalizer != events.FinalizerNodeClassTermination ||
		adds[0].NodeClass.Name() != "default" {
		t.Errorf("AddFinalizer commands %+v", adds)
	}
	if len(d.NodeClasses) != 1 || !d.NodeClasses[0].Resolve || !NeedsResolve(d.NodeClasses[0].NodeClass) {
		t.Errorf("actions %+v, want one Resolve of a class with no status", d.NodeClasses)
	}

	// Being deleted while a NodeClaim still uses it: nothing is released.
	deleting := class(metav1.ConditionTrue)
	now := metav1.NewTime(t0)
	deleting.DeletionTimestamp = &now
	user := claim()
	user.Spec.NodeClassRef = &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: apisv1.KindEC2NodeClass, Name: "default"}
	snap.NodeClasses = []apisv1.NodeClass{apisv1.NodeClassOf(deleting)}
	snap.NodeClaims = []apisv1.NodeClaim{user}
	if d := Decide(snap, Options{}); len(d.NodeClasses) != 0 {
		t.Errorf("actions %+v while NodeClaim %s uses the class", d.NodeClasses, user.Name)
	}
	// Once it is gone: release, then remove the finalizer.
	snap.NodeClaims = nil
	d = Decide(snap, Options{})
	if len(d.NodeClasses) != 1 || !d.NodeClasses[0].Release || len(d.NodeClasses[0].Finish) != 1 {
		t.Fatalf("actions %+v, want one Release", d.NodeClasses)
	}
	f := d.NodeClasses[0].Finish[0]
	if f.Kind != events.CommandRemoveFinalizer || f.Finalizer != events.FinalizerNodeClassTermination || f.NodeClass.Name() != "default" ||
		f.Cluster != "c" || f.SnapshotRevision != 3 {
		t.Errorf("finish %+v", f)
	}
	if err := f.Validate(); err != nil {
		t.Errorf("finish command invalid: %v", err)
	}
}

func TestStatusCommandOnlyWhenTheStatusChanged(t *testing.T) {
	snap := &events.Snapshot{Cluster: "c", Revision: 9, Time: metav1.NewTime(t0)}
	cur := class(metav1.ConditionTrue)
	cur.Status.Subnets = []apisv1.Subnet{{ID: "subnet-1", Zone: "us-east-1a"}}
	cur.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0) // the agent's; ignored
	same := cur.DeepCopy()
	same.Status.Conditions[0].LastTransitionTime = metav1.Time{}
	if c := StatusCommand(snap, apisv1.NodeClassOf(cur), apisv1.NodeClassOf(same)); c != nil {
		t.Errorf("command %+v for an unchanged status", c)
	}
	newAMI := same.DeepCopy()
	newAMI.Status.AMIs = []apisv1.AMI{{ID: "ami-2"}}
	c := StatusCommand(snap, apisv1.NodeClassOf(cur), apisv1.NodeClassOf(newAMI))
	if c == nil || c.Kind != events.CommandSetNodeClassStatus || len(c.NodeClass.EC2.Status.AMIs) != 1 || c.Validate() != nil {
		t.Errorf("command %+v for a new AMI", c)
	}
}
