package localdev

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const windowsPods = `apiVersion: apps/v1
kind: Deployment
metadata: {name: iis, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: iis}}
  template:
    metadata: {labels: {app: iis}}
    spec:
      nodeSelector: {kubernetes.io/os: windows}
      containers:
        - name: iis
          image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022
          resources: {requests: {cpu: "1", memory: 2Gi}}
`

// Karpenter's Windows v1 examples launch Windows nodes in dovetail dev --cloud aws: the
// windows20XX@latest alias resolves through the Windows SSM parameter, the launch template
// carries the PowerShell user data, and the fake kubelet registers each node from it with the
// labels a Windows kubelet sets: kubernetes.io/os windows and node.kubernetes.io/windows-build
// the family's build (Karpenter's Windows2019Build / 2022 / 2025).
func TestKarpenterWindowsExamplesLaunchWindowsNodes(t *testing.T) {
	pods := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(pods, []byte(windowsPods), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, build := range map[string]string{"windows-2019.yaml": "10.0.17763", "windows-2022.yaml": "10.0.20348", "windows-2025.yaml": "10.0.26100"} {
		t.Run(file, func(t *testing.T) {
			// The example as a user applies it: ${CLUSTER_NAME} replaced with the cluster's name.
			raw, err := os.ReadFile(filepath.Join("..", "testdata", "karpenter-examples", "v1.14.0", file))
			if err != nil {
				t.Fatal(err)
			}
			example := filepath.Join(t.TempDir(), file)
			if err := os.WriteFile(example, []byte(strings.ReplaceAll(string(raw), "${CLUSTER_NAME}", "dovetail-dev")), 0o600); err != nil {
				t.Fatal(err)
			}
			env, out := startEnv(t, Options{CloudProvider: CloudAWS, Manifests: []string{example, pods}})
			nodes, err := env.Cluster.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) == 0 {
				t.Fatalf("no node registered\n%s", out)
			}
			for _, n := range nodes.Items {
				if n.Labels[corev1.LabelOSStable] != "windows" || n.Labels[corev1.LabelWindowsBuild] != build || n.Labels[corev1.LabelArchStable] != "amd64" {
					t.Errorf("node %s labels %v: want kubernetes.io/os windows, windows-build %s, amd64", n.Name, n.Labels, build)
				}
				if n.Status.NodeInfo.OperatingSystem != "windows" {
					t.Errorf("node %s nodeInfo.operatingSystem %q", n.Name, n.Status.NodeInfo.OperatingSystem)
				}
			}
			params := env.EC2API.RequestsOf("AmazonSSM.GetParameter")
			if len(params) == 0 {
				t.Fatal("the Windows alias was not resolved through SSM")
			}
		})
	}
}
