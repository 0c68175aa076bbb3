package scheduling

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRequirementOperators(t *testing.T) {
	cases := []struct {
		op     corev1.NodeSelectorOperator
		values []string
		has    map[string]bool
		absent bool
	}{
		{corev1.NodeSelectorOpIn, []string{"a", "b"}, map[string]bool{"a": true, "b": true, "c": false}, false},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, map[string]bool{"a": false, "b": true}, true},
		{corev1.NodeSelectorOpExists, nil, map[string]bool{"x": true}, false},
		{corev1.NodeSelectorOpDoesNotExist, nil, map[string]bool{"x": false}, true},
		{corev1.NodeSelectorOpGt, []string{"5"}, map[string]bool{"5": false, "6": true, "x": false}, false},
		{corev1.NodeSelectorOpLt, []string{"5"}, map[string]bool{"4": true, "5": false}, false},
		{OpGte, []string{"5"}, map[string]bool{"4": false, "5": true}, false},
		{OpLte, []string{"5"}, map[string]bool{"5": true, "6": false}, false},
	}
	for _, c := range cases {
		r := MustRequirement("k", c.op, c.values...)
		for v, want := range c.has {
			if r.Has(v) != want {
				t.Errorf("%s %v: Has(%q) = %v, want %v", c.op, c.values, v, !want, want)
			}
		}
		if r.AbsentOK() != c.absent {
			t.Errorf("%s: AbsentOK = %v, want %v", c.op, r.AbsentOK(), c.absent)
		}
	}
	if _, err := NewRequirement("k", corev1.NodeSelectorOpGt, "five"); err == nil {
		t.Error("Gt with a non-integer must fail")
	}
}

func TestRequirementIntersect(t *testing.T) {
	in := MustRequirement("k", corev1.NodeSelectorOpIn, "1", "5", "9")
	gt := MustRequirement("k", corev1.NodeSelectorOpGt, "4")
	got := in.Intersect(gt)
	if vals := got.Values(); len(vals) != 2 || vals[0] != "5" || vals[1] != "9" {
		t.Fatalf("In[1 5 9] ∩ Gt 4 = %v, want [5 9]", vals)
	}
	notIn := MustRequirement("k", corev1.NodeSelectorOpNotIn, "5")
	if v := in.Intersect(notIn).Values(); len(v) != 2 || v[0] != "1" || v[1] != "9" {
		t.Fatalf("In[1 5 9] ∩ NotIn[5] = %v, want [1 9]", v)
	}
	lt := MustRequirement("k", corev1.NodeSelectorOpLt, "5")
	if !gt.Intersect(lt).Unsatisfiable() {
		t.Fatal("Gt 4 ∩ Lt 5 has no integer and must be unsatisfiable")
	}
	dne := MustRequirement("k", corev1.NodeSelectorOpDoesNotExist)
	if dne.Intersect(notIn).Unsatisfiable() {
		t.Fatal("DoesNotExist ∩ NotIn is satisfied by an absent label")
	}
	if !dne.Intersect(MustRequirement("k", corev1.NodeSelectorOpExists)).Unsatisfiable() {
		t.Fatal("DoesNotExist ∩ Exists must be unsatisfiable")
	}
}

func TestBetaLabelsNormalised(t *testing.T) {
	rs := FromLabels(map[string]string{"beta.kubernetes.io/os": "linux"})
	if err := rs.MatchLabels(map[string]string{"kubernetes.io/os": "linux"}); err != nil {
		t.Fatalf("beta os selector must match the GA label: %v", err)
	}
}

func TestPodNodeRequirementsTermsORed(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}}}},
			}}}}}}
	alts, err := PodNodeRequirements(pod)
	if err != nil || len(alts) != 2 {
		t.Fatalf("got %d alternatives, %v; want 2", len(alts), err)
	}
	for _, a := range alts {
		if a["kubernetes.io/os"] == nil {
			t.Fatal("nodeSelector must be ANDed into every term")
		}
	}
}

func TestUntoleratedTaint(t *testing.T) {
	taints := []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
	if got := UntoleratedTaint(nil, taints); got == nil || got.Key != "dedicated" {
		t.Fatalf("want the NoSchedule taint reported, got %v", got)
	}
	tol := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	if got := UntoleratedTaint(tol, taints); got != nil {
		t.Fatalf("tolerated taint reported: %v", got)
	}
}

// TestCSIZoneKeysNormalised: the CSI drivers' zone keys are read as topology.kubernetes.io/zone
// (aws/karpenter-provider-aws and Azure/karpenter-provider-azure alias them onto the zone), and
// the Azure Disk driver's "" (a regional VM) is read as cloud-provider-azure's regional zone "0"
// (Karpenter core's NormalizedLabelValues); zone names are kept as they are.
func TestCSIZoneKeysNormalised(t *testing.T) {
	for _, c := range []struct {
		key    string
		values []string
		want   []string
	}{
		{"topology.ebs.csi.aws.com/zone", []string{"us-east-1a", "us-east-1c"}, []string{"us-east-1a", "us-east-1c"}},
		{"topology.disk.csi.azure.com/zone", []string{"eastus-2"}, []string{"eastus-2"}},
		{"topology.disk.csi.azure.com/zone", []string{"", "eastus-1"}, []string{"0", "eastus-1"}},
	} {
		in := append([]string(nil), c.values...)
		k, v := Normalize(c.key, in)
		if k != corev1.LabelTopologyZone || !slices.Equal(v, c.want) || !slices.Equal(in, c.values) {
			t.Errorf("Normalize(%s, %q) = %s, %q (input now %q); want %s, %q", c.key, c.values, k, v, in, corev1.LabelTopologyZone, c.want)
		}
	}
	// The zone's own key keeps its values: "" is only rewritten when it came from an alias.
	if k, v := Normalize(corev1.LabelTopologyZone, []string{""}); k != corev1.LabelTopologyZone || v[0] != "" {
		t.Errorf("Normalize(zone, \"\") = %s, %q", k, v)
	}
	rs := FromLabels(map[string]string{"topology.ebs.csi.aws.com/zone": "us-east-1b"})
	if r := rs[corev1.LabelTopologyZone]; r == nil || !r.Has("us-east-1b") || r.Has("us-east-1a") || len(rs) != 1 {
		t.Errorf("FromLabels with the EBS key: %v", rs)
	}
}
