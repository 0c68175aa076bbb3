package ec2class

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Karpenter's isPlacementGroupDrifted compares the NodeClaim's placement-group-id label with the
// id the class resolves to; Dovetail knows that id for a class that selects none ("") or selects
// by id once PlacementGroupReady is True.
func TestPlacementGroupDrift(t *testing.T) {
	ready := []metav1.Condition{{Type: apisv1.ConditionPlacementGroupReady, Status: metav1.ConditionTrue}}
	notReady := []metav1.Condition{{Type: apisv1.ConditionPlacementGroupReady, Status: metav1.ConditionFalse}}
	for _, tc := range []struct {
		name  string
		label string
		sel   *apisv1.PlacementGroupSelector
		conds []metav1.Condition
		drift bool
	}{
		{"no group either side", "", nil, ready, false},
		{"selector removed", "pg-0aaa", nil, ready, true},
		{"same id", "pg-0aaa", &apisv1.PlacementGroupSelector{ID: "pg-0aaa"}, ready, false},
		{"other id", "pg-0aaa", &apisv1.PlacementGroupSelector{ID: "pg-0bbb"}, ready, true},
		{"selector added", "", &apisv1.PlacementGroupSelector{ID: "pg-0bbb"}, ready, true},
		{"selector added, group not resolved", "", &apisv1.PlacementGroupSelector{ID: "pg-0bbb"}, notReady, false},
		{"by name: no resolved id to compare", "pg-0aaa", &apisv1.PlacementGroupSelector{Name: "ml"}, ready, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &apisv1.NodeClaim{}
			if tc.label != "" {
				nc.Labels = map[string]string{apisv1.LabelPlacementGroupID: tc.label}
			}
			class := &apisv1.EC2NodeClass{Spec: apisv1.EC2NodeClassSpec{PlacementGroupSelector: tc.sel}, Status: apisv1.EC2NodeClassStatus{Conditions: tc.conds}}
			class.Name = "gpu"
			d := placementGroupDrift(nc, class)
			if (d.Kind == DriftPlacementGroup) != tc.drift || (!tc.drift && d.Kind != "") {
				t.Errorf("drift %+v, want drifted=%v", d, tc.drift)
			}
		})
	}
}
