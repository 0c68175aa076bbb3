package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/preview"
	"github.com/dovetail-dev/dovetail/shared/preview/previewtest"
)

// testdata/liveplan/cluster.yaml is the e2e suite's cluster (e2e/livestate_test.go) dumped from the
// real API server by kube.ListState with managed fields (`kubectl get --show-managed-fields -o
// yaml` of nodes, pods, PDBs, DaemonSets, NodePools, EC2NodeClasses and NodeClaims): Karpenter
// v1 objects with status, managedFields, finalizers, owner references, resourceVersion, uid and
// creationTimestamp, read without edits. liveAt is its NodeClaim D's creation + 2h.
const (
	liveDump = "testdata/liveplan/cluster.yaml"
	liveAt   = "2026-12-02T07:39:58Z"
)

func runCLIWithStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runWith(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// The disruption preview of the dump is the hand calculation of shared/preview/previewtest.
func TestPlanDisruptionOnClusterDump(t *testing.T) {
	code, out, stderr := runCLI(t, "plan", "--disruption", "-f", liveDump, "--at", liveAt, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr %q, want nothing: every kind of the dump is read", stderr)
	}
	var got DisruptionOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, d := range previewtest.CheckLive(got.Result) {
		t.Error(d)
	}
	if got.Catalog.Region != "us-east-1" {
		t.Errorf("catalog region %q, want the nodes' us-east-1", got.Catalog.Region)
	}

	// The same dump piped in (kubectl get ... -o yaml | dovetail plan -f -) plans the same.
	raw, err := os.ReadFile(liveDump)
	if err != nil {
		t.Fatal(err)
	}
	code, piped, stderr := runCLIWithStdin(t, string(raw), "plan", "--disruption", "-f", "-", "--at", liveAt, "-o", "json")
	if code != 0 || piped != out {
		t.Errorf("-f - gave exit %d, %s; want the file's output", code, stderr)
	}

	code, table, stderr := runCLI(t, "plan", "--disruption", "-f", liveDump, "--at", liveAt)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"Round 1 at 2026-12-02T07:39:58Z",
		"drift delete Expired ip-10-0-1-13.ec2.internal (c5.large on-demand 0.0850)",
		"drifted field: NodeClaim status.imageID",
		"blocked ip-10-0-1-15.ec2.internal (consolidate, PodDisruptionBudget): PodDisruptionBudget shop/db allows 0 disruption(s)",
		"Before: 0.8707 (est.) USD/h (8 nodes); after: 0.4017 (est.) USD/h (4 nodes); saves 0.4690 USD/h; lower bound 0.3797 USD/h",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// plan without --disruption adds the saving against today to the plan of pending pods (none).
func TestPlanClusterSaving(t *testing.T) {
	code, out, stderr := runCLI(t, "plan", "-f", liveDump, "--at", liveAt, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got PlanOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Cluster
	if c == nil || len(got.NodeClaims) != 0 {
		t.Fatalf("cluster %+v, nodeClaims %d; want the saving and no launch", c, len(got.NodeClaims))
	}
	if c.TodayPerHour != previewtest.LiveToday || c.ConvergedPerHour != previewtest.LiveConverged || !c.TodayEstimated ||
		c.LowerBoundPerHour != previewtest.LiveLowerBound || c.Rounds != 5 {
		t.Errorf("cluster %+v", c)
	}
	// Today by owner: the NodePool's 7 on-demand nodes (0.853) and the node group's spot node.
	if len(c.Today) != 2 || c.Today[0].Owner != "default" || c.Today[0].Nodes != 7 || c.Today[0].PricePerHour != 0.853 ||
		c.Today[1].Owner != "system" || c.Today[1].PricePerHour != 0.017722 || !c.Today[1].Estimated {
		t.Errorf("today by owner: %+v", c.Today)
	}
}

// Invalid input in a dump exits 2, naming the file, the document and item, and the field.
func TestPlanClusterDumpBadInput(t *testing.T) {
	raw, err := os.ReadFile(liveDump)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The first node's allocatable CPU is "3920m" (the first such line of the file).
	badQty := write("qty.yaml", strings.Replace(string(raw), "cpu: 3920m", "cpu: lots", 1))
	code, _, stderr := runCLI(t, "plan", "--disruption", "-f", badQty, "--at", liveAt)
	if code != exitInvalidInput || !strings.Contains(stderr, "qty.yaml doc 0 items[0]: Node ip-10-0-1-10.ec2.internal: status.allocatable.cpu: \"lots\" is not a quantity") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	badField := write("field.yaml", strings.Replace(string(raw), "    expireAfter: 1h\n", "    expireAfter: 1h\n    expireAfterr: 1h\n", 1))
	code, _, stderr = runCLI(t, "plan", "-f", badField, "--at", liveAt)
	if code != exitInvalidInput || !strings.Contains(stderr, "field.yaml doc 0 items[36]: NodeClaim default-hq5vt") || !strings.Contains(stderr, "spec.expireAfterr") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "plan", "--disruption", "-f", liveDump, "--at", "yesterday")
	if code != exitInvalidInput || !strings.Contains(stderr, "--at: \"yesterday\" is not an RFC 3339 time") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "plan", "--disruption")
	if code != exitInvalidInput || !strings.Contains(stderr, "or --kubeconfig") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "plan", "--kubeconfig", "/nonexistent", "--commitments-namespace", "Dovetail_System")
	if code != exitInvalidInput || !strings.Contains(stderr, `--commitments-namespace "Dovetail_System": a lowercase RFC 1123 label`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// Kinds Dovetail does not use are counted in one line, whatever their number.
func TestPlanClusterDumpSkipsUnusedKindsInOneLine(t *testing.T) {
	raw, err := os.ReadFile(liveDump)
	if err != nil {
		t.Fatal(err)
	}
	extra := "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: shop}\n" +
		"- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b, namespace: shop}\n" +
		"- apiVersion: v1\n  kind: Event\n  metadata: {name: e, namespace: shop}\n"
	dump := strings.Replace(string(raw), "items:\n", "items:\n"+extra, 1)
	code, _, stderr := runCLIWithStdin(t, dump, "plan", "-f", "-", "--at", liveAt)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "warning: skipped 3 objects of kinds Dovetail does not use: ConfigMap 2, Event 1\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

// plan-rbac.yaml grants list, and only list, on exactly the resources --kubeconfig lists, and
// get on the one commitments ConfigMap of the agent's default namespace, which --kubeconfig gets.
func TestPlanRBACGrantsListOnStateResources(t *testing.T) {
	raw, err := os.ReadFile("plan-rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	granted := map[string]bool{}
	var namespaced []string
	docs := strings.Split(string(raw), "\n---\n")
	for _, doc := range docs {
		var kind struct{ Kind string }
		if err := sigsyaml.Unmarshal([]byte(doc), &kind); err != nil {
			t.Fatal(err)
		}
		switch kind.Kind {
		case "ClusterRole":
			var role rbacv1.ClusterRole
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				t.Fatal(err)
			}
			for _, r := range role.Rules {
				if strings.Join(r.Verbs, ",") != "list" || len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
					t.Errorf("rule %+v: want the verb list only", r)
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						granted[g+"/"+res] = true
					}
				}
			}
		case "Role":
			var role rbacv1.Role
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				t.Fatal(err)
			}
			for _, r := range role.Rules {
				namespaced = append(namespaced, fmt.Sprintf("%s %v %v/%v %v", role.Namespace, r.Verbs, r.APIGroups, r.Resources, r.ResourceNames))
			}
		case "ClusterRoleBinding", "RoleBinding":
			var binding rbacv1.RoleBinding
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &binding); err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"ClusterRoleBinding": "ClusterRole/dovetail-plan-reader", "RoleBinding": "Role/dovetail-plan-commitments-reader"}[kind.Kind]; binding.RoleRef.Kind+"/"+binding.RoleRef.Name != want {
				t.Errorf("%s refers to %+v, want %s", kind.Kind, binding.RoleRef, want)
			}
		default:
			t.Errorf("plan-rbac.yaml: unexpected kind %q", kind.Kind)
		}
	}
	want := map[string]bool{}
	for _, r := range kube.StateResources {
		want[r.GVR.Group+"/"+r.GVR.Resource] = true
	}
	if fmt.Sprint(granted) != fmt.Sprint(want) {
		t.Errorf("granted %v\nwant    %v", granted, want)
	}
	if w := fmt.Sprintf("%s [get] []/[configmaps] [%s]", DefaultCommitmentsNamespace, apisv1.CommitmentsConfigMap); len(namespaced) != 1 || namespaced[0] != w {
		t.Errorf("namespaced rules %q, want only %q", namespaced, w)
	}
}

// An AKS cluster scaled by the cluster autoscaler (VMSS agent pools, no NodePool): the cloud
// comes from the nodes' azure:// provider IDs, the catalog from their region (eastus); the
// system pool stays, the user pool and the empty Spot pool node are drained onto node
// auto-provisioning's default NodePool (SKU family D, on-demand).
//
// Hand calculation: today 2 system + 3 user Standard_D4s_v3 at eastus's list price 0.192, and a
// Standard_D2s_v3 Spot node (its price the spot model's estimate). The user pods (3 × 500m,
// 512Mi) do not tolerate the system pool's CriticalAddonsOnly taint: they get one new node, the
// cheapest family-D on-demand size that holds them (found here by scanning the catalog).
// Converged: 2 × 0.192 + that size.
func TestPlanClusterAutoscalerAKS(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	node := func(name, pool, mode, size, prio string, taint bool) {
		fmt.Fprintf(&b, `- apiVersion: v1
  kind: Node
  metadata:
    name: %[1]s
    labels: {kubernetes.azure.com/agentpool: %[2]s, agentpool: %[2]s, kubernetes.azure.com/mode: %[3]s,
      kubernetes.azure.com/scalesetpriority: %[5]s, node.kubernetes.io/instance-type: %[4]s, kubernetes.io/arch: amd64,
      kubernetes.io/os: linux, topology.kubernetes.io/region: eastus, topology.kubernetes.io/zone: eastus-1, kubernetes.io/hostname: %[1]s}
  spec:
    providerID: azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-%[2]s-vmss/virtualMachines/%[1]s
`, name, pool, mode, size, prio)
		if taint {
			b.WriteString("    taints: [{key: CriticalAddonsOnly, value: \"true\", effect: NoSchedule}]\n")
		}
		b.WriteString("  status:\n    allocatable: {cpu: 3860m, memory: 12Gi, pods: \"110\"}\n    conditions: [{type: Ready, status: \"True\"}]\n")
	}
	node("aks-system-0", "system", "system", "Standard_D4s_v3", "regular", true)
	node("aks-system-1", "system", "system", "Standard_D4s_v3", "regular", true)
	for i := 0; i < 3; i++ {
		node(fmt.Sprintf("aks-user-%d", i), "user", "user", "Standard_D4s_v3", "regular", false)
		fmt.Fprintf(&b, `- apiVersion: v1
  kind: Pod
  metadata:
    name: web-5d9-%[1]d
    namespace: shop
    ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d9, uid: u1, controller: true}]
  spec:
    nodeName: aks-user-%[1]d
    containers: [{name: c, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
  status: {phase: Running, conditions: [{type: Ready, status: "True"}]}
`, i)
	}
	node("aks-spot-0", "spot", "user", "Standard_D2s_v3", "spot", false)

	code, out, stderr := runCLIWithStdin(t, b.String(), "plan", "--disruption", "-f", "-", "--at", liveAt, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got DisruptionOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	spot, _, _ := preview.OfferingPrice(cat, events.OfferingKey{InstanceType: "Standard_D2s_v3", Zone: "eastus-1", CapacityType: "spot"})
	best, bestSize := math.Inf(1), ""
	for _, it := range cat.Types() {
		a := it.Allocatable()
		if it.Labels[apisv1.LabelSKUFamily] != "D" || it.Labels[corev1.LabelArchStable] != "amd64" ||
			a.Cpu().MilliValue() < 1500 || a.Memory().Value() < 3*512<<20 || a.Pods().Value() < 3 {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == "on-demand" && o.Available && o.PricePerHour < best {
				best, bestSize = o.PricePerHour, it.Name
			}
		}
	}
	r := got.Result
	if got.Catalog.Region != "eastus" || r.AssumedPool != "default" || !strings.Contains(r.AssumedWhat, "SKU family D") {
		t.Errorf("catalog %+v, assumed %q %q", got.Catalog, r.AssumedPool, r.AssumedWhat)
	}
	if want := 5*0.192 + spot; math.Abs(r.Today.PricePerHour-want) > 1e-6 || !r.Today.Estimated {
		t.Errorf("today %.6f (estimated %v), want %.6f estimated", r.Today.PricePerHour, r.Today.Estimated, want)
	}
	d := r.Rounds[0].Decisions[0]
	if d.Function != "migration" || len(d.Nodes) != 4 || len(d.Launched) != 1 || d.Launched[0].InstanceType != bestSize {
		t.Fatalf("migration %+v; want the 3 user nodes and the spot node drained onto one %s", d, bestSize)
	}
	if want := 2*0.192 + best; math.Abs(r.Converged.PricePerHour-want) > 1e-6 {
		t.Errorf("converged %.6f, want %.6f", r.Converged.PricePerHour, want)
	}
	kept := 0
	for _, bl := range r.Rounds[0].Blocked {
		if bl.Kind == preview.BlockerSystemPool {
			kept++
		}
	}
	if kept != 2 {
		t.Errorf("system pool nodes kept: %d, want 2: %+v", kept, r.Rounds[0].Blocked)
	}
}

// Issue 25, 7a: a pending pod that fits an in-flight NodeClaim is placed by `plan` and must not
// be reported unschedulable (with an empty reason) by `plan --disruption`: Karpenter's scheduler
// counts in-flight NodeClaims as capacity and nominates pods to them (sigs.k8s.io/karpenter
// pkg/controllers/provisioning/scheduling: in-flight state nodes are existing nodes; the
// Nominated event). The preview names the NodeClaim the pod waits for.
func TestPlanDisruptionCountsInFlightNodeClaims(t *testing.T) {
	const file = "testdata/inflight/pending-fits-inflight.yaml"
	code, out, stderr := runCLI(t, "plan", "-f", file, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) != 0 || len(plan.NodeClaims) != 0 {
		t.Fatalf("plan: unschedulable %v, new NodeClaims %d; want the pod on the in-flight NodeClaim", plan.Unschedulable, len(plan.NodeClaims))
	}
	code, out, stderr = runCLI(t, "plan", "--disruption", "-f", file, "--at", "2026-12-06T07:00:00Z", "-o", "json")
	if code != 0 {
		t.Fatalf("plan --disruption: exit %d: %s", code, stderr)
	}
	var got DisruptionOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Unschedulable) != 0 {
		t.Errorf("plan --disruption: unschedulable %v; the pod fits the in-flight NodeClaim", got.Unschedulable)
	}
	want := []preview.PodMove{{Pod: "default/web", To: "default-inflight"}}
	if len(got.Nominated) != 1 || got.Nominated[0] != want[0] {
		t.Errorf("plan --disruption: nominated %v, want %v", got.Nominated, want)
	}
}

// Two nodes expiring in one round are handed to the termination path together, and their pods
// are placed in one run over the nodes not being deleted, as Karpenter's provisioner places the
// pods of every node being deleted (sigs.k8s.io/karpenter
// pkg/controllers/provisioning/provisioner.go, Schedule: nodes.Deleting() pods with the
// pending ones, nodes.Active() as capacity).
//
// Hand calculation: the dump with E's NodeClaim also at expireAfter 1h (created with D's, so
// both expired at --at). D's cache (800m, zone us-east-1b only) must leave D. The 1b nodes are
// D and E (both being deleted) and F (630m free): none takes it, so one NodeClaim is launched
// in 1b for it; the cheapest of the pool's types there is a c5.large at 0.085 USD/h. E's only
// pod, report, is do-not-disrupt: E's drain waits for it. Node by node (E still counted as
// capacity while D was evacuated), cache went to E (1530m free, first by name) and would have
// been moved again when E's drain reached it.
func TestPlanDisruptionExpiresARoundsNodesTogether(t *testing.T) {
	raw, err := os.ReadFile(liveDump)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	d := strings.Index(s, "    expireAfter: 1h\n") // D's NodeClaim; E's is the next one
	e := strings.Index(s[d+1:], "    expireAfter: 720h\n")
	if d < 0 || e < 0 {
		t.Fatal("the dump's NodeClaims moved: D's expireAfter 1h, then E's 720h")
	}
	e += d + 1
	s = s[:e] + "    expireAfter: 1h\n" + s[e+len("    expireAfter: 720h\n"):]
	p := filepath.Join(t.TempDir(), "two-expired.yaml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "--disruption", "-f", p, "--at", liveAt, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got DisruptionOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	const nodeD, nodeE = "ip-10-0-1-13.ec2.internal", "ip-10-0-1-14.ec2.internal"
	var expiries []preview.Decision
	for _, dec := range got.Result.Rounds[0].Decisions {
		if dec.Reason == "Expired" {
			expiries = append(expiries, dec)
		}
	}
	if len(expiries) != 1 {
		t.Fatalf("round 1 has %d expiry decisions, want one for both nodes: %+v", len(expiries), expiries)
	}
	x := expiries[0]
	if len(x.Nodes) != 2 || x.Nodes[0].Name != nodeD || x.Nodes[1].Name != nodeE || math.Abs(x.PricePerHourBefore-(0.085+0.096)) > 1e-9 {
		t.Errorf("nodes %+v, before %.4f; want D (0.085) and E (0.096)", x.Nodes, x.PricePerHourBefore)
	}
	if len(x.Launched) != 1 || x.Launched[0].InstanceType != "c5.large" || x.Launched[0].Zone != "us-east-1b" || x.Launched[0].PricePerHour != 0.085 {
		t.Fatalf("launched %+v; want one c5.large in us-east-1b at 0.085", x.Launched)
	}
	if len(x.Moved) != 1 || !strings.HasPrefix(x.Moved[0].Pod, "shop/cache-") || x.Moved[0].To != x.Launched[0].Name {
		t.Errorf("moved %+v; want only cache, onto %s", x.Moved, x.Launched[0].Name)
	}
	if len(x.Waits) != 2 || !strings.Contains(x.Waits[0], "report-") || !strings.Contains(x.Waits[0], apisv1.AnnotationDoNotDisrupt) {
		t.Errorf("waits %q; want E's drain waiting for its do-not-disrupt report pod, then until when", x.Waits)
	}
	// One hand-off (the NodeClaim's deletion) per node, as each expiry's own decision had.
	handOffs := 0
	for _, c := range x.Commands {
		if strings.HasPrefix(c, "DeleteNodeClaim ") {
			handOffs++
		}
	}
	if handOffs != 2 || len(x.Commands) != 2 {
		t.Errorf("commands %q; want the two NodeClaims' DeleteNodeClaim", x.Commands)
	}
}
