package provision

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/runtime/functest"
)

// The handler publishes through a real embedded NATS JetStream server; commands are read back
// from the stream. The cloud is the fake over the real catalog.

const cluster = "test"

var snapTime = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type env struct {
	h     *Handler
	cloud *fake.Cloud
	cmds  *functest.Commands
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := dnats.Connect(url, "test", srv.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := dnats.EnsureStream(ctx, nc, dnats.StreamConfig{Cluster: cluster, Memory: true}); err != nil {
		t.Fatal(err)
	}
	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.MustAWS()
	fc := fake.New(fake.Options{Catalog: cat, Cluster: cluster, Clock: clocktesting.NewFakeClock(snapTime)})
	e := &env{cloud: fc, h: &Handler{Cluster: cluster, Catalog: cat, NodeSettings: cloud.NodeSettingsFor, Provider: fc, Publisher: pub,
		Now: func() time.Time { return snapTime }}}
	e.cmds = functest.CollectCommands(ctx, t, nc, cluster)
	return e
}

func (e *env) waitCommands(t *testing.T, n int) []events.Command { return e.cmds.Wait(t, n) }

func pool(name string, weight int32, types ...string) apisv1.NodePool {
	return apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apisv1.NodePoolSpec{Weight: &weight,
		Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimSpec{
			NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}}}}}
}

func pendingEvent(t *testing.T, pools ...apisv1.NodePool) []byte {
	t.Helper()
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: "u1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
	snap := &events.Snapshot{Cluster: cluster, Revision: 7, Time: metav1.NewTime(snapTime), PendingPods: []corev1.Pod{p}, NodePools: pools}
	data, err := events.NewEvent(cluster, "agent", events.TypePodsPending, "pods-pending-7", &events.PodsPending{Pods: []string{"default/web-0"}, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestMalformedEventIsPoison(t *testing.T) {
	e := newEnv(t)
	err := e.h.Handle(context.Background(), queue.Message{Data: []byte(`{"specversion":"1.0"}`)})
	if !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("want a poison error, got %v", err)
	}
	// Another cluster's event is refused the same way, naming the field.
	other := &Handler{Cluster: "elsewhere", Catalog: e.h.Catalog, NodeSettings: e.h.NodeSettings, Provider: e.h.Provider,
		Publisher: e.h.Publisher, Codec: e.h.Codec, Log: e.h.Log}
	err = other.Handle(context.Background(), queue.Message{Data: pendingEvent(t, pool("a", 10, "m5.large"))})
	if !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), "snapshot.cluster") {
		t.Fatalf("want a poison error naming snapshot.cluster, got %v", err)
	}
}

func TestCapacityErrorReplansOntoAnotherPool(t *testing.T) {
	e := newEnv(t)
	// Every m5.large offering refuses: the weight-50 pool cannot launch; the invocation marks
	// the offerings unavailable, re-plans, and the weight-10 pool launches c5.large.
	if err := e.cloud.InjectICE(fake.Pattern{InstanceType: "m5.large", Zone: "*", CapacityType: "*"}, "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Handle(context.Background(), queue.Message{Data: pendingEvent(t, pool("preferred", 50, "m5.large"), pool("fallback", 10, "c5.large"))}); err != nil {
		t.Fatal(err)
	}
	insts, _ := e.cloud.List(context.Background(), cluster)
	if len(insts) != 1 || insts[0].InstanceType != "c5.large" {
		t.Fatalf("instances = %+v, want one c5.large", insts)
	}
	cmds := e.waitCommands(t, 3) // MarkOfferingsUnavailable, CreateNodeClaim, its NominatePods
	var create, mark *events.Command
	for i := range cmds {
		switch cmds[i].Kind {
		case events.CommandCreateNodeClaim:
			create = &cmds[i]
		case events.CommandMarkUnavailable:
			mark = &cmds[i]
		}
	}
	if create == nil || create.NodeClaim.Status.ProviderID != insts[0].ProviderID || create.SnapshotRevision != 7 {
		t.Fatalf("create command = %+v", create)
	}
	// m5.large is offered on demand in the 5 Nitro zones (us-east-1a,b,c,d,f): 5 marks, each
	// expiring 3 minutes after the snapshot's time.
	if mark == nil || len(mark.Unavailable) != 5 {
		t.Fatalf("mark command = %+v, want 5 marks", mark)
	}
	for _, m := range mark.Unavailable {
		if m.InstanceType != "m5.large" || !m.Expires.Time.Equal(snapTime.Add(3*time.Minute)) || m.Reason != "InsufficientInstanceCapacity" {
			t.Fatalf("mark %+v", m)
		}
	}
}

func TestOrphansPastGraceAreTerminated(t *testing.T) {
	e := newEnv(t)
	e.h.Now = func() time.Time { return snapTime } // the function's clock agrees with the agent's
	tags := map[string]string{apisv1.TagCluster: cluster, apisv1.TagNodeClaim: "gone"}
	old := cloud.Instance{ID: "i-0aaaaaaaaaaaaaaaa", Zone: "us-east-1a", InstanceType: "m5.large", Tags: tags, LaunchTime: snapTime.Add(-11 * time.Minute)}
	young := cloud.Instance{ID: "i-0bbbbbbbbbbbbbbbb", Zone: "us-east-1a", InstanceType: "m5.large", Tags: tags, LaunchTime: snapTime.Add(-9 * time.Minute)}
	for _, i := range []cloud.Instance{old, young} {
		if err := e.cloud.AddInstance(i); err != nil {
			t.Fatal(err)
		}
	}
	decide := func(s *events.Snapshot) []string {
		t.Helper()
		d, err := e.h.Decide(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		return d.Orphans
	}
	// An incomplete snapshot (informers not synced) and one dated an hour ahead of the function's
	// clock decide nothing by absence.
	if o := decide(&events.Snapshot{Cluster: cluster, Revision: 6, Time: metav1.NewTime(snapTime)}); len(o) != 0 {
		t.Fatalf("incomplete snapshot: orphans %v", o)
	}
	if o := decide(&events.Snapshot{Cluster: cluster, Revision: 7, Time: metav1.NewTime(snapTime.Add(time.Hour)), Complete: true}); len(o) != 0 {
		t.Fatalf("skewed snapshot: orphans %v", o)
	}
	// Grace period 10 minutes by the function's clock: the 11-minute-old orphan goes on the second
	// complete snapshot that still lists no NodeClaim for it; the 9-minute-old one stays.
	if o := decide(&events.Snapshot{Cluster: cluster, Revision: 8, Time: metav1.NewTime(snapTime), Complete: true}); len(o) != 0 {
		t.Fatalf("first sighting: orphans %v, want none yet", o)
	}
	if o := decide(&events.Snapshot{Cluster: cluster, Revision: 9, Time: metav1.NewTime(snapTime), Complete: true}); len(o) != 1 || o[0] != cloud.AWSProviderID("us-east-1a", old.ID) {
		t.Fatalf("second sighting: orphans %v, want %s", o, old.ID)
	}
}

// A decision launches before the agent applies its CreateNodeClaim commands, so the next
// snapshot can still list the same pods pending and no NodeClaim for them (seen in `make run`:
// a NodePool status write published a snapshot in that window and the seed was launched twice).
// The decision on that snapshot launches nothing and waits for one that records the launch;
// a redelivery of the first decision still finds its instance and publishes its command.
func TestSnapshotBeforeCommandsLaunchesNothingTwice(t *testing.T) {
	e := newEnv(t)
	env, err := events.Decode(pendingEvent(t, pool("a", 10, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	first, err := events.DecodePodsPending(env.Data)
	if err != nil {
		t.Fatal(err)
	}
	first.Snapshot.Complete = true
	d1, err := e.h.Decide(context.Background(), first.Snapshot)
	if err != nil || len(d1.Launched) != 1 {
		t.Fatalf("first decision: launched %d, err %v; want 1", len(d1.Launched), err)
	}
	next := *first.Snapshot // the next revision: the same pod pending, the NodeClaim not applied yet
	next.Revision++
	d2, err := e.h.Decide(context.Background(), &next)
	if err != nil || len(d2.Launched) != 0 {
		t.Fatalf("second decision launched %d NodeClaims (err %v) for a pod already launched for", len(d2.Launched), err)
	}
	d3, err := e.h.Decide(context.Background(), first.Snapshot)
	if err != nil || len(d3.Launched) != 1 || d3.Launched[0].Instance.ProviderID != d1.Launched[0].Instance.ProviderID {
		t.Fatalf("redelivered decision: %+v, err %v; want the same instance again", d3.Launched, err)
	}
	if insts, _ := e.cloud.List(context.Background(), cluster); len(insts) != 1 {
		t.Fatalf("%d instances, want 1", len(insts))
	}
}

// TestUnplaceablePodGetsFailedScheduling: a pod the only NodePool's one type cannot hold launches
// nothing and is told why: one RecordEvents command with Karpenter's FailedScheduling Warning
// on the pod, carrying the plan's reason.
func TestUnplaceablePodGetsFailedScheduling(t *testing.T) {
	e := newEnv(t)
	// t3.nano: 2 vCPUs, 0.5 GiB; the pod asks 1 GiB of memory, more than it allocates.
	if err := e.h.Handle(context.Background(), queue.Message{Data: pendingEvent(t, pool("tiny", 10, "t3.nano"))}); err != nil {
		t.Fatal(err)
	}
	if insts, _ := e.cloud.List(context.Background(), cluster); len(insts) != 0 {
		t.Fatalf("launched %+v for a pod no type holds", insts)
	}
	cmds := e.waitCommands(t, 1)
	c := cmds[0]
	if c.Kind != events.CommandRecordEvents || len(c.Events) != 1 || c.SnapshotRevision != 7 {
		t.Fatalf("commands %+v, want one RecordEvents", cmds)
	}
	ev := c.Events[0]
	if ev.Reason != "FailedScheduling" || ev.Type != corev1.EventTypeWarning || ev.Object.Kind != "Pod" || ev.Object.Namespace != "default" ||
		ev.Object.Name != "web-0" || ev.Object.UID != "u1" || !strings.HasPrefix(ev.Message, `Failed to schedule pod, nodepool "tiny": `) {
		t.Fatalf("event %+v", ev)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the command does not validate: %v", err)
	}
}
