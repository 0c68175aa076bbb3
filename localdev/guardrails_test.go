package localdev

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/guardrails"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

const anomalyManifests = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: burst
  annotations:
    dovetail.dev/anomaly-hold: "{multiple: 3, window: 1h}"
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms: [{alias: bottlerocket@latest}]
  role: KarpenterNodeRole-dovetail-dev
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: dovetail-dev}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: dovetail-dev}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers:
        - name: c
          image: busybox:1.36
          resources: {requests: {cpu: 1500m, memory: 1Gi}}
`

// The anomaly hold through every real function, the agent and the in-memory cluster: the
// NodePool "burst" has no NodeClaim (trailing average 0 USD/h), so the plan for the
// Deployment's two pods (two m5.large, 2 × 0.096 USD/h) is above 3 × 0: it waits with
// ScaleUpHeld True and nothing launched. Annotating the NodePool with the hold's ID releases it:
// ScaleUpHeld turns False (Approved) and the nodes launch.
func TestAnomalyHoldReleasesOnApprovalAnnotation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "burst.yaml")
	if err := os.WriteFile(file, []byte(anomalyManifests), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	out := &syncWriter{w: &buf}
	text := func() string { out.mu.Lock(); defer out.mu.Unlock(); return buf.String() }
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := Start(ctx, Options{Manifests: []string{file}, Out: out, BootDelay: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()

	held := func(status metav1.ConditionStatus) *metav1.Condition {
		var cond *metav1.Condition
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := env.Cluster.Dynamic.Resource(kube.NodePoolGVR).Get(ctx, "burst", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			np := &apisv1.NodePool{}
			if kube.FromUnstructured(u, np) != nil {
				return false, nil
			}
			for i := range np.Status.Conditions {
				if c := np.Status.Conditions[i]; c.Type == guardrails.ConditionScaleUpHeld && c.Status == status {
					cond = &c
				}
			}
			return cond != nil, nil
		})
		if err != nil {
			t.Fatalf("no ScaleUpHeld=%s: %v\n%s", status, err, text())
		}
		return cond
	}
	cond := held(metav1.ConditionTrue)
	if cond.Reason != guardrails.ReasonSpendAnomaly {
		t.Fatalf("ScaleUpHeld %+v", cond)
	}
	if n := len(env.Cloud.Records()); n != 0 {
		t.Fatalf("%d instances launched while held", n)
	}
	id := guardrails.HoldID(cond.LastTransitionTime.Time)
	patch := []byte(`{"metadata":{"annotations":{"` + guardrails.AnnotationApproveScaleUp + `":"` + id + `"}}}`)
	if _, err := env.Cluster.Dynamic.Resource(kube.NodePoolGVR).Patch(ctx, "burst", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if cond := held(metav1.ConditionFalse); cond.Reason != guardrails.ReasonApproved {
		t.Fatalf("ScaleUpHeld after approval %+v", cond)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return len(env.Cloud.Records()) == 2, nil
	})
	if err != nil {
		t.Fatalf("%d instances after approval, want 2: %v\n%s", len(env.Cloud.Records()), err, text())
	}
}
