package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/shared/kube"
)

// A change snapshot holds the next back by four times its cost, at most the ceiling (the periodic
// snapshot's interval): at 1 s (10,000 pods in make scale) the next may start 4 s after it
// began; at 3 ms (a small cluster) the 1 s ticker, not the holdoff, sets the pace; at 10 s the
// 30 s ceiling holds. Changes in the holdoff wait for its end, not for the next change.
func TestChangePacerHoldsBackByCost(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		cost, want time.Duration
	}{{time.Second, 4 * time.Second}, {3 * time.Millisecond, 12 * time.Millisecond}, {10 * time.Second, 30 * time.Second}, {0, 0}, {-time.Second, 0}} {
		if got := ChangeSnapshotHoldoff(c.cost, DefaultSnapshotInterval); got != c.want {
			t.Errorf("holdoff after a snapshot costing %v: %v, want %v", c.cost, got, c.want)
		}
	}
	var p changePacer
	if !p.ready(t0) {
		t.Fatal("no snapshot yet: held back")
	}
	p.published(t0, ChangeSnapshotHoldoff(time.Second, DefaultSnapshotInterval))
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{time.Second, false}, {3 * time.Second, false}, {4 * time.Second, true}, {5 * time.Second, true}} {
		if got := p.ready(t0.Add(c.at)); got != c.want {
			t.Errorf("%v after a 1 s snapshot: ready %v, want %v", c.at, got, c.want)
		}
	}
	p.published(t0.Add(5*time.Second), ChangeSnapshotHoldoff(3*time.Millisecond, DefaultSnapshotInterval))
	if !p.ready(t0.Add(6 * time.Second)) {
		t.Error("a 3 ms snapshot held the next back past the next 1 s tick")
	}
}

// downPublisher is a queue that is down: each try waits per (a publish's timeout, scaled down)
// and fails. Not a mock of a real queue's semantics: only the time a failing publish takes matters
// here.
type downPublisher struct{ per time.Duration }

func (p downPublisher) Publish(ctx context.Context, _, _ string, _ []byte) error {
	time.Sleep(p.per)
	return errors.New("nats: timeout")
}

// The cost a change snapshot is paced by is its building and encoding, not the queue's publish:
// when the queue is down each try waits for its timeout, and counting those (here 5 tries of
// 500 ms, plus the retries' backoff) held change snapshots back for four times as long after the
// queue came back (found in review: a NATS outage, 5 tries of 5 s, held them back about 106 s).
func TestChangeSnapshotCostLeavesOutTheQueue(t *testing.T) {
	const per = 500 * time.Millisecond
	a, err := New(Config{Cluster: cluster, Namespace: "dovetail-system", Kube: fake.NewClientset(testNode("n1")),
		Dynamic:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(), kube.ListKinds),
		Publisher: downPublisher{per: per}, Clock: clock.RealClock{}, SnapshotInterval: -1, ChangeSnapshotInterval: -1,
		SyncTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-a.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("caches not synced")
	}
	begin := time.Now()
	cost, err := a.publishSnapshot(ctx)
	took := time.Since(begin)
	if err == nil {
		t.Fatal("published to a queue that is down")
	}
	if took < 5*per {
		t.Fatalf("the publish took %v: the queue's five tries did not run", took)
	}
	if cost >= per {
		t.Errorf("cost %v of a one-node snapshot whose publish took %v: the queue's time is counted", cost, took)
	}
}
