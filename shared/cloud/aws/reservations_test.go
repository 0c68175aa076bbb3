package aws_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
	"github.com/dovetail-dev/dovetail/shared/launch"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// The reservations of these tests: ids as EC2 spells them.
const (
	crML    = "cr-0a1b2c3d4e5f60001"
	crBlock = "cr-0a1b2c3d4e5f60002"
	crWeb   = "cr-0a1b2c3d4e5f60003"
	crGone  = "cr-0a1b2c3d4e5f60004"
)

func addReservation(t *testing.T, e *env, r fake.CapacityReservation) {
	t.Helper()
	if err := e.cloud.AddCapacityReservation(r); err != nil {
		t.Fatal(err)
	}
}

func reserved(typ, zone, id, rtype string) cloud.OfferingRef {
	return cloud.OfferingRef{InstanceType: typ, Zone: zone, CapacityType: apisv1.CapacityTypeReserved, ReservationID: id, ReservationType: rtype}
}

// The resolver writes status.capacityReservations as Karpenter's status controller does: the
// active reservations the terms select (tags, an id that does not exist matches nothing), each
// once and sorted by id, a capacity block 30 minutes from its end marked expiring, and
// CapacityReservationsReady True.
func TestCapacityReservationsResolvedIntoStatus(t *testing.T) {
	now := time.Now()
	e := setup(t, func(o *dvaws.Options) { o.Now = func() time.Time { return now } })
	end := now.Add(30 * time.Minute).Truncate(time.Second)
	addReservation(t, e, fake.CapacityReservation{ID: crML, InstanceType: "m5.xlarge", Zone: "us-east-1a", Total: 2, Tags: map[string]string{"team": "ml"}})
	addReservation(t, e, fake.CapacityReservation{ID: crBlock, InstanceType: "m5.2xlarge", Zone: "us-east-1b", Total: 1, Type: apisv1.CapacityReservationTypeCapacityBlock,
		End: &end, Tags: map[string]string{"team": "ml"}})
	addReservation(t, e, fake.CapacityReservation{ID: crWeb, InstanceType: "c5.large", Zone: "us-east-1a", Total: 1, Tags: map[string]string{"team": "web"}})
	addReservation(t, e, fake.CapacityReservation{ID: crGone, InstanceType: "m5.large", Zone: "us-east-1a", Total: 1, State: "cancelled", Tags: map[string]string{"team": "ml"}})
	nc := nodeClass("al2023@latest")
	nc.Spec.CapacityReservationSelectorTerms = []apisv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}, {ID: "cr-0ffffffffffffffff"}, {ID: crML}}
	got := resolve(t, e, nc)
	want := []apisv1.CapacityReservation{
		{ID: crML, InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a", OwnerID: ec2api.DefaultAccountID, InstanceMatchCriteria: "targeted",
			ReservationType: apisv1.CapacityReservationTypeDefault, State: apisv1.CapacityReservationStateActive},
		{ID: crBlock, InstanceType: "m5.2xlarge", AvailabilityZone: "us-east-1b", OwnerID: ec2api.DefaultAccountID, InstanceMatchCriteria: "targeted",
			ReservationType: apisv1.CapacityReservationTypeCapacityBlock, State: apisv1.CapacityReservationStateExpiring, EndTime: &metav1.Time{Time: end.UTC()}},
	}
	if len(got.Status.CapacityReservations) != len(want) {
		t.Fatalf("status.capacityReservations %+v, want %+v", got.Status.CapacityReservations, want)
	}
	for i, w := range want {
		g := got.Status.CapacityReservations[i]
		if g.ID != w.ID || g.InstanceType != w.InstanceType || g.AvailabilityZone != w.AvailabilityZone || g.OwnerID != w.OwnerID ||
			g.InstanceMatchCriteria != w.InstanceMatchCriteria || g.ReservationType != w.ReservationType || g.State != w.State ||
			(w.EndTime == nil) != (g.EndTime == nil) || (w.EndTime != nil && !g.EndTime.Equal(w.EndTime)) {
			t.Errorf("capacityReservations[%d] = %+v, want %+v", i, g, w)
		}
	}
	if c := condition(t, got, apisv1.ConditionCapacityReservationsReady); c.Status != metav1.ConditionTrue {
		t.Errorf("CapacityReservationsReady %+v", c)
	}
	if c := condition(t, got, apisv1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}
}

// A launch into a reservation goes through a launch template that targets it
// (capacity-reservations-only) in an on-demand fleet, takes one of its instances (EC2's count
// drops), and the instance reads back as reserved in that reservation; a launch into the full
// reservation is refused with EC2's ReservationCapacityExceeded as an unavailable offering.
func TestLaunchIntoCapacityReservation(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	addReservation(t, e, fake.CapacityReservation{ID: crML, InstanceType: "m5.xlarge", Zone: "us-east-1a", Total: 1})
	counts, err := e.p.ReservationCounts(ctx, []string{crML, "cr-0ffffffffffffffff"})
	if err != nil || len(counts) != 1 || counts[crML] != (apisv1.ReservationCount{Available: 1, Total: 1}) {
		t.Fatalf("ReservationCounts: %+v, %v; want %s 1 of 1", counts, err, crML)
	}
	nc := nodeClass("al2023@latest")
	inst, err := e.p.Create(ctx, request("tok-reserved", nc, reserved("m5.xlarge", "us-east-1a", crML, apisv1.CapacityReservationTypeDefault)))
	if err != nil {
		t.Fatal(err)
	}
	if inst.CapacityType != apisv1.CapacityTypeReserved || inst.CapacityReservationID != crML || inst.CapacityReservationType != apisv1.CapacityReservationTypeDefault {
		t.Errorf("instance %+v, want reserved in %s", inst, crML)
	}
	fleets := fleetInputs(e)
	if len(fleets) != 1 || fleets[0].TargetCapacitySpecification.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeOnDemand {
		t.Fatalf("fleets %+v, want one on-demand fleet", fleets)
	}
	lt := template(t, e, fleets[0])
	if s := lt.CapacityReservationSpecification; s == nil || s.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly ||
		s.CapacityReservationTarget == nil || aws.ToString(s.CapacityReservationTarget.CapacityReservationId) != crML || lt.InstanceMarketOptions != nil {
		t.Errorf("launch template capacity reservation %+v, market %+v", s, lt.InstanceMarketOptions)
	}
	got, err := e.p.Get(ctx, inst.ProviderID)
	if err != nil || got.CapacityType != apisv1.CapacityTypeReserved || got.CapacityReservationID != crML {
		t.Errorf("Get: %+v, %v", got, err)
	}
	if counts, _ := e.p.ReservationCounts(ctx, []string{crML}); counts[crML].Available != 0 {
		t.Errorf("after the launch %s has %d free", crML, counts[crML].Available)
	}
	_, err = e.p.Create(ctx, request("tok-reserved-2", nc, reserved("m5.xlarge", "us-east-1a", crML, apisv1.CapacityReservationTypeDefault)))
	var ice *cloud.InsufficientCapacityError
	if !errors.As(err, &ice) || len(ice.Unavailable) != 1 || ice.Unavailable[0].Code != fake.CodeReservationCapacityExceeded ||
		ice.Unavailable[0].Offering.Key() != (events.OfferingKey{InstanceType: "m5.xlarge", Zone: "us-east-1a", CapacityType: apisv1.CapacityTypeReserved}) {
		t.Fatalf("launch into the full reservation: %v, want ReservationCapacityExceeded on m5.xlarge/us-east-1a/reserved", err)
	}
	// Terminating the instance gives the reservation its instance back.
	if err := e.p.Delete(ctx, inst.ProviderID); err != nil {
		t.Fatal(err)
	}
	e.cloud.Tick(ctx)
	if counts, _ := e.p.ReservationCounts(ctx, []string{crML}); counts[crML].Available != 1 {
		t.Errorf("after termination %s has %d free, want 1", crML, counts[crML].Available)
	}
}

// EC2 refuses a launch that targets a reservation of another zone or type, a capacity block as
// on-demand capacity, a reservation past its end, or one that does not exist: each a fleet
// error on the reserved offering.
func TestLaunchIntoCapacityReservationRefusedAsEC2Does(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Minute)
	addReservation(t, e, fake.CapacityReservation{ID: crML, InstanceType: "m5.xlarge", Zone: "us-east-1a", Total: 2})
	addReservation(t, e, fake.CapacityReservation{ID: crBlock, InstanceType: "m5.2xlarge", Zone: "us-east-1b", Total: 1, Type: apisv1.CapacityReservationTypeCapacityBlock})
	addReservation(t, e, fake.CapacityReservation{ID: crWeb, InstanceType: "c5.large", Zone: "us-east-1a", Total: 1, End: &past})
	nc := nodeClass("al2023@latest")
	for i, c := range []struct {
		off  cloud.OfferingRef
		code string
	}{
		{reserved("m5.xlarge", "us-east-1b", crML, apisv1.CapacityReservationTypeDefault), fake.CodeReservationMismatch},
		{reserved("m5.large", "us-east-1a", crML, apisv1.CapacityReservationTypeDefault), fake.CodeReservationMismatch},
		{reserved("m5.2xlarge", "us-east-1b", crBlock, apisv1.CapacityReservationTypeDefault), fake.CodeReservationMismatch},
		{reserved("c5.large", "us-east-1a", crWeb, apisv1.CapacityReservationTypeDefault), fake.CodeReservationUnavailable},
		{reserved("m5.xlarge", "us-east-1a", "cr-0ffffffffffffffff", apisv1.CapacityReservationTypeDefault), fake.CodeReservationNotFound},
	} {
		_, err := e.p.Create(ctx, request("tok-refused-"+string(rune('a'+i)), nc, c.off))
		var ice *cloud.InsufficientCapacityError
		if !errors.As(err, &ice) || len(ice.Unavailable) != 1 || ice.Unavailable[0].Code != c.code {
			t.Errorf("%s: %v, want %s", c.off, err, c.code)
		}
	}
	// The capacity block itself: a capacity-block fleet and market type.
	inst, err := e.p.Create(ctx, request("tok-block", nc, reserved("m5.2xlarge", "us-east-1b", crBlock, apisv1.CapacityReservationTypeCapacityBlock)))
	if err != nil || inst.CapacityReservationType != apisv1.CapacityReservationTypeCapacityBlock {
		t.Fatalf("capacity block launch: %+v, %v", inst, err)
	}
	fleets := fleetInputs(e)
	last := fleets[len(fleets)-1]
	if last.TargetCapacitySpecification.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeCapacityBlock || last.OnDemandOptions != nil {
		t.Errorf("capacity block fleet %+v", last.TargetCapacitySpecification)
	}
	if m := template(t, e, last).InstanceMarketOptions; m == nil || m.MarketType != ec2types.MarketTypeCapacityBlock {
		t.Errorf("capacity block template market options %+v", m)
	}
	if got, err := e.p.Get(ctx, inst.ProviderID); err != nil || got.CapacityReservationType != apisv1.CapacityReservationTypeCapacityBlock {
		t.Errorf("Get: %+v, %v", got, err)
	}
}

// One decision through launch.Step, the real SDK and the fake EC2 face: the plan was made on a
// count that says the reservation has an instance free, but it is full (another launch took
// it); the reserved launch is refused (ReservationCapacityExceeded), its offering marked
// unavailable, and the re-plan of the same decision launches the pod on demand.
func TestFullReservationFallsBackInTheSameDecision(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	addReservation(t, e, fake.CapacityReservation{ID: crML, InstanceType: "m5.xlarge", Zone: "us-east-1a", Total: 1})
	if _, err := e.p.Create(ctx, request("tok-other", nodeClass("al2023@latest"), reserved("m5.xlarge", "us-east-1a", crML, ""))); err != nil {
		t.Fatal(err)
	}
	nc := nodeClass("al2023@latest")
	nc.Spec.CapacityReservationSelectorTerms = []apisv1.CapacityReservationSelectorTerm{{ID: crML}}
	nc.Status.CapacityReservations = []apisv1.CapacityReservation{{ID: crML, InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a",
		OwnerID: ec2api.DefaultAccountID, InstanceMatchCriteria: "targeted", ReservationType: apisv1.CapacityReservationTypeDefault, State: apisv1.CapacityReservationStateActive}}
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimSpec{
		NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: apisv1.KindEC2NodeClass, Name: "default"},
		Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"reserved", "on-demand"}}},
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"}}}}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}}}
	now := time.Now()
	classes := []apisv1.NodeClass{apisv1.NodeClassOf(nc)}
	step := launch.Step{Launcher: &launch.Launcher{Cluster: cluster, Provider: e.p, Catalog: e.cat}, Decision: launch.Decision{Revision: 7, Time: now},
		NodeClasses: classes, Publish: func(context.Context, events.Command) error { return nil }}
	stale := map[string]apisv1.ReservationCount{crML: {Available: 1}} // counted before the other launch
	var plans []*provisioning.Plan
	out, err := step.Run(ctx, func(marks []events.UnavailableOfferingMark, launched []apisv1.NodeClaim) (*provisioning.Plan, error) {
		plan, err := provisioning.Solve(provisioning.Input{Pods: []*corev1.Pod{pod}, NodePools: []*apisv1.NodePool{np}, NodeClasses: classes,
			Catalog: e.cat, ReservationCounts: stale, Unavailable: events.UnavailableAt(marks, now)})
		plans = append(plans, plan)
		return plan, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || plans[0].NodeClaims[0].Cheapest().ReservationID != crML {
		t.Fatalf("%d plans; want a reserved plan first and a re-plan", len(plans))
	}
	if len(out.Launched) != 1 || out.Launched[0].Instance.CapacityType != apisv1.CapacityTypeOnDemand || out.Launched[0].NodeClaim.Labels[apisv1.LabelCapacityReservationID] != "" {
		t.Fatalf("launched %+v, want the pod on demand", out.Launched)
	}
	if len(out.Marks) != 1 || out.Marks[0].OfferingKey != (events.OfferingKey{InstanceType: "m5.xlarge", Zone: "us-east-1a", CapacityType: apisv1.CapacityTypeReserved}) ||
		out.Marks[0].Reason != fake.CodeReservationCapacityExceeded {
		t.Errorf("marks %+v, want m5.xlarge/us-east-1a/reserved ReservationCapacityExceeded", out.Marks)
	}
}
