// Package functest helps the tests of function binaries (functions/*/cmd/*): it parses a
// function's flags as runtime.Command would, builds its handler, makes snapshot events, and
// collects the commands a function publishes on a NATS stream. For tests only.
package functest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/runtime"
)

// Quiet is a logger that discards.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// ParseFlags registers f's own flags on a new set and parses args (nil: every default).
func ParseFlags(t testing.TB, f runtime.Function, args ...string) {
	t.Helper()
	fs := pflag.NewFlagSet(f.Name, pflag.ContinueOnError)
	if f.Flags != nil {
		f.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
}

// Build parses args and builds f's handler for a NATS-mode transport of cluster with no
// publisher (for handlers that decide nothing, or fail first).
func Build(t testing.TB, f runtime.Function, cluster string, args ...string) (queue.Handler, error) {
	t.Helper()
	ParseFlags(t, f, args...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return f.Build(ctx, runtime.Transport{Mode: runtime.ModeNATS, Cluster: cluster, Logger: Quiet})
}

// SnapshotEvent is a TypeSnapshot event of snap (its SchemaVersion and Cluster filled when
// empty) with the id "snapshot-<revision>".
func SnapshotEvent(t testing.TB, cluster string, snap events.Snapshot) []byte {
	t.Helper()
	if snap.SchemaVersion == 0 {
		snap.SchemaVersion = events.SnapshotSchemaVersion
	}
	if snap.Cluster == "" {
		snap.Cluster = cluster
	}
	if snap.Time.IsZero() {
		snap.Time = metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	}
	b, err := events.NewEvent(cluster, "agent", events.TypeSnapshot, fmt.Sprintf("snapshot-%d", snap.Revision), &snap)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Commands collects the commands published on the cluster's commands subject (durable
// "agent", as the agent reads them) until ctx ends.
type Commands struct {
	mu   sync.Mutex
	cmds []events.Command
}

// CollectCommands starts collecting; the stream must exist.
func CollectCommands(ctx context.Context, t testing.TB, nc *natsgo.Conn, cluster string) *Commands {
	t.Helper()
	c := &Commands{}
	cons, err := qnats.NewConsumer(ctx, nc, qnats.ConsumerConfig{Cluster: cluster, Durable: "agent",
		Subject: queue.CommandsSubject(cluster), MaxAckPending: -1, Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	go cons.Consume(ctx, func(ctx context.Context, m queue.Message) error {
		env, err := events.Decode(m.Data)
		if err != nil {
			return err
		}
		cmd, err := events.Codec{}.Command(ctx, env)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.cmds = append(c.cmds, *cmd)
		c.mu.Unlock()
		return nil
	})
	return c
}

// All returns the commands collected so far, in arrival order.
func (c *Commands) All() []events.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.Command(nil), c.cmds...)
}

// Wait returns the commands once at least n have arrived (in arrival order); it fails the test
// after 20 seconds. The bound only ends a failing test (Wait returns as soon as n are there), so
// it is generous: on CI's loaded 2-core machine the commands cross the embedded JetStream server
// while many test binaries share the cores.
func (c *Commands) Wait(t testing.TB, n int) []events.Command {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got := c.All(); len(got) >= n {
			return got
		}
	}
	t.Fatalf("fewer than %d commands arrived", n)
	return nil
}
