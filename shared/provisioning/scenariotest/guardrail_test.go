package scenariotest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/planner"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// gpuManifests is a misconfigured 500-replica Deployment asking one NVIDIA GPU per pod, against
// an on-demand NodePool of g4dn/g5 types with the given extra NodePool lines.
func gpuManifests(poolMeta, poolSpec string) string {
	return `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu` + poolMeta + `}
spec:` + poolSpec + `
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [g4dn, g5]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer}
spec:
  replicas: 500
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 4Gi}, limits: {nvidia.com/gpu: 1}}}]
`
}

func planGPU(t *testing.T, poolMeta, poolSpec string, edit func(*provisioning.Input)) *provisioning.Plan {
	t.Helper()
	set, err := manifests.LoadReader("guardrail.yaml", strings.NewReader(gpuManifests(poolMeta, poolSpec)))
	if err != nil {
		t.Fatal(err)
	}
	in, err := planner.Input(set, catalog.MustAWS(), cloud.NodeSettingsFor)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&in)
	}
	plan, err := provisioning.Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// launched sums the NVIDIA GPUs of the plan's NodeClaims (their first offering's type) and their
// dearest offerings' price, and counts the pods placed.
func launched(t *testing.T, plan *provisioning.Plan) (gpus int64, dearest float64, pods int) {
	t.Helper()
	for _, nc := range plan.NodeClaims {
		it := nc.Cheapest().InstanceType
		q := it.Capacity[corev1.ResourceName("nvidia.com/gpu")]
		gpus += q.Value()
		worst := 0.0
		for _, o := range nc.Offerings {
			worst = max(worst, o.PricePerHour)
		}
		dearest += worst
		pods += len(nc.Pods)
	}
	return gpus, dearest, pods
}

// TestGuardrailGPUCap: with spec.limits nvidia.com/gpu: 4 (a key Karpenter's NodePool schema
// accepts: limits is a ResourceList), the 500 replicas get exactly 4 GPUs' worth of nodes, 4 pods
// placed (one GPU each), and the other 496 are unschedulable naming the exhausted limit.
func TestGuardrailGPUCap(t *testing.T) {
	plan := planGPU(t, "", `
  limits: {nvidia.com/gpu: "4"}`, nil)
	gpus, _, pods := launched(t, plan)
	if gpus != 4 || pods != 4 {
		t.Fatalf("launched %d GPUs for %d pods, want 4 and 4", gpus, pods)
	}
	if len(plan.Unschedulable) != 496 {
		t.Fatalf("%d unschedulable, want 496", len(plan.Unschedulable))
	}
	for _, u := range plan.Unschedulable {
		if !strings.Contains(u.Reason, `nodepool "gpu": limits exceeded`) || !strings.Contains(u.Reason, "nvidia.com/gpu=0") {
			t.Fatalf("pod %s unschedulable for %q, want the GPU limit named", u.Pod.Name, u.Reason)
		}
	}
}

// TestGuardrailPriceCap: with dovetail.dev/max-price-per-hour "2.00" the cheapest GPU node,
// g4dn.xlarge on demand (0.526 USD/h, us-east-1), fits 3 times (1.578; a 4th would make 2.104):
// 3 pods placed. An in-flight g4dn.xlarge NodeClaim of the pool counts: then only 2 more
// (0.526 + 2 × 0.526 = 1.578; a third would make 2.104).
func TestGuardrailPriceCap(t *testing.T) {
	const meta = `, annotations: {dovetail.dev/max-price-per-hour: "2.00"}`
	plan := planGPU(t, meta, "", nil)
	gpus, dearest, pods := launched(t, plan)
	if len(plan.NodeClaims) != 3 || pods != 3 || gpus != 3 || dearest > 2.00 {
		t.Fatalf("%d NodeClaims, %d pods, %d GPUs, %.3f USD/h at the dearest offerings; want 3, 3, 3, <= 2.00",
			len(plan.NodeClaims), pods, gpus, dearest)
	}
	if len(plan.Unschedulable) != 497 || !strings.Contains(plan.Unschedulable[0].Reason, "dovetail.dev/max-price-per-hour") {
		t.Fatalf("%d unschedulable, first %+v; want 497 naming the annotation", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
	inflight := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu-inflight", Labels: map[string]string{
		apisv1.LabelNodePool: "gpu", corev1.LabelInstanceTypeStable: "g4dn.xlarge", corev1.LabelTopologyZone: "us-east-1a",
		apisv1.LabelCapacityType: apisv1.CapacityTypeOnDemand}},
		Status: apisv1.NodeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"), "nvidia.com/gpu": resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("29")}}}
	plan = planGPU(t, meta, "", func(in *provisioning.Input) { in.NodeClaims = append(in.NodeClaims, inflight) })
	if _, _, pods := launched(t, plan); len(plan.NodeClaims) != 2 {
		t.Fatalf("with an in-flight g4dn.xlarge: %d new NodeClaims (%d pods), want 2", len(plan.NodeClaims), pods)
	}
}

// TestGuardrailBadAnnotation: an unparsable cap launches nothing and says why (manifests with
// one are refused at load, naming the field; a snapshot's NodePool reaches the solver as is).
func TestGuardrailBadAnnotation(t *testing.T) {
	plan := planGPU(t, "", "", func(in *provisioning.Input) {
		in.NodePools[0].Annotations = map[string]string{apisv1.AnnotationMaxPricePerHour: "lots"}
	})
	if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 500 ||
		!strings.Contains(plan.Unschedulable[0].Reason, `metadata.annotations[dovetail.dev/max-price-per-hour]: "lots"`) {
		t.Fatalf("%d launches, %d unschedulable, first reason %q", len(plan.NodeClaims), len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
}
