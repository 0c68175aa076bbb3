//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/preview"
	"github.com/dovetail-dev/dovetail/shared/preview/previewtest"
)

// TestPlanLiveCluster builds a cluster state in a real control plane (livestate_test.go: Karpenter
// nodes of several types with their NodeClaims, running pods of Deployments, two of them behind
// PodDisruptionBudgets, a DaemonSet, a NodeClaim on a superseded AMI, an expired NodeClaim, a
// do-not-disrupt pod, an empty node and a spot node of an EKS managed node group), dumps it
// with kubectl's list calls through client-go (kube.ListState: a v1 List, each item with its
// apiVersion and kind, as `kubectl get -o yaml` prints it), and checks `dovetail plan
// --disruption` on the dump against the hand calculation in livestate_test.go; then the same state
// read through --kubeconfig, as a user holding only cmd/dovetail/plan-rbac.yaml's ClusterRole,
// must print the identical output, and that user may list and nothing else.
//
// DOVETAIL_LIVEPLAN_DUMP=path also writes the dump with managed fields there (how
// cmd/dovetail/testdata/liveplan/cluster.yaml was made).
func TestPlanLiveCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	_, bin, cp, kc, dc := startLive(ctx, t, filepath.Join("cmd", "dovetail", "plan-rbac.yaml"))
	begin := time.Now()
	st := &liveState{kc: kc, dc: dc}
	if err := st.build(ctx); err != nil {
		t.Fatalf("building the cluster state: %v", err)
	}
	t.Logf("timing: cluster state built and settled in %s", time.Since(begin).Round(100*time.Millisecond))

	list, notServed, err := kube.ListState(ctx, dc, kube.DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(notServed) != 0 {
		t.Errorf("resources not served: %v (the Karpenter CRDs are installed)", notServed)
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "cluster.yaml")
	writeDump(t, dump, list)
	if keep := os.Getenv("DOVETAIL_LIVEPLAN_DUMP"); keep != "" {
		full, _, err := kube.ListState(ctx, dc, kube.DumpOptions{ShowManagedFields: true})
		if err != nil {
			t.Fatal(err)
		}
		writeDump(t, keep, full)
	}
	at := st.at.UTC().Format(time.RFC3339)

	jsonOut := runPlan(t, bin, "plan", "--disruption", "-f", dump, "--at", at, "-o", "json")
	var out preview.Result
	if err := json.Unmarshal([]byte(jsonOut), &out); err != nil {
		t.Fatalf("%v\n%s", err, jsonOut)
	}
	checkHandCalculation(t, out)

	// The same state through --kubeconfig, as the least-privileged reader: identical output.
	reader := readerKubeconfig(t, cp, dir)
	if got := runPlan(t, bin, "plan", "--disruption", "--kubeconfig", reader, "--at", at, "-o", "json"); got != jsonOut {
		t.Errorf("--kubeconfig output differs from the dump's:\n%s\nwant\n%s", got, jsonOut)
	}
	table := runPlan(t, bin, "plan", "--disruption", "-f", dump, "--at", at)
	if got := runPlan(t, bin, "plan", "--disruption", "--kubeconfig", reader, "--at", at); got != table {
		t.Errorf("--kubeconfig table differs from the dump's:\n%s\nwant\n%s", got, table)
	}
	t.Logf("dovetail plan --disruption:\n%s", table)
	checkReaderIsListOnly(ctx, t, reader)
}

// buildCLI builds the dovetail binary the test runs, as a user would run it.
func buildCLI(ctx context.Context, t *testing.T, root string) string {
	bin := filepath.Join(t.TempDir(), "dovetail")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/dovetail")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/dovetail: %v\n%s", err, out)
	}
	return bin
}

func runPlan(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dovetail %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func writeDump(t *testing.T, path string, list *unstructured.UnstructuredList) {
	t.Helper()
	var b bytes.Buffer
	if err := kube.WriteList(&b, list); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readerKubeconfig writes a kubeconfig that acts as user plan-reader in group
// dovetail-plan-readers (the admin certificate impersonating them), which plan-rbac.yaml binds.
func readerKubeconfig(t *testing.T, cp *realcluster.ControlPlane, dir string) string {
	admin, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range admin.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = "plan-reader", []string{"dovetail-plan-readers"}
	}
	path := filepath.Join(dir, "reader.kubeconfig")
	if err := clientcmd.WriteToFile(*admin, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkReaderIsListOnly: the ClusterRole grants list and nothing else.
func checkReaderIsListOnly(ctx context.Context, t *testing.T, kubeconfig string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("reader list pods: %v, want allowed", err)
	}
	if _, err := kc.CoreV1().Nodes().Get(ctx, liveNodes[0].name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reader get node: %v, want 403 Forbidden (list only)", err)
	}
	if _, err := kc.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reader watch pods: %v, want 403 Forbidden (list only)", err)
	}
	if _, err := kc.CoreV1().Secrets("").List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
		t.Errorf("reader list secrets: %v, want 403 Forbidden", err)
	}
	if _, err := kc.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reader create configmap: %v, want 403 Forbidden", err)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// checkHandCalculation compares the preview with the hand calculation of livestate_test.go.
func checkHandCalculation(t *testing.T, out preview.Result) {
	for _, d := range previewtest.CheckLive(&out) {
		t.Error(d)
	}
}

// startLive starts a control plane for a test of the CLI against a live cluster (stopped when
// the test ends), builds the dovetail binary, applies the CRDs and the files given relative to
// the repository root, and returns the root, the binary, the control plane and its clients.
func startLive(ctx context.Context, t *testing.T, files ...string) (string, string, *realcluster.ControlPlane, kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	if _, _, _, err := (&realcluster.Options{}).Binaries(); err != nil {
		t.Fatalf("the e2e suite needs the control-plane binaries: %v", err)
	}
	root, err := realcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := buildCLI(ctx, t, root)
	cp, err := realcluster.Start(ctx, realcluster.Options{Logf: t.Logf, Dir: os.Getenv("DOVETAIL_E2E_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	paths := []string{filepath.Join(root, "infra", "crds")}
	for _, f := range files {
		paths = append(paths, filepath.Join(root, f))
	}
	if err := cp.ApplyFiles(ctx, paths...); err != nil {
		t.Fatal(err)
	}
	kc, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return root, bin, cp, kc, dc
}
