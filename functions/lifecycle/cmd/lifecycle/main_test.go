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

func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cloud", "gcp"}, `--cloud (DOVETAIL_CLOUD) "gcp": must be fake or aws or azure`},
		{[]string{"--registration-ttl", "soon"}, `--registration-ttl (DOVETAIL_REGISTRATION_TTL) "soon": must be a positive duration such as 15m`},
		{[]string{"--registration-ttl", "-1m"}, `--registration-ttl (DOVETAIL_REGISTRATION_TTL) "-1m": must be a positive duration such as 15m`},
	} {
		if _, err := functest.Build(t, function(), "c1", c.args...); err == nil || err.Error() != c.want {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

// DOVETAIL_NODE_REPAIR with a value that is not a boolean is refused, naming the variable:
// keeping the default would leave repair on where the operator meant it off.
func TestNodeRepairEnvTypo(t *testing.T) {
	t.Setenv("DOVETAIL_NODE_REPAIR", "off")
	want := `DOVETAIL_NODE_REPAIR "off": must be true or false`
	if _, err := functest.Build(t, function(), "c1"); err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	t.Setenv("DOVETAIL_NODE_REPAIR", "false")
	if _, err := functest.Build(t, function(), "c1"); err != nil {
		t.Errorf("DOVETAIL_NODE_REPAIR=false: %v", err)
	}
}

func TestHandlerOfTheBinary(t *testing.T) {
	h, err := functest.Build(t, function(), "c1", "--registration-ttl", "2m")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := h(ctx, queue.Message{ID: "snapshot-1", Data: functest.SnapshotEvent(t, "c1", events.Snapshot{Revision: 1})}); err != nil {
		t.Errorf("empty snapshot: %v, want nil", err)
	}
	other := functest.SnapshotEvent(t, "c2", events.Snapshot{Revision: 1})
	if err := h(ctx, queue.Message{ID: "snapshot-1", Data: other}); !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "snapshot.cluster") {
		t.Errorf("other cluster: %v, want poison naming snapshot.cluster", err)
	}
}
