package provisioning

import (
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// zoneIDs is one account's mapping of us-east-1's zone names to zone IDs (it differs per
// account; the EC2NodeClass's status.subnets carry it from DescribeSubnets' AvailabilityZoneId).
var zoneIDs = map[string]string{"us-east-1a": "use1-az6", "us-east-1b": "use1-az1", "us-east-1c": "use1-az2", "us-east-1d": "use1-az4", "us-east-1f": "use1-az5"}

func zoneIDInput(ps ...*corev1.Pod) Input {
	class := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.EC2NodeClassSpec{Role: "r"}}
	zones := make([]string, 0, len(zoneIDs))
	for z := range zoneIDs {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		class.Status.Subnets = append(class.Status.Subnets, apisv1.Subnet{ID: "subnet-" + z, Zone: z, ZoneID: zoneIDs[z]})
	}
	return Input{Pods: ps, NodePools: []*apisv1.NodePool{nodePool("default", onDemand("m5.large")...)},
		NodeClasses: []apisv1.NodeClass{apisv1.NodeClassOf(class)}, NodeSettings: cloud.NodeSettingsFor}
}

// offeringZones lists a NodeClaim's distinct offering zones, sorted.
func offeringZones(nc *NodeClaimPlan) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range nc.Offerings {
		if !seen[o.Zone] {
			seen[o.Zone] = true
			out = append(out, o.Zone)
		}
	}
	sort.Strings(out)
	return out
}

func TestZoneIDRequirement(t *testing.T) {
	for _, c := range []struct {
		name  string
		op    corev1.NodeSelectorOperator
		ids   []string
		zones []string
	}{
		// use1-az1 is us-east-1b in this account: m5.large's one on-demand offering there.
		{"In", corev1.NodeSelectorOpIn, []string{"use1-az1"}, []string{"us-east-1b"}},
		// NotIn use1-az6 leaves the four other zones m5.large is offered in (a, the zone of
		// use1-az6, goes; e never offers a Nitro type).
		{"NotIn", corev1.NodeSelectorOpNotIn, []string{"use1-az6"}, []string{"us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := pod("a", "1", "1Gi")
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: apisv1.LabelTopologyZoneID, Operator: c.op, Values: c.ids}}}}}}}
			plan := solve(t, zoneIDInput(p))
			wantClaims(t, plan, "m5.large")
			if got := offeringZones(plan.NodeClaims[0]); !equalStrings(got, c.zones) {
				t.Fatalf("offering zones %v, want %v", got, c.zones)
			}
		})
	}
	t.Run("unknown zone ID", func(t *testing.T) {
		p := pod("a", "1", "1Gi")
		p.Spec.NodeSelector = map[string]string{apisv1.LabelTopologyZoneID: "use1-az3"} // us-east-1e's here: no subnet
		plan := solve(t, zoneIDInput(p))
		if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 1 {
			t.Fatalf("%d claims, %d unschedulable; want the pod pending", len(plan.NodeClaims), len(plan.Unschedulable))
		}
	})
	t.Run("no zone IDs discovered", func(t *testing.T) {
		p := pod("a", "1", "1Gi")
		p.Spec.NodeSelector = map[string]string{apisv1.LabelTopologyZoneID: "use1-az1"}
		in := zoneIDInput(p)
		in.NodeClasses, in.NodeSettings = nil, nil
		plan := solve(t, in)
		if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 1 {
			t.Fatalf("%d claims, %d unschedulable; want the pod pending (no node would carry the label)", len(plan.NodeClaims), len(plan.Unschedulable))
		}
	})
}

// Four 1-CPU pods spread on zone-id (maxSkew 1, DoNotSchedule) over five empty domains: each
// goes to a domain with the fewest pods, so four distinct zone IDs; every NodeClaim's offerings
// lie in the one zone of its zone ID. All five zones price m5.large on-demand alike (0.096), so
// the claims pin in zone order: a (use1-az6), b (use1-az1), c (use1-az2), d (use1-az4).
func TestZoneIDTopologySpread(t *testing.T) {
	ps := pods(4, "1", "1Gi")
	for _, p := range ps {
		p.Labels = map[string]string{"app": "db"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: apisv1.LabelTopologyZoneID,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	}
	plan := solve(t, zoneIDInput(ps...))
	wantClaims(t, plan, "m5.large", "m5.large", "m5.large", "m5.large")
	var ids []string
	for _, nc := range plan.NodeClaims {
		zs := offeringZones(nc)
		r := nc.Requirements[apisv1.LabelTopologyZoneID]
		id, ok := "", false
		if r != nil {
			id, ok = r.Single()
		}
		if len(zs) != 1 || !ok || zoneIDs[zs[0]] != id {
			t.Fatalf("claim zones %v, zone-id requirement %v: want one zone and its ID", zs, r)
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if want := []string{"use1-az1", "use1-az2", "use1-az4", "use1-az6"}; !equalStrings(ids, want) {
		t.Fatalf("zone IDs %v, want %v", ids, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
