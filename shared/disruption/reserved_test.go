package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/ec2class"
)

func inReservation(nc *apisv1.NodeClaim, id, typ string) {
	nc.Labels[apisv1.LabelCapacityType] = apisv1.CapacityTypeReserved
	nc.Labels[apisv1.LabelCapacityReservationID] = id
	nc.Labels[apisv1.LabelCapacityReservationType] = typ
}

func withReservations(class *apisv1.EC2NodeClass, rs ...apisv1.CapacityReservation) {
	class.Status.CapacityReservations = rs
	class.Status.Conditions = append(class.Status.Conditions, metav1.Condition{Type: apisv1.ConditionCapacityReservationsReady, Status: metav1.ConditionTrue})
}

// A NodeClaim in a reservation its NodeClass no longer selects drifted (Karpenter's
// CapacityReservationDrift); while the class's reservations are not resolved nothing is compared.
func TestCapacityReservationDrift(t *testing.T) {
	np := driftPool("default")
	np.Spec.Template.Spec.Requirements[0].Values = []string{"reserved", "on-demand"}
	node, nc := driftNode("n1", &np, driftNow)
	inReservation(&nc, "cr-0a", apisv1.CapacityReservationTypeDefault)
	node.Labels = nc.Labels
	class := driftClass()
	if d := Drifted(&nc, &node, &np, apisv1.NodeClassOf(&class), ec2class.Rules{}); d.Kind != "" {
		t.Fatalf("reservations not resolved: %+v, want no drift", d)
	}
	withReservations(&class, apisv1.CapacityReservation{ID: "cr-0a", InstanceType: "m5.large", AvailabilityZone: "us-east-1a"})
	if d := Drifted(&nc, &node, &np, apisv1.NodeClassOf(&class), ec2class.Rules{}); d.Kind != "" {
		t.Fatalf("still selected: %+v", d)
	}
	class.Status.CapacityReservations = nil
	if d := Drifted(&nc, &node, &np, apisv1.NodeClassOf(&class), ec2class.Rules{}); d.Kind != ec2class.DriftCapacityReservation || !strings.Contains(d.Detail, "cr-0a") {
		t.Fatalf("no longer selected: %+v, want %s naming cr-0a", d, ec2class.DriftCapacityReservation)
	}
}

// A node in a capacity block is handed to termination from 40 minutes before the block's end
// (10 minutes before EC2 starts reclaiming it), whatever the budget, as Karpenter deletes it; a
// default reservation with an end time is not.
func TestCapacityBlockExpiry(t *testing.T) {
	np := driftPool("default")
	np.Spec.Template.Spec.Requirements[0].Values = []string{"reserved"}
	np.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: "0"}}
	end := metav1.NewTime(driftNow.Add(39 * time.Minute))
	block, bnc := driftNode("block", &np, driftNow.Add(-time.Hour))
	inReservation(&bnc, "cr-0b", apisv1.CapacityReservationTypeCapacityBlock)
	block.Labels = bnc.Labels
	odcr, onc := driftNode("odcr", &np, driftNow.Add(-time.Hour))
	inReservation(&onc, "cr-0c", apisv1.CapacityReservationTypeDefault)
	odcr.Labels = onc.Labels
	class := driftClass()
	withReservations(&class,
		apisv1.CapacityReservation{ID: "cr-0b", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", ReservationType: apisv1.CapacityReservationTypeCapacityBlock, State: "active", EndTime: &end},
		apisv1.CapacityReservation{ID: "cr-0c", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", ReservationType: apisv1.CapacityReservationTypeDefault, State: "active", EndTime: &end})
	snap := &events.Snapshot{Cluster: "c", Time: metav1.NewTime(driftNow), NodePools: []apisv1.NodePool{np},
		NodeClasses: []apisv1.NodeClass{{EC2: &class}}, Nodes: []corev1.Node{block, odcr}, NodeClaims: []apisv1.NodeClaim{bnc, onc}}
	plan := PlanDrift(snap, ec2class.Rules{})
	if len(plan.Expired) != 1 || plan.Expired[0].Name() != "block" || plan.Expired[0].Reason != ReasonCapacityBlockExpiring {
		t.Fatalf("expired %+v, want the capacity block's node only", plan.Expired)
	}
	if want := end.Add(-40 * time.Minute); !plan.Expired[0].ExpiredAt.Equal(want) || !strings.Contains(plan.Expired[0].Why(), "cr-0b") {
		t.Errorf("expiring since %v (%s), want %v", plan.Expired[0].ExpiredAt, plan.Expired[0].Why(), want)
	}
	// 41 minutes before the end it is still active.
	snap.Time = metav1.NewTime(driftNow.Add(-2 * time.Minute))
	if plan := PlanDrift(snap, ec2class.Rules{}); len(plan.Expired) != 0 {
		t.Errorf("41 minutes before the end: expired %+v", plan.Expired)
	}
}
