package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const planPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: %s}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c1}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c1}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
`

// Empty input (an empty file, or only kinds plan does not use) was planned as nothing, exit 0:
// now exit 2 naming the files.
func TestPlanRefusesEmptyInput(t *testing.T) {
	empty := writeFile(t, "empty.yaml", "")
	cm := writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	code, out, stderr := runCLI(t, "plan", "-f", empty, "-f", cm)
	if code != 2 || out != "" || !strings.Contains(stderr, empty+", "+cm) || !strings.Contains(stderr, "no Kubernetes object") ||
		!strings.Contains(stderr, "ConfigMap") {
		t.Errorf("exit %d stdout %q stderr %q: want 2 naming both files and the unused kind", code, out, stderr)
	}
}

// A NodePool whose nodeClassRef names a NodeClass not in the input is what Karpenter reports
// NodeClassReady=False for and provisions nothing from: the plan warns (stderr and JSON
// warnings) and the pods only it could take are unschedulable. With the NodeClass present the
// same input plans both pods.
func TestPlanWarnsOfDanglingNodeClassRef(t *testing.T) {
	ok := writeFile(t, "ok.yaml", strings.Replace(planPool, "%s", "default", 1))
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", ok)
	var plan PlanOutput
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil || len(plan.Unschedulable) != 0 || len(plan.Warnings) != 0 {
		t.Fatalf("with its NodeClass: exit %d stderr %q plan %+v", code, stderr, plan)
	}
	dangling := writeFile(t, "dangling.yaml", strings.Replace(planPool, "%s", "gone", 1))
	code, out, stderr = runCLI(t, "plan", "-o", "json", "-f", dangling)
	plan = PlanOutput{}
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	const want = "NodePool default: spec.template.spec.nodeClassRef names EC2NodeClass gone, which is not in the input"
	if !strings.Contains(stderr, want) || len(plan.Warnings) != 1 || !strings.HasPrefix(plan.Warnings[0], want) {
		t.Errorf("stderr %q warnings %q: want %q", stderr, plan.Warnings, want)
	}
	if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 2 {
		t.Errorf("plan %+v: want no NodeClaims and both pods unschedulable", plan)
	}

	// A manifest set with no NodeClass at all (a NodePool and its workloads) is planned with the
	// pool's default node settings and no warning: the classes were left out of the input, not
	// out of the cluster.
	noClasses := strings.Replace(strings.Replace(planPool, "%s", "default", 1), `---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c1}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c1}}]
`, "", 1)
	code, out, stderr = runCLI(t, "plan", "-o", "json", "-f", writeFile(t, "noclasses.yaml", noClasses))
	plan = PlanOutput{}
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil || strings.Contains(noClasses, "EC2NodeClass\n") {
		t.Fatalf("without classes: exit %d: %s", code, stderr)
	}
	if len(plan.Unschedulable) != 0 || len(plan.Warnings) != 0 || len(plan.NodeClaims) == 0 {
		t.Errorf("without classes: plan %+v: want both pods placed and no warning", plan)
	}
}

// Workloads whose ownerReferences form a cycle vanished from the plan silently; now they are
// planned and named.
func TestPlanWarnsOfOwnerCycles(t *testing.T) {
	in := strings.Replace(planPool, "%s", "default", 1) + `---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: loop
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: loop, controller: true}]
spec:
  replicas: 1
  selector: {matchLabels: {app: loop}}
  template:
    metadata: {labels: {app: loop}}
    spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "1"}}}]}
`
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", writeFile(t, "loop.yaml", in))
	var plan PlanOutput
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	pods := 0
	for _, nc := range plan.NodeClaims {
		pods += len(nc.Pods)
	}
	if pods != 3 || !strings.Contains(stderr, "ownerReferences form a cycle") || !strings.Contains(stderr, "ReplicaSet default/loop") {
		t.Errorf("%d pods planned, stderr %q: want 3 (web's 2 and loop's 1) and the cycle named", pods, stderr)
	}
}
