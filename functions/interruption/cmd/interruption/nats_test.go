//go:build !lambda.norpc

package main

// The interruption binary's function, run as a NATS worker by shared/runtime over a real embedded
// JetStream server: the notice arrives on the notices subject, the snapshot on the events subject
// (followed, not consumed), and the commands come out on the commands subject. The fake cloud is
// the --cloud default. (The Lambda build, -tags lambda.norpc, has no NATS worker mode.)

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/queue"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/functest"
)

func TestNATSWorkerWaitsForSnapshotThenTaintsTheNoticedNode(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{StoreDir: t.TempDir(), Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := qnats.Connect(url, t.Name(), srv.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// The worker runs with the function role's credentials only (natsauth.For): consuming notices,
	// following events and publishing commands and audit records is all it may do, and enough.
	// The test plays the agent and the DaemonSet on nc.
	fnc, err := qnats.Connect(url, t.Name()+"-worker", srv.ClientOptions(natsauth.RoleFunction)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fnc.Close)
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
		done <- runtime.RunNATS(ctx, f, fnc, runtime.Options{Cluster: cluster, LogLevel: "info"}, functest.Quiet)
	}()

	// Then, once the notice has been tried and asked to wait (not after a fixed sleep: a slow
	// start under load delivered the snapshot first), the agent's snapshot on the events
	// subject: the follower feeds it to the function, and the redelivered notice (1 s backoff)
	// finds the node.
	for waited := false; !waited && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
		h.Lock()
		waited = len(h.attempts) > 0
		h.Unlock()
	}
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
