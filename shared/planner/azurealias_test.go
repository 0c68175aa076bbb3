package planner

import (
	"strings"
	"testing"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

const aksClass = `
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec: {imageFamily: Ubuntu2204}
`

// aksPool is a NodePool of the D family on the AKSNodeClass; extra is its requirements' tail.
func aksPool(extra string) string {
	return `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
        - {key: karpenter.azure.com/sku-family, operator: In, values: [D]}
` + extra
}

// aksPod is a 1-vCPU pod whose nodeSelector or affinity is sel (indented under spec).
func aksPod(name, sel string) string {
	return `
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
` + sel + `
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
}

func planAKS(t *testing.T, docs ...string) *provisioning.Plan {
	t.Helper()
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	set, err := manifests.LoadReader("in.yaml", strings.NewReader(strings.Join(append([]string{aksClass}, docs...), "\n---\n")))
	if err != nil {
		t.Fatal(err)
	}
	plan, _, err := Plan(set, cat, cloud.NodeSettingsFor)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// capacityTypes are the distinct capacity types of a NodeClaim's offerings.
func capacityTypes(nc *provisioning.NodeClaimPlan) string {
	seen := map[string]bool{}
	var out []string
	for _, o := range nc.Offerings {
		if !seen[o.CapacityType] {
			seen[o.CapacityType] = true
			out = append(out, o.CapacityType)
		}
	}
	return strings.Join(out, ",")
}

// kubernetes.azure.com/scalesetpriority is a capacity-type alias on an AKS pool, as the Azure
// provider's offerings carry it (spot offerings =spot, on-demand =regular): a pod selecting spot
// gets a NodeClaim whose every offering is spot, one selecting regular every offering on demand,
// and the single value becomes the node's label (so kube-scheduler binds the pod to it). The
// expectations follow from the rule alone: the pool allows both capacity types, so only the
// pod's selector narrows them.
func TestScaleSetPriorityIsACapacityType(t *testing.T) {
	both := aksPool("        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}\n")
	for _, tc := range []struct {
		name, pool, sel   string
		wantCT, wantLabel string // wantLabel "": the node gets no scalesetpriority label from the plan
		unschedulable     string // a substring of the reason; "" = the pod is placed
	}{
		{name: "spot", pool: both, sel: "  nodeSelector: {kubernetes.azure.com/scalesetpriority: spot}", wantCT: "spot", wantLabel: "spot"},
		{name: "regular", pool: both, sel: "  nodeSelector: {kubernetes.azure.com/scalesetpriority: regular}", wantCT: "on-demand", wantLabel: "regular"},
		// kubernetes.azure.com/priority is the provider's newer alias of the same value.
		{name: "priority spot", pool: both, sel: "  nodeSelector: {kubernetes.azure.com/priority: spot}", wantCT: "spot"},
		// NotIn [spot] leaves regular: on demand, and no single value to label.
		{name: "not spot", pool: both, sel: "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.azure.com/scalesetpriority, operator: NotIn, values: [spot]}]}]}}}", wantCT: "on-demand"},
		// Every offering carries the label, so DoesNotExist leaves none.
		{name: "absent", pool: both, sel: "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.azure.com/scalesetpriority, operator: DoesNotExist}]}]}}}", unschedulable: "conflicts"},
		// A pool that says nothing about capacity type is on demand (Karpenter's default): no spot.
		{name: "spot on a default pool", pool: aksPool(""), sel: "  nodeSelector: {kubernetes.azure.com/scalesetpriority: spot}", unschedulable: "conflicts"},
		// The provider's e2e "Spot (nonstandard node pool)": the pool requires scalesetpriority=spot
		// and no capacity type, and launches spot (the alias narrows before the on-demand default).
		{name: "spot pool", pool: aksPool("        - {key: kubernetes.azure.com/scalesetpriority, operator: In, values: [spot]}\n"), sel: "  nodeSelector: {}", wantCT: "spot", wantLabel: "spot"},
		{name: "unknown value", pool: both, sel: "  nodeSelector: {kubernetes.azure.com/scalesetpriority: low}", unschedulable: "conflicts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planAKS(t, tc.pool, aksPod("p", tc.sel))
			if tc.unschedulable != "" {
				if len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, tc.unschedulable) || len(plan.NodeClaims) != 0 {
					t.Fatalf("want unschedulable (%q), got %d claims, %+v", tc.unschedulable, len(plan.NodeClaims), plan.Unschedulable)
				}
				return
			}
			if len(plan.Unschedulable) != 0 || len(plan.NodeClaims) != 1 {
				t.Fatalf("want one NodeClaim, got %d, unschedulable %+v", len(plan.NodeClaims), plan.Unschedulable)
			}
			nc := plan.NodeClaims[0]
			if got := capacityTypes(nc); got != tc.wantCT {
				t.Errorf("offerings' capacity types %q, want %q", got, tc.wantCT)
			}
			if got := nc.Labels["kubernetes.azure.com/scalesetpriority"]; got != tc.wantLabel {
				t.Errorf("scalesetpriority label %q, want %q", got, tc.wantLabel)
			}
		})
	}
}

// On an EC2 pool the label is nobody's: a pod requiring it stays pending, as Karpenter leaves a
// pod whose required label no NodePool or instance type defines.
func TestScaleSetPriorityIsNotAnEC2Label(t *testing.T) {
	set, err := manifests.LoadReader("in.yaml", strings.NewReader(`
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {amiSelectorTerms: [{alias: al2023@latest}], role: r, subnetSelectorTerms: [{tags: {a: b}}], securityGroupSelectorTerms: [{tags: {a: b}}]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
---`+aksPod("p", "  nodeSelector: {kubernetes.azure.com/scalesetpriority: spot}")))
	if err != nil {
		t.Fatal(err)
	}
	plan, _, err := Plan(set, catalog.MustAWS(), cloud.NodeSettingsFor)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, "is not defined by the nodepool") {
		t.Fatalf("claims %d, unschedulable %+v", len(plan.NodeClaims), plan.Unschedulable)
	}
}
