//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// registrationTTL is the shortened liveness timeout the e2e environment runs with.
const registrationTTL = 20 * time.Second

const lifecycleNS = "e2e-lifecycle"

// nodeClaims lists the NodeClaims through the API server.
func nodeClaims(ctx context.Context, t *testing.T, env *localdev.Env) []apisv1.NodeClaim {
	t.Helper()
	list, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]apisv1.NodeClaim, 0, len(list.Items))
	for i := range list.Items {
		var nc apisv1.NodeClaim
		if err := kube.FromUnstructured(&list.Items[i], &nc); err != nil {
			t.Fatal(err)
		}
		out = append(out, nc)
	}
	return out
}

func ready(nc apisv1.NodeClaim) bool {
	for _, c := range nc.Status.Conditions {
		if c.Type == apisv1.ConditionReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// checkNodeClaimsReady: every seed NodeClaim is Ready with status.nodeName, and `kubectl get
// nodeclaims` (the server-side table of the CRD's printer columns) shows TYPE, CAPACITY, ZONE,
// NODE and READY filled.
func checkNodeClaimsReady(ctx context.Context, t *testing.T, env *localdev.Env) {
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, nc := range nodeClaims(ctx, t, env) {
			if !ready(nc) || nc.Status.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		for _, nc := range nodeClaims(ctx, t, env) {
			t.Logf("%s: nodeName %q conditions %+v", nc.Name, nc.Status.NodeName, nc.Status.Conditions)
		}
		t.Fatalf("not every NodeClaim became Ready with a nodeName: %v", err)
	}
	col, rows := table(ctx, t, env, "/apis/karpenter.sh/v1/nodeclaims")
	if len(rows) == 0 {
		t.Fatal("kubectl get nodeclaims: no rows")
	}
	for _, r := range rows {
		for _, name := range []string{"TYPE", "CAPACITY", "ZONE", "NODE", "READY"} {
			i, ok := col[name]
			if !ok {
				t.Fatalf("kubectl get nodeclaims has no %s column (columns %v)", name, col)
			}
			if v := fmt.Sprint(r[i]); v == "" || v == "<nil>" || (name == "READY" && v != "True") {
				t.Errorf("kubectl get nodeclaims: row %v: %s is %q", r, name, v)
			}
		}
	}
	t.Logf("kubectl get nodeclaims: %d rows, TYPE CAPACITY ZONE NODE READY filled", len(rows))
}

// deploy creates a one-replica Deployment whose pod selects nodes by selector, and waits until
// its pod runs; it returns the node.
func deploy(ctx context.Context, t *testing.T, env *localdev.Env, name string, selector map[string]string) string {
	t.Helper()
	kc := env.Cluster.Kube
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lifecycleNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	labels := map[string]string{"app": name}
	one, grace := int32(1), int64(5)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: lifecycleNS},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: selector, TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}}}}}
	if _, err := kc.AppsV1().Deployments(lifecycleNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return runningNode(ctx, t, env, name, "")
}

// runningNode waits until the app's pod runs on a node other than not, and returns the node.
func runningNode(ctx context.Context, t *testing.T, env *localdev.Env, app, not string) string {
	t.Helper()
	var node string
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := env.Cluster.Kube.CoreV1().Pods(lifecycleNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Spec.NodeName != not && p.Status.Phase == corev1.PodRunning {
				node = p.Spec.NodeName
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the pod of %s never ran (on a node other than %q): %v", app, not, err)
	}
	return node
}

// c6gLabels are the labels of a c6g instance Karpenter puts on its node, by size: the
// karpenter.k8s.aws labels of the type (Karpenter's published instance-types reference, the
// same facts as shared/data/aws/ec2_instance_types.csv), written out by hand.
func c6gLabels(size string) map[string]string {
	cpu, mem, net := "1", "2048", "500"
	if size == "large" {
		cpu, mem, net = "2", "4096", "750"
	}
	return map[string]string{
		"karpenter.k8s.aws/instance-category": "c", "karpenter.k8s.aws/instance-cpu": cpu,
		"karpenter.k8s.aws/instance-cpu-manufacturer": "aws", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "2500",
		"karpenter.k8s.aws/instance-ebs-bandwidth": "4750", "karpenter.k8s.aws/instance-encryption-in-transit-supported": "false",
		"karpenter.k8s.aws/instance-family": "c6g", "karpenter.k8s.aws/instance-generation": "6",
		"karpenter.k8s.aws/instance-hypervisor": "nitro", "karpenter.k8s.aws/instance-memory": mem,
		"karpenter.k8s.aws/instance-network-bandwidth": net, "karpenter.k8s.aws/instance-size": size,
		"kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "c6g." + size,
		"topology.kubernetes.io/region": "us-east-1", "beta.kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux",
		"beta.kubernetes.io/instance-type": "c6g." + size, "failure-domain.beta.kubernetes.io/region": "us-east-1",
		"karpenter.sh/nodepool": "default", "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true",
	}
}

// checkNodeLabels: a Deployment selecting spot and category c (and c6g.medium) runs, and so does
// one selecting on-demand arm64 (c6g.large); each node carries exactly the labels Karpenter would
// put on it. Returns the on-demand node.
func checkNodeLabels(ctx context.Context, t *testing.T, env *localdev.Env) string {
	cases := []struct {
		app, size, capacity string
	}{
		{"spot-c", "medium", apisv1.CapacityTypeSpot},
		{"ondemand-arm64", "large", apisv1.CapacityTypeOnDemand},
	}
	var odNode string
	for _, c := range cases {
		sel := map[string]string{apisv1.LabelCapacityType: c.capacity, corev1.LabelInstanceTypeStable: "c6g." + c.size}
		if c.capacity == apisv1.CapacityTypeSpot {
			sel[apisv1.LabelInstanceCategory] = "c"
		} else {
			sel[corev1.LabelArchStable] = "arm64"
		}
		name := deploy(ctx, t, env, c.app, sel)
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			n, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && n.Labels[apisv1.LabelNodeInitialized] == "true", nil
		}); err != nil {
			t.Fatalf("node %s never initialized: %v", name, err)
		}
		n, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := c6gLabels(c.size)
		want[apisv1.LabelCapacityType] = c.capacity
		want[corev1.LabelHostname] = n.Name
		zone := n.Labels[corev1.LabelTopologyZone]
		if !strings.HasPrefix(zone, "us-east-1") {
			t.Errorf("node %s zone %q", n.Name, zone)
		}
		want[corev1.LabelTopologyZone], want["failure-domain.beta.kubernetes.io/zone"] = zone, zone
		// Karpenter labels the NodeClaim with its subnet's AvailabilityZoneId, and registration
		// copies it onto the Node: the zone ID the EC2NodeClass's status gives that zone.
		for _, sn := range ec2NodeClassStatusSubnets(ctx, t, env) {
			if sn.Zone == zone {
				want[apisv1.LabelTopologyZoneID] = sn.ZoneID
			}
		}
		var diff []string
		for k, v := range want {
			if n.Labels[k] != v {
				diff = append(diff, fmt.Sprintf("%s=%q (want %q)", k, n.Labels[k], v))
			}
		}
		for k, v := range n.Labels {
			if _, ok := want[k]; !ok {
				diff = append(diff, fmt.Sprintf("unexpected %s=%q", k, v))
			}
		}
		sort.Strings(diff)
		if len(diff) > 0 {
			t.Errorf("%s node %s labels differ from Karpenter's: %s", c.app, n.Name, strings.Join(diff, "; "))
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == apisv1.TaintKeyUnregistered {
				t.Errorf("node %s still tainted %s", n.Name, tn.Key)
			}
		}
		if c.capacity == apisv1.CapacityTypeOnDemand {
			odNode = name
		}
		t.Logf("%s runs on %s (c6g.%s %s): %d labels, exactly Karpenter's", c.app, name, c.size, c.capacity, len(n.Labels))
	}
	return odNode
}

// checkDeleteNodeClaim: `kubectl delete nodeclaim` (a client-go delete) drains the node (its pod
// runs again elsewhere), terminates the instance in the fake cloud and removes both finalizers,
// so the Node and the NodeClaim are gone.
func checkDeleteNodeClaim(ctx context.Context, t *testing.T, env *localdev.Env, node string) {
	var victim apisv1.NodeClaim
	for _, nc := range nodeClaims(ctx, t, env) {
		if nc.Status.NodeName == node {
			victim = nc
		}
	}
	if victim.Name == "" {
		t.Fatalf("no NodeClaim for node %s", node)
	}
	begin := time.Now()
	if err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	elsewhere := runningNode(ctx, t, env, "ondemand-arm64", node)
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, nerr := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		_, cerr := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(nerr) && apierrors.IsNotFound(cerr), nil
	}); err != nil {
		t.Fatalf("NodeClaim %s / Node %s not gone after the delete: %v", victim.Name, node, err)
	}
	inst, err := env.Cloud.Get(ctx, victim.Status.ProviderID)
	if err == nil && inst.State != cloud.StateShuttingDown && inst.State != cloud.StateTerminated {
		t.Errorf("instance %s is %s after its NodeClaim was deleted", victim.Status.ProviderID, inst.State)
	}
	t.Logf("kubectl delete nodeclaim %s: pod moved to %s, instance terminated, Node and NodeClaim gone in %s", victim.Name, elsewhere,
		time.Since(begin).Round(100*time.Millisecond))
}

// checkLiveness: an instance whose kubelet never joins is reaped after the (shortened)
// registration timeout: its NodeClaim is deleted and the instance terminated.
func checkLiveness(ctx context.Context, t *testing.T, env *localdev.Env) {
	if err := env.Cloud.InjectBootFailure(fake.Pattern{InstanceType: "r6g.medium"}); err != nil {
		t.Fatal(err)
	}
	defer env.Cloud.ClearBootFailures()
	kc := env.Cluster.Kube
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lifecycleNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "never-joins"}
	one := int32(1)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "never-joins", Namespace: lifecycleNS},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{corev1.LabelInstanceTypeStable: "r6g.medium", apisv1.LabelCapacityType: apisv1.CapacityTypeOnDemand},
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m")}}}}}}}}
	if _, err := kc.AppsV1().Deployments(lifecycleNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = kc.AppsV1().Deployments(lifecycleNS).Delete(context.Background(), "never-joins", metav1.DeleteOptions{})
	}()
	var launched apisv1.NodeClaim
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, nc := range nodeClaims(ctx, t, env) {
			if nc.Labels[corev1.LabelInstanceTypeStable] == "r6g.medium" {
				launched = nc
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no r6g.medium NodeClaim was launched: %v", err)
	}
	begin := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, registrationTTL+60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).Get(ctx, launched.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("NodeClaim %s of an instance that never registered was not reaped: %v", launched.Name, err)
	}
	inst, err := env.Cloud.Get(ctx, launched.Status.ProviderID)
	if err == nil && inst.State == cloud.StateRunning {
		t.Errorf("instance %s still running after its NodeClaim was reaped", inst.ID)
	}
	t.Logf("launch %s (never registers) reaped %s after it was seen, registration TTL %s", launched.Name, time.Since(begin).Round(time.Second), registrationTTL)
}

// ec2NodeClassStatusSubnets returns the resolved subnets of the seed EC2NodeClass "default".
func ec2NodeClassStatusSubnets(ctx context.Context, t *testing.T, env *localdev.Env) []apisv1.Subnet {
	t.Helper()
	nc, err := ec2NodeClass(ctx, t, env, "default")
	if err != nil {
		t.Fatal(err)
	}
	return nc.Status.Subnets
}
