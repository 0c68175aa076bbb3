//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// explainJSON is the part of `dovetail explain -o json` this test reads (cmd/dovetail
// PodExplanation and NodeExplanationOutput; the e2e package does not import package main).
type explainJSON struct {
	Status   string `json:"status"`
	Refusals []struct {
		NodePool string `json:"nodePool"`
		Kind     string `json:"kind"`
		Message  string `json:"message"`
	} `json:"refusals"`
	ProvisioningRequest *struct {
		Request string `json:"request"`
		Class   string `json:"class"`
		Found   bool   `json:"found"`
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"provisioningRequest"`
	Consolidation struct {
		Blockers []struct {
			Kind   string `json:"kind"`
			Object struct {
				Kind, Namespace, Name string
			} `json:"object"`
			Message string `json:"message"`
		} `json:"blockers"`
	} `json:"consolidation"`
}

// TestExplainLiveCluster runs `dovetail explain` through --kubeconfig, as the least-privileged
// reader of cmd/dovetail/plan-rbac.yaml, on the real control plane with kwok playing the
// kubelets: the cluster of TestPlanLiveCluster (livestate_test.go) plus
//   - default/m6i-only, pending: it selects node.kubernetes.io/instance-type m6i.large, which
//     NodePool default's requirement (c5/m5 large and xlarge) refuses;
//   - ml/train-0, pending (3 CPUs on an m5.large, which no node has): it consumes the
//     best-effort-atomic-scale-up ProvisioningRequest ml/train, not answered yet, and is held
//     back by it; ml/early-0 consumes ml/later, which does not exist;
//   - node E (ip-10-0-1-14), whose pod shop/report-… is annotated karpenter.sh/do-not-disrupt;
//   - the agent's dovetail-commitments ConfigMap in dovetail-system (a Reserved Instance for one
//     m5.large in us-east-1), which `dovetail plan --kubeconfig` reads with the Role's get.
func TestExplainLiveCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root, bin, cp, kc, dc := startLive(ctx, t)
	st := &liveState{kc: kc, dc: dc}
	if err := st.build(ctx); err != nil {
		t.Fatalf("building the cluster state: %v", err)
	}
	// The Role of plan-rbac.yaml lives in dovetail-system: the namespace must exist first.
	for _, ns := range []string{"ml", "dovetail-system"} {
		if err := st.ensureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.ApplyFiles(ctx, filepath.Join(root, "cmd", "dovetail", "plan-rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := explainObjects(ctx, st); err != nil {
		t.Fatal(err)
	}
	reader := readerKubeconfig(t, cp, t.TempDir())
	at := st.at.UTC().Format(time.RFC3339)
	explain := func(args ...string) explainJSON {
		t.Helper()
		out := runPlan(t, bin, append(append([]string{"explain"}, args...), "--kubeconfig", reader, "--at", at, "-o", "json")...)
		var x explainJSON
		if err := json.Unmarshal([]byte(out), &x); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return x
	}

	x := explain("pod", "default/m6i-only")
	if x.Status != "Pending" || len(x.Refusals) != 1 || x.Refusals[0].NodePool != "default" || x.Refusals[0].Kind != "Requirement" ||
		!strings.Contains(x.Refusals[0].Message, "requirement node.kubernetes.io/instance-type In [c5.large c5.xlarge m5.large m5.xlarge] conflicts with the pod's node.kubernetes.io/instance-type In [m6i.large]") {
		t.Errorf("m6i-only: %+v, want NodePool default's instance-type requirement refusal", x)
	}
	x = explain("pod", "ml/train-0")
	if r := x.ProvisioningRequest; r == nil || r.Request != "ml/train" || !r.Found || r.State != "Pending" || r.Class != apisv1.ProvisioningClassBestEffortAtomicScaleUp ||
		r.Message != "waits for ProvisioningRequest ml/train (best-effort-atomic-scale-up.autoscaling.x-k8s.io) to be provisioned (not answered yet)" || len(x.Refusals) != 0 {
		t.Errorf("train-0: %+v, want held by ProvisioningRequest ml/train", x.ProvisioningRequest)
	}
	x = explain("pod", "ml/early-0")
	if r := x.ProvisioningRequest; r == nil || r.Request != "ml/later" || r.Found {
		t.Errorf("early-0: %+v, want waiting for ml/later, not found", x.ProvisioningRequest)
	}
	x = explain("node", liveNodeByKey("E").name)
	found := false
	for _, b := range x.Consolidation.Blockers {
		if b.Kind == "DoNotDisrupt" && b.Object.Kind == "Pod" && b.Object.Namespace == "shop" && strings.HasPrefix(b.Object.Name, "report-") &&
			strings.Contains(b.Message, "is annotated karpenter.sh/do-not-disrupt") {
			found = true
		}
	}
	if !found {
		t.Errorf("node E blockers %+v, want the do-not-disrupt pod shop/report-… named", x.Consolidation.Blockers)
	}

	// plan --kubeconfig reads the commitments ConfigMap (the Role's get) and holds the consumers.
	var plan struct {
		Commitments []struct {
			Name string `json:"name"`
		} `json:"commitments"`
		Held []struct{ Pod, Request string } `json:"held"`
	}
	out := runPlan(t, bin, "plan", "--kubeconfig", reader, "--at", at, "-o", "json")
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(plan.Commitments) != 1 || plan.Commitments[0].Name != "ri-m5" {
		t.Errorf("plan commitments %+v, want the ConfigMap's ri-m5", plan.Commitments)
	}
	// In the pods' list order: the API server lists a namespace's pods by name.
	if len(plan.Held) != 2 || plan.Held[0].Pod != "ml/early-0" || plan.Held[0].Request != "ml/later" ||
		plan.Held[1].Pod != "ml/train-0" || plan.Held[1].Request != "ml/train" {
		t.Errorf("plan held %+v, want ml/early-0 (ml/later) and ml/train-0 (ml/train)", plan.Held)
	}
}

// explainObjects creates the pods, the ProvisioningRequest with its PodTemplate and the
// commitments ConfigMap TestExplainLiveCluster explains.
func explainObjects(ctx context.Context, st *liveState) error {
	m6i := podSpec("100m", "64Mi")
	m6i.NodeSelector = map[string]string{corev1.LabelInstanceTypeStable: "m6i.large"}
	big := podSpec("3", "1Gi")
	big.NodeSelector = map[string]string{corev1.LabelInstanceTypeStable: "m5.large"}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m6i-only"}, Spec: m6i},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0", Annotations: map[string]string{
			apisv1.AnnotationConsumeProvisioningRequest: "train", apisv1.AnnotationProvisioningClass: apisv1.ProvisioningClassBestEffortAtomicScaleUp}}, Spec: big},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "early-0", Annotations: map[string]string{
			apisv1.AnnotationConsumeProvisioningRequest: "later"}}, Spec: big},
	}
	tpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "trainer"}, Template: corev1.PodTemplateSpec{Spec: big}}
	if _, err := st.kc.CoreV1().PodTemplates("ml").Create(ctx, tpl, metav1.CreateOptions{}); err != nil {
		return err
	}
	pr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
		"metadata": map[string]any{"namespace": "ml", "name": "train"},
		"spec": map[string]any{"provisioningClassName": apisv1.ProvisioningClassBestEffortAtomicScaleUp,
			"podSets": []any{map[string]any{"podTemplateRef": map[string]any{"name": "trainer"}, "count": int64(2)}}}}}
	if _, err := st.dc.Resource(kube.ProvisioningRequestGVR).Namespace("ml").Create(ctx, pr, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, p := range pods {
		if _, err := st.kc.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "dovetail-system", Name: apisv1.CommitmentsConfigMap},
		Data: map[string]string{apisv1.CommitmentsKey: "reservations:\n- {name: ri-m5, instanceType: m5.large, region: us-east-1, count: 1}\n"}}
	_, err := st.kc.CoreV1().ConfigMaps("dovetail-system").Create(ctx, cm, metav1.CreateOptions{})
	return err
}
