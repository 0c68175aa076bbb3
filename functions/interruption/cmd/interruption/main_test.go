package main

// The interruption binary's test inputs (a notice, a snapshot) and its Lambda dispatch; the NATS
// worker is tested in nats_test.go, the Lambda bootstrap under the emulator in rie_test.go.

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime/functest"
)

const (
	cluster  = "int-test"
	instance = "i-0123456789abcdef0"
	nodeName = "ip-10-0-1-17.ec2.internal"
)

var noticeTime = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// spotNotice is an EC2 Spot Instance Interruption Warning as EventBridge delivers it (AWS EC2
// User Guide, "Spot Instance interruption notices": detail-type, source aws.ec2, detail
// instance-id and instance-action).
func spotNotice(id string) []byte {
	return []byte(fmt.Sprintf(`{"version":"0","id":%q,"detail-type":%q,"source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1",`+
		`"resources":["arn:aws:ec2:us-east-1:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		id, notices.DetailTypeSpotInterruption, noticeTime.Format(time.RFC3339), instance, instance))
}

// snapshotEvent is a TypeSnapshot event with one empty, Ready spot node running the instance.
func snapshotEvent(t *testing.T, rev int64) []byte {
	t.Helper()
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{
		corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a", apisv1.LabelCapacityType: "spot"}},
		Spec:   corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	return functest.SnapshotEvent(t, cluster, events.Snapshot{Revision: rev, Time: metav1.NewTime(noticeTime.Add(10 * time.Second)),
		Nodes: []corev1.Node{node}})
}

// Under Lambda, a record published on the events subject updates the snapshot; any other record
// (an EventBridge notice carries no dovetail-subject attribute) is a notice.
func TestDispatchRoutesEventsToTheSnapshotSource(t *testing.T) {
	latest := &interruption.LatestSnapshot{Cluster: cluster}
	var noticesSeen []string
	h := Dispatch(cluster, latest, func(_ context.Context, m queue.Message) error { noticesSeen = append(noticesSeen, m.ID); return nil })
	ctx := context.Background()
	if err := h(ctx, queue.Message{ID: "snapshot-3", Subject: queue.EventsSubject(cluster), Data: snapshotEvent(t, 3)}); err != nil {
		t.Fatal(err)
	}
	if err := h(ctx, queue.Message{ID: "n-1", Data: spotNotice("n-1")}); err != nil {
		t.Fatal(err)
	}
	snap, _ := latest.Latest(ctx)
	if snap == nil || snap.Revision != 3 || len(noticesSeen) != 1 || noticesSeen[0] != "n-1" {
		t.Errorf("snapshot %v, notices %v; want revision 3 and [n-1]", snap, noticesSeen)
	}
}
