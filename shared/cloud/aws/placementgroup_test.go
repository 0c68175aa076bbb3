package aws_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// addGroup creates a placement group in the fake EC2 and returns its id.
func addGroup(t *testing.T, e *env, name string, strategy ec2types.PlacementStrategy, partitions int32) string {
	t.Helper()
	g := ec2types.PlacementGroup{GroupName: aws.String(name), Strategy: strategy}
	if partitions > 0 {
		g.PartitionCount = aws.Int32(partitions)
	}
	got, err := e.srv.AddPlacementGroup(g)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(got.GroupId)
}

func inGroup(sel apisv1.PlacementGroupSelector) *apisv1.EC2NodeClass {
	nc := nodeClass("al2023@latest")
	nc.Spec.PlacementGroupSelector = &sel
	return nc
}

// The lifecycle function's resolution asks DescribePlacementGroups for the selector's name (or
// id) with the filter state=available, as Karpenter's provider does, and records the answer as
// PlacementGroupReady; a name or id EC2 does not know (InvalidPlacementGroup.Unknown) is
// PlacementGroupReady=False with reason PlacementGroupNotFound naming the selector, and Ready
// False through UnhealthyDependents.
func TestPlacementGroupResolution(t *testing.T) {
	e := setup(t)
	id := addGroup(t, e, "ml-training", ec2types.PlacementStrategyCluster, 0)
	for _, tc := range []struct {
		name string
		sel  apisv1.PlacementGroupSelector
		ok   bool
		msg  string
	}{
		{"by name", apisv1.PlacementGroupSelector{Name: "ml-training"}, true, ""},
		{"by id", apisv1.PlacementGroupSelector{ID: id}, true, ""},
		{"unknown name", apisv1.PlacementGroupSelector{Name: "ml-trainin"}, false, `spec.placementGroupSelector: no available placement group has name "ml-trainin"`},
		{"unknown id", apisv1.PlacementGroupSelector{ID: "pg-0123456789abcdef0"}, false, `spec.placementGroupSelector: no available placement group has id "pg-0123456789abcdef0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(t, e, inGroup(tc.sel))
			c := condition(t, got, apisv1.ConditionPlacementGroupReady)
			ready := condition(t, got, apisv1.ConditionReady)
			if tc.ok {
				if c.Status != metav1.ConditionTrue || ready.Status != metav1.ConditionTrue {
					t.Errorf("PlacementGroupReady %s, Ready %s %s: want both True", c.Status, ready.Status, ready.Message)
				}
				return
			}
			if c.Status != metav1.ConditionFalse || c.Reason != apisv1.ReasonPlacementGroupNotFound || c.Message != tc.msg {
				t.Errorf("PlacementGroupReady %s %s %q, want False %s %q", c.Status, c.Reason, c.Message, apisv1.ReasonPlacementGroupNotFound, tc.msg)
			}
			if ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "PlacementGroupReady=False") {
				t.Errorf("Ready %s %q, want False naming PlacementGroupReady", ready.Status, ready.Message)
			}
		})
	}
	// What went on the wire: the name in GroupNames, the id in GroupIds, each with state=available.
	reqs := e.srv.RequestsOf("DescribePlacementGroups")
	if len(reqs) != 4 {
		t.Fatalf("%d DescribePlacementGroups calls, want 4", len(reqs))
	}
	first, second := reqs[0].(*ec2.DescribePlacementGroupsInput), reqs[1].(*ec2.DescribePlacementGroupsInput)
	if fmt.Sprint(first.GroupNames, first.GroupIds) != "[ml-training] []" || fmt.Sprint(second.GroupNames, second.GroupIds) != fmt.Sprintf("[] [%s]", id) {
		t.Errorf("selectors sent %v %v / %v %v", first.GroupNames, first.GroupIds, second.GroupNames, second.GroupIds)
	}
	if len(first.Filters) != 1 || aws.ToString(first.Filters[0].Name) != "state" || fmt.Sprint(first.Filters[0].Values) != "[available]" {
		t.Errorf("filters %+v, want state=available", first.Filters)
	}
}

// A class without a selector is PlacementGroupReady=True (Karpenter sets it True when there is
// nothing to resolve) and calls nothing.
func TestNoPlacementGroupSelectorIsReady(t *testing.T) {
	e := setup(t)
	got := resolve(t, e, nodeClass("al2023@latest"))
	if c := condition(t, got, apisv1.ConditionPlacementGroupReady); c.Status != metav1.ConditionTrue {
		t.Errorf("PlacementGroupReady %s", c.Status)
	}
	if n := e.counts.get("DescribePlacementGroups"); n != 0 {
		t.Errorf("%d DescribePlacementGroups calls, want 0", n)
	}
}

// A cluster group: the launch template carries Placement.GroupId (no PartitionNumber), the
// instance is in the group (DescribeInstances Placement.GroupId). Once it runs in us-east-1a, a
// launch offered only us-east-1b comes back as insufficient capacity for that offering (a
// cluster group spans one zone), which is what the launch step marks unavailable; offered
// us-east-1a again, it launches beside the first.
func TestClusterPlacementGroupLaunch(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	id := addGroup(t, e, "ml-training", ec2types.PlacementStrategyCluster, 0)
	nc := inGroup(apisv1.PlacementGroupSelector{Name: "ml-training"})
	a := e.offering(t, "m5.large", "us-east-1a", "on-demand")
	inst, err := e.p.Create(ctx, request("tok-pg-1", nc, a))
	if err != nil {
		t.Fatal(err)
	}
	if inst.PlacementGroupID != id || inst.PlacementPartition != 0 || inst.Zone != "us-east-1a" {
		t.Errorf("instance in group %q partition %d zone %s, want %s 0 us-east-1a", inst.PlacementGroupID, inst.PlacementPartition, inst.Zone, id)
	}
	d := template(t, e, fleetInputs(e)[0])
	if d.Placement == nil || aws.ToString(d.Placement.GroupId) != id || d.Placement.PartitionNumber != nil {
		t.Fatalf("template placement %+v, want GroupId %s and no partition", d.Placement, id)
	}

	b := e.offering(t, "m5.large", "us-east-1b", "on-demand")
	_, err = e.p.Create(ctx, request("tok-pg-2", nc, b))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) || len(ice.Unavailable) != 1 || ice.Unavailable[0].Offering.Key() != b.Key() || ice.Unavailable[0].Code != "InsufficientInstanceCapacity" {
		t.Fatalf("launch into us-east-1b: %v, want InsufficientInstanceCapacity for %s", err, b)
	}
	// The refusal holds inside the group only: its scope is the name selector's,
	// "pgname-" and the first 8 bytes of sha256("ml-training") in hex.
	if got := ice.Unavailable[0].Scope; got != "pgname-3939283794785d5c" {
		t.Errorf("scope %q, want pgname-3939283794785d5c", got)
	}
	if _, err := e.p.Create(ctx, request("tok-pg-3", nc, a)); err != nil {
		t.Fatalf("second launch into us-east-1a: %v", err)
	}
}

// A spread group holds at most 7 live instances per zone: the 8th launch in us-east-1a is
// refused with InsufficientInstanceCapacity and EC2's spread-limit message (what Karpenter's
// IsSpreadPlacementGroupLimitError reads), while us-east-1b still launches.
func TestSpreadPlacementGroupSevenPerZone(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	addGroup(t, e, "etcd", ec2types.PlacementStrategySpread, 0)
	nc := inGroup(apisv1.PlacementGroupSelector{Name: "etcd"})
	a := e.offering(t, "m5.large", "us-east-1a", "on-demand")
	for i := 1; i <= 7; i++ {
		if _, err := e.p.Create(ctx, request(fmt.Sprintf("tok-spread-%d", i), nc, a)); err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
	}
	_, err := e.p.Create(ctx, request("tok-spread-8", nc, a))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) || len(ice.Unavailable) != 1 || ice.Unavailable[0].Code != "InsufficientInstanceCapacity" {
		t.Fatalf("8th launch in us-east-1a: %v, want InsufficientInstanceCapacity", err)
	}
	// The same fleet sent again through the SDK under a fresh token shows EC2's message.
	in := *fleetInputs(e)[7]
	in.ClientToken = aws.String("tok-spread-8-again")
	out, err := e.ec2.CreateFleet(ctx, &in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || !strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), "limit of instances in this spread placement group") {
		t.Errorf("fleet errors %+v, want the spread limit message", out.Errors)
	}
	if _, err := e.p.Create(ctx, request("tok-spread-b", nc, e.offering(t, "m5.large", "us-east-1b", "on-demand"))); err != nil {
		t.Errorf("launch in us-east-1b: %v", err)
	}
}

func partitionClaim(values ...string) *apisv1.NodeClaim {
	return &apisv1.NodeClaim{Spec: apisv1.NodeClaimSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{{
		NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelPlacementGroupPartition, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}
}

// A partition group of 3: without a partition requirement EC2 spreads the instances evenly,
// the fewest-filled partition first (1, 2, 3, then 1 again); a NodeClaim requiring partitions
// In [3, 2] launches with Placement.PartitionNumber 2, the lowest, as Karpenter picks it; one
// requiring partition 4 is refused before any call, naming the requirement.
func TestPartitionPlacementGroup(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	id := addGroup(t, e, "kafka", ec2types.PlacementStrategyPartition, 3)
	nc := inGroup(apisv1.PlacementGroupSelector{ID: id})
	a := e.offering(t, "m5.large", "us-east-1a", "on-demand")
	for i, want := range []int32{1, 2, 3, 1} {
		req := request(fmt.Sprintf("tok-part-%d", i), nc, a)
		req.NodeClaim = &apisv1.NodeClaim{}
		inst, err := e.p.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if inst.PlacementGroupID != id || inst.PlacementPartition != want {
			t.Errorf("launch %d: group %s partition %d, want %s %d", i, inst.PlacementGroupID, inst.PlacementPartition, id, want)
		}
	}
	req := request("tok-part-targeted", nc, a)
	req.NodeClaim = partitionClaim("3", "2")
	inst, err := e.p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	fleets := fleetInputs(e)
	d := template(t, e, fleets[len(fleets)-1])
	if d.Placement == nil || aws.ToInt32(d.Placement.PartitionNumber) != 2 || inst.PlacementPartition != 2 {
		t.Errorf("template placement %+v, instance partition %d; want partition 2", d.Placement, inst.PlacementPartition)
	}
	req = request("tok-part-4", nc, a)
	req.NodeClaim = partitionClaim("4")
	if _, err := e.p.Create(ctx, req); err == nil || !strings.Contains(err.Error(), apisv1.LabelPlacementGroupPartition) || !strings.Contains(err.Error(), "(1..3)") {
		t.Errorf("partition 4 of 3: %v, want an error naming the requirement and 1..3", err)
	}
}

// A launch from a class whose group does not resolve fails before any fleet, naming the selector.
func TestLaunchIntoUnknownPlacementGroupIsRefused(t *testing.T) {
	e := setup(t)
	_, err := e.p.Create(context.Background(), request("tok-pg-gone", inGroup(apisv1.PlacementGroupSelector{Name: "gone"}),
		e.offering(t, "m5.large", "us-east-1a", "on-demand")))
	if err == nil || !strings.Contains(err.Error(), `spec.placementGroupSelector: no available placement group has name "gone"`) {
		t.Errorf("err %v", err)
	}
	if n := e.counts.get("CreateFleet"); n != 0 {
		t.Errorf("%d CreateFleet calls, want 0", n)
	}
}

// RecordLaunch labels the NodeClaim with the instance's group and partition, which registration
// copies onto the Node (Karpenter's placement-group-id and placement-group-partition labels).
func TestRecordLaunchPlacementLabels(t *testing.T) {
	e := setup(t)
	nc := &apisv1.NodeClaim{}
	e.p.RecordLaunch(nc, apisv1.NodeClassOf(inGroup(apisv1.PlacementGroupSelector{ID: "pg-0abc"})),
		&cloud.Instance{ID: "i-1", PlacementGroupID: "pg-0abc", PlacementPartition: 2})
	if nc.Labels[apisv1.LabelPlacementGroupID] != "pg-0abc" || nc.Labels[apisv1.LabelPlacementGroupPartition] != "2" {
		t.Errorf("labels %v", nc.Labels)
	}
}

// A cluster group does not take burstable types: offered t3.medium (cheaper) and m5.large in
// one zone, the fleet refuses t3.medium with Unsupported and launches m5.large.
func TestClusterPlacementGroupRefusesBurstableTypes(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	addGroup(t, e, "ml-training", ec2types.PlacementStrategyCluster, 0)
	nc := inGroup(apisv1.PlacementGroupSelector{Name: "ml-training"})
	t3, m5 := e.offering(t, "t3.medium", "us-east-1a", "on-demand"), e.offering(t, "m5.large", "us-east-1a", "on-demand")
	if t3.PricePerHour >= m5.PricePerHour {
		t.Fatalf("t3.medium %v is not cheaper than m5.large %v", t3.PricePerHour, m5.PricePerHour)
	}
	inst, err := e.p.Create(ctx, request("tok-pg-t3", nc, t3, m5))
	if err != nil {
		t.Fatal(err)
	}
	if inst.InstanceType != "m5.large" {
		t.Errorf("launched %s, want m5.large", inst.InstanceType)
	}
	in := *fleetInputs(e)[0]
	in.ClientToken = aws.String("tok-pg-t3-again")
	out, err := e.ec2.CreateFleet(ctx, &in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "Unsupported" || out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType != "t3.medium" {
		t.Errorf("fleet errors %+v, want Unsupported for t3.medium", out.Errors)
	}
}

// Ten launches into one spread group and one zone at once: EC2 places atomically, so exactly 7
// launch and 3 are refused with insufficient capacity.
func TestSpreadPlacementGroupLimitUnderConcurrentLaunches(t *testing.T) {
	e := setup(t)
	addGroup(t, e, "etcd", ec2types.PlacementStrategySpread, 0)
	nc := inGroup(apisv1.PlacementGroupSelector{Name: "etcd"})
	a := e.offering(t, "m5.large", "us-east-1a", "on-demand")
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		go func(i int) {
			_, err := e.p.Create(context.Background(), request(fmt.Sprintf("tok-race-%d", i), nc, a))
			errs <- err
		}(i)
	}
	launched, refused := 0, 0
	for i := 0; i < 10; i++ {
		var ice *cloud.InsufficientCapacityError
		switch err := <-errs; {
		case err == nil:
			launched++
		case errors.As(err, &ice):
			refused++
		default:
			t.Errorf("launch: %v", err)
		}
	}
	if launched != 7 || refused != 3 {
		t.Errorf("%d launched, %d refused; want 7 and 3", launched, refused)
	}
}

// A full spread group refuses the zone for every type, so the refusal marks every offering of
// the request in that zone and capacity type, not only the overrides the fleet carried
// (Karpenter marks all the NodeClaim's types there): with 7 instances in us-east-1a, a request of
// 61 us-east-1a offerings sends the 60 cheapest (MaxOverrides), all refused, and comes back with
// all 61 unavailable.
func TestSpreadPlacementGroupLimitMarksTheZone(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	addGroup(t, e, "etcd", ec2types.PlacementStrategySpread, 0)
	nc := inGroup(apisv1.PlacementGroupSelector{Name: "etcd"})
	m5a := e.offering(t, "m5.large", "us-east-1a", "on-demand")
	for i := 1; i <= 7; i++ {
		if _, err := e.p.Create(ctx, request(fmt.Sprintf("tok-zone-%d", i), nc, m5a)); err != nil {
			t.Fatal(err)
		}
	}
	var offs []cloud.OfferingRef
	for _, fam := range []string{"m5", "c5", "r5", "m6i", "c6i", "r6i", "m7i", "c7i", "r7i", "m5a", "c5a", "r5a"} {
		for _, size := range []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge"} {
			if len(offs) < 61 && e.cat.Get(fam+"."+size) != nil {
				offs = append(offs, e.offering(t, fam+"."+size, "us-east-1a", "on-demand"))
			}
		}
	}
	if len(offs) != 61 {
		t.Fatalf("%d offerings, want 61", len(offs))
	}
	_, err := e.p.Create(ctx, request("tok-zone-8", nc, offs...))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("err %v, want insufficient capacity", err)
	}
	fleets := fleetInputs(e)
	sent := 0
	for _, c := range fleets[len(fleets)-1].LaunchTemplateConfigs {
		sent += len(c.Overrides)
	}
	got := map[string]bool{}
	for _, u := range ice.Unavailable {
		got[u.Offering.Key().String()] = true
	}
	if sent != 60 || len(got) != 61 {
		t.Errorf("%d overrides sent, %d offerings unavailable; want 60 and 61", sent, len(got))
	}
}
