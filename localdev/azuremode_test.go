package localdev

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// The AKS seed in provision mode bootstrappingclient: every launch asks the fake AKS
// NodeBootstrapping API (one request per VM created), the VM boots AgentBaker's cloud-config,
// and its CustomScript extension cse-agent-karpenter (Microsoft.Azure.Extensions/CustomScript
// 2.0, the command in protected settings, which ARM never returns) runs the provisioning
// command the Node registers from: every pod is bound, and every Node carries the contract's
// AKS labels (spot ones scalesetpriority=spot).
func TestSeedScenarioInBootstrappingClientMode(t *testing.T) {
	env, out := startEnv(t, Options{CloudProvider: CloudAzure, AKSProvisionMode: azure.ProvisionModeBootstrappingClient})
	// Bounded, so a wait that never ends fails naming what it waited for instead of hanging the package.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bound, total, err := env.count(ctx)
	if err != nil || bound != total || total != 40 {
		t.Fatalf("bound %d of %d workload pods (%v), want 40 of 40\n%s", bound, total, err, out)
	}
	if err := env.WaitNodeClaimsReady(ctx); err != nil {
		t.Fatal(err)
	}
	claims, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) == 0 {
		t.Fatalf("NodeClaims: %v (%d)", err, len(claims.Items))
	}
	if env.AKSAPI == nil || env.AKSAPI.Requests < len(claims.Items) {
		t.Fatalf("NodeBootstrapping requests: %v for %d NodeClaims", env.AKSAPI, len(claims.Items))
	}
	for i := range claims.Items {
		var nc apisv1.NodeClaim
		if err := kube.FromUnstructured(&claims.Items[i], &nc); err != nil {
			t.Fatal(err)
		}
		node, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ext, ok := env.AzureAPI.Extension(node.Name, "cse-agent-karpenter")
		if !ok || *ext.Properties.Publisher != "Microsoft.Azure.Extensions" || *ext.Properties.Type != "CustomScript" ||
			*ext.Properties.TypeHandlerVersion != "2.0" || ext.Properties.ProtectedSettings != nil || *ext.Properties.ProvisioningState != "Succeeded" {
			t.Errorf("node %s: extension %v %+v", node.Name, ok, ext.Properties)
		}
		if data, _ := env.AzureAPI.CustomData(node.Name); data != "I2Nsb3VkLWNvbmZpZwp3cml0ZV9maWxlczogW10K" { // base64("#cloud-config\nwrite_files: []\n")
			t.Errorf("node %s: custom data %q, want the fake AKS's cloud-config", node.Name, data)
		}
		want := map[string]string{"kubernetes.azure.com/mode": "user", "kubernetes.azure.com/role": "agent", "agentpool": "default",
			apisv1.AKSLabelCluster: localNodeResourceGroup, "karpenter.sh/nodepool": "default"}
		if nc.Labels[apisv1.LabelCapacityType] == apisv1.CapacityTypeSpot {
			want[apisv1.AKSLabelScaleSetPriority] = "spot"
		}
		for k, v := range want {
			if node.Labels[k] != v {
				t.Errorf("node %s: %s = %q, want %q", node.Name, k, node.Labels[k], v)
			}
		}
	}
}
