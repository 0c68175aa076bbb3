package lifecycle

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const pid = "aws:///us-east-1a/i-0123456789abcdef0"

// claim is a NodeClaim as the launch records it: labels of the chosen offering, a startup
// taint, Launched=True at t0.
func claim() apisv1.NodeClaim {
	return apisv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abc", UID: "uid-nc", CreationTimestamp: metav1.NewTime(t0),
			Finalizers: []string{events.FinalizerTermination},
			Labels: map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelCapacityType: "spot", corev1.LabelTopologyZone: "us-east-1a",
				corev1.LabelInstanceTypeStable: "c6g.large", apisv1.LabelInstanceCategory: "c", "team": "web",
				apisv1.LabelManagedBy: apisv1.ManagedByAgent}, // as the agent created it
			Annotations: map[string]string{"dovetail.dev/client-token": "tok", apisv1.AnnotationPlannedPods: "default/web-0,default/web-1"}},
		Spec: apisv1.NodeClaimSpec{
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}},
			Resources: apisv1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
		},
		Status: apisv1.NodeClaimStatus{ProviderID: pid, Conditions: []metav1.Condition{
			{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(t0)}}},
	}
}

// kubeletNode is the Node as the kubelet registers it from the user data: the pool's labels
// and the kubelet's own, the user data's taints with karpenter.sh/unregistered, Ready.
func kubeletNode() corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-4.ec2.internal", UID: "uid-node",
			Labels: map[string]string{apisv1.LabelNodePool: "default", "team": "web", corev1.LabelHostname: "ip-10-0-0-4.ec2.internal",
				corev1.LabelInstanceTypeStable: "c6g.large", corev1.LabelTopologyZone: "us-east-1a"}},
		Spec: corev1.NodeSpec{ProviderID: pid, Taints: []corev1.Taint{
			{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule},
			{Key: "cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule},
			{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("3Gi")},
		},
	}
}

func snapshot(at time.Time, ncs []apisv1.NodeClaim, nodes []corev1.Node, pods ...corev1.Pod) *events.Snapshot {
	s := &events.Snapshot{Cluster: "prod", Revision: 7, Time: metav1.NewTime(at), NodeClaims: ncs, Nodes: nodes}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			s.PendingPods = append(s.PendingPods, p)
		} else {
			s.Pods = append(s.Pods, p)
		}
	}
	return s
}

func pod(name, node string, grace int64) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web"}}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func kinds(cmds []events.Command) string {
	out := make([]string, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, string(c.Kind))
	}
	return strings.Join(out, ",")
}

func find(t *testing.T, cmds []events.Command, kind events.CommandKind) events.Command {
	t.Helper()
	for _, c := range cmds {
		if c.Kind == kind {
			return c
		}
	}
	t.Fatalf("no %s command in %s", kind, kinds(cmds))
	return events.Command{}
}

func condOf(c events.Command, typ string) *metav1.Condition {
	for i := range c.NodeClaim.Status.Conditions {
		if c.NodeClaim.Status.Conditions[i].Type == typ {
			return &c.NodeClaim.Status.Conditions[i]
		}
	}
	return nil
}

// The node registered from its user data: the NodeClaim's labels (the single-valued offering
// labels included), taints, startup taints (first registration) and annotations go on; the
// unregistered taint comes off (the agent's part of RegisterNode); the finalizer is added; the
// NodeClaim records nodeName and Registered=True, with Initialized and Ready Unknown.
func TestRegistration(t *testing.T) {
	at := t0.Add(40 * time.Second)
	d := Decide(snapshot(at, []apisv1.NodeClaim{claim()}, []corev1.Node{kubeletNode()}), Options{})
	if got := kinds(d.Commands); got != "RegisterNode,SetNodeClaimStatus" {
		t.Fatalf("commands %s", got)
	}
	reg := d.Commands[0]
	// Every label of the NodeClaim but the agent's ownership mark, which stays on the NodeClaim.
	wantLabels := map[string]string{apisv1.LabelNodePool: "default", apisv1.LabelCapacityType: "spot", corev1.LabelTopologyZone: "us-east-1a",
		corev1.LabelInstanceTypeStable: "c6g.large", apisv1.LabelInstanceCategory: "c", "team": "web", apisv1.LabelNodeRegistered: "true"}
	if !reflect.DeepEqual(reg.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", reg.Labels, wantLabels)
	}
	if len(reg.Taints) != 2 || reg.Taints[0].Key != "dedicated" || reg.Taints[1].Key != "cilium.io/agent-not-ready" {
		t.Errorf("taints %v, want the NodeClaim's taint and startup taint", reg.Taints)
	}
	if reg.Finalizer != events.FinalizerTermination || reg.NodeName != "ip-10-0-0-4.ec2.internal" || reg.NodeClaim.Name != "default-abc" ||
		reg.Annotations["dovetail.dev/client-token"] != "tok" || reg.SnapshotRevision != 7 || reg.Cluster != "prod" {
		t.Errorf("register command %+v", reg)
	}
	st := d.Commands[1]
	if st.NodeClaim.Status.NodeName != "ip-10-0-0-4.ec2.internal" {
		t.Errorf("status.nodeName %q", st.NodeClaim.Status.NodeName)
	}
	if c := condOf(st, apisv1.ConditionRegistered); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonRegistered || !c.LastTransitionTime.Time.Equal(at) {
		t.Errorf("Registered %+v", c)
	}
	for _, typ := range []string{apisv1.ConditionInitialized, apisv1.ConditionReady} {
		if c := condOf(st, typ); c == nil || c.Status != metav1.ConditionUnknown {
			t.Errorf("%s %+v, want Unknown", typ, c)
		}
	}
	if len(d.Transitions) != 1 || d.Transitions[0].Phase != ReasonRegistered {
		t.Errorf("transitions %+v", d.Transitions)
	}
	// The same snapshot again (a redelivery) decides the same commands, ids included.
	if again := Decide(snapshot(at, []apisv1.NodeClaim{claim()}, []corev1.Node{kubeletNode()}), Options{}); !reflect.DeepEqual(again.Commands, d.Commands) {
		t.Error("a repeated snapshot must give the same commands")
	}
}

// registered returns the claim and node after RegisterNode and Registered=True were applied.
func registered() (apisv1.NodeClaim, corev1.Node) {
	nc, n := claim(), kubeletNode()
	nc.Status.NodeName = n.Name
	nc.Status.Conditions = append(nc.Status.Conditions,
		metav1.Condition{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: ReasonRegistered, LastTransitionTime: metav1.NewTime(t0.Add(40 * time.Second))},
		metav1.Condition{Type: apisv1.ConditionInitialized, Status: metav1.ConditionUnknown, Reason: ReasonNotInitialized, Message: "node not initialized yet"})
	for k, v := range nc.Labels {
		if k != apisv1.LabelManagedBy {
			n.Labels[k] = v
		}
	}
	n.Labels[apisv1.LabelNodeRegistered] = "true"
	n.Finalizers = []string{events.FinalizerTermination}
	n.Spec.Taints = n.Spec.Taints[:2]
	return nc, n
}

// Initialized waits for the startup taint and for every requested resource; then the node is
// labelled karpenter.sh/initialized and the NodeClaim gets Initialized=True and Ready=True.
func TestInitialization(t *testing.T) {
	at := t0.Add(50 * time.Second)
	nc, n := registered()
	d := Decide(snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n}), Options{})
	st := find(t, d.Commands, events.CommandSetNodeClaimStatus)
	if c := condOf(st, apisv1.ConditionInitialized); c == nil || c.Status != metav1.ConditionUnknown || c.Message != "taint cilium.io/agent-not-ready:NoSchedule is still on the node" {
		t.Fatalf("Initialized %+v, want Unknown naming the startup taint", c)
	}
	n.Spec.Taints = n.Spec.Taints[:1] // the CNI removed its startup taint
	nc.Spec.Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	d = Decide(snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n}), Options{})
	if c := condOf(find(t, d.Commands, events.CommandSetNodeClaimStatus), apisv1.ConditionInitialized); c == nil || c.Message != "resource nvidia.com/gpu is not registered" {
		t.Fatalf("Initialized %+v, want Unknown until the device plugin registers the GPU", c)
	}
	n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("1")
	d = Decide(snapshot(at, []apisv1.NodeClaim{nc}, []corev1.Node{n}, pod("web-0", "", 30)), Options{})
	if got := kinds(d.Commands); got != "NominatePods,LabelNode,SetNodeClaimStatus" {
		t.Fatalf("commands %s", got)
	}
	// web-0 (pending, planned here) is nominated to the node; web-1 is not pending.
	if nom := d.Commands[0]; nom.NodeName != n.Name || len(nom.Pods) != 1 || nom.Pods[0].Name != "web-0" {
		t.Errorf("nominate %+v", nom)
	}
	if l := d.Commands[1].Labels; l[apisv1.LabelNodeInitialized] != "true" || len(l) != 1 {
		t.Errorf("labels %v", l)
	}
	for _, typ := range []string{apisv1.ConditionInitialized, apisv1.ConditionReady} {
		if c := condOf(d.Commands[2], typ); c == nil || c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(at) {
			t.Errorf("%s %+v, want True since %v", typ, c, at)
		}
	}
}

// A launch whose node never registers is reaped at the registration TTL, and its offering is
// marked unavailable for 3 minutes; a minute before, nothing happens.
func TestLiveness(t *testing.T) {
	o := Options{RegistrationTTL: 15 * time.Minute}
	if d := Decide(snapshot(t0.Add(14*time.Minute+59*time.Second), []apisv1.NodeClaim{claim()}, nil), o); len(d.Commands) != 0 {
		t.Fatalf("before the TTL: %s", kinds(d.Commands))
	}
	at := t0.Add(15 * time.Minute)
	d := Decide(snapshot(at, []apisv1.NodeClaim{claim()}, nil), o)
	if got := kinds(d.Commands); got != "DeleteNodeClaim,MarkOfferingsUnavailable" {
		t.Fatalf("commands %s", got)
	}
	m := d.Commands[1].Unavailable[0]
	if m.OfferingKey != (events.OfferingKey{InstanceType: "c6g.large", Zone: "us-east-1a", CapacityType: "spot"}) || m.Reason != ReasonRegistrationTTL ||
		!m.Expires.Time.Equal(at.Add(3*time.Minute)) {
		t.Errorf("mark %+v", m)
	}
	// A shorter TTL (the flag) reaps sooner.
	if d := Decide(snapshot(t0.Add(2*time.Minute), []apisv1.NodeClaim{claim()}, nil), Options{RegistrationTTL: time.Minute}); len(d.Commands) != 2 {
		t.Errorf("1m TTL at 2m: %s", kinds(d.Commands))
	}
}

// applyStatus records the conditions of the decision's SetNodeClaimStatus commands on nc, as
// the agent would (each replaces the condition of its type).
func applyStatus(nc *apisv1.NodeClaim, d Decision) {
	for _, c := range d.Commands {
		if c.Kind != events.CommandSetNodeClaimStatus {
			continue
		}
		for _, w := range c.NodeClaim.Status.Conditions {
			if old := condition(nc, w.Type); old != nil {
				*old = w
			} else {
				nc.Status.Conditions = append(nc.Status.Conditions, w)
			}
		}
	}
}

// Deleting the NodeClaim taints its node and drains it in Karpenter's groups (non-critical,
// non-critical DaemonSet, critical, critical DaemonSet), each gone before the next is evicted;
// a pod tolerating karpenter.sh/disrupted stays. Once drained, the instance waits for the
// node's VolumeAttachments (not those of the pod that stays), then is terminated; the
// NodeClaim's Drained, VolumesDetached and InstanceTerminating conditions follow each step.
func TestTerminationDrainsInGroupsThenWaitsForVolumes(t *testing.T) {
	nc, n := registered()
	del := t0.Add(time.Hour)
	nc.DeletionTimestamp = &metav1.Time{Time: del}
	nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 10 * time.Minute}
	yes := true
	web := pod("web-0", n.Name, 30)
	web.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web"}}}}
	ds := pod("ds-0", n.Name, 30)
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: &yes}}
	crit := pod("coredns-0", n.Name, 30)
	crit.Spec.PriorityClassName = "system-cluster-critical"
	tol := pod("tolerant-0", n.Name, 30)
	tol.Spec.Tolerations = []corev1.Toleration{{Key: apisv1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	tol.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-tol"}}}}
	pvcs := []corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data-web"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-web"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data-tol"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-tol"}},
	}
	va := func(name, pv string) storagev1.VolumeAttachment {
		return storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "ebs.csi.aws.com", NodeName: n.Name, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}
	}
	snap := func(at time.Duration, vas []storagev1.VolumeAttachment, pods ...corev1.Pod) *events.Snapshot {
		s := snapshot(del.Add(at), []apisv1.NodeClaim{nc}, []corev1.Node{n}, pods...)
		s.PVCs, s.VolumeAttachments = pvcs, vas
		return s
	}
	both := []storagev1.VolumeAttachment{va("csi-tol", "pv-tol"), va("csi-web", "pv-web")}

	d := Decide(snap(time.Second, both, web, ds, crit, tol), Options{})
	if got := kinds(d.Commands); got != "TaintNode,DrainNode,SetNodeClaimStatus" || len(d.Terminate) != 0 {
		t.Fatalf("commands %s, terminate %d", got, len(d.Terminate))
	}
	if c := condOf(d.Commands[2], apisv1.ConditionDrained); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Draining" {
		t.Fatalf("Drained %+v", c)
	}
	if r := d.Commands[1].Reason; !strings.HasSuffix(r, "evicting its non-critical pods") {
		t.Errorf("first group: %q", r)
	}
	applyStatus(&nc, d)
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule})
	// Each group once the one before is gone; the condition is not rewritten.
	for _, step := range []struct {
		pods  []corev1.Pod
		group string
	}{{[]corev1.Pod{ds, crit, tol}, "non-critical DaemonSet"}, {[]corev1.Pod{crit, tol}, "critical"}} {
		d = Decide(snap(time.Minute, both, step.pods...), Options{})
		if got := kinds(d.Commands); got != "DrainNode" || !strings.HasSuffix(d.Commands[0].Reason, "evicting its "+step.group+" pods") {
			t.Fatalf("%s: %s %q", step.group, got, d.Commands[0].Reason)
		}
	}
	// Only the tolerating pod left: drained; web-0's attachment still blocks, tolerant-0's never does.
	d = Decide(snap(2*time.Minute, both, tol), Options{})
	if got := kinds(d.Commands); got != "SetNodeClaimStatus,SetNodeClaimStatus" || len(d.Terminate) != 0 {
		t.Fatalf("drained: %s, terminate %d", got, len(d.Terminate))
	}
	if c := condOf(d.Commands[0], apisv1.ConditionDrained); c == nil || c.Status != metav1.ConditionTrue || c.Reason != apisv1.ConditionDrained {
		t.Fatalf("Drained %+v", c)
	}
	if c := condOf(d.Commands[1], apisv1.ConditionVolumesDetached); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "AwaitingVolumeDetachment" {
		t.Fatalf("VolumesDetached %+v", c)
	}
	applyStatus(&nc, d)
	if d = Decide(snap(3*time.Minute, both, tol), Options{}); len(d.Commands) != 0 || len(d.Terminate) != 0 {
		t.Fatalf("still attached: %s, terminate %d", kinds(d.Commands), len(d.Terminate))
	}
	// csi-web detached: VolumesDetached, InstanceTerminating, terminate.
	d = Decide(snap(4*time.Minute, both[:1], tol), Options{})
	if got := kinds(d.Commands); got != "SetNodeClaimStatus,SetNodeClaimStatus" || len(d.Terminate) != 1 {
		t.Fatalf("detached: %s, terminate %d", got, len(d.Terminate))
	}
	if c := condOf(d.Commands[0], apisv1.ConditionVolumesDetached); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("VolumesDetached %+v", c)
	}
	if c := condOf(d.Commands[1], apisv1.ConditionInstanceTerminating); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("InstanceTerminating %+v", c)
	}
	term := d.Terminate[0]
	if term.ProviderID != pid || term.NodeClaim != "default-abc" || term.Node != n.Name || kinds(term.Finish) != "DeleteNode,RemoveFinalizer,RemoveFinalizer" ||
		term.Finish[1].NodeName != n.Name || term.Finish[2].NodeClaim.Name != "default-abc" || term.Finish[2].SnapshotRevision != 7 {
		t.Fatalf("termination %+v", term)
	}
}

// The terminationGracePeriod bounds both waits: pods whose own grace no longer fits are deleted
// with what is left, and at the deadline the instance is terminated whatever pods and
// VolumeAttachments are left (Karpenter's instance termination once the period has elapsed).
func TestTerminationGracePeriodBoundsDrainAndDetach(t *testing.T) {
	nc, n := registered()
	del := t0.Add(time.Hour)
	nc.DeletionTimestamp = &metav1.Time{Time: del}
	nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 10 * time.Minute}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule})
	web := pod("web-0", n.Name, 30)
	pv := "pv-web"
	vas := []storagev1.VolumeAttachment{{ObjectMeta: metav1.ObjectMeta{Name: "csi-web"},
		Spec: storagev1.VolumeAttachmentSpec{NodeName: n.Name, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}}
	// A PDB holds web-0 at 9 min 20 s: 40 s left > its 30 s grace, wait.
	d := Decide(snapshot(del.Add(9*time.Minute+20*time.Second), []apisv1.NodeClaim{nc}, []corev1.Node{n}, web), Options{})
	if got := kinds(d.Commands); got != "DrainNode,SetNodeClaimStatus" || len(d.Terminate) != 0 {
		t.Fatalf("at 9m20s: %s", got)
	}
	// At 9 min 40 s only 20 s are left: web-0 is deleted with a 20 s grace.
	d = Decide(snapshot(del.Add(9*time.Minute+40*time.Second), []apisv1.NodeClaim{nc}, []corev1.Node{n}, web), Options{})
	dp := find(t, d.Commands, events.CommandDeletePods)
	if len(dp.Pods) != 1 || dp.Pods[0].Name != "web-0" || *dp.Pods[0].GracePeriodSeconds != 20 || dp.Pods[0].UID != "uid-web-0" {
		t.Fatalf("delete pods %+v", dp.Pods)
	}
	// At 10 min, drained but csi-web still attached: terminated anyway.
	s := snapshot(del.Add(10*time.Minute), []apisv1.NodeClaim{nc}, []corev1.Node{n})
	s.VolumeAttachments = vas
	if d = Decide(s, Options{}); len(d.Terminate) != 1 {
		t.Fatalf("at the deadline with an attachment: %s, terminate %d", kinds(d.Commands), len(d.Terminate))
	}
	// So is a node whose pod still has not left at the deadline.
	if d = Decide(snapshot(del.Add(10*time.Minute), []apisv1.NodeClaim{nc}, []corev1.Node{n}, web), Options{}); len(d.Terminate) != 1 {
		t.Fatalf("at the deadline with a pod: %s, terminate %d", kinds(d.Commands), len(d.Terminate))
	}
	// One second earlier the attachment still holds it.
	s.Time = metav1.NewTime(del.Add(10*time.Minute - time.Second))
	if d = Decide(s, Options{}); len(d.Terminate) != 0 {
		t.Fatalf("before the deadline: terminate %d", len(d.Terminate))
	}
}

// Deleting the Node (kubectl delete node) runs the same path: the NodeClaim is deleted too.
func TestNodeDeletionDeletesTheNodeClaim(t *testing.T) {
	nc, n := registered()
	n.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Hour)}
	d := Decide(snapshot(t0.Add(time.Hour+time.Second), []apisv1.NodeClaim{nc}, []corev1.Node{n}, pod("web-0", n.Name, 30)), Options{})
	if got := kinds(d.Commands); got != "DeleteNodeClaim,TaintNode,DrainNode,SetNodeClaimStatus" {
		t.Fatalf("commands %s", got)
	}
	// An empty node being deleted whose NodeClaim is gone still has its instance terminated.
	d = Decide(snapshot(t0.Add(time.Hour+time.Minute), nil, []corev1.Node{n}), Options{})
	if len(d.Terminate) != 1 || d.Terminate[0].ProviderID != pid || kinds(d.Terminate[0].Finish) != "RemoveFinalizer" {
		t.Fatalf("terminate %+v", d.Terminate)
	}
}

// Nodes Dovetail did not launch (no NodeClaim, no finalizer) are left alone, and the decision
// is the same whatever the order of the snapshot's lists.
func TestForeignNodesAndOrder(t *testing.T) {
	system := kubeletNode()
	system.Name, system.Spec.ProviderID, system.Spec.Taints = "system", "aws:///us-east-1a/i-0aaaaaaaaaaaaaaaa", nil
	a, b := claim(), claim()
	b.Name, b.Status.ProviderID = "default-xyz", "aws:///us-east-1b/i-0bbbbbbbbbbbbbbbb"
	n := kubeletNode()
	at := t0.Add(time.Minute)
	d1 := Decide(snapshot(at, []apisv1.NodeClaim{a, b}, []corev1.Node{system, n}), Options{})
	d2 := Decide(snapshot(at, []apisv1.NodeClaim{b, a}, []corev1.Node{n, system}), Options{})
	if !reflect.DeepEqual(d1.Commands, d2.Commands) {
		t.Fatal("order of the snapshot's lists changed the decision")
	}
	var names []string
	for _, c := range d1.Commands {
		names = append(names, c.NodeName)
	}
	sort.Strings(names)
	for _, nm := range names {
		if nm == "system" {
			t.Fatalf("a command targets the system node: %s", kinds(d1.Commands))
		}
	}
}

// Drift compares the NodePool's requirements with the node's labels: the kubelet's node alone
// lacks the offering labels and would look drifted (and be replaced in a loop); once the
// registration's labels are on, it does not.
func TestRegisteredNodeIsNotRequirementsDrifted(t *testing.T) {
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}}},
		}}}}}
	nc, n := claim(), kubeletNode()
	if d := disruption.Drifted(&nc, &n, np, apisv1.NodeClass{}, nil); d.Kind != disruption.DriftRequirements {
		t.Fatalf("kubelet-only node: drift %q, want %s (the labels registration adds are missing)", d.Kind, disruption.DriftRequirements)
	}
	reg := find(t, Decide(snapshot(t0.Add(time.Minute), []apisv1.NodeClaim{nc}, []corev1.Node{n}), Options{}).Commands, events.CommandRegisterNode)
	for k, v := range reg.Labels {
		n.Labels[k] = v
	}
	if d := disruption.Drifted(&nc, &n, np, apisv1.NodeClass{}, nil); d.Kind != "" {
		t.Fatalf("registered node: drift %q (%s), want none", d.Kind, d.Detail)
	}
}

// The NodeClaims of one decision register together: the first node waits (at most the
// registration window) for its siblings' nodes; each node with pending planned pods trades
// karpenter.sh/unregistered for dovetail.dev/planned=<nodeclaim>, which only its planned pods
// tolerate (the toleration comes with their nomination), and loses it once they are bound.
func TestNodesOfOneDecisionRegisterTogether(t *testing.T) {
	a, b := claim(), claim()
	a.Annotations[apisv1.AnnotationSnapshotRevision] = "41"
	b.Annotations = map[string]string{apisv1.AnnotationSnapshotRevision: "41"}
	b.Name, b.UID, b.Status.ProviderID = "default-def", "uid-b", "aws:///us-east-1a/i-0bbbbbbbbbbbbbbbb"
	n := kubeletNode()
	web := pod("web-0", "", 30)
	d := Decide(snapshot(t0.Add(40*time.Second), []apisv1.NodeClaim{a, b}, []corev1.Node{n}, web), Options{})
	if len(d.Commands) != 0 || len(d.Transitions) != 1 || d.Transitions[0].Phase != "Waiting" {
		t.Fatalf("one of two nodes up: %s %+v, want it waiting", kinds(d.Commands), d.Transitions)
	}
	// The window (1 minute from the launch) ends: it registers alone, nominating its pod first
	// (the nomination is on the pod before the taint goes).
	if got := kinds(Decide(snapshot(t0.Add(time.Minute), []apisv1.NodeClaim{a, b}, []corev1.Node{n}, web), Options{}).Commands); got != "NominatePods,RegisterNode,SetNodeClaimStatus" {
		t.Fatalf("after the window: %s", got)
	}
	// Both nodes up: both register at once; a (a pending planned pod) with the planned taint,
	// b (none pending) without.
	m := kubeletNode()
	m.Name, m.UID, m.Spec.ProviderID = "ip-10-0-0-5.ec2.internal", "uid-m", b.Status.ProviderID
	d = Decide(snapshot(t0.Add(40*time.Second), []apisv1.NodeClaim{a, b}, []corev1.Node{n, m}, web), Options{})
	if got := kinds(d.Commands); got != "NominatePods,RegisterNode,SetNodeClaimStatus,RegisterNode,SetNodeClaimStatus" {
		t.Fatalf("both up: %s", got)
	}
	tol := corev1.Toleration{Key: apisv1.TaintKeyPlanned, Operator: corev1.TolerationOpEqual, Value: a.Name, Effect: corev1.TaintEffectNoSchedule}
	if nom := d.Commands[0]; nom.Toleration == nil || *nom.Toleration != tol || nom.NodeName != n.Name {
		t.Errorf("NominatePods %+v, want the toleration %+v", nom, tol)
	}
	planned := corev1.Taint{Key: apisv1.TaintKeyPlanned, Value: a.Name, Effect: corev1.TaintEffectNoSchedule}
	if !hasTaint(d.Commands[1].Taints, planned) || d.Commands[1].NodeName != n.Name {
		t.Errorf("a's RegisterNode taints %v, want %v among them", d.Commands[1].Taints, planned)
	}
	if hasTaintKey(d.Commands[3].Taints, apisv1.TaintKeyPlanned) {
		t.Errorf("b's RegisterNode taints %v: b has no pending planned pod", d.Commands[3].Taints)
	}
	// Registered with its pod still pending: the taint stays; bound: it goes.
	a.Status.NodeName = n.Name
	a.Status.Conditions = append(a.Status.Conditions, metav1.Condition{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue,
		Reason: ReasonRegistered, LastTransitionTime: metav1.NewTime(t0.Add(41 * time.Second))})
	n.Spec.Taints = append(n.Spec.Taints, planned)
	nominated := web
	nominated.Status.NominatedNodeName = n.Name
	untaints := func(d Decision) int {
		c := 0
		for _, cmd := range d.Commands {
			if cmd.Kind == events.CommandUntaintNode && cmd.NodeName == n.Name && cmd.Taint.Key == apisv1.TaintKeyPlanned {
				c++
			}
		}
		return c
	}
	if c := untaints(Decide(snapshot(t0.Add(45*time.Second), []apisv1.NodeClaim{a, b}, []corev1.Node{n, m}, nominated), Options{})); c != 0 {
		t.Errorf("%d UntaintNode while the planned pod is pending", c)
	}
	if c := untaints(Decide(snapshot(t0.Add(46*time.Second), []apisv1.NodeClaim{a, b}, []corev1.Node{n, m}), Options{})); c != 1 {
		t.Errorf("%d UntaintNode once the planned pod is bound, want 1", c)
	}
	// A planned pod that never binds holds the node at most the registration window.
	if c := untaints(Decide(snapshot(t0.Add(101*time.Second), []apisv1.NodeClaim{a, b}, []corev1.Node{n, m}, nominated), Options{})); c != 1 {
		t.Errorf("%d UntaintNode after the window, want 1", c)
	}
}

func hasTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
