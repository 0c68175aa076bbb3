package interruption_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime/functest"
)

// An EC2 Capacity Reservation Instance Interruption Warning (the reservation's owner reclaims
// its capacity) on a node the provision function launched into a reservation: the interruption
// function marks the reserved offering unavailable (Karpenter zeroes the reservation), launches
// the replacement outside the reservation (on demand, the pool's fallback) and taints the node,
// as for a spot interruption.
func TestCapacityReservationInterruptionReplacesOutsideTheReservation(t *testing.T) {
	const cr = "cr-0a1b2c3d4e5f60009"
	ctx, nc, pub := jetStream(t)
	w := scenarios.NewWorld(scenarios.Start, 30*time.Second, nil)
	if err := w.Cloud.AddCapacityReservation(fake.CapacityReservation{ID: cr, InstanceType: "m5.xlarge", Zone: "us-east-1a", Total: 1}); err != nil {
		t.Fatal(err)
	}
	profile := "node-profile"
	class := &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "reserved"}, Spec: apisv1.EC2NodeClassSpec{InstanceProfile: &profile,
		CapacityReservationSelectorTerms: []apisv1.CapacityReservationSelectorTerm{{ID: cr}}},
		Status: apisv1.EC2NodeClassStatus{CapacityReservations: []apisv1.CapacityReservation{{ID: cr, InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a",
			OwnerID: "123456789012", InstanceMatchCriteria: "targeted", ReservationType: apisv1.CapacityReservationTypeDefault, State: apisv1.CapacityReservationStateActive}}}}
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: apisv1.KindEC2NodeClass, Name: "reserved"},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"reserved", "on-demand"}}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"}}},
			}}}}}
	w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{EC2: class}})
	w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "train", Controller: ptr(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}}})
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	snap := w.Snapshot()
	if len(snap.Nodes) != 1 || snap.Nodes[0].Labels[apisv1.LabelCapacityReservationID] != cr || snap.Nodes[0].Labels[apisv1.LabelCapacityType] != apisv1.CapacityTypeReserved {
		t.Fatalf("want one node in %s, got %d nodes %v", cr, len(snap.Nodes), snap.Nodes)
	}
	node := snap.Nodes[0]
	snaps := &interruption.LatestSnapshot{Cluster: scenarios.Cluster}
	h := &interruption.Handler{Cluster: scenarios.Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Cloud, Publisher: pub,
		Snapshots: snaps, Now: w.Clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cmds := functest.CollectCommands(ctx, t, nc, scenarios.Cluster)
	_, id, err := cloud.ParseAWSProviderID(node.Spec.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	notice := fmt.Sprintf(`{"version":"0","id":"n-cr","detail-type":%q,"source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1",`+
		`"resources":["arn:aws:ec2:us-east-1:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		notices.DetailTypeCapacityReservationWarn, w.Clock.Now().UTC().Format(time.RFC3339), id, id)
	snaps.Set(w.Snapshot())
	if err := h.Handle(ctx, queue.Message{Data: []byte(notice), Attempt: 1}); !errors.Is(err, interruption.ErrAwaitingReplacement) {
		t.Fatalf("want ErrAwaitingReplacement, got %v", err)
	}
	got := cmds.Wait(t, 3)
	if got[0].Kind != "MarkOfferingsUnavailable" || got[1].Kind != "CreateNodeClaim" || got[2].Kind != "TaintNode" {
		t.Fatalf("want mark, create, taint; got %s, %s, %s", got[0].Kind, got[1].Kind, got[2].Kind)
	}
	if m := got[0].Unavailable[0]; m.InstanceType != "m5.xlarge" || m.Zone != "us-east-1a" || m.CapacityType != apisv1.CapacityTypeReserved {
		t.Errorf("marked %+v, want m5.xlarge/us-east-1a/reserved", m)
	}
	repl := got[1].NodeClaim
	if repl.Labels[apisv1.LabelCapacityType] != apisv1.CapacityTypeOnDemand || repl.Labels[apisv1.LabelCapacityReservationID] != "" {
		t.Errorf("replacement labels %v, want on-demand outside the reservation", repl.Labels)
	}
}
