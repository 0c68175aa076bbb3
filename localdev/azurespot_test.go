package localdev

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Two pods select AKS's scale-set priority (kubernetes.azure.com/scalesetpriority), the label AKS
// users put on spot workloads: in `dev --cloud azure` on the AKS seed pool (spot and on demand),
// the spot one is planned onto a spot VM and runs on a Node that carries scalesetpriority=spot
// (the kubelet registered with it from the AKS bootstrap contract) and capacity type spot; the
// regular one onto a regular VM whose Node carries scalesetpriority=regular (the NodeClaim's
// single-valued requirement, given to the kubelet) and capacity type on-demand.
func TestScaleSetPrioritySelectorsRunOnMatchingNodes(t *testing.T) {
	pods := filepath.Join(t.TempDir(), "pods.yaml")
	doc := ""
	for name, prio := range map[string]string{"spot-worker": "spot", "regular-worker": "regular"} {
		doc += `---
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: default}
spec:
  nodeSelector: {kubernetes.azure.com/scalesetpriority: ` + prio + `}
  containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
	}
	if err := os.WriteFile(pods, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	env, out := startEnv(t, Options{CloudProvider: CloudAzure, Manifests: []string{"azureseed", pods}})
	// Bounded, so a wait that never ends fails naming what it waited for instead of hanging the package.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for name, want := range map[string][2]string{"spot-worker": {"spot", "spot"}, "regular-worker": {"regular", "on-demand"}} {
		pod, err := env.Cluster.Kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName == "" {
			t.Fatalf("pod %s: %v, node %q\n%s", name, err, pod.Spec.NodeName, out)
		}
		node, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, ct := node.Labels[apisv1.AKSLabelScaleSetPriority], node.Labels[apisv1.LabelCapacityType]; got != want[0] || ct != want[1] {
			t.Errorf("pod %s on node %s: scalesetpriority %q, capacity type %q; want %q, %q", name, node.Name, got, ct, want[0], want[1])
		}
		vm, ok := env.AzureAPI.VM(node.Name)
		if !ok || string(*vm.Properties.Priority) != map[string]string{"spot": "Spot", "regular": "Regular"}[want[0]] {
			t.Errorf("pod %s: VM %s found %v with priority %v", name, node.Name, ok, vm.Properties)
		}
	}
}
