package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime"
)

// build parses args as runtime.Command would and builds the handler for a NATS-mode transport
// (the publisher is never reached: the snapshots below decide nothing).
func build(t *testing.T, args ...string) (queue.Handler, error) {
	t.Helper()
	f := function()
	fs := pflag.NewFlagSet(f.Name, pflag.ContinueOnError)
	f.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return f.Build(ctx, runtime.Transport{Mode: runtime.ModeNATS, Cluster: "c1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func snapshot(t *testing.T, cluster string) []byte {
	t.Helper()
	b, err := events.NewEvent(cluster, "agent", events.TypeSnapshot, "snapshot-1", &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion,
		Cluster: cluster, Revision: 1, Time: metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFlagsSelectModeAndCloud(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "greedy"}, `--mode (DOVETAIL_MODE) "greedy": must be search or prefix`},
		{[]string{"--cloud", "gcp"}, `--cloud (DOVETAIL_CLOUD) "gcp": must be fake or aws`},
	} {
		if _, err := build(t, c.args...); err == nil || err.Error() != c.want {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

func TestHandlerOfTheBinary(t *testing.T) {
	h, err := build(t, "--mode", "prefix")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// An empty cluster: nothing to consolidate, acknowledged.
	if err := h(ctx, queue.Message{ID: "snapshot-1", Data: snapshot(t, "c1")}); err != nil {
		t.Errorf("empty snapshot: %v, want nil", err)
	}
	// Another cluster's snapshot is refused as poison, naming the field.
	if err := h(ctx, queue.Message{ID: "snapshot-1", Data: snapshot(t, "c2")}); !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "snapshot.cluster") {
		t.Errorf("other cluster: %v, want poison naming snapshot.cluster", err)
	}
}
