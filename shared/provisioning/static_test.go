package provisioning

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func staticPool(name string, replicas int64, reqs ...apisv1.NodeSelectorRequirementWithMinValues) *apisv1.NodePool {
	np := nodePool(name, reqs...)
	np.Spec.Replicas = &replicas
	return np
}

// TestStaticPlansTemplateOnly: each static NodeClaim carries no pods and every type the
// template allows, cheapest first (m5.large 0.096 < m5.xlarge 0.192 USD/h on demand), and its
// own slot.
func TestStaticPlansTemplateOnly(t *testing.T) {
	np := staticPool("fixed", 3, onDemand("m5.xlarge", "m5.large")...)
	plans, err := StaticPlans(Input{Catalog: cat(t), NodePools: []*apisv1.NodePool{np}, Pods: pods(2, "1", "1Gi")}, np, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 3 {
		t.Fatalf("plans = %d, want 3", len(plans))
	}
	for i, p := range plans {
		if len(p.Pods) != 0 || p.NodePool != np || p.Labels[apisv1.LabelNodePool] != "fixed" {
			t.Errorf("plan %d: %d pods, pool %v, labels %v: want no pods, pool fixed", i, len(p.Pods), p.NodePool.Name, p.Labels)
		}
		if got := p.InstanceTypeOptions(); !reflect.DeepEqual(got, []string{"m5.large", "m5.xlarge"}) {
			t.Errorf("plan %d: types %v, want [m5.large m5.xlarge]", i, got)
		}
		if c := p.Cheapest(); c.PricePerHour != 0.096 || c.CapacityType != apisv1.CapacityTypeOnDemand {
			t.Errorf("plan %d: cheapest %s %s %v, want m5.large on-demand 0.096", i, c.InstanceType.Name, c.CapacityType, c.PricePerHour)
		}
	}
	if plans[0].Slot != "static-0" || plans[2].Slot != "static-2" {
		t.Errorf("slots %q, %q: want static-0, static-2", plans[0].Slot, plans[2].Slot)
	}
}

// TestStaticPlansLeaveExoticTypesOut: a GPU type is offered only when nothing else is allowed,
// as the AWS provider's filterExoticInstanceTypes does.
func TestStaticPlansLeaveExoticTypesOut(t *testing.T) {
	for _, tc := range []struct {
		types []string
		want  []string
	}{
		{[]string{"g4dn.xlarge", "m5.large"}, []string{"m5.large"}},
		{[]string{"g4dn.xlarge"}, []string{"g4dn.xlarge"}},
	} {
		np := staticPool("fixed", 1, onDemand(tc.types...)...)
		plans, err := StaticPlans(Input{Catalog: cat(t), NodePools: []*apisv1.NodePool{np}}, np, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := plans[0].InstanceTypeOptions(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("allowed %v: offered %v, want %v", tc.types, got, tc.want)
		}
	}
}

func TestStaticPlansRefusals(t *testing.T) {
	dyn := nodePool("dynamic", onDemand("m5.large")...)
	if _, err := StaticPlans(Input{Catalog: cat(t)}, dyn, 1); err == nil || !strings.Contains(err.Error(), "spec.replicas") {
		t.Errorf("dynamic pool: err %v, want one naming spec.replicas", err)
	}
	none := staticPool("fixed", 1, onDemand("no-such-type.large")...)
	if _, err := StaticPlans(Input{Catalog: cat(t)}, none, 1); err == nil || !strings.Contains(err.Error(), "no instance type") {
		t.Errorf("no type: err %v, want the pool's reason", err)
	}
	if plans, err := StaticPlans(Input{Catalog: cat(t)}, staticPool("fixed", 0, onDemand("m5.large")...), 0); err != nil || plans != nil {
		t.Errorf("n 0: %v, %v, want nothing", plans, err)
	}
}

// TestPodsDoNotSizeStaticPools: pending pods never open a NodeClaim on a static NodePool; they
// go to a dynamic one, or wait with the reason.
func TestPodsDoNotSizeStaticPools(t *testing.T) {
	st := staticPool("fixed", 2, onDemand("m5.large")...)
	p := solve(t, Input{Pods: pods(1, "1", "1Gi"), NodePools: []*apisv1.NodePool{st}})
	if len(p.NodeClaims) != 0 || len(p.Unschedulable) != 1 || !strings.Contains(p.Unschedulable[0].Reason, "static") {
		t.Fatalf("static pool only: %d claims, unschedulable %+v: want none and a reason naming the static pool", len(p.NodeClaims), p.Unschedulable)
	}
	dyn := nodePool("dynamic", onDemand("c5.large")...)
	p = solve(t, Input{Pods: pods(1, "1", "1Gi"), NodePools: []*apisv1.NodePool{st, dyn}})
	wantClaims(t, p, "c5.large")
	if p.NodeClaims[0].NodePool.Name != "dynamic" {
		t.Fatalf("claim from %s, want dynamic", p.NodeClaims[0].NodePool.Name)
	}
}

// TestInFlightStaticNodeClaimTakesPods: a static pool's in-flight NodeClaim is capacity like any
// other (Karpenter's scheduler counts static NodeClaims): 2 × 900m fit an m5.large's 1930m.
func TestInFlightStaticNodeClaimTakesPods(t *testing.T) {
	st := staticPool("fixed", 1, onDemand("m5.large")...)
	nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "fixed-abc", Labels: map[string]string{
		apisv1.LabelNodePool: "fixed", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64",
		corev1.LabelOSStable: "linux", apisv1.LabelCapacityType: "on-demand", corev1.LabelTopologyZone: "us-east-1a"}},
		Status: apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}}
	p := solve(t, Input{Pods: pods(2, "900m", "1Gi"), NodeClaims: []*apisv1.NodeClaim{nc}, NodePools: []*apisv1.NodePool{st}})
	if len(p.NodeClaims) != 0 || len(p.ExistingNodes) != 1 || len(p.ExistingNodes[0].Pods) != 2 {
		t.Fatalf("want both pods on the in-flight static NodeClaim: %+v, %d new", p.ExistingNodes, len(p.NodeClaims))
	}
}
