package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/dovetail-dev/dovetail/shared/catalog"
)

var seed = []string{"-f", "../../localdev/manifests/nodepool.yaml", "-f", "../../localdev/manifests/system-nodes.yaml", "-f", "../../localdev/manifests/workloads.yaml"}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPlanJSONSeed(t *testing.T) {
	code, out, stderr := runCLI(t, append([]string{"plan", "--output", "json"}, seed...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Exactly one JSON object with exactly the documented keys.
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value printed")
	}
	for _, k := range []string{"nodeClaims", "existingNodes", "unschedulable", "totalPricePerHour", "lowerBoundPerHour", "gap"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("key %q missing", k)
		}
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	// The seed's 40 workload pods: the 4 Karpenter controllers (which require a node without
	// karpenter.sh/nodepool and tolerate CriticalAddonsOnly) go to the two system nodes, two each
	// with no two replicas of one deployment together (hostname anti-affinity); the 36 others get
	// NodeClaims.
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %+v", plan.Unschedulable)
	}
	placed := 0
	for _, n := range plan.NodeClaims {
		placed += len(n.Pods)
		if n.PricePerHour <= 0 || n.Zone == "" || len(n.InstanceTypeOptions) == 0 || n.InstanceTypeOptions[0] != n.InstanceType {
			t.Fatalf("nodeClaim %+v: first option must be the offering's type, with a price and zone", n)
		}
		if n.CapacityType == "spot" && n.PriceSource != "estimate-spot-model" {
			t.Fatalf("spot price not labelled as an estimate: %+v", n)
		}
	}
	if placed != 36 {
		t.Fatalf("pods on new NodeClaims = %d, want 36", placed)
	}
	if len(plan.ExistingNodes) != 2 {
		t.Fatalf("existing nodes used = %d, want 2", len(plan.ExistingNodes))
	}
	for _, e := range plan.ExistingNodes {
		if len(e.Pods) != 2 || !strings.HasPrefix(e.Pods[0], "kube-system/karpenter") || e.Pods[0][:len(e.Pods[0])-2] == e.Pods[1][:len(e.Pods[1])-2] {
			t.Fatalf("node %s got %v; want one replica of each Karpenter deployment", e.Name, e.Pods)
		}
	}
	var sum float64
	for _, n := range plan.NodeClaims {
		sum += n.PricePerHour
	}
	if math.Abs(sum-plan.TotalPricePerHour) > 1e-6 {
		t.Fatalf("total %v != sum of NodeClaims %v", plan.TotalPricePerHour, sum)
	}
	name := regexp.MustCompile(`^[a-z0-9-]+/[a-z0-9-]+-[0-9]+$`)
	for _, n := range plan.NodeClaims {
		for _, p := range n.Pods {
			if !name.MatchString(p) {
				t.Fatalf("pod %q is not named <namespace>/<controller>-<index>", p)
			}
		}
	}
}

func TestPlanInvalidInputExits2(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["five"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "-f", bad, "--output", "json")
	if code != 2 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 2 and nothing on stdout", code, out)
	}
	if !strings.Contains(stderr, "requirements[0]") || !strings.Contains(stderr, "bad.yaml") {
		t.Fatalf("the error must name the file and the field: %s", stderr)
	}
	if code, _, _ := runCLI(t, "plan", "--output", "yaml", "-f", bad); code != 2 {
		t.Fatalf("an unknown --output must exit 2, got %d", code)
	}
}

func TestPlanUnschedulableStillExits0(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pods.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {requests: {cpu: "1000"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", "../../localdev/manifests/nodepool.yaml", "-f", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	// 1000 vCPU exceeds every instance type (the largest in c/m/r generation > 5 have 192 vCPU).
	if len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod != "default/huge" || len(plan.NodeClaims) != 0 {
		t.Fatalf("want default/huge unschedulable and no launch, got %+v", plan)
	}
}

// The bound and gap, by hand. A pool of m5.large (1930m allocatable, $0.096) and m5.xlarge
// (3920m, $0.192), on-demand, no DaemonSets; five pods of 1000m. One m5.large holds one such pod
// (⌊1930/1000⌋), one m5.xlarge three. Best whole plan: 0.384 (two m5.xlarge, or one m5.xlarge
// and two m5.large). The bound's LP: minimise 0.096·L + 0.192·X subject to the count cut
// L + 3X ≥ 5, the node-count row L + X ≥ ⌈5000/3920⌉ = 2 and the CPU row 1930L + 3920X ≥ 5000:
// the first two meet at X = 1.5, L = 0.5 (CPU 6845 ≥ 5000), cost 0.336. Gap 0.384/0.336 − 1 =
// 0.142857 (printed to four places: 0.1429).
func TestPlanBoundAndGapByHand(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 5
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 1000m}}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", "../../testdata/scenarios/common/nodeclass.yaml", "-f", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.TotalPricePerHour != 0.384 || plan.LowerBoundPerHour != 0.336 || plan.Gap != 0.1429 {
		t.Fatalf("total %v, bound %v, gap %v; want 0.384, 0.336, 0.1429", plan.TotalPricePerHour, plan.LowerBoundPerHour, plan.Gap)
	}
	code, out, _ = runCLI(t, "plan", "-f", "../../testdata/scenarios/common/nodeclass.yaml", "-f", f)
	if code != 0 || !strings.Contains(out, "Lower bound: 0.3360 USD/h (no plan for these pods can cost less); gap 14.3 %") {
		t.Fatalf("table footer missing the bound and gap:\n%s", out)
	}
}

var azureSeed = []string{"-f", "../../localdev/azureseed", "-f", "../../localdev/manifests/workloads.yaml"}

// TestPlanAzureSeed: an AKS NodePool (D, E and F families, at most 32 vCPUs, amd64, spot and on
// demand) with its AKSNodeClass picks the Azure cloud and places every seed pod on sizes that
// satisfy the requirements, in zones eastus-N, priced per node; on demand only, at the region's
// list price.
func TestPlanAzureSeed(t *testing.T) {
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := os.ReadFile("../../localdev/azureseed/nodepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	onDemand := filepath.Join(dir, "nodepool.yaml")
	if err := os.WriteFile(onDemand, bytes.Replace(pool, []byte(`["spot", "on-demand"]`), []byte(`["on-demand"]`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"spot and on-demand": azureSeed,
		"on-demand":          {"-f", onDemand, "-f", "../../localdev/azureseed/system-nodes.yaml", "-f", "../../localdev/manifests/workloads.yaml"},
	} {
		code, out, stderr := runCLI(t, append([]string{"plan", "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		var plan PlanOutput
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatal(err)
		}
		if plan.Catalog.Region != "eastus" || len(plan.Unschedulable) != 0 || len(plan.ExistingNodes) != 2 {
			t.Fatalf("%s: catalog %+v, unschedulable %+v, existing %+v", name, plan.Catalog, plan.Unschedulable, plan.ExistingNodes)
		}
		placed := 0
		for _, n := range plan.NodeClaims {
			placed += len(n.Pods)
			if !regexp.MustCompile(`^eastus-[123]$`).MatchString(n.Zone) || n.PricePerHour <= 0 {
				t.Errorf("%s: %s in zone %q at %v USD/h", name, n.InstanceType, n.Zone, n.PricePerHour)
			}
			if name == "on-demand" {
				if n.CapacityType != "on-demand" || n.PriceSource != "embedded-list-price" {
					t.Errorf("on-demand pool got %s (%s)", n.CapacityType, n.PriceSource)
				}
				// The eastus Linux pay-as-you-go price of the chosen size (data/azure/on_demand_prices.csv).
				if off := cat.Get(n.InstanceType).Offerings; !hasOffering(off, n.Zone, "on-demand", n.PricePerHour) {
					t.Errorf("%s %s: %v USD/h is not its list price", n.InstanceType, n.Zone, n.PricePerHour)
				}
			}
			for _, opt := range n.InstanceTypeOptions {
				it := cat.Get(opt)
				family, cpu := it.Labels["karpenter.azure.com/sku-family"], it.Labels["karpenter.azure.com/sku-cpu"]
				if (family != "D" && family != "E" && family != "F") || len(cpu) > 2 || (len(cpu) == 2 && cpu > "32") || it.Labels["kubernetes.io/arch"] != "amd64" {
					t.Errorf("%s: option %s (family %s, %s vCPU, %s) is outside the requirements", name, opt, family, cpu, it.Labels["kubernetes.io/arch"])
				}
			}
		}
		if placed != 36 {
			t.Errorf("%s: %d pods on new NodeClaims, want 36", name, placed)
		}
	}
}

// TestPlanAzureRegionWithoutZones: the AKS seed planned in westcentralus, a region without
// availability zones, places every pod; each NodeClaim is in zone "0" (the label AKS gives a node
// of a VM without a zone) at the size's westcentralus list price. A pool requiring placement-scope
// zonal launches nothing there.
func TestPlanAzureRegionWithoutZones(t *testing.T) {
	cat, err := catalog.AzureRegionCatalog("westcentralus")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pool, err := os.ReadFile("../../localdev/azureseed/nodepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	onDemand := filepath.Join(dir, "nodepool.yaml")
	if err := os.WriteFile(onDemand, bytes.Replace(pool, []byte(`["spot", "on-demand"]`), []byte(`["on-demand"]`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "--output", "json", "--region", "westcentralus",
		"-f", onDemand, "-f", "../../localdev/azureseed/system-nodes.yaml", "-f", "../../localdev/manifests/workloads.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan struct {
		Catalog       struct{ Region string }
		Unschedulable []json.RawMessage
		NodeClaims    []struct {
			InstanceType, Zone, CapacityType string
			PricePerHour                     float64
			Pods                             []string
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Catalog.Region != "westcentralus" || len(plan.Unschedulable) != 0 || len(plan.NodeClaims) == 0 {
		t.Fatalf("catalog %+v, unschedulable %s, %d NodeClaims", plan.Catalog, plan.Unschedulable, len(plan.NodeClaims))
	}
	placed := 0
	for _, n := range plan.NodeClaims {
		placed += len(n.Pods)
		if n.Zone != "0" || !hasOffering(cat.Get(n.InstanceType).Offerings, "0", "on-demand", n.PricePerHour) {
			t.Errorf("%s in zone %q at %v USD/h; want zone 0 at its westcentralus list price", n.InstanceType, n.Zone, n.PricePerHour)
		}
	}
	if placed != 36 {
		t.Errorf("%d pods on new NodeClaims, want 36", placed)
	}

	// A pool that asks for zonal placement has no offering there (Karpenter Azure: an explicit
	// placement-scope zonal does not provision in a region without zones): nothing is launched.
	zonal := filepath.Join(dir, "zonal.yaml")
	if err := os.WriteFile(zonal, bytes.Replace(pool, []byte("      requirements:\n"),
		[]byte("      requirements:\n        - key: karpenter.azure.com/placement-scope\n          operator: In\n          values: [\"zonal\"]\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "plan", "--output", "json", "--region", "westcentralus",
		"-f", zonal, "-f", "../../localdev/azureseed/system-nodes.yaml", "-f", "../../localdev/manifests/workloads.yaml")
	plan.NodeClaims, plan.Unschedulable = nil, nil
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil {
		t.Fatalf("zonal pool: exit %d: %s", code, stderr)
	}
	if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) == 0 {
		t.Errorf("zonal pool in westcentralus: %d NodeClaims, %d unschedulable; want none launched", len(plan.NodeClaims), len(plan.Unschedulable))
	}
}

func hasOffering(offs []catalog.Offering, zone, capacityType string, price float64) bool {
	for _, o := range offs {
		if o.Zone == zone && o.CapacityType == capacityType && o.PricePerHour == price {
			return true
		}
	}
	return false
}

// TestPlanAzureLabelRequirements: requirements over the Azure provider's labels narrow the sizes
// exactly: premium storage, accelerated networking, a version above 4, 4 to 8 vCPUs, one zone.
func TestPlanAzureLabelRequirements(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: premium}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.azure.com/sku-storage-premium-capable, operator: In, values: ["true"]}
      - {key: karpenter.azure.com/sku-networking-accelerated, operator: In, values: ["true"]}
      - {key: karpenter.azure.com/sku-version, operator: Gt, values: ["4"]}
      - {key: karpenter.azure.com/sku-cpu, operator: In, values: ["4", "8"]}
      - {key: topology.kubernetes.io/zone, operator: In, values: [eastus-2]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec: {imageFamily: AzureLinux}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 1500m, memory: 2Gi}}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	cat, _ := catalog.AzureRegionCatalog("eastus")
	if len(plan.NodeClaims) == 0 || len(plan.Unschedulable) != 0 {
		t.Fatalf("plan %+v", plan)
	}
	for _, n := range plan.NodeClaims {
		if n.Zone != "eastus-2" || n.CapacityType != "on-demand" {
			t.Errorf("%s in %s (%s)", n.InstanceType, n.Zone, n.CapacityType)
		}
		for _, opt := range n.InstanceTypeOptions {
			l := cat.Get(opt).Labels
			v := l["karpenter.azure.com/sku-version"]
			if l["karpenter.azure.com/sku-storage-premium-capable"] != "true" || l["karpenter.azure.com/sku-networking-accelerated"] != "true" ||
				len(v) != 1 || v <= "4" || (l["karpenter.azure.com/sku-cpu"] != "4" && l["karpenter.azure.com/sku-cpu"] != "8") {
				t.Errorf("option %s has labels %v", opt, l)
			}
		}
	}
}

// dovetail plan shows reserved offerings read from an EC2NodeClass's status and its count
// annotation: 3 free m5.xlarge in cr-0b22222222222222b take three of five 3-vCPU pods (one per
// node: 2 x 3000m > 3920m allocatable), priced 0.192 / 1e7; the other two go on demand at
// 0.192 USD/h each.
func TestPlanShowsReservedOfferings(t *testing.T) {
	code, out, stderr := runCLI(t, "plan", "--output", "json", "-f", "testdata/reserved.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	reserved, onDemand := 0, 0
	for _, n := range plan.NodeClaims {
		switch {
		case n.CapacityType == "reserved" && n.ReservationID == "cr-0b22222222222222b" && n.ReservationType == "default" &&
			n.Zone == "us-east-1b" && n.PriceSource == "capacity-reservation" && math.Abs(n.PricePerHour-0.192/1e7) < 1e-12:
			reserved++
		case n.CapacityType == "on-demand" && n.ReservationID == "" && n.PricePerHour == 0.192:
			onDemand++
		default:
			t.Errorf("unexpected NodeClaim %+v", n)
		}
	}
	if reserved != 3 || onDemand != 2 || math.Abs(plan.TotalPricePerHour-0.384) > 1e-6 {
		t.Fatalf("%d reserved, %d on-demand, %.7f USD/h; want 3, 2, 0.384", reserved, onDemand, plan.TotalPricePerHour)
	}
	code, out, _ = runCLI(t, "plan", "-f", "testdata/reserved.yaml")
	if code != 0 || strings.Count(out, "reserved (cr-0b22222222222222b)") != 3 {
		t.Fatalf("table:\n%s", out)
	}
}

// --wide (or -o wide, kubectl's spelling) adds each NodeClaim's pods as a last column: the same
// pods the JSON lists, in the same order.
func TestPlanTableWide(t *testing.T) {
	code, js, stderr := runCLI(t, append([]string{"plan", "-o", "json"}, seed...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(js), &plan); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"plan", "--wide"}, {"plan", "-o", "wide"}, {"plan", "-o", "table", "--wide"}} {
		code, out, stderr := runCLI(t, append(args, seed...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		lines := strings.Split(out, "\n")
		if !strings.HasSuffix(strings.TrimSpace(lines[0]), "FALLBACK TYPES  POD NAMES") {
			t.Fatalf("%v: header %q", args, lines[0])
		}
		for i, nc := range plan.NodeClaims {
			fields := strings.Fields(lines[1+i])
			if got := fields[len(fields)-1]; got != strings.Join(nc.Pods, ",") {
				t.Errorf("%v: row %d pods %q, want %q", args, i, got, strings.Join(nc.Pods, ","))
			}
		}
	}
	code, out, _ := runCLI(t, append([]string{"plan"}, seed...)...)
	if code != 0 || strings.Contains(out, "POD NAMES") {
		t.Errorf("the plain table (exit %d) has the wide column:\n%s", code, out)
	}
	if code, _, stderr := runCLI(t, append([]string{"plan", "-o", "json", "--wide"}, seed...)...); code != exitInvalidInput || !strings.Contains(stderr, "--wide") {
		t.Errorf("-o json --wide: exit %d, stderr %q; want 2 naming --wide", code, stderr)
	}
}

// TestPlanAzureDiskCSIZoneKey: the Azure Disk CSI driver's zone key is read as the zone
// (Azure/karpenter-provider-azure aliases topology.disk.csi.azure.com/zone onto
// topology.kubernetes.io/zone). Pod pinned uses a disk the driver provisioned in eastus-3 (its
// PersistentVolume's node affinity is on the driver's key); StatefulSet db's WaitForFirstConsumer
// claims come from a class whose allowedTopologies name eastus-1 under the same key. So pinned's
// NodeClaim is in eastus-3 and db's in eastus-1, and nothing is unschedulable.
func TestPlanAzureDiskCSIZoneKey(t *testing.T) {
	f := filepath.Join(t.TempDir(), "disk.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec: {imageFamily: Ubuntu2204}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: managed-csi}
provisioner: disk.csi.azure.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: managed-csi-zone1}
provisioner: disk.csi.azure.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.disk.csi.azure.com/zone, values: [eastus-1]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-disk}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: managed-csi
  csi: {driver: disk.csi.azure.com, volumeHandle: /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mc_rg/providers/Microsoft.Compute/disks/pvc-1}
  claimRef: {namespace: default, name: disk}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: topology.disk.csi.azure.com/zone, operator: In, values: [eastus-3]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: disk}
spec:
  storageClassName: managed-csi
  volumeName: pv-disk
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: pinned}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: disk}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      storageClassName: managed-csi-zone1
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 10Gi}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %+v", plan.Unschedulable)
	}
	zoneOf := map[string]string{}
	for _, n := range plan.NodeClaims {
		for _, p := range n.Pods {
			zoneOf[p] = n.Zone
		}
	}
	if zoneOf["default/pinned"] != "eastus-3" || zoneOf["default/db-0"] != "eastus-1" {
		t.Fatalf("pod zones %v; want default/pinned in eastus-3, default/db-0 in eastus-1", zoneOf)
	}
}

// TestPlanDRAPodRefused: a pod with Dynamic Resource Allocation claims is not planned (Karpenter
// v1.14 with IgnoreDRARequests, its default, reports "pod has Dynamic Resource Allocation
// requirements that are not yet supported"), never planned as if the claim did not exist; a
// DaemonSet whose pods claim a device adds no overhead. The plain pod beside it is planned.
func TestPlanDRAPodRefused(t *testing.T) {
	f := filepath.Join(t.TempDir(), "dra.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpu-monitor, namespace: kube-system}
spec:
  selector: {matchLabels: {app: gpu-monitor}}
  template:
    metadata: {labels: {app: gpu-monitor}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: single-gpu}]
      containers: [{name: c, image: x, resources: {requests: {cpu: 1500m}, claims: [{name: gpu}]}}]
---
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: single-gpu}]
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}, claims: [{name: gpu}]}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod != "default/trainer" ||
		!strings.Contains(plan.Unschedulable[0].Reason, "Dynamic Resource Allocation") {
		t.Fatalf("unschedulable %+v; want only default/trainer, for its Dynamic Resource Allocation claims", plan.Unschedulable)
	}
	// web (500m) fits one m5.large (1930m allocatable) only because the DaemonSet's 1500m is not
	// counted: with it, 500m + 1500m = 2000m would not fit.
	if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].InstanceType != "m5.large" {
		t.Fatalf("nodeclaims %+v; want one m5.large for web", plan.NodeClaims)
	}
}

// --min-values-policy reaches the plan: Strict leaves the 3-CPU pod pending (two types fit,
// minValues asks for three), BestEffort launches it on the cheaper of the two, m5.xlarge; an
// unknown value is a usage error naming the flag.
func TestPlanMinValuesPolicyFlag(t *testing.T) {
	for _, c := range []struct {
		policy        string
		claims, unsch int
	}{{"Strict", 0, 1}, {"BestEffort", 1, 0}} {
		code, out, stderr := runCLI(t, "plan", "--output", "json", "--min-values-policy", c.policy, "-f", "testdata/minvalues.yaml")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.policy, code, stderr)
		}
		var plan PlanOutput
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatal(err)
		}
		if len(plan.NodeClaims) != c.claims || len(plan.Unschedulable) != c.unsch {
			t.Fatalf("%s: %d NodeClaims, %d unschedulable; want %d and %d", c.policy, len(plan.NodeClaims), len(plan.Unschedulable), c.claims, c.unsch)
		}
		if c.claims == 1 && plan.NodeClaims[0].InstanceType != "m5.xlarge" {
			t.Fatalf("%s: first offering %s, want m5.xlarge", c.policy, plan.NodeClaims[0].InstanceType)
		}
	}
	code, _, stderr := runCLI(t, "plan", "--min-values-policy", "Loose", "-f", "testdata/minvalues.yaml")
	if code != 2 || !strings.Contains(stderr, "--min-values-policy") {
		t.Fatalf("exit %d, stderr %q: want 2 naming --min-values-policy", code, stderr)
	}
}

// TestPlanNodeOverlays: `dovetail plan` applies the NodeOverlays of testdata/overlay.yaml (prices
// and arithmetic in the file). The m-family Savings Plan makes m6i.large ($0.0672/h) cheaper than
// c6i.large (list $0.085/h, $0.685/h with licence-b), and only m6i carries the 4 devices the
// two dev pods (2 each) need: web (1 CPU) and both dev pods (400m each) fit one m6i.large
// (1800m of 1930m, 4 of 4 devices), so the plan is one m6i.large at $0.0672/h. The lower bound
// is priced from the same overlaid view, so it is at most that (list prices would put it at or
// above $0.085/h). licence-a is reported as conflicting.
func TestPlanNodeOverlays(t *testing.T) {
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", "../../testdata/scenarios/common/nodeclass.yaml", "-f", "testdata/overlay.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 0 {
		t.Fatalf("claims %+v, unschedulable %+v; want one claim, none unschedulable", plan.NodeClaims, plan.Unschedulable)
	}
	nc := plan.NodeClaims[0]
	if nc.InstanceType != "m6i.large" || nc.PricePerHour != 0.0672 || nc.PriceOverlay != "savings-plan-m" || len(nc.Pods) != 3 {
		t.Errorf("claim %+v, want m6i.large at 0.0672 by savings-plan-m with 3 pods", nc)
	}
	if plan.LowerBoundPerHour <= 0 || plan.LowerBoundPerHour > 0.0672 {
		t.Errorf("lower bound %v, want in (0, 0.0672]", plan.LowerBoundPerHour)
	}
	want := []NodeOverlayOutput{{Name: "devices", Applied: true}, {Name: "licence-a", Reason: "Conflict", Message: "conflict with another overlay"},
		{Name: "licence-b", Applied: true}, {Name: "savings-plan-m", Applied: true}}
	if !reflect.DeepEqual(plan.NodeOverlays, want) {
		t.Errorf("overlays %+v, want %+v", plan.NodeOverlays, want)
	}
	code, out, _ = runCLI(t, "plan", "-f", "../../testdata/scenarios/common/nodeclass.yaml", "-f", "testdata/overlay.yaml")
	if code != 0 || !strings.Contains(out, "0.0672 (overlay savings-plan-m)") || !strings.Contains(out, "NodeOverlay licence-a not applied (Conflict: conflict with another overlay)") {
		t.Fatalf("table misses the overlay price or the conflict:\n%s", out)
	}
}

// TestPlanCommitments: `dovetail plan` reads the dovetail-commitments ConfigMap from the
// manifests (the hand calculation is provisioning's TestCommitmentsChangeTotalAndTypes): two
// m6i.xlarge at 0 under the Reserved Instance, ten pods on c6i at 1.70 USD/h list, of which the
// Savings Plan covers 1.00 / 0.7 = 1.428571: total 1.00 + 0.271429 = 1.271429 USD/h, and both
// commitments show as fully used. A bad field is refused naming it.
func TestPlanCommitments(t *testing.T) {
	code, out, stderr := runCLI(t, "plan", "-o", "json", "-f", "../../testdata/scenarios/common/nodeclass.yaml", "-f", "testdata/commitments.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if want := 1.00 + (1.70 - 1.00/0.7); math.Abs(plan.TotalPricePerHour-want) > 1e-6 {
		t.Errorf("total %.6f, want %.6f", plan.TotalPricePerHour, want)
	}
	reserved := 0
	for _, nc := range plan.NodeClaims {
		if nc.InstanceType == "m6i.xlarge" && nc.PricePerHour == 0 {
			reserved++
		}
	}
	if reserved != 2 {
		t.Errorf("%d m6i.xlarge at 0, want 2: %+v", reserved, plan.NodeClaims)
	}
	if len(plan.Commitments) != 2 || plan.Commitments[0].Utilisation != 1 || plan.Commitments[1].Used != 2 {
		t.Errorf("commitments %+v, want both fully used", plan.Commitments)
	}
	code, out, _ = runCLI(t, "plan", "-f", "../../testdata/scenarios/common/nodeclass.yaml", "-f", "testdata/commitments.yaml")
	if code != 0 || !strings.Contains(out, "Savings Plan compute: 1.0000 of 1.0000 USD/h used (100.0 %)") ||
		!strings.Contains(out, "Reservation ri-m6i: 2 of 2 instances used (100.0 %)") || !strings.Contains(out, "0.0000 (commitment)") {
		t.Fatalf("table misses the utilisation or the commitment price:\n%s", out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	data, err := os.ReadFile("testdata/commitments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(string(data), "count: 2", "count: 0", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "plan", "-f", "../../testdata/scenarios/common/nodeclass.yaml", "-f", bad)
	if code == 0 || !strings.Contains(stderr, "reservations[0].count: must be a positive number of instances, got 0") {
		t.Fatalf("exit %d, stderr %s; want the count refused", code, stderr)
	}
}
