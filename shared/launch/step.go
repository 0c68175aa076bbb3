package launch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// MaxRounds bounds how often one decision re-plans after insufficient capacity: each round
// marks the refused offerings and places the pods of the failed launches elsewhere.
const MaxRounds = 3

// SolveFunc plans a decision. marks are the offerings refused so far in this decision (to
// honour besides the snapshot's own); launched are the NodeClaims launched so far, which are in
// flight for the re-plan and keep their pods.
type SolveFunc func(marks []events.UnavailableOfferingMark, launched []apisv1.NodeClaim) (*provisioning.Plan, error)

// Fixed is a SolveFunc for a plan made before the step (consolidation's replacements, drift's
// evacuation): it never re-plans.
func Fixed(plan *provisioning.Plan) SolveFunc {
	return func([]events.UnavailableOfferingMark, []apisv1.NodeClaim) (*provisioning.Plan, error) {
		return plan, nil
	}
}

// Step is the one launch step every function runs: solve → launch each planned NodeClaim →
// mark the offerings the cloud refused → re-plan the pods of the failed launches → one
// CreateNodeClaim command per launched NodeClaim and one MarkOfferingsUnavailable command for
// all the refusals. Idempotency comes from the Launcher (names and client tokens from the
// decision) and from command IDs derived from the same names.
type Step struct {
	Launcher *Launcher
	Decision Decision
	// NodeClasses are the snapshot's; each NodeClaim launches with the one its NodePool names.
	NodeClasses []apisv1.NodeClass
	// Publish sends one command (the function's emitter).
	Publish func(context.Context, events.Command) error
	// Rounds bounds re-planning (0: MaxRounds; 1: no re-plan).
	Rounds int
	// AllOrNothing stops at the first launch refused for capacity: a replacement that is only
	// partly there lets nothing be disrupted, so the rest is not launched (drift, consolidation).
	AllOrNothing bool
	// Reason is the CreateNodeClaim command's reason for a planned NodeClaim.
	Reason func(*provisioning.NodeClaimPlan) string
	// Annotate, when set, adds the caller's annotations to a launched NodeClaim before its
	// command is published.
	Annotate func(*apisv1.NodeClaim)
	// Recorded, when set, says whether the snapshot the decision was made on records a launch
	// (by provider ID or NodeClaim name; RecordedIn). Before launching, the step then lists the
	// cluster's instances launched within UnrecordedWindow of the decision's time: one that the
	// snapshot does not record and that this decision does not launch itself is another
	// decision's launch whose CreateNodeClaim is not applied yet, so the snapshot is behind the
	// cloud and deciding on it would launch the same pods' capacity twice. The step then
	// launches nothing and returns ErrBehindCloud; a snapshot that records the launch follows
	// within a second (the agent publishes on every NodeClaim change).
	Recorded func(providerID, nodeClaim string) bool
}

// UnrecordedWindow is how long a launch may go unrecorded in the snapshots before decisions stop
// waiting for it: 2 minutes (events.MaxClockSkew), far above the seconds a CreateNodeClaim takes
// to be applied; an older unrecorded instance is an orphan, the provision function's collection's.
const UnrecordedWindow = 2 * time.Minute

// ErrBehindCloud is returned by Step.Run when the snapshot does not record a recent launch of
// another decision: the caller decides again on a later snapshot (not an error to retry).
var ErrBehindCloud = errors.New("the snapshot is behind the cloud: a recent launch is not recorded in it yet")

// RecordedIn is a Step.Recorded over a snapshot's NodeClaims (names and provider IDs) and Nodes
// (provider IDs); nil for a snapshot that is not complete (the agent's are: built from synced
// informers), where what it does not list may simply not have been read.
func RecordedIn(snap *events.Snapshot) func(providerID, nodeClaim string) bool {
	if !snap.Complete {
		return nil
	}
	known := map[string]bool{}
	for i := range snap.NodeClaims {
		known[snap.NodeClaims[i].Name] = true
		if pid := snap.NodeClaims[i].Status.ProviderID; pid != "" {
			known[pid] = true
		}
	}
	for i := range snap.Nodes {
		if pid := snap.Nodes[i].Spec.ProviderID; pid != "" {
			known[pid] = true
		}
	}
	return func(providerID, nodeClaim string) bool {
		return known[providerID] || (nodeClaim != "" && known[nodeClaim])
	}
}

// behind returns ErrBehindCloud (naming the instance) when the cloud holds a recent launch of
// another decision that the snapshot does not record.
func (s Step) behind(ctx context.Context, plan *provisioning.Plan) error {
	if s.Recorded == nil || len(plan.NodeClaims) == 0 {
		return nil
	}
	mine := map[string]bool{}
	for _, nc := range plan.NodeClaims {
		mine[NodeClaimName(s.Launcher.Cluster, s.Decision, nc)] = true
	}
	insts, err := s.Launcher.Provider.List(ctx, s.Launcher.Cluster)
	if err != nil {
		return fmt.Errorf("listing the cluster's instances: %w", err)
	}
	for _, i := range insts {
		name := i.Tags[apisv1.TagNodeClaim]
		if (i.State != cloud.StatePending && i.State != cloud.StateRunning) || s.Decision.Time.Sub(i.LaunchTime) > UnrecordedWindow ||
			mine[name] || s.Recorded(i.ProviderID, name) {
			continue
		}
		return fmt.Errorf("%w: instance %s (NodeClaim %s) launched at %s", ErrBehindCloud, i.ProviderID, name, i.LaunchTime.UTC().Format(time.RFC3339))
	}
	return nil
}

// Launched is one NodeClaim the step launched, with the plan it came from.
type Launched struct {
	NodeClaim *apisv1.NodeClaim
	Instance  *cloud.Instance
	Plan      *provisioning.NodeClaimPlan
}

// Outcome is what the step did.
type Outcome struct {
	// Plan is the last plan made (the one whose NodeClaims are launched or refused last).
	Plan     *provisioning.Plan
	Launched []Launched
	// Marks are the offerings the cloud refused, sorted by offering; published as one command.
	Marks []events.UnavailableOfferingMark
	// Refused are the launches every offering of which was refused, in order.
	Refused []error
	// RolledBack are the provider IDs RunAtomic terminated because the launch was partial, in
	// launch order (empty for Run and for a complete atomic launch).
	RolledBack []string
}

// Run runs the step. An error is transient (the cloud failed other than for capacity, or a
// command could not be published): the message is to be redelivered, and the same decision then
// finds its launches through their client tokens. Capacity refusals are not errors: they are in
// Outcome.Refused and Outcome.Marks.
func (s Step) Run(ctx context.Context, solve SolveFunc) (Outcome, error) {
	var out Outcome
	rounds := s.Rounds
	if rounds <= 0 {
		rounds = MaxRounds
	}
	var launched []apisv1.NodeClaim
	for round := 0; round < rounds; round++ {
		plan, err := solve(out.Marks, launched)
		if err != nil {
			return out, err
		}
		out.Plan = plan
		if round == 0 {
			if err := s.behind(ctx, plan); err != nil {
				return out, err
			}
		}
		refused, err := s.launchAll(ctx, plan, &out, &launched)
		if err != nil {
			return out, err
		}
		if !refused || s.AllOrNothing {
			break
		}
	}
	return out, s.publishMarks(ctx, out.Marks)
}

// launchAll launches the plan's NodeClaims and publishes their commands; it reports whether a
// launch was refused for capacity.
func (s Step) launchAll(ctx context.Context, plan *provisioning.Plan, out *Outcome, launched *[]apisv1.NodeClaim) (bool, error) {
	refused := false
	for _, nc := range plan.NodeClaims {
		res := s.Launcher.Launch(ctx, s.Decision, nc, apisv1.FindNodeClass(s.NodeClasses, nc.NodeClassRef))
		out.Marks = append(out.Marks, res.Unavailable...)
		if res.Err != nil {
			if !cloud.IsInsufficientCapacity(res.Err) {
				return refused, res.Err
			}
			out.Refused = append(out.Refused, res.Err)
			refused = true
			if s.AllOrNothing {
				return refused, nil
			}
			continue
		}
		if s.Annotate != nil {
			s.Annotate(res.NodeClaim)
		}
		cmd := events.Command{ID: events.CommandID(s.Launcher.Cluster, "create", res.NodeClaim.Name), Kind: events.CommandCreateNodeClaim,
			Cluster: s.Launcher.Cluster, SnapshotRevision: s.Decision.Revision, NodeClaim: res.NodeClaim}
		if s.Reason != nil {
			cmd.Reason = s.Reason(nc)
		}
		if err := s.Publish(ctx, cmd); err != nil {
			return refused, err
		}
		*launched = append(*launched, *res.NodeClaim)
		out.Launched = append(out.Launched, Launched{NodeClaim: res.NodeClaim, Instance: res.Instance, Plan: nc})
	}
	return refused, nil
}

// publishMarks sorts the marks by offering and publishes them as one command whose ID derives
// from the cluster, the revision and the offerings, so a redelivered decision repeats it exactly.
func (s Step) publishMarks(ctx context.Context, marks []events.UnavailableOfferingMark) error {
	if len(marks) == 0 {
		return nil
	}
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].String() < marks[j].String() })
	keys := []string{s.Launcher.Cluster, "unavailable", fmt.Sprint(s.Decision.Revision)}
	for _, m := range marks {
		keys = append(keys, m.String())
	}
	return s.Publish(ctx, events.Command{ID: events.CommandID(keys...), Kind: events.CommandMarkUnavailable,
		Cluster: s.Launcher.Cluster, SnapshotRevision: s.Decision.Revision, Unavailable: marks, Reason: "insufficient capacity"})
}

// RunAtomic launches every NodeClaim of plan or none, as a best-effort-atomic-scale-up
// ProvisioningRequest asks (Cluster Autoscaler's atomic scale-up cleans up what a partial
// scale-up left): each is launched in turn and no command is published until all are; when one
// is refused for capacity (or an idempotent replay answers with an instance no longer pending or
// running), the instances launched so far are terminated (Provider.Delete) within the same
// decision, the refused offerings are published as marks, and Outcome.Launched is empty with
// the refusals in Outcome.Refused. The plan is not re-planned (Rounds is ignored). An error is
// transient (as Run's), including a failed termination: the redelivered decision replays the
// same client tokens and terminates again.
func (s Step) RunAtomic(ctx context.Context, plan *provisioning.Plan) (Outcome, error) {
	out := Outcome{Plan: plan}
	if err := s.behind(ctx, plan); err != nil {
		return out, err
	}
	var done []Launched
	refused := false
	for _, nc := range plan.NodeClaims {
		res := s.Launcher.Launch(ctx, s.Decision, nc, apisv1.FindNodeClass(s.NodeClasses, nc.NodeClassRef))
		out.Marks = append(out.Marks, res.Unavailable...)
		if res.Err != nil && !cloud.IsInsufficientCapacity(res.Err) {
			return out, errors.Join(res.Err, s.rollback(ctx, done))
		}
		if res.Err != nil {
			out.Refused = append(out.Refused, res.Err)
			refused = true
			break
		}
		done = append(done, Launched{NodeClaim: res.NodeClaim, Instance: res.Instance, Plan: nc})
		if st := res.Instance.State; st != cloud.StatePending && st != cloud.StateRunning {
			out.Refused = append(out.Refused, fmt.Errorf("NodeClaim %s: instance %s is %s (an earlier attempt of this decision rolled it back)", res.NodeClaim.Name, res.Instance.ProviderID, st))
			refused = true
			break
		}
	}
	if refused {
		if err := s.rollback(ctx, done); err != nil {
			return out, err
		}
		for _, l := range done {
			out.RolledBack = append(out.RolledBack, l.Instance.ProviderID)
		}
		return out, s.publishMarks(ctx, out.Marks)
	}
	for _, l := range done {
		if s.Annotate != nil {
			s.Annotate(l.NodeClaim)
		}
		cmd := events.Command{ID: events.CommandID(s.Launcher.Cluster, "create", l.NodeClaim.Name), Kind: events.CommandCreateNodeClaim,
			Cluster: s.Launcher.Cluster, SnapshotRevision: s.Decision.Revision, NodeClaim: l.NodeClaim}
		if s.Reason != nil {
			cmd.Reason = s.Reason(l.Plan)
		}
		if err := s.Publish(ctx, cmd); err != nil {
			return out, err
		}
		out.Launched = append(out.Launched, l)
	}
	return out, s.publishMarks(ctx, out.Marks)
}

// rollback terminates the instances of an atomic launch that did not complete.
func (s Step) rollback(ctx context.Context, done []Launched) error {
	var errs []error
	for _, l := range done {
		if err := s.Launcher.Provider.Delete(ctx, l.Instance.ProviderID); err != nil {
			errs = append(errs, fmt.Errorf("terminating %s (NodeClaim %s) of a partial atomic launch: %w", l.Instance.ProviderID, l.NodeClaim.Name, err))
		}
	}
	return errors.Join(errs...)
}
