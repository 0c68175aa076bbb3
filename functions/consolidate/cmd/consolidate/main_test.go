package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime/functest"
)

func TestFlagsSelectModeAndCloud(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "greedy"}, `--mode (DOVETAIL_MODE) "greedy": must be search or prefix`},
		{[]string{"--cloud", "gcp"}, `--cloud (DOVETAIL_CLOUD) "gcp": must be fake or aws or azure`},
	} {
		if _, err := functest.Build(t, function(), "c1", c.args...); err == nil || err.Error() != c.want {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

func TestHandlerOfTheBinary(t *testing.T) {
	h, err := functest.Build(t, function(), "c1", "--mode", "prefix")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// An empty cluster: nothing to consolidate, acknowledged.
	if err := h(ctx, queue.Message{ID: "snapshot-1", Data: functest.SnapshotEvent(t, "c1", events.Snapshot{Revision: 1})}); err != nil {
		t.Errorf("empty snapshot: %v, want nil", err)
	}
	// Another cluster's snapshot is refused as poison, naming the field.
	other := functest.SnapshotEvent(t, "c2", events.Snapshot{Revision: 1})
	if err := h(ctx, queue.Message{ID: "snapshot-1", Data: other}); !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "snapshot.cluster") {
		t.Errorf("other cluster: %v, want poison naming snapshot.cluster", err)
	}
}
