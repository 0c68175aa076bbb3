package drift_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/preview"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// recorder passes every published event on and keeps the disruption sequence's commands (taint,
// drain, hand-off) in order, as "<kind> <node or NodeClaim> <ID>" (disruption.CommandLines).
type recorder struct {
	next  queue.Publisher
	lines []string
}

func (r *recorder) Publish(ctx context.Context, subject, id string, data []byte) error {
	if env, err := events.Decode(data); err == nil && env.Type == events.TypeCommand {
		if c, err := (events.Codec{}).Command(ctx, env); err == nil {
			switch c.Kind {
			case events.CommandTaintNode, events.CommandDrainNode, events.CommandDeleteNodeClaim, events.CommandDeleteNode:
				r.lines = append(r.lines, disruption.CommandLines([]disruption.SequenceStep{{Commands: []events.Command{*c}}})...)
			}
		}
	}
	return r.next.Publish(ctx, subject, id, data)
}

// previewCommands runs `dovetail plan --disruption`'s preview on snap and returns the commands
// of its first round's drift decisions.
func previewCommands(t *testing.T, o preview.Options, snap *events.Snapshot) []string {
	t.Helper()
	res, err := preview.Run(snap, o)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if len(res.Rounds) > 0 {
		for _, d := range res.Rounds[0].Decisions {
			if d.Function == preview.FunctionDrift {
				out = append(out, d.Commands...)
			}
		}
	}
	return out
}

// Issue 25: the preview shows exactly what the functions will do. On the same snapshot, the
// drift function's published taint, drain and hand-off commands (kinds, targets and IDs) are
// the preview's, for a drifted node (replacement launched, then tainted) and for an expired one
// (handed off at once).
func TestPreviewCommandsAreTheDriftFunctions(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(*events.Snapshot)
		want  []string // the command kinds, in order
	}{
		{"drift", func(s *events.Snapshot) {
			s.NodeClasses[0].EC2.Status.AMIs = []apisv1.AMI{{ID: "ami-2"}}
		}, []string{"TaintNode"}},
		{"expiry", func(s *events.Snapshot) {
			s.NodeClaims[0].Spec.ExpireAfter = apisv1.MustParseNillableDuration("1h")
			s.Time.Time = s.NodeClaims[0].CreationTimestamp.Add(61 * time.Minute)
		}, []string{"DeleteNodeClaim"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, h := setup(t)
			snap := w.Snapshot()
			c.setup(snap)
			rec := &recorder{next: w}
			h.Publisher = rec
			if _, err := h.Decide(context.Background(), snap); err != nil {
				t.Fatal(err)
			}
			got := previewCommands(t, preview.Options{Catalog: h.Catalog, NodeSettings: h.NodeSettings, NodeClassRules: cloud.RulesOf(h.Provider)}, snap)
			if !reflect.DeepEqual(got, rec.lines) {
				t.Fatalf("preview commands\n%q\nfunction commands\n%q", got, rec.lines)
			}
			if len(got) != len(c.want) {
				t.Fatalf("commands %q, want kinds %v", got, c.want)
			}
			for i, k := range c.want {
				if got[i][:len(k)] != k {
					t.Errorf("command %d: %q, want %s", i, got[i], k)
				}
			}
		})
	}
}
