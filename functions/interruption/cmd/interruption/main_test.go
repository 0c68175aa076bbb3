package main

// The interruption binary's function, run as a NATS worker by shared/runtime over a real embedded
// JetStream server: the notice arrives on the notices subject, the snapshot on the events subject
// (followed, not consumed), and the commands come out on the commands subject. The fake cloud is
// the --cloud default.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/queue"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/runtime"
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

func TestNATSWorkerWaitsForSnapshotThenTaintsTheNoticedNode(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := qnats.Connect(url, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := qnats.EnsureStream(ctx, nc, qnats.StreamConfig{Cluster: cluster}); err != nil {
		t.Fatal(err)
	}
	pub, err := qnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	// Commands out, read as the agent reads them.
	cmds := functest.CollectCommands(ctx, t, nc, cluster)

	// The notice comes first: no snapshot yet, so the first delivery waits (ErrAwaitingSnapshot).
	if err := pub.Publish(ctx, queue.NoticesSubject(cluster), "notice-1", spotNotice("11111111-2222-3333-4444-555555555555")); err != nil {
		t.Fatal(err)
	}
	var h struct {
		sync.Mutex
		attempts []string
	}
	f := function(func(ih *interruption.Handler, _ *interruption.LatestSnapshot) {
		ih.Now = func() time.Time { return noticeTime.Add(20 * time.Second) }
		ih.OnDecision = func(d interruption.Decision) {
			h.Lock()
			h.attempts = append(h.attempts, d.Action)
			h.Unlock()
		}
	})
	functest.ParseFlags(t, f) // the defaults: --cloud fake, --rebalance Record
	done := make(chan error, 1)
	go func() {
		done <- runtime.RunNATS(ctx, f, nc, runtime.Options{Cluster: cluster, LogLevel: "info"}, functest.Quiet)
	}()

	// Then the agent's snapshot on the events subject: the follower feeds it to the function,
	// and the redelivered notice (1 s backoff) finds the node.
	time.Sleep(300 * time.Millisecond)
	if err := pub.Publish(ctx, queue.EventsSubject(cluster), "snapshot-7", snapshotEvent(t, 7)); err != nil {
		t.Fatal(err)
	}
	var taint *events.Command
	for taint == nil && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		for _, c := range cmds.All() {
			if c.Kind == events.CommandTaintNode {
				taint = &c
			}
		}
	}
	if taint == nil {
		select {
		case err := <-done:
			t.Fatalf("RunNATS returned %v", err)
		default:
		}
		t.Fatalf("no taint command; decisions %v, commands %v", h.attempts, cmds.All())
	}
	if taint.NodeName != nodeName || taint.SnapshotRevision != 7 || taint.Taint == nil ||
		taint.Taint.Key != apisv1.TaintKeyDisrupted || taint.Taint.Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taint command = %+v", taint)
	}
	h.Lock()
	if len(h.attempts) < 2 || h.attempts[0] != "wait" || h.attempts[len(h.attempts)-1] != "replace" {
		t.Errorf("decisions = %v, want a wait before the snapshot, then replace", h.attempts)
	}
	h.Unlock()
	var kinds []string
	for _, c := range cmds.All() {
		kinds = append(kinds, string(c.Kind))
	}
	// Spot interruption of an empty node (functions/interruption docs): mark the offering, taint,
	// and drain at once (no pod needs a place).
	if got := strings.Join(kinds, ","); !strings.Contains(got, string(events.CommandMarkUnavailable)) || !strings.Contains(got, string(events.CommandDrainNode)) {
		t.Errorf("commands = %s, want mark-unavailable, taint and drain", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunNATS: %v", err)
	}
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
