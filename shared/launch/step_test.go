package launch

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// The cloud here is the in-memory fake over the real embedded catalog; commands are collected
// as the function's emitter would publish them.

type sink struct{ cmds []events.Command }

func (s *sink) publish(_ context.Context, c events.Command) error {
	s.cmds = append(s.cmds, c)
	return nil
}

func (s *sink) kinds() map[events.CommandKind]int {
	out := map[events.CommandKind]int{}
	for _, c := range s.cmds {
		out[c.Kind]++
	}
	return out
}

func stepWith(t *testing.T) (*fake.Cloud, *sink, Step) {
	t.Helper()
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: "prod", Clock: clocktesting.NewFakeClock(at)})
	s := &sink{}
	return fc, s, Step{Launcher: &Launcher{Cluster: "prod", Provider: fc, Catalog: cat}, Decision: Decision{Revision: 9, Time: at}, Publish: s.publish}
}

// The first plan asks for m5.large only, which the cloud refuses in every zone; the re-plan
// sees the five marks and moves the pod to m5.xlarge. One CreateNodeClaim command, one
// MarkOfferingsUnavailable command with all five marks, sorted, each expiring 3 minutes after
// the decision.
func TestStepReplansAroundRefusedOfferings(t *testing.T) {
	fc, s, step := stepWith(t)
	if err := fc.InjectICE(fake.Pattern{InstanceType: "m5.large", Zone: "*", CapacityType: "*"}, "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	var seen [][]events.UnavailableOfferingMark
	out, err := step.Run(context.Background(), func(marks []events.UnavailableOfferingMark, launched []apisv1.NodeClaim) (*provisioning.Plan, error) {
		seen = append(seen, marks)
		if len(launched) != 0 {
			t.Errorf("round %d: %d launched NodeClaims in flight, want 0 (the only launch failed)", len(seen), len(launched))
		}
		if len(marks) == 0 {
			return &provisioning.Plan{NodeClaims: []*provisioning.NodeClaimPlan{plan(t, "m5.large")}}, nil
		}
		return &provisioning.Plan{NodeClaims: []*provisioning.NodeClaimPlan{plan(t, "m5.xlarge")}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || len(seen[1]) != 5 {
		t.Fatalf("rounds %d (marks seen by the re-plan %d), want 2 rounds and 5 marks", len(seen), len(seen[len(seen)-1]))
	}
	if len(out.Launched) != 1 || out.Launched[0].Instance.InstanceType != "m5.xlarge" || len(out.Refused) != 1 {
		t.Fatalf("launched %+v, refused %d; want one m5.xlarge and one refusal", out.Launched, len(out.Refused))
	}
	if k := s.kinds(); k[events.CommandCreateNodeClaim] != 1 || k[events.CommandMarkUnavailable] != 1 || len(s.cmds) != 2 {
		t.Fatalf("commands %v, want one CreateNodeClaim and one MarkOfferingsUnavailable", k)
	}
	marks := s.cmds[1].Unavailable
	for i, m := range marks {
		if m.InstanceType != "m5.large" || m.Reason != "InsufficientInstanceCapacity" || !m.Expires.Time.Equal(at.Add(events.UnavailableOfferingTTL)) {
			t.Errorf("mark %d = %+v", i, m)
		}
		if i > 0 && marks[i-1].String() >= m.String() {
			t.Errorf("marks not sorted: %s before %s", marks[i-1], m)
		}
	}
	if c := s.cmds[0]; c.ID != events.CommandID("prod", "create", c.NodeClaim.Name) || c.SnapshotRevision != 9 {
		t.Errorf("create command id %q revision %d", c.ID, c.SnapshotRevision)
	}
}

// All or nothing (drift, consolidation): the first refusal stops the step; the NodeClaims
// after it are not launched, and the marks are still published.
func TestStepAllOrNothingStopsAtTheFirstRefusal(t *testing.T) {
	fc, s, step := stepWith(t)
	step.AllOrNothing, step.Rounds = true, 1
	annotated := 0
	step.Annotate = func(nc *apisv1.NodeClaim) { annotated++ }
	if err := fc.InjectICE(fake.Pattern{InstanceType: "m5.large", Zone: "*", CapacityType: "*"}, ""); err != nil {
		t.Fatal(err)
	}
	out, err := step.Run(context.Background(), Fixed(&provisioning.Plan{NodeClaims: []*provisioning.NodeClaimPlan{plan(t, "m5.large"), plan(t, "c5.xlarge")}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Refused) != 1 || len(out.Launched) != 0 || annotated != 0 {
		t.Fatalf("refused %d, launched %d, annotated %d; want 1, 0, 0", len(out.Refused), len(out.Launched), annotated)
	}
	if k := s.kinds(); k[events.CommandCreateNodeClaim] != 0 || k[events.CommandMarkUnavailable] != 1 {
		t.Fatalf("commands %v, want only the marks", k)
	}
	if st := fc.Stats(); st.Launches != 0 {
		t.Fatalf("the cloud launched %d instances, want 0", st.Launches)
	}
}

// A redelivered decision publishes the same commands and launches nothing new.
func TestStepIsIdempotent(t *testing.T) {
	fc, s, step := stepWith(t)
	p := &provisioning.Plan{NodeClaims: []*provisioning.NodeClaimPlan{plan(t, "m5.large")}}
	for i := 0; i < 2; i++ {
		if _, err := step.Run(context.Background(), Fixed(p)); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.cmds) != 2 || s.cmds[0].ID != s.cmds[1].ID {
		t.Fatalf("commands %d, ids differ or missing", len(s.cmds))
	}
	if st := fc.Stats(); st.Launches != 1 {
		t.Fatalf("launched %d instances, want 1", st.Launches)
	}
}

// A failure other than capacity is transient: the step returns it at once.
func TestStepReturnsTransientErrors(t *testing.T) {
	_, _, step := stepWith(t)
	boom := errors.New("publish failed")
	step.Publish = func(context.Context, events.Command) error { return boom }
	if _, err := step.Run(context.Background(), Fixed(&provisioning.Plan{NodeClaims: []*provisioning.NodeClaimPlan{plan(t, "m5.large")}})); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the publish error", err)
	}
}

// A snapshot that does not record another decision's recent launch (its CreateNodeClaim not
// applied yet) is behind the cloud: the step launches nothing (it would launch the same pods'
// capacity twice). Its own launch, redelivered, is no reason to stop; nor is an unrecorded
// instance older than UnrecordedWindow (an orphan: the orphan collection's).
func TestStepWaitsForASnapshotThatRecordsRecentLaunches(t *testing.T) {
	fc, _, step := stepWith(t)
	p := &provisioning.Plan{NodeClaims: []*provisioning.NodeClaimPlan{plan(t, "m5.large")}}
	snap := &events.Snapshot{Cluster: "prod", Revision: 9, Complete: true}
	step.Recorded = RecordedIn(snap)
	if _, err := step.Run(context.Background(), Fixed(p)); err != nil {
		t.Fatalf("first decision: %v", err)
	}
	if _, err := step.Run(context.Background(), Fixed(p)); err != nil {
		t.Fatalf("the same decision redelivered: %v, want its own launch found again", err)
	}
	later := step
	later.Decision = Decision{Revision: 10, Time: at.Add(10 * time.Second)}
	if _, err := later.Run(context.Background(), Fixed(p)); !errors.Is(err, ErrBehindCloud) {
		t.Fatalf("a later decision on a snapshot without the launch: %v, want ErrBehindCloud", err)
	}
	if st := fc.Stats(); st.Launches != 1 {
		t.Fatalf("%d launches, want 1", st.Launches)
	}
	insts, _ := fc.List(context.Background(), "prod")
	recorded := step
	recorded.Decision = later.Decision
	recorded.Recorded = RecordedIn(&events.Snapshot{Complete: true, NodeClaims: []apisv1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: insts[0].Tags[apisv1.TagNodeClaim]}}}})
	if _, err := recorded.Run(context.Background(), Fixed(&provisioning.Plan{})); err != nil {
		t.Fatalf("a snapshot that records it: %v", err)
	}
	old := later
	old.Decision.Time = at.Add(UnrecordedWindow + time.Second)
	if _, err := old.Run(context.Background(), Fixed(p)); errors.Is(err, ErrBehindCloud) {
		t.Fatalf("an unrecorded launch older than the window: %v, want no wait", err)
	}
}
