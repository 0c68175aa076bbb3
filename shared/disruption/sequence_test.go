package disruption

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

func seqTarget(name string, pods int) Target {
	t := Target{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}},
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name}}, NodePool: &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
	for range pods {
		t.Pods = append(t.Pods, &corev1.Pod{})
	}
	return t
}

// shape is a sequence as its step kinds and, per step, its command kinds and nodes.
func shape(steps []SequenceStep) []string {
	var out []string
	for _, s := range steps {
		line := s.Kind + ":"
		for _, c := range s.Commands {
			n := c.NodeName
			if c.NodeClaim != nil {
				n = c.NodeClaim.Name
			}
			line += " " + string(c.Kind) + "(" + n + ")"
		}
		out = append(out, line)
	}
	return out
}

// The order is Karpenter's disruption order (pre-spin replacements, taint, then drain and
// delete: the Disruption Controller steps of karpenter.sh concepts/disruption), with each step
// present only when the decision asks for it.
func TestSequenceOrdersEveryKindOfDisruption(t *testing.T) {
	now := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	budget := map[string]*events.BudgetReservation{"default": {NodePool: "default", Reason: apisv1.DisruptionReasonDrifted, MaxDisrupting: 1}}
	repl := []*provisioning.NodeClaimPlan{{}}
	for _, c := range []struct {
		name string
		d    Disruption
		want []string
	}{
		{"drift start, replacement needed", Disruption{Source: "drift", ID: "u1", Reason: "Drifted", Method: "Replace", TaintValue: TaintValueDrifted,
			Candidates: []Target{seqTarget("a", 2)}, Replacements: repl, Budgets: budget},
			[]string{"launch:", "taint: TaintNode(a)"}},
		{"drift start, pods fit on ready nodes", Disruption{Source: "drift", ID: "u1", Reason: "Drifted", Method: "Delete", TaintValue: TaintValueDrifted,
			Candidates: []Target{seqTarget("a", 2)}, Drain: true, Budgets: budget},
			[]string{"taint: TaintNode(a)", "drain: DrainNode(a)"}},
		{"drift, empty node", Disruption{Source: "drift", ID: "u1", Reason: "Drifted", Method: "Delete", TaintValue: TaintValueDrifted,
			Candidates: []Target{seqTarget("a", 0)}, HandOff: true, Budgets: budget},
			[]string{"taint: TaintNode(a)", "hand-off: DeleteNodeClaim(nc-a)"}},
		{"expiry: forced, no deadline: launch then hand-off, no taint, no budget", Disruption{Source: "expire", ID: "nc-a", Reason: ReasonExpired, Method: "Replace",
			Candidates: []Target{seqTarget("a", 2)}, Replacements: repl, Forced: true, HandOff: true},
			[]string{"launch:", "hand-off: DeleteNodeClaim(nc-a)"}},
		{"interruption: forced with the notice's deadline, drain due", Disruption{Source: "interruption", ID: "n1", Reason: "Interrupted", TaintValue: TaintValueInterrupted,
			Candidates: []Target{seqTarget("a", 2), seqTarget("b", 1)}, Forced: true, Deadline: now.Add(2 * time.Minute), Drain: true},
			[]string{"taint: TaintNode(a) TaintNode(b)", "drain: DrainNode(a) DrainNode(b)"}},
		{"consolidation: launch, taint both", Disruption{Source: "consolidate", ID: "abc", Reason: "Underutilized", Method: "Replace", TaintValue: "consolidation.abc.1",
			Candidates: []Target{seqTarget("a", 1), seqTarget("b", 1)}, Replacements: repl, Budgets: budget},
			[]string{"launch:", "taint: TaintNode(a) TaintNode(b)"}},
	} {
		c.d.Revision, c.d.Time = 42, now
		steps, err := Sequence("prod", c.d)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := shape(steps); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
		for _, s := range steps {
			for _, cmd := range s.Commands {
				if cmd.SnapshotRevision != 42 || cmd.Cluster != "prod" {
					t.Errorf("%s: %s carries revision %d, cluster %q; want the decision's", c.name, cmd.Kind, cmd.SnapshotRevision, cmd.Cluster)
				}
				if cmd.Kind == events.CommandTaintNode {
					if (cmd.Budget != nil) == c.d.Forced {
						t.Errorf("%s: taint budget %v; a forced disruption takes none, a voluntary one its pool's", c.name, cmd.Budget)
					}
					if cmd.Taint.TimeAdded == nil || !cmd.Taint.TimeAdded.Time.Equal(now) || cmd.Taint.Value != c.d.TaintValue {
						t.Errorf("%s: taint %+v; want %s dated at the decision", c.name, cmd.Taint, c.d.TaintValue)
					}
				}
			}
		}
	}
}

// A node an earlier snapshot tainted is not tainted again: a drift node in progress whose pods
// now have ready places is only drained.
func TestSequenceDoesNotTaintTwice(t *testing.T) {
	tg := seqTarget("a", 1)
	tg.Disrupting, tg.TaintValue = true, TaintValueDrifted
	steps, err := Sequence("prod", Disruption{Source: "drift", ID: "u1", Reason: "Drifted", TaintValue: TaintValueDrifted, Candidates: []Target{tg}, Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shape(steps), []string{"drain: DrainNode(a)"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestSequenceRefusesIncoherentDecisions(t *testing.T) {
	ok := Disruption{Source: "drift", ID: "u1", Reason: "Drifted", TaintValue: TaintValueDrifted, Candidates: []Target{seqTarget("a", 1)}}
	for field, mutate := range map[string]func(*Disruption){
		"source":     func(d *Disruption) { d.Source = "" },
		"id":         func(d *Disruption) { d.ID = "" },
		"candidates": func(d *Disruption) { d.Candidates = nil },
		"taintValue": func(d *Disruption) { d.TaintValue = "" },
		"deadline":   func(d *Disruption) { d.Deadline = time.Now() },
		"budgets": func(d *Disruption) {
			d.Forced, d.Budgets = true, map[string]*events.BudgetReservation{"default": {}}
		},
		"candidates[0]": func(d *Disruption) { d.Candidates = []Target{{}} },
	} {
		d := ok
		mutate(&d)
		if _, err := Sequence("prod", d); !errors.Is(err, ErrInvalidDisruption) || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: %v, want ErrInvalidDisruption naming it", field, err)
		}
	}
	if _, err := Sequence("", ok); !errors.Is(err, ErrInvalidDisruption) || !strings.Contains(err.Error(), "cluster:") {
		t.Errorf("no cluster: %v", err)
	}
}
