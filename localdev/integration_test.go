package localdev

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
)

// These tests run the whole local path: the agent's informers over the in-memory cluster, a
// real embedded NATS JetStream server, the provision function, the fake cloud over the real
// catalog and the scheduler stand-in. Only the Kubernetes API is in memory (client-go's fake
// clientset), because no API server runs offline in a unit test.

func startEnv(t *testing.T, o Options) (*Env, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	o.Out = &syncWriter{w: &out}
	o.BootDelay = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	env, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	if err := env.WaitAllBound(ctx); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return env, &out
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// recordsSettle bounds the wait for every instance to have exactly one NodeClaim recorded. A
// decision whose invocation failed after its launch records the NodeClaim when it is delivered
// again, after the consumer's backoff (dnats.DefaultBackoff: 1 s, 5 s, 15 s, ...); three failures
// in a row (TestChaos kills one invocation in seven) take 21 s, and the commands then cross the
// queue and the agent. The waits end as soon as the records match, so the bound only ends a
// failing test.
var recordsSettle = dnats.DefaultBackoff[0] + dnats.DefaultBackoff[1] + dnats.DefaultBackoff[2] + 10*time.Second

// checkNoOrphans asserts every instance the cloud runs has exactly one NodeClaim, every launch
// happened once, and every launched node runs pods.
func checkNoOrphans(t *testing.T, env *Env) {
	t.Helper()
	// Bounded, so a wait that never ends fails naming what it waited for instead of hanging the package.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Pods may be bound before a redelivered decision has recorded its NodeClaim (the node
	// registers as soon as the instance boots): wait for the records to settle, bounded.
	var insts []cloud.Instance
	var claims *unstructured.UnstructuredList
	for deadline := time.Now().Add(recordsSettle); ; {
		var err error
		if insts, err = env.Cloud.List(ctx, env.Options.Cluster); err != nil {
			t.Fatal(err)
		}
		if claims, err = env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(insts) == len(claims.Items) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	byProvider := map[string]int{}
	for _, u := range claims.Items {
		var nc apisv1.NodeClaim
		if err := kube.FromUnstructured(&u, &nc); err != nil {
			t.Fatal(err)
		}
		byProvider[nc.Status.ProviderID]++
	}
	if len(insts) != len(claims.Items) {
		t.Fatalf("%d instances but %d NodeClaims", len(insts), len(claims.Items))
	}
	for _, i := range insts {
		if byProvider[i.ProviderID] != 1 {
			t.Fatalf("instance %s has %d NodeClaims, want 1 (orphan or duplicate)", i.ProviderID, byProvider[i.ProviderID])
		}
	}
	if st := env.Cloud.Stats(); st.Launches != len(insts) {
		t.Fatalf("launches = %d for %d instances: something launched twice", st.Launches, len(insts))
	}
	s, err := Summarize(ctx, env.Cluster, env.Cloud, env.Options.Cluster, env.Catalog, env.Set)
	if err != nil {
		t.Fatal(err)
	}
	// Every workload pod must run somewhere, but which node a pod lands on is the scheduler's
	// call: nodes boot one after another and the first one ready may take pods the plan put on
	// another (the real kube-scheduler does the same, see e2e/). A node left with DaemonSet pods
	// only is reported, and consolidation removes it; more such nodes than the plan had claims
	// would mean a launch nobody needed.
	idle := 0
	for _, n := range s.Nodes {
		if n.WorkloadPods == 0 {
			idle++
			t.Logf("launched node %s runs no workload pod (only %d DaemonSet pods): the scheduler placed its pods elsewhere", n.Name, n.Pods)
		}
	}
	if s.PodsBound != s.PodsTotal || idle == len(s.Nodes) && len(s.Nodes) > 0 {
		t.Fatalf("%d of %d workload pods bound, %d of %d launched nodes idle", s.PodsBound, s.PodsTotal, idle, len(s.Nodes))
	}
}

func TestDefaultScenarioAllPodsBound(t *testing.T) {
	env, out := startEnv(t, Options{})
	bound, total, err := env.count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The seed has 40 workload pods (sum of the replicas in localdev/manifests/source); 4 of them
	// (the Karpenter controllers) go to the system node group, 36 to Dovetail's nodes.
	if bound != total || total != 40 {
		t.Fatalf("bound %d of %d workload pods, want 40 of 40\n%s", bound, total, out)
	}
	checkNoOrphans(t, env)
	if !strings.Contains(out.String(), "launched NodeClaim") {
		t.Fatalf("the progress shows no launch:\n%s", out)
	}
}

func TestDuplicateDeliveryLaunchesNothingTwice(t *testing.T) {
	var deliveries atomic.Int32
	env, out := startEnv(t, Options{wrapHandler: func(h queue.Handler) queue.Handler {
		// Every message is handled twice, as when an ack is lost and the queue redelivers.
		return func(ctx context.Context, m queue.Message) error {
			deliveries.Add(1)
			if err := h(ctx, m); err != nil {
				return err
			}
			m.Attempt++
			return h(ctx, m)
		}
	}})
	if deliveries.Load() == 0 {
		t.Fatal("the function received nothing")
	}
	checkNoOrphans(t, env)
	if st := env.Cloud.Stats(); st.IdempotentReplays == 0 {
		t.Fatalf("the second delivery did not reach the cloud as a replay: %+v\n%s", st, out)
	}
}

func TestCrashBetweenLaunchAndCommandLeavesNoOrphan(t *testing.T) {
	var crashed atomic.Bool
	env, out := startEnv(t, Options{wrapPublisher: func(p queue.Publisher) queue.Publisher {
		return &crashOnce{Publisher: p, crashed: &crashed}
	}})
	if !crashed.Load() {
		t.Fatal("the crash was never injected")
	}
	checkNoOrphans(t, env)
	_ = out
}

// crashOnce fails the first command publish: the instance is launched but its NodeClaim command
// never leaves, as if the function died at that line. The handler returns the error, so the
// queue redelivers the message.
type crashOnce struct {
	queue.Publisher
	crashed *atomic.Bool
}

func (c *crashOnce) Publish(ctx context.Context, subject, id string, data []byte) error {
	if c.crashed.CompareAndSwap(false, true) {
		return errors.New("injected crash after launch, before the command")
	}
	return c.Publisher.Publish(ctx, subject, id, data)
}

// Run waits for every pod bound and every NodeClaim Ready, prints the summary and, with Keep,
// keeps running until its context ends.
func TestRunKeepsRunningUntilInterrupted(t *testing.T) {
	var out bytes.Buffer
	w := &syncWriter{w: &out}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{Out: w, BootDelay: 200 * time.Millisecond, Keep: true})
		done <- err
	}()
	deadline := time.After(60 * time.Second)
	for {
		w.mu.Lock()
		s := out.String()
		w.mu.Unlock()
		if strings.Contains(s, "keeps running") {
			if !strings.Contains(s, "NodeClaims Ready") || !strings.Contains(s, "=== Summary ===") {
				t.Fatalf("kept running before the NodeClaims were Ready and the summary printed:\n%s", s)
			}
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before it was interrupted: %v\n%s", err, s)
		case <-deadline:
			t.Fatalf("never reached the summary:\n%s", s)
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after the interrupt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop after its context ended")
	}
}
