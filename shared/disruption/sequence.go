package disruption

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// The kinds of step a disruption sequence is made of, in the order they always run. Karpenter's
// disruption controller has the same order (pre-spin replacements, taint, then delete and let
// the termination controller drain: sigs.k8s.io/karpenter pkg/controllers/disruption, the
// "Disruption Controller" steps of the concepts/disruption docs); Dovetail asks for the drain
// itself once every pod has a place, and then hands the node to the termination path.
const (
	// SeqLaunch launches the replacements (the function, through shared/launch); nothing after
	// it runs when a launch is refused, except for a forced disruption.
	SeqLaunch = "launch"
	// SeqTaint taints each candidate karpenter.sh/disrupted:NoSchedule, so nothing new lands.
	SeqTaint = "taint"
	// SeqDrain asks the agent to evict the candidates' pods (Eviction API: PDBs hold).
	SeqDrain = "drain"
	// SeqHandOff deletes each candidate's NodeClaim (HandOff): the termination path drains what
	// is left, terminates the instance and releases the finalizers.
	SeqHandOff = "hand-off"
)

// Disruption is one decision to disrupt nodes, whichever function made it: consolidation,
// drift, expiry or interruption. Sequence turns it into the ordered steps that carry it out.
type Disruption struct {
	// Source names the deciding function ("consolidate", "drift", "expire", "interruption"): it
	// starts every command ID, so two functions' commands for one node never collide.
	Source string
	// ID is the decision's identity (a consolidation's decision ID, a node's UID for drift, a
	// NodeClaim's name for expiry, the notice's ID for an interruption); part of every command ID.
	ID string
	// Reason is Karpenter's disruption reason (Drifted, Expired, Empty, Underutilized), or the
	// interruption's event reason (Interrupted); Method is "Delete" or "Replace", as Karpenter's
	// DisruptionTerminating events spell a decision ("" for an interruption, which has none).
	Reason, Method string
	// Why is the one-line explanation every command's reason carries.
	Why string
	// Candidates are the nodes disrupted. A candidate already tainted with TaintValue (an
	// earlier snapshot's step) is not tainted again.
	Candidates []Target
	// TaintValue is the karpenter.sh/disrupted taint's value: which function holds the node.
	TaintValue string
	// Tainted says an earlier step tainted the candidates: this one taints none (a later step of
	// a consolidation, whose candidates may be gone from the snapshot's taints by now).
	Tainted bool
	// Replacements are launched before anything is tainted.
	Replacements []*provisioning.NodeClaimPlan
	// Drain asks for the drain in this decision: every evicted pod has a place on ready capacity,
	// or (forced) the notice's deadline leaves no more time to wait.
	Drain bool
	// HandOff hands the candidates to the termination path at the end of this decision: they are
	// empty, their terminationGracePeriod has passed, or the disruption is forced without notice
	// (expiry).
	HandOff bool
	// Forced disruptions (expiry, interruption) take no disruption budget and do not wait for
	// their replacements (Karpenter v1: expiration and interruption are forceful).
	Forced bool
	// Deadline is an interruption notice's reclaim time (zero: none; only a forced disruption has
	// one). A forced disruption handed off at once (expiry) is not tainted.
	Deadline time.Time
	// Budgets are the disruption budget reservations each voluntary taint carries, by NodePool.
	Budgets map[string]*events.BudgetReservation
	// Revision and Time are the snapshot's the decision was made on.
	Revision int64
	Time     time.Time
}

// SequenceStep is one step of a sequence: its kind, the nodes it acts on, the replacements it
// launches (SeqLaunch only) and the commands it publishes, in order.
type SequenceStep struct {
	Kind         string
	Nodes        []string
	Replacements []*provisioning.NodeClaimPlan
	Commands     []events.Command
}

// ErrInvalidDisruption wraps every error Sequence returns: the decision names no cluster, no
// source, no candidate, or a combination no disruption has.
var ErrInvalidDisruption = errors.New("invalid disruption")

// Sequence is the one place a disruption decision becomes its ordered steps and commands: every
// function (consolidate, drift, expiry, interruption) and the preview call it, so the preview
// shows what the functions will do. The order is launch → taint → drain → hand-off; each step
// is present only when the decision calls for it:
//   - launch when there are replacements;
//   - taint for the candidates with a node that are not tainted with TaintValue yet, unless
//     Tainted (a forced disruption handed off at once, expiry, is not tainted: the termination
//     path cordons);
//   - drain when Drain is set, for the candidates with a node;
//   - hand-off when HandOff is set.
//
// Commands carry d.Revision; their IDs derive from cluster, d.Source, d.ID, the node and (for
// taint and drain, which a later snapshot may ask for again) the revision. It is pure: the same
// decision gives the same steps. Errors wrap ErrInvalidDisruption and name the field.
func Sequence(cluster string, d Disruption) ([]SequenceStep, error) {
	if err := d.check(cluster); err != nil {
		return nil, err
	}
	var out []SequenceStep
	if len(d.Replacements) > 0 {
		out = append(out, SequenceStep{Kind: SeqLaunch, Nodes: d.names(false), Replacements: d.Replacements})
	}
	expiry := d.Forced && d.HandOff
	if !expiry && !d.Tainted {
		if s := d.taintStep(cluster); len(s.Commands) > 0 {
			out = append(out, s)
		}
	}
	if d.Drain {
		s := SequenceStep{Kind: SeqDrain, Nodes: d.names(true)}
		rev := strconv.FormatInt(d.Revision, 10)
		for _, node := range s.Nodes {
			s.Commands = append(s.Commands, events.Command{ID: events.CommandID(cluster, d.Source+"-drain", d.ID, node, rev),
				Kind: events.CommandDrainNode, Cluster: cluster, SnapshotRevision: d.Revision, NodeName: node, Reason: d.reason()})
		}
		if len(s.Commands) > 0 {
			out = append(out, s)
		}
	}
	if d.HandOff {
		s := SequenceStep{Kind: SeqHandOff, Nodes: d.names(false)}
		for _, t := range d.Candidates {
			c := HandOff(cluster, d.Revision, t.Name(), t.NodeClaim, d.reason(), d.Source, d.ID)
			if expiry {
				// Nothing tainted it, so the hand-off is where Karpenter's DisruptionTerminating goes.
				c.Events = kevents.Disrupting(claimRefOf(t.NodeClaim), nodeRefOf(t.Node), d.decision())
			}
			s.Commands = append(s.Commands, c)
		}
		out = append(out, s)
	}
	return out, nil
}

// check refuses a decision Sequence cannot turn into steps, naming the field.
func (d *Disruption) check(cluster string) error {
	switch {
	case cluster == "":
		return fmt.Errorf("%w: cluster: required", ErrInvalidDisruption)
	case d.Source == "":
		return fmt.Errorf("%w: source: required", ErrInvalidDisruption)
	case d.ID == "":
		return fmt.Errorf("%w: id: required", ErrInvalidDisruption)
	case len(d.Candidates) == 0:
		return fmt.Errorf("%w: candidates: at least one node is required", ErrInvalidDisruption)
	case d.TaintValue == "" && !d.Tainted && !(d.Forced && d.HandOff):
		return fmt.Errorf("%w: taintValue: required for a disruption that taints its nodes", ErrInvalidDisruption)
	case !d.Forced && !d.Deadline.IsZero():
		return fmt.Errorf("%w: deadline: only a forced disruption (an interruption) has one", ErrInvalidDisruption)
	case d.Forced && len(d.Budgets) > 0:
		return fmt.Errorf("%w: budgets: a forced disruption takes no disruption budget", ErrInvalidDisruption)
	}
	for i, t := range d.Candidates {
		if t.Node == nil && t.NodeClaim == nil {
			return fmt.Errorf("%w: candidates[%d]: neither a node nor a NodeClaim", ErrInvalidDisruption, i)
		}
	}
	return nil
}

// taintStep taints the candidates that have a node and do not carry the taint yet. Each taint
// is dated (timeAdded: what the grace period and the rollback timeouts count from) and, when
// voluntary, reserves a unit of its pool's budget with the agent.
func (d *Disruption) taintStep(cluster string) SequenceStep {
	s := SequenceStep{Kind: SeqTaint}
	at := metav1.NewTime(d.Time)
	rev := strconv.FormatInt(d.Revision, 10)
	for _, t := range d.Candidates {
		if t.Node == nil || (t.Disrupting && t.TaintValue == d.TaintValue) {
			continue
		}
		taint := corev1.Taint{Key: apisv1.TaintKeyDisrupted, Value: d.TaintValue, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &at}
		c := events.Command{ID: events.CommandID(cluster, d.Source+"-taint", d.ID, t.Node.Name, rev), Kind: events.CommandTaintNode,
			Cluster: cluster, SnapshotRevision: d.Revision, NodeName: t.Node.Name, Taint: &taint, Reason: d.reason(),
			// Karpenter's DisruptionTerminating, recorded once the agent grants the taint.
			Events: kevents.Disrupting(claimRefOf(t.NodeClaim), kevents.NodeRef(t.Node), d.decision())}
		if !d.Forced && t.NodePool != nil {
			c.Budget = d.Budgets[t.NodePool.Name]
		}
		s.Nodes = append(s.Nodes, t.Node.Name)
		s.Commands = append(s.Commands, c)
	}
	return s
}

// names lists the candidates' names, or (nodesOnly) the names of those with a node.
func (d *Disruption) names(nodesOnly bool) []string {
	var out []string
	for _, t := range d.Candidates {
		if nodesOnly && t.Node == nil {
			continue
		}
		out = append(out, t.Name())
	}
	return out
}

func (d *Disruption) reason() string {
	if d.Why == "" {
		return d.Reason
	}
	return d.Reason + ": " + d.Why
}

// decision is the reason of Karpenter's DisruptionTerminating event: "<reason>/<method>".
func (d *Disruption) decision() string {
	if d.Method == "" {
		return d.Reason
	}
	return d.Reason + "/" + d.Method
}

func claimRefOf(nc *apisv1.NodeClaim) corev1.ObjectReference {
	if nc == nil {
		return corev1.ObjectReference{}
	}
	return kevents.NodeClaimRef(nc)
}

func nodeRefOf(n *corev1.Node) corev1.ObjectReference {
	if n == nil {
		return corev1.ObjectReference{}
	}
	return kevents.NodeRef(n)
}

// DriftOf is a drifted node's disruption before its step is known (reason Drifted, method
// Delete, taint TaintValueDrifted, the pool's budget reservation): the drift function's and the
// preview's starting point. ID is the node's UID (a node re-created under the same name is
// another decision), or its name when it has none.
func DriftOf(c DriftCandidate, budgets map[string]*events.BudgetReservation, rev int64, at time.Time) Disruption {
	id := c.Name()
	if c.Node != nil && c.Node.UID != "" {
		id = string(c.Node.UID)
	}
	return Disruption{Source: "drift", ID: id, Reason: apisv1.DisruptionReasonDrifted, Method: "Delete", Why: c.Why(),
		Candidates: []Target{c.Target}, TaintValue: TaintValueDrifted, Budgets: budgets, Revision: rev, Time: at}
}

// DriftStart is a selected drifted node's first step (PlanDrift.Selected): an empty node (no
// evictable pod) is tainted and handed off; another, given plan (its pods placed with the node
// left out), has the plan's NodeClaims launched as replacements, is tainted, and is drained at
// once when every pod already has a place on ready capacity (ReadyPlacement).
func DriftStart(c DriftCandidate, plan *provisioning.Plan, budgets map[string]*events.BudgetReservation, rev int64, at time.Time) Disruption {
	d := DriftOf(c, budgets, rev, at)
	if len(c.Pods) == 0 || plan == nil {
		d.HandOff = true
		return d
	}
	d.Method, d.Replacements, d.Drain = "Replace", plan.NodeClaims, ReadyPlacement(plan)
	return d
}

// Expiry is an expired node's disruption (PlanDrift.Expired): forced and handed off at once,
// with the NodeClaims of plan (its pods placed with the node left out; nil when it has none)
// launched first and not waited for.
func Expiry(c DriftCandidate, plan *provisioning.Plan, rev int64, at time.Time) Disruption {
	d := Disruption{Source: "expire", ID: c.Name(), Reason: c.Reason, Method: "Delete", Why: c.Why(),
		Candidates: []Target{c.Target}, Forced: true, HandOff: true, Revision: rev, Time: at}
	if c.NodeClaim != nil {
		d.ID = c.NodeClaim.Name
	}
	if plan != nil && len(plan.NodeClaims) > 0 {
		d.Method, d.Replacements = "Replace", plan.NodeClaims
	}
	return d
}

// CommandLines renders the commands of steps one a line ("<kind> <node or NodeClaim> <id>"),
// in order: what the preview shows and what its parity tests compare with the functions'.
func CommandLines(steps []SequenceStep) []string {
	var out []string
	for _, s := range steps {
		for _, c := range s.Commands {
			target := c.NodeName
			if c.NodeClaim != nil {
				target = c.NodeClaim.Name
			}
			out = append(out, string(c.Kind)+" "+target+" "+c.ID)
		}
	}
	return out
}
