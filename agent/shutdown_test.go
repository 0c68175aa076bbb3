package agent

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
)

// shutdownBound is the acceptance of issue 29: the agent exits within 5 s of SIGTERM (which
// cancels Run's context: agent/cmd/agent's signal.NotifyContext), with no command lost.
const shutdownBound = 5 * time.Second

// SIGTERM while a command is being applied: Run returns within shutdownBound, the command goes
// back to the queue (a NATS nak: redelivered at once, not after the ack wait), and the next
// agent applies it; nothing is dead-lettered.
func TestShutdownReturnsTheInFlightCommand(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := qnats.Connect(url, "agent-test", srv.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	bg := context.Background()
	stream, err := qnats.EnsureStream(bg, nc, qnats.StreamConfig{Cluster: cluster, Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := qnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	kc := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kube.ListKinds)

	first, stop := context.WithCancel(bg)
	defer stop()
	// The first agent's NodeClaim create is in flight when SIGTERM comes: it waits, as a request
	// to a slow API server does, until its context ends (net/http aborts a request whose context
	// is canceled: http.Request.WithContext). Later creates go through.
	inFlight := make(chan struct{})
	var creates atomic.Int32
	dyn.PrependReactor("create", "nodeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) > 1 {
			return false, nil, nil
		}
		close(inFlight)
		<-first.Done()
		return true, nil, first.Err()
	})
	start := func(ctx context.Context) chan error {
		cmds, err := qnats.NewConsumer(ctx, nc, qnats.ConsumerConfig{Cluster: cluster, Durable: "agent", Subject: queue.CommandsSubject(cluster)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(Config{Cluster: cluster, Namespace: "dovetail-system", Kube: kc, Dynamic: dyn, Publisher: pub, Commands: cmds,
			Clock: clock.RealClock{}, SnapshotInterval: -1, ChangeSnapshotInterval: -1, SyncTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		return done
	}

	done := start(first)
	cmd := &events.Command{
		ID: events.CommandID(cluster, "create", "default-x1"), Kind: events.CommandCreateNodeClaim, Cluster: cluster,
		NodeClaim: &apisv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "default-x1", Labels: map[string]string{apisv1.LabelNodePool: "default"},
				CreationTimestamp: metav1.NewTime(time.Now())}, // the decision's time, which a CreateNodeClaim must carry
			Spec:   apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"}},
			Status: apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"},
		},
	}
	data, err := events.NewEvent(cluster, "provision", events.TypeCommand, "cmd-1", cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(bg, queue.CommandsSubject(cluster), "cmd-1", data); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("the command never reached the API server")
	}

	sigterm := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after SIGTERM: %v", err)
		}
		t.Logf("agent stopped %s after SIGTERM", time.Since(sigterm).Round(time.Millisecond))
	case <-time.After(shutdownBound):
		t.Fatalf("agent still running %s after SIGTERM", shutdownBound)
	}

	// The next agent (the restarted pod) gets the command at once and applies it.
	second, stop2 := context.WithCancel(bg)
	done2 := start(second)
	defer func() {
		stop2()
		<-done2
	}()
	eventually(t, "the command applied by the next agent", func() bool {
		_, err := dyn.Resource(kube.NodeClaimGVR).Get(bg, "default-x1", metav1.GetOptions{})
		return err == nil
	})
	if n := creates.Load(); n != 2 {
		t.Errorf("%d creates, want 2: the interrupted one and the redelivery", n)
	}
	info, err := stream.Info(bg, jetstream.WithSubjectFilter(queue.DeadLetterSubject(cluster)))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[queue.DeadLetterSubject(cluster)]; n != 0 {
		t.Errorf("%d dead-lettered messages, want 0", n)
	}
}
