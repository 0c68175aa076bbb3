package provisioning

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/guardrails"
)

// The rate policies as the solver enforces them, by hand. m5.large on demand: 0.096 USD/h,
// 1930m allocatable (one 1500m pod each). The pool has two in-flight m5.large NodeClaims, made
// 5 and 20 minutes before the decision; each takes one of the 8 pods, 6 need new nodes.
//
//	Nodes 3 per 600 s:            window (t−600 s, t] holds the 5-minute claim: 3 − 1 = 2 left.
//	PricePerHour 0.5 per 3600 s:  both claims, 2 × 0.096 = 0.192: 0.308 USD/h left, room for
//	                              3 more (3 × 0.096 = 0.288 ≤ 0.308 < 0.384).
//
// Both hold (Min): 2 new NodeClaims; 4 pods wait, turned away by the node policy. Without the
// policy of nodes, the price policy launches 3. An interruption's replacement plan (no
// ScaleUpGuardrails) launches all 6.
func TestScaleUpPoliciesLimitNewNodeClaims(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	inFlight := func(name string, age time.Duration) *apisv1.NodeClaim {
		return &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age)), Labels: map[string]string{
			apisv1.LabelNodePool: "default", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64",
			corev1.LabelOSStable: "linux", apisv1.LabelCapacityType: "on-demand", corev1.LabelTopologyZone: "us-east-1a"}},
			Status: apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-" + name}}
	}
	in := func(policies string, guard bool) Input {
		np := nodePool("default", onDemand("m5.large")...)
		np.Annotations = map[string]string{guardrails.AnnotationScaleUpPolicies: policies}
		return Input{Pods: pods(8, "1500m", "1Gi"), NodePools: []*apisv1.NodePool{np}, Time: now, ScaleUpGuardrails: guard,
			NodeClaims: []*apisv1.NodeClaim{inFlight("a", 5*time.Minute), inFlight("b", 20*time.Minute)}}
	}
	both := `{selectPolicy: Min, policies: [{type: Nodes, value: 3, periodSeconds: 600}, {type: PricePerHour, value: 0.5, periodSeconds: 3600}]}`
	p := solve(t, in(both, true))
	wantClaims(t, p, "m5.large", "m5.large")
	if len(p.Unschedulable) != 4 {
		t.Fatalf("%d pods unschedulable, want 4", len(p.Unschedulable))
	}
	u := p.Unschedulable[0]
	if want := []LimitHit{{"default", ResourceScaleUpNodes}}; !reflect.DeepEqual(u.LimitsExceeded, want) {
		t.Errorf("LimitsExceeded = %v, want %v", u.LimitsExceeded, want)
	}
	for _, want := range []string{"scale-up nodes=0", "dovetail.dev/scale-up-policies Nodes 3 per 600s", "scale-up price=0.1160 USD/h"} {
		if !strings.Contains(u.Reason, want) {
			t.Errorf("reason %q lacks %q", u.Reason, want)
		}
	}
	p = solve(t, in(`{policies: [{type: PricePerHour, value: 0.5, periodSeconds: 3600}]}`, true))
	wantClaims(t, p, "m5.large", "m5.large", "m5.large")
	if u := p.Unschedulable[0]; !reflect.DeepEqual(u.LimitsExceeded, []LimitHit{{"default", ResourceScaleUpPricePerHour}}) {
		t.Errorf("LimitsExceeded = %v, want the price policy", u.LimitsExceeded)
	}
	p = solve(t, in(both, false))
	wantClaims(t, p, "m5.large", "m5.large", "m5.large", "m5.large", "m5.large", "m5.large")
}

// An invalid annotation keeps the pool from launching, with the annotation and field named.
func TestScaleUpPoliciesInvalidAnnotation(t *testing.T) {
	np := nodePool("default", onDemand("m5.large")...)
	np.Annotations = map[string]string{guardrails.AnnotationScaleUpPolicies: `{policies: [{type: Nodes, value: -1, periodSeconds: 60}]}`}
	p := solve(t, Input{Pods: pods(1, "1", "1Gi"), NodePools: []*apisv1.NodePool{np}, ScaleUpGuardrails: true})
	if len(p.NodeClaims) != 0 || len(p.Unschedulable) != 1 ||
		!strings.Contains(p.Unschedulable[0].Reason, "metadata.annotations[dovetail.dev/scale-up-policies]: policies[0].value: -1 is not a non-negative number") {
		t.Fatalf("plan %+v", p.Unschedulable)
	}
}
