//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	sigsyaml "sigs.k8s.io/yaml"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// The cluster of TestPlanLiveCluster, as Karpenter v1 would have left it on EKS (us-east-1,
// AL2023 nodes): NodePool "default" (on-demand c5/m5 large and xlarge in us-east-1a and 1b,
// consolidateAfter 5m, the default budget of 10 % of its nodes) and EC2NodeClass "default",
// whose resolved AMI is now ami-new; seven nodes of the pool with their NodeClaims, and one
// spot node of the EKS managed node group "system" (tainted CriticalAddonsOnly).
//
// Pods (requests), on the nodes the setup gives them (one node open to the scheduler at a time):
//
//	A ip-10-0-1-10 m5.xlarge 1a 0.192  web ×3 (1000m, 1Gi; PDB shop/web minAvailable 2: allows 1)
//	B ip-10-0-1-11 m5.xlarge 1a 0.192  api ×1 (500m, 512Mi)
//	C ip-10-0-1-12 m5.large  1a 0.096  worker ×2 (700m, 1Gi); NodeClaim on ami-old: AMI drift
//	D ip-10-0-1-13 c5.large  1b 0.085  cache ×1 (800m, 1Gi, nodeSelector zone 1b); expireAfter 1h
//	E ip-10-0-1-14 m5.large  1b 0.096  report ×1 (300m, 256Mi, karpenter.sh/do-not-disrupt)
//	F ip-10-0-1-15 m5.large  1b 0.096  db ×2 (600m, 1Gi; PDB shop/db maxUnavailable 0: allows 0)
//	H ip-10-0-1-16 m5.large  1a 0.096  empty
//	G ip-10-0-2-20 t3.medium 1a spot 0.017722 (estimate)  coredns ×2 (100m, 70Mi); node group "system"
//
// and DaemonSet kube-system/node-agent (100m, 128Mi) on every node. Prices: the embedded
// us-east-1 catalog (on-demand list prices; the t3.medium spot price is the spot model's
// estimate). Allocatable CPU (AL2023): xlarge 3920m, large 1930m.
type liveNode struct {
	key, name, itype, zone string
	claim                  string // NodeClaim name; "" for the node group node
	image                  string
	expireAfter            string
}

var liveNodes = []liveNode{
	{"A", "ip-10-0-1-10.ec2.internal", "m5.xlarge", "us-east-1a", "default-4fkq2", "ami-new", "720h"},
	{"B", "ip-10-0-1-11.ec2.internal", "m5.xlarge", "us-east-1a", "default-8dz7w", "ami-new", "720h"},
	{"C", "ip-10-0-1-12.ec2.internal", "m5.large", "us-east-1a", "default-b2xnc", "ami-old", "720h"},
	{"D", "ip-10-0-1-13.ec2.internal", "c5.large", "us-east-1b", "default-hq5vt", "ami-new", "1h"},
	{"E", "ip-10-0-1-14.ec2.internal", "m5.large", "us-east-1b", "default-k9mrs", "ami-new", "720h"},
	{"F", "ip-10-0-1-15.ec2.internal", "m5.large", "us-east-1b", "default-p3wjd", "ami-new", "720h"},
	{"H", "ip-10-0-1-16.ec2.internal", "m5.large", "us-east-1a", "default-t6gby", "ami-new", "720h"},
	{"G", "ip-10-0-2-20.ec2.internal", "t3.medium", "us-east-1a", "", "", ""},
}

func liveNodeByKey(k string) liveNode {
	for _, n := range liveNodes {
		if n.key == k {
			return n
		}
	}
	panic("no node " + k)
}

type liveWorkload struct {
	name, ns, node   string
	replicas         int32
	cpu, mem         string
	doNotDisrupt     bool
	zone             string
	criticalAddonsOK bool
}

var liveWorkloads = []liveWorkload{
	{name: "web", ns: "shop", node: "A", replicas: 3, cpu: "1", mem: "1Gi"},
	{name: "api", ns: "shop", node: "B", replicas: 1, cpu: "500m", mem: "512Mi"},
	{name: "worker", ns: "shop", node: "C", replicas: 2, cpu: "700m", mem: "1Gi"},
	{name: "cache", ns: "shop", node: "D", replicas: 1, cpu: "800m", mem: "1Gi", zone: "us-east-1b"},
	{name: "report", ns: "shop", node: "E", replicas: 1, cpu: "300m", mem: "256Mi", doNotDisrupt: true},
	{name: "db", ns: "shop", node: "F", replicas: 2, cpu: "600m", mem: "1Gi"},
	{name: "coredns", ns: "kube-system", node: "G", replicas: 2, cpu: "100m", mem: "70Mi", criticalAddonsOK: true},
}

// setupTaint keeps the scheduler off every node but the one a Deployment is being placed on.
const setupTaint = "e2e.dovetail.dev/setup"

type liveState struct {
	kc kubernetes.Interface
	dc dynamic.Interface
	// at is the preview time: NodeClaim D's creation + 2h (expired: expireAfter 1h); every
	// other pod and node is then older than consolidateAfter (5m).
	at time.Time
}

func (s *liveState) build(ctx context.Context) error {
	pool, err := s.karpenterObjects(ctx)
	if err != nil {
		return err
	}
	for _, n := range liveNodes {
		if err := s.createNode(ctx, n, pool); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	if err := s.waitNodesReady(ctx); err != nil {
		return err
	}
	if err := s.daemonSet(ctx); err != nil {
		return err
	}
	for _, w := range liveWorkloads {
		if err := s.deploy(ctx, w); err != nil {
			return fmt.Errorf("deployment %s/%s: %w", w.ns, w.name, err)
		}
	}
	if err := s.pdbs(ctx); err != nil {
		return err
	}
	for _, n := range liveNodes {
		if err := s.setTaint(ctx, n.name, false); err != nil {
			return err
		}
	}
	return s.settled(ctx)
}

const livePoolYAML = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, c5.xlarge, m5.large, m5.xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}
      expireAfter: 720h
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5m
`

const liveClassYAML = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-shop
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: shop}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: shop}}]
`

func readYAML(doc string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	return u, sigsyaml.Unmarshal([]byte(doc), &u.Object)
}

// karpenterObjects creates the NodePool and EC2NodeClass with the status Karpenter writes.
func (s *liveState) karpenterObjects(ctx context.Context) (*unstructured.Unstructured, error) {
	class, err := readYAML(liveClassYAML)
	if err != nil {
		return nil, err
	}
	if class, err = s.dc.Resource(kube.EC2NodeClassGVR).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	ready := func(types ...string) []any {
		var out []any
		for _, t := range types {
			out = append(out, map[string]any{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": now, "observedGeneration": int64(1)})
		}
		return out
	}
	class.Object["status"] = map[string]any{
		"amis": []any{map[string]any{"id": "ami-new", "name": "amazon-eks-node-al2023-x86_64-standard-1.34-v20250101",
			"requirements": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}}}},
		"subnets":         []any{map[string]any{"id": "subnet-0a1", "zone": "us-east-1a", "zoneID": "use1-az1"}, map[string]any{"id": "subnet-0b1", "zone": "us-east-1b", "zoneID": "use1-az2"}},
		"securityGroups":  []any{map[string]any{"id": "sg-0c1", "name": "eks-cluster-sg-shop"}},
		"instanceProfile": "shop_1234567890",
		"conditions":      ready("AMIsReady", "SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady", "ValidationSucceeded", "Ready"),
	}
	if _, err := s.dc.Resource(kube.EC2NodeClassGVR).UpdateStatus(ctx, class, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("EC2NodeClass status: %w", err)
	}
	pool, err := readYAML(livePoolYAML)
	if err != nil {
		return nil, err
	}
	if pool, err = s.dc.Resource(kube.NodePoolGVR).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	pool.Object["status"] = map[string]any{"conditions": ready("ValidationSucceeded", "NodeClassReady", "Ready"),
		"nodes": int64(7), "resources": map[string]any{"cpu": "18", "nodes": "7", "pods": "261"}}
	if pool, err = s.dc.Resource(kube.NodePoolGVR).UpdateStatus(ctx, pool, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("NodePool status: %w", err)
	}
	return pool, nil
}

// createNode creates the Node as its kubelet and Karpenter's registration leave it (labels,
// provider ID, capacity and allocatable of the type on AL2023), tainted for the setup, and its
// NodeClaim as Karpenter leaves it: owned by the NodePool, finalizer, hash annotations, status
// Launched, Registered, Initialized and Ready with the image it booted.
func (s *liveState) createNode(ctx context.Context, n liveNode, pool *unstructured.Unstructured) error {
	it := catalog.MustAWS().Get(n.itype)
	labels := map[string]string{}
	for k, v := range it.Labels {
		labels[k] = v
	}
	for k, v := range map[string]string{corev1.LabelHostname: n.name, corev1.LabelTopologyZone: n.zone, corev1.LabelTopologyRegion: "us-east-1",
		corev1.LabelInstanceTypeStable: n.itype, "topology.k8s.aws/zone-id": map[string]string{"us-east-1a": "use1-az1", "us-east-1b": "use1-az2"}[n.zone]} {
		labels[k] = v
	}
	taints := []corev1.Taint{{Key: setupTaint, Effect: corev1.TaintEffectNoSchedule}}
	if n.claim == "" {
		labels["eks.amazonaws.com/nodegroup"] = "system"
		labels["eks.amazonaws.com/capacityType"] = "SPOT"
		labels["eks.amazonaws.com/nodegroup-image"] = "ami-0eks"
		taints = append(taints, corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule})
	} else {
		labels[apisv1.LabelNodePool] = "default"
		labels[apisv1.LabelCapacityType] = apisv1.CapacityTypeOnDemand
		labels[apisv1.LabelNodeRegistered] = "true"
		labels[apisv1.LabelNodeInitialized] = "true"
		labels[apisv1.LabelEC2NodeClass] = "default"
	}
	id := fmt.Sprintf("i-0%x%015x", n.key[0], 0x5a17c3e09b2d4)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + n.zone + "/" + id, Taints: taints},
		Status:     corev1.NodeStatus{Capacity: it.Capacity, Allocatable: it.Allocatable()},
	}
	if n.claim != "" {
		node.Finalizers = []string{"karpenter.sh/termination"}
	}
	if _, err := s.kc.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	if n.claim == "" {
		return nil
	}
	return s.createClaim(ctx, n, node, pool, it)
}

func (s *liveState) createClaim(ctx context.Context, n liveNode, node *corev1.Node, pool *unstructured.Unstructured, it *catalog.InstanceType) error {
	ncLabels := map[string]any{}
	for k, v := range node.Labels {
		if k != corev1.LabelHostname && k != apisv1.LabelNodeRegistered && k != apisv1.LabelNodeInitialized {
			ncLabels[k] = v
		}
	}
	yes := true
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apisv1.GroupVersion, "kind": "NodeClaim",
		"metadata": map[string]any{"name": n.claim, "labels": ncLabels, "finalizers": []any{"karpenter.sh/termination"},
			"annotations": map[string]any{"karpenter.sh/nodepool-hash": "6821555240594823858", "karpenter.sh/nodepool-hash-version": "v3",
				"karpenter.k8s.aws/ec2nodeclass-hash": "15535182697325354914", "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
				"karpenter.k8s.aws/tagged": "true"},
			"ownerReferences": []any{map[string]any{"apiVersion": apisv1.GroupVersion, "kind": "NodePool", "name": pool.GetName(),
				"uid": string(pool.GetUID()), "blockOwnerDeletion": yes}}},
		"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": apisv1.AWSGroup, "kind": "EC2NodeClass", "name": "default"},
			"expireAfter":  n.expireAfter,
			"requirements": []any{
				map[string]any{"key": corev1.LabelInstanceTypeStable, "operator": "In", "values": []any{n.itype}},
				map[string]any{"key": apisv1.LabelCapacityType, "operator": "In", "values": []any{"on-demand"}},
				map[string]any{"key": apisv1.LabelNodePool, "operator": "In", "values": []any{"default"}},
				map[string]any{"key": corev1.LabelTopologyZone, "operator": "In", "values": []any{n.zone}},
			},
			"resources": map[string]any{"requests": map[string]any{"cpu": "1100m", "memory": "1152Mi", "pods": "4"}},
		},
	}}
	dc := s.dc.Resource(kube.NodeClaimGVR)
	created, err := dc.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	t := created.GetCreationTimestamp().UTC().Format(time.RFC3339)
	cond := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": typ, "message": "", "lastTransitionTime": t, "observedGeneration": int64(1)}
	}
	created.Object["status"] = map[string]any{
		"nodeName": n.name, "providerID": node.Spec.ProviderID, "imageID": n.image,
		"capacity": toStrings(it.Capacity), "allocatable": toStrings(it.Allocatable()),
		"conditions": []any{cond("Launched"), cond("Registered"), cond("Initialized"), cond("Ready")},
	}
	if _, err := dc.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("NodeClaim %s status: %w", n.claim, err)
	}
	if n.key == "D" {
		s.at = created.GetCreationTimestamp().Add(2 * time.Hour)
	}
	return nil
}

func toStrings(l corev1.ResourceList) map[string]any {
	out := map[string]any{}
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

func (s *liveState) waitNodesReady(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := s.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != len(liveNodes) {
			return false, nil
		}
		for i := range nodes.Items {
			if !nodeReady(&nodes.Items[i]) || hasTaint(&nodes.Items[i], corev1.TaintNodeNotReady) {
				return false, nil
			}
		}
		return true, nil
	})
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func podSpec(cpu, mem string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}
}

// daemonSet runs node-agent on every node (it tolerates every taint) and waits for its pods.
func (s *liveState) daemonSet(ctx context.Context) error {
	labels := map[string]string{"app": "node-agent"}
	spec := podSpec("100m", "128Mi")
	spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
	if _, err := s.kc.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return err
	}
	return s.waitPods(ctx, "kube-system", "app=node-agent", len(liveNodes))
}

// deploy opens the workload's node to the scheduler, creates the Deployment, waits for its
// pods to run there, and closes the node again.
func (s *liveState) deploy(ctx context.Context, w liveWorkload) error {
	node := liveNodeByKey(w.node).name
	if err := s.ensureNamespace(ctx, w.ns); err != nil {
		return err
	}
	if err := s.setTaint(ctx, node, false); err != nil {
		return err
	}
	labels := map[string]string{"app": w.name}
	spec := podSpec(w.cpu, w.mem)
	if w.zone != "" {
		spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: w.zone}
	}
	if w.criticalAddonsOK {
		spec.Tolerations = []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
	if w.doNotDisrupt {
		tmpl.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: "true"}
	}
	replicas := w.replicas
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	if _, err := s.kc.AppsV1().Deployments(w.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := s.waitPods(ctx, w.ns, "app="+w.name, int(w.replicas)); err != nil {
		return err
	}
	pods, err := s.kc.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + w.name})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node {
			return fmt.Errorf("pod %s ran on %s, want %s", p.Name, p.Spec.NodeName, node)
		}
	}
	return s.setTaint(ctx, node, true)
}

func (s *liveState) ensureNamespace(ctx context.Context, ns string) error {
	_, err := s.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !isAlreadyExists(err) {
		return err
	}
	return nil
}

// waitPods waits for n pods of the selector, each bound, Running and Ready.
func (s *liveState) waitPods(ctx context.Context, ns, selector string, n int) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := s.kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) != n {
			return false, nil
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || !podIsReady(p) {
				return false, nil
			}
		}
		return true, nil
	})
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setTaint adds or removes the setup taint.
func (s *liveState) setTaint(ctx context.Context, name string, on bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != setupTaint {
				taints = append(taints, t)
			}
		}
		if on {
			taints = append(taints, corev1.Taint{Key: setupTaint, Effect: corev1.TaintEffectNoSchedule})
		}
		n.Spec.Taints = taints
		_, err = s.kc.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// pdbs creates shop/web (minAvailable 2 of 3: allows 1) and shop/db (maxUnavailable 0: allows 0).
func (s *liveState) pdbs(ctx context.Context) error {
	two, zero := intstr.FromInt32(2), intstr.FromInt32(0)
	for _, p := range []*policyv1.PodDisruptionBudget{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop"}, Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	} {
		if _, err := s.kc.PolicyV1().PodDisruptionBudgets("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// settled waits until the disruption controller has computed both PDBs (web allows 1, db 0) and
// no node carries a setup or NotReady taint.
func (s *liveState) settled(ctx context.Context) error {
	want := map[string]int32{"web": 1, "db": 0}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for name, allowed := range want {
			p, err := s.kc.PolicyV1().PodDisruptionBudgets("shop").Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.ObservedGeneration < p.Generation || p.Status.DisruptionsAllowed != allowed || p.Status.ExpectedPods == 0 {
				return false, nil
			}
		}
		nodes, err := s.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range nodes.Items {
			if hasTaint(&nodes.Items[i], setupTaint) || hasTaint(&nodes.Items[i], corev1.TaintNodeNotReady) || !nodeReady(&nodes.Items[i]) {
				return false, nil
			}
		}
		return true, nil
	})
}
