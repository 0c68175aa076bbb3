package disruption

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/ec2class"
	"github.com/dovetail-dev/dovetail/shared/kevents"
)

var driftNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func driftPool(name string, budgets ...apisv1.Budget) apisv1.NodePool {
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apisv1.NodePoolSpec{
		Template: apisv1.NodeClaimTemplate{
			ObjectMeta: apisv1.ObjectMeta{Labels: map[string]string{"team": "web"}},
			Spec: apisv1.NodeClaimSpec{
				NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
				Requirements: []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
					Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}}},
			}}}}
	if budgets != nil {
		np.Spec.Disruption.Budgets = budgets
	}
	return np
}

func driftClass() apisv1.EC2NodeClass {
	return apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Status: apisv1.EC2NodeClassStatus{
		AMIs:           []apisv1.AMI{{ID: "ami-new-amd64"}, {ID: "ami-new-arm64"}},
		Subnets:        []apisv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}},
		SecurityGroups: []apisv1.SecurityGroup{{ID: "sg-2"}, {ID: "sg-1"}},
	}}
}

// driftNode returns a Ready node and its NodeClaim launched from np at created, matching the
// class as launch records it (image ami-new-amd64, subnet-a, sg-1,sg-2).
func driftNode(name string, np *apisv1.NodePool, created time.Time) (corev1.Node, apisv1.NodeClaim) {
	labels := map[string]string{apisv1.LabelNodePool: np.Name, apisv1.LabelCapacityType: "spot", "team": "web",
		corev1.LabelTopologyZone: "us-east-1a", corev1.LabelInstanceTypeStable: "m5.large"}
	pid := "aws:///us-east-1a/i-" + fmt.Sprintf("%017x", len(name)*7919+int(created.Unix()%100000))
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("29")}}}
	nc := apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name, Labels: labels, CreationTimestamp: metav1.NewTime(created),
		Annotations: map[string]string{apisv1.AnnotationNodePoolHash: apisv1.NodePoolHash(np), apisv1.AnnotationNodePoolHashVersion: apisv1.NodePoolHashVersion,
			apisv1.AnnotationSubnetID: "subnet-a", apisv1.AnnotationSecurityGroupIDs: "sg-1,sg-2"}},
		Spec:   apisv1.NodeClaimSpec{NodeClassRef: np.Spec.Template.Spec.NodeClassRef},
		Status: apisv1.NodeClaimStatus{ProviderID: pid, NodeName: name, ImageID: "ami-new-amd64"}}
	return node, nc
}

func driftBoundPod(name, node string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: driftPtr(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func driftPtr[T any](v T) *T { return &v }

func TestDriftRules(t *testing.T) {
	np := driftPool("default")
	class := driftClass()
	node, nc := driftNode("n1", &np, driftNow.Add(-time.Hour))
	if d := Drifted(&nc, &node, &np, apisv1.NodeClassOf(&class), ec2class.Rules{}); d.Kind != "" {
		t.Fatalf("a node launched from the current pool and class must not drift, got %+v", d)
	}
	cases := []struct {
		name string
		edit func(np *apisv1.NodePool, class *apisv1.EC2NodeClass, node *corev1.Node, nc *apisv1.NodeClaim)
		want DriftKind
	}{
		{"template label changed", func(np *apisv1.NodePool, _ *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "api"}
		}, DriftNodePoolHash},
		{"taint added", func(np *apisv1.NodePool, _ *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, DriftNodePoolHash},
		// Requirements are not hashed: narrowing them so the node's label no longer fits is
		// requirements drift; widening them is nothing.
		{"requirements narrowed to on-demand", func(np *apisv1.NodePool, _ *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{"on-demand"}
		}, DriftRequirements},
		{"requirements widened", func(np *apisv1.NodePool, _ *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{"spot", "on-demand", "reserved"}
		}, ""},
		{"new AMI behind the alias", func(_ *apisv1.NodePool, c *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			c.Status.AMIs = []apisv1.AMI{{ID: "ami-newer-amd64"}, {ID: "ami-newer-arm64"}}
		}, ec2class.DriftAMI},
		{"subnet removed", func(_ *apisv1.NodePool, c *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			c.Status.Subnets = c.Status.Subnets[1:]
		}, ec2class.DriftSubnet},
		{"security group added", func(_ *apisv1.NodePool, c *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			c.Status.SecurityGroups = append(c.Status.SecurityGroups, apisv1.SecurityGroup{ID: "sg-3"})
		}, ec2class.DriftSecurityGroups},
		{"security groups reordered", func(_ *apisv1.NodePool, c *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			c.Status.SecurityGroups = []apisv1.SecurityGroup{{ID: "sg-1"}, {ID: "sg-2"}}
		}, ""},
		{"class status not resolved yet", func(_ *apisv1.NodePool, c *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			c.Status = apisv1.EC2NodeClassStatus{}
		}, ""},
		{"hash of another version is not compared", func(np *apisv1.NodePool, _ *apisv1.EC2NodeClass, _ *corev1.Node, nc *apisv1.NodeClaim) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "web", "x": "y"}
			nc.Annotations[apisv1.AnnotationNodePoolHashVersion] = "v0"
			nc.Labels["x"] = "y"
		}, ""},
		{"expireAfter changed is behavioural", func(np *apisv1.NodePool, _ *apisv1.EC2NodeClass, _ *corev1.Node, _ *apisv1.NodeClaim) {
			np.Spec.Template.Spec.ExpireAfter = apisv1.MustParseNillableDuration("24h")
		}, ""},
	}
	for _, c := range cases {
		np2, class2 := driftPool("default"), driftClass()
		n2, nc2 := driftNode("n1", &np, driftNow.Add(-time.Hour))
		nc2.Labels = map[string]string{}
		for k, v := range n2.Labels {
			nc2.Labels[k] = v
		}
		c.edit(&np2, &class2, &n2, &nc2)
		if c.name == "hash of another version is not compared" {
			n2.Labels["x"] = "y"
		}
		if got := Drifted(&nc2, &n2, &np2, apisv1.NodeClassOf(&class2), ec2class.Rules{}); got.Kind != c.want {
			t.Errorf("%s: got %q (%s), want %q", c.name, got.Kind, got.Detail, c.want)
		}
	}
}

func TestExpiry(t *testing.T) {
	np := driftPool("default")
	_, nc := driftNode("n1", &np, driftNow.Add(-30*24*time.Hour))
	if Expired(&nc, driftNow) {
		t.Fatal("no expireAfter: never expires")
	}
	nc.Spec.ExpireAfter = apisv1.MustParseNillableDuration("720h") // 30 days exactly
	if !Expired(&nc, driftNow) {
		t.Fatal("created 720h ago with expireAfter 720h: expired at now (now >= creation + 720h)")
	}
	if Expired(&nc, driftNow.Add(-time.Second)) {
		t.Fatal("one second before creation + 720h: not expired")
	}
	nc.Spec.ExpireAfter = apisv1.MustParseNillableDuration("Never")
	if Expired(&nc, driftNow.Add(1000*time.Hour)) {
		t.Fatal("Never never expires")
	}
}

// Five drifted nodes in one pool; budget 20% of 5 nodes = ceil(1.0) = 1 node at once
// (Karpenter rounds percentages up). Order: the empty node first, then the oldest.
func TestPlanDriftOrderAndBudget(t *testing.T) {
	np := driftPool("default", apisv1.Budget{Nodes: "20%"})
	class := driftClass()
	class.Status.AMIs = []apisv1.AMI{{ID: "ami-newer"}} // every node drifts by AMI
	snap := &events.Snapshot{Cluster: "c", Revision: 3, Time: metav1.NewTime(driftNow),
		NodePools: []apisv1.NodePool{np}, NodeClasses: []apisv1.NodeClass{{EC2: &class}}}
	// n1 oldest with pods; n4 empty and youngest; n5 do-not-disrupt.
	ages := map[string]time.Duration{"n1": 50 * time.Hour, "n2": 40 * time.Hour, "n3": 30 * time.Hour, "n4": time.Hour, "n5": 60 * time.Hour}
	for _, name := range []string{"n1", "n2", "n3", "n4", "n5"} {
		node, nc := driftNode(name, &np, driftNow.Add(-ages[name]))
		if name == "n5" {
			node.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
		}
		snap.Nodes = append(snap.Nodes, node)
		snap.NodeClaims = append(snap.NodeClaims, nc)
		if name != "n4" {
			snap.Pods = append(snap.Pods, driftBoundPod("p-"+name, name))
		}
	}
	plan := PlanDrift(snap, ec2class.Rules{})
	if len(plan.Selected) != 1 || plan.Selected[0].Name() != "n4" {
		t.Fatalf("budget 1: want the empty node n4 first, got %v", driftNames(plan.Selected))
	}
	if plan.Selected[0].Drift.Kind != ec2class.DriftAMI {
		t.Fatalf("want AMI drift, got %+v", plan.Selected[0].Drift)
	}
	if len(plan.Blocked) != 1 || plan.Blocked[0].Node != "n5" {
		t.Fatalf("n5 has do-not-disrupt: want blocked, got %+v", plan.Blocked)
	}
	if len(plan.OverBudget) != 3 {
		t.Fatalf("n1, n2, n3 wait for budget, got %+v", plan.OverBudget)
	}
	// With n4 now tainted by drift: it is in progress and holds the one unit of budget.
	for i := range snap.Nodes {
		if snap.Nodes[i].Name == "n4" {
			snap.Nodes[i].Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyDisrupted, Value: TaintValueDrifted, Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	plan = PlanDrift(snap, ec2class.Rules{})
	if len(plan.Selected) != 0 || len(plan.InProgress) != 1 || plan.InProgress[0].Name() != "n4" {
		t.Fatalf("want n4 in progress and nothing new, got selected %v in progress %v", driftNames(plan.Selected), driftNames(plan.InProgress))
	}
	// Budget 3 (a count): n4 holds one, so two more start: the oldest with pods, n1 then n2.
	snap.NodePools[0].Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "3"}}
	plan = PlanDrift(snap, ec2class.Rules{})
	if got := strings.Join(driftNames(plan.Selected), ","); got != "n1,n2" {
		t.Fatalf("want n1,n2 (oldest first), got %s", got)
	}
	// A budget of 0 for Drifted in a window blocks everything.
	snap.NodePools[0].Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "0", Reasons: []string{apisv1.DisruptionReasonDrifted}}}
	if plan = PlanDrift(snap, ec2class.Rules{}); len(plan.Selected) != 0 {
		t.Fatalf("budget 0: want none, got %v", driftNames(plan.Selected))
	}
}

func TestPlanDriftExpired(t *testing.T) {
	np := driftPool("default")
	class := driftClass()
	node, nc := driftNode("old", &np, driftNow.Add(-721*time.Hour))
	nc.Spec.ExpireAfter = apisv1.MustParseNillableDuration("720h")
	young, ync := driftNode("young", &np, driftNow.Add(-time.Hour))
	ync.Spec.ExpireAfter = apisv1.MustParseNillableDuration("720h")
	snap := &events.Snapshot{Cluster: "c", Time: metav1.NewTime(driftNow), NodePools: []apisv1.NodePool{np},
		NodeClasses: []apisv1.NodeClass{{EC2: &class}}, Nodes: []corev1.Node{node, young}, NodeClaims: []apisv1.NodeClaim{nc, ync}}
	// Expiry is forceful (Karpenter v1): no budget is spent, even a budget of 0 does not hold it.
	snap.NodePools[0].Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "0"}}
	plan := PlanDrift(snap, ec2class.Rules{})
	if len(plan.Expired) != 1 || plan.Expired[0].Name() != "old" || plan.Expired[0].Reason != ReasonExpired || len(plan.Selected)+len(plan.OverBudget) != 0 {
		t.Fatalf("want old expired (and nothing selected or over budget), got expired %+v selected %+v over budget %+v", plan.Expired, plan.Selected, plan.OverBudget)
	}
	if want := driftNow.Add(-time.Hour); !plan.Expired[0].ExpiredAt.Equal(want) {
		t.Fatalf("expired at %v, want creation + 720h = %v", plan.Expired[0].ExpiredAt, want)
	}
}

func TestGraceExceeded(t *testing.T) {
	nc := &apisv1.NodeClaim{Spec: apisv1.NodeClaimSpec{TerminationGracePeriod: &metav1.Duration{Duration: time.Hour}}}
	tainted := driftNow.Add(-59 * time.Minute)
	if GraceExceeded(nc, &tainted, driftNow) {
		t.Fatal("59 min of a 1 h terminationGracePeriod: still waiting")
	}
	tainted = driftNow.Add(-time.Hour)
	if !GraceExceeded(nc, &tainted, driftNow) {
		t.Fatal("1 h of 1 h: the blocked drain stops waiting")
	}
	if GraceExceeded(&apisv1.NodeClaim{}, &tainted, driftNow) {
		t.Fatal("no terminationGracePeriod: wait forever")
	}
}

func driftNames(cs []DriftCandidate) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return out
}

// Static NodeClass drift: a change to a field only a new node picks up (user data) drifts the
// NodeClaim; changes Karpenter's hash ignores (selector terms, which drift through the status,
// amiFamily written out next to an alias of that family) and a hash from another rule version
// (a NodeClaim Karpenter launched) do not.
func TestEC2NodeClassHashDrift(t *testing.T) {
	np := driftPool("default")
	class := driftClass()
	class.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	node, nc := driftNode("n1", &np, driftNow)
	nc.Annotations[apisv1.AnnotationEC2NodeClassHash] = apisv1.EC2NodeClassHash(&class)
	nc.Annotations[apisv1.AnnotationEC2NodeClassHashVersion] = apisv1.EC2NodeClassHashVersion
	if d := Drifted(&nc, &node, &np, apisv1.NodeClassOf(&class), ec2class.Rules{}); d.Kind != "" {
		t.Fatalf("unchanged class: %+v", d)
	}
	same := class.DeepCopy()
	al2023 := apisv1.AMIFamilyAL2023
	same.Spec.AMIFamily = &al2023
	same.Spec.SubnetSelectorTerms = []apisv1.SubnetSelectorTerm{{ID: "subnet-a"}}
	if d := Drifted(&nc, &node, &np, apisv1.NodeClassOf(same), ec2class.Rules{}); d.Kind != "" {
		t.Errorf("amiFamily spelled out and a new subnet selector: %+v, want no drift", d)
	}
	changed := class.DeepCopy()
	ud := "#!/bin/bash\necho hello"
	changed.Spec.UserData = &ud
	if d := Drifted(&nc, &node, &np, apisv1.NodeClassOf(changed), ec2class.Rules{}); d.Kind != ec2class.DriftNodeClassHash || !strings.Contains(d.Detail, "EC2NodeClass default") {
		t.Errorf("new user data: %+v, want %s", d, ec2class.DriftNodeClassHash)
	}
	karpenters := nc.DeepCopy()
	karpenters.Annotations[apisv1.AnnotationEC2NodeClassHashVersion] = "v5"
	if d := Drifted(karpenters, &node, &np, apisv1.NodeClassOf(changed), ec2class.Rules{}); d.Kind != "" {
		t.Errorf("a hash of Karpenter's rule: %+v, want no drift", d)
	}
}

// Issue 25, 7b: drift picks no more nodes in one round than the pods' PodDisruptionBudgets let
// drain together. Karpenter makes no disruption candidate of a node whose pods a PDB keeps from
// being evicted ("pdb prevents pod evictions", sigs.k8s.io/karpenter
// pkg/controllers/disruption/types.go NewCandidate), except an eventual disruption (drift) of a
// NodeClaim with a terminationGracePeriod.
//
// Three drifted nodes each run one pod of app=web; the PDB (minAvailable 2 of the 3 Ready pods)
// allows 3 − 2 = 1 disruption. The budget (100%) would take all three; the PDB takes one: the
// oldest node, n1. n2 and n3 are blocked by the PDB, and n3's NodeClaim, given a
// terminationGracePeriod, is chosen after all.
func TestPlanDriftHonoursPDBsAcrossTheRound(t *testing.T) {
	np := driftPool("default", apisv1.Budget{Nodes: "100%"})
	class := driftClass()
	class.Status.AMIs = []apisv1.AMI{{ID: "ami-newer"}}
	snap := &events.Snapshot{Cluster: "c", Revision: 3, Time: metav1.NewTime(driftNow),
		NodePools: []apisv1.NodePool{np}, NodeClasses: []apisv1.NodeClass{{EC2: &class}}}
	for i, name := range []string{"n1", "n2", "n3"} {
		node, nc := driftNode(name, &np, driftNow.Add(-time.Duration(50-10*i)*time.Hour))
		snap.Nodes = append(snap.Nodes, node)
		snap.NodeClaims = append(snap.NodeClaims, nc)
		p := driftBoundPod("web-"+name, name)
		p.Labels = map[string]string{"app": "web"}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		snap.Pods = append(snap.Pods, p)
	}
	two := intstr.FromInt32(2)
	snap.PDBs = []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
	plan := PlanDrift(snap, ec2class.Rules{})
	if got := strings.Join(driftNames(plan.Selected), ","); got != "n1" {
		t.Fatalf("selected %s; want n1 only: the PDB allows one eviction", got)
	}
	if len(plan.Blocked) != 2 || plan.Blocked[0].Node != "n2" || plan.Blocked[1].Node != "n3" ||
		!strings.Contains(plan.Blocked[0].Reason, "PodDisruptionBudget default/web allows 1") || plan.Blocked[0].Blocker != kevents.PDBBlocks("default/web") {
		t.Fatalf("blocked %+v; want n2 and n3 held by PodDisruptionBudget default/web", plan.Blocked)
	}
	snap.NodeClaims[2].Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
	plan = PlanDrift(snap, ec2class.Rules{})
	if got := strings.Join(driftNames(plan.Selected), ","); got != "n1,n3" || len(plan.Blocked) != 1 || plan.Blocked[0].Node != "n2" {
		t.Fatalf("selected %s, blocked %+v; want n1 and n3 (terminationGracePeriod), n2 blocked", got, plan.Blocked)
	}
}

// Drifted as Karpenter writes it: True with the drift reason (here the EC2 NodeClass's
// AMIDrift) as reason and message; unchanged when already so; removed once the NodeClaim no
// longer drifts. A node not initialized is not judged.
func TestDriftConditions(t *testing.T) {
	np := driftPool("default", apisv1.Budget{Nodes: "20%"})
	class := driftClass()
	snap := &events.Snapshot{Cluster: "c", Revision: 3, Time: metav1.NewTime(driftNow),
		NodePools: []apisv1.NodePool{np}, NodeClasses: []apisv1.NodeClass{{EC2: &class}}}
	node, nc := driftNode("n1", &np, driftNow.Add(-time.Hour))
	young, ync := driftNode("n2", &np, driftNow.Add(-time.Minute))
	delete(young.Labels, apisv1.LabelNodeInitialized)
	ync.Status.Conditions = nil
	young.Spec.Taints = append(young.Spec.Taints, corev1.Taint{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}) // still booting
	snap.Nodes, snap.NodeClaims = []corev1.Node{node, young}, []apisv1.NodeClaim{nc, ync}
	if cmds := DriftConditions(snap, ec2class.Rules{}); len(cmds) != 0 {
		t.Fatalf("nothing drifted: %+v", cmds)
	}
	class.Status.AMIs = []apisv1.AMI{{ID: "ami-newer"}}
	cmds := DriftConditions(snap, ec2class.Rules{})
	if len(cmds) != 1 || cmds[0].NodeClaim.Name != nc.Name || len(cmds[0].NodeClaim.Status.Conditions) != 1 {
		t.Fatalf("drifted: %+v", cmds)
	}
	c := cmds[0].NodeClaim.Status.Conditions[0]
	if c.Type != apisv1.ConditionDrifted || c.Status != metav1.ConditionTrue || c.Reason != string(ec2class.DriftAMI) || c.Message != c.Reason {
		t.Fatalf("condition %+v", c)
	}
	snap.NodeClaims[0].Status.Conditions = append(snap.NodeClaims[0].Status.Conditions, c)
	if cmds := DriftConditions(snap, ec2class.Rules{}); len(cmds) != 0 {
		t.Fatalf("already recorded: %+v", cmds)
	}
	class.Status.AMIs = driftClass().Status.AMIs
	cmds = DriftConditions(snap, ec2class.Rules{})
	if len(cmds) != 1 || len(cmds[0].ClearConditions) != 1 || cmds[0].ClearConditions[0] != apisv1.ConditionDrifted {
		t.Fatalf("no longer drifted: %+v", cmds)
	}
}
