package localdev

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// chaosNodes sizes TestChaos: one 3-vCPU pod per 4-vCPU spot node. make test runs 40 (about 20 s
// on two cores); the full size is go test ./localdev -run TestChaos -chaos.nodes=200
// (minutes: the in-memory API server copies every object on every list).
var chaosNodes = flag.Int("chaos.nodes", 40, "nodes of TestChaos (the issue's full size: 200)")

const chaosManifests = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: chaos}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["spot"]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["c6i.xlarge", "m6i.xlarge", "c6a.xlarge", "m6a.xlarge", "c7i.xlarge", "m7i.xlarge"]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: bottlerocket@latest}]
  role: KarpenterNodeRole-dovetail-dev
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: dovetail-dev}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: dovetail-dev}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: registry.example.com/web:v1
          resources: {requests: {cpu: "3", memory: 1Gi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 10%%
  selector: {matchLabels: {app: web}}
`

var errKilled = errors.New("chaos: worker killed")

// chaos wraps every function's handler: each message is handled three times (duplicates), half
// the time the function's previous message is handled again after it (an older message after a
// newer one of the same group), and one invocation in seven is killed at a random point (its
// context ends 0–60 ms in, whatever it was doing) and redelivered by JetStream.
type chaos struct {
	mu                     sync.Mutex
	rng                    *rand.Rand
	prev                   map[string]queue.Message
	kills, dups, reordered atomic.Int64
}

func (c *chaos) wrap(name string, h queue.Handler) queue.Handler {
	return func(ctx context.Context, msg queue.Message) error {
		c.mu.Lock()
		kill := c.rng.IntN(7) == 0
		after := time.Duration(c.rng.IntN(60)) * time.Millisecond
		prev, replay := c.prev[name]
		replay = replay && c.rng.IntN(2) == 0
		c.prev[name] = msg
		c.mu.Unlock()
		if kill {
			kctx, cancel := context.WithTimeout(ctx, after)
			_ = h(kctx, msg)
			cancel()
			c.kills.Add(1)
			return errKilled
		}
		first := h(ctx, msg)
		for range 2 {
			_ = h(ctx, msg)
			c.dups.Add(1)
		}
		if replay {
			_ = h(ctx, prev)
			c.reordered.Add(1)
		}
		return first
	}
}

// The local path under chaos: N spot nodes, every message of every function delivered three
// times, older messages replayed after newer ones, workers killed mid-invocation, then 30 % of
// the spot nodes interrupted. Asserted zero: instances launched twice for one NodeClaim
// (duplicates), instances no NodeClaim records (orphans), moments the web PodDisruptionBudget
// was broken, and pods lost (not running again on a live node).
func TestChaos(t *testing.T) {
	n := *chaosNodes
	start := time.Now()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chaos.yaml"), []byte(fmt.Sprintf(chaosManifests, n)), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := &chaos{rng: rand.New(rand.NewPCG(13, uint64(n))), prev: map[string]queue.Message{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute+time.Duration(3*n)*time.Second)
	defer cancel()
	out := syncWriter{w: new(bytes.Buffer)}
	env, err := Start(ctx, Options{Manifests: []string{dir}, BootDelay: 300 * time.Millisecond, Out: &out,
		wrapHandler: func(h queue.Handler) queue.Handler {
			if os.Getenv("NOCHAOS") != "" {
				return h
			}
			return ch.wrap("provision", h)
		}, wrapFunction: func(n string, h queue.Handler) queue.Handler {
			if os.Getenv("NOCHAOS") != "" {
				return h
			}
			return ch.wrap(n, h)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	for _, wait := range []func(context.Context) error{env.WaitAllBound, env.WaitNodeClaimsReady} {
		if err := wait(ctx); err != nil {
			os.WriteFile("/tmp/chaos-out.txt", out.w.Bytes(), 0o644)
			t.Fatalf("%v (progress in /tmp/chaos-out.txt)", err)
		}
	}
	provisioned := time.Since(start)

	// The PDB (maxUnavailable 10 %) watched from here on: healthy web pods never below n − 10 %.
	minHealthy := n - (n+9)/10
	var violations, samples atomic.Int64
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watched sync.WaitGroup
	watched.Add(1)
	go func() {
		defer watched.Done()
		for watchCtx.Err() == nil {
			pods, err := env.Cluster.Kube.CoreV1().Pods("default").List(watchCtx, metav1.ListOptions{})
			if err == nil {
				h := 0
				for i := range pods.Items {
					if healthy(&pods.Items[i]) {
						h++
					}
				}
				samples.Add(1)
				if h < minHealthy {
					violations.Add(1)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// 30 % of the spot nodes interrupted at once, each notice on the notices subject.
	insts, err := env.Cloud.List(ctx, env.Options.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dnats.Connect(env.NATSURL, t.Name(), env.NATS.ClientOptions(natsauth.RoleScheduledEvents)...) // notices, as the DaemonSet publishes them
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	interrupted := map[string]bool{}
	for i := range insts {
		if len(interrupted) >= (3*n+9)/10 {
			break
		}
		if insts[i].CapacityType != "spot" || insts[i].State != cloud.StateRunning {
			continue
		}
		it, err := env.Cloud.Interrupt(insts[i].ProviderID, fake.KindSpotInterruption)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("notice-%d", i)
		if err := pub.Publish(ctx, queue.NoticesSubject(env.Options.Cluster), id, it.SpotNoticeJSON(id)); err != nil {
			t.Fatal(err)
		}
		interrupted[insts[i].ProviderID] = true
	}

	// Settled: every web pod running on a node that is not interrupted, every interrupted node
	// tainted and drained.
	settled := func() (bool, string) {
		nodes, err := env.Cluster.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		leaving := map[string]bool{}
		live := map[string]bool{}
		for _, nd := range nodes.Items {
			live[nd.Name] = true
			if interrupted[nd.Spec.ProviderID] {
				leaving[nd.Name] = true
				tainted := false
				for _, tt := range nd.Spec.Taints {
					tainted = tainted || tt.Key == apisv1.TaintKeyDisrupted
				}
				if !tainted {
					return false, "interrupted node " + nd.Name + " not tainted"
				}
			}
		}
		pods, err := env.Cluster.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		var others []string
		for i := range pods.Items {
			p := &pods.Items[i]
			if healthy(p) && live[p.Spec.NodeName] && !leaving[p.Spec.NodeName] {
				running++
			} else if len(others) < 3 {
				msg := ""
				for _, c := range p.Status.Conditions {
					msg += string(c.Type) + "=" + string(c.Status) + " " + c.Message + ";"
				}
				others = append(others, fmt.Sprintf("%s on %q (%s) %s", p.Name, p.Spec.NodeName, p.Status.Phase, msg))
			}
		}
		return running == n, fmt.Sprintf("%d of %d web pods running on live nodes that are not interrupted; e.g. %v", running, n, others)
	}
	var why string
	for ok := false; !ok; {
		if ctx.Err() != nil {
			os.WriteFile("/tmp/chaos-out.txt", out.w.Bytes(), 0o644)
			t.Fatalf("not settled: %s (progress in /tmp/chaos-out.txt)", why)
		}
		ok, why = settled()
		time.Sleep(200 * time.Millisecond)
	}
	stopWatch()
	watched.Wait()

	// Every instance has exactly one NodeClaim, no NodeClaim two instances (checked after the
	// records settle, as checkNoOrphans does).
	var duplicates, orphans int
	for deadline := time.Now().Add(recordsSettle); ; {
		duplicates, orphans = 0, 0
		insts, err = env.Cloud.List(ctx, env.Options.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		claims, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		recorded := map[string]bool{}
		for _, u := range claims.Items {
			var c apisv1.NodeClaim
			if err := kube.FromUnstructured(&u, &c); err != nil {
				t.Fatal(err)
			}
			recorded[c.Status.ProviderID] = true
		}
		perClaim := map[string]int{}
		for _, i := range insts {
			if i.State == cloud.StateTerminated || i.State == cloud.StateShuttingDown {
				continue
			}
			if perClaim[i.Tags[apisv1.TagNodeClaim]]++; perClaim[i.Tags[apisv1.TagNodeClaim]] == 2 {
				duplicates++
			}
			if !recorded[i.ProviderID] {
				orphans++
			}
		}
		if (duplicates == 0 && orphans == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	pods, err := env.Cluster.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lost := n
	for i := range pods.Items {
		if healthy(&pods.Items[i]) {
			lost--
		}
	}
	t.Logf("chaos: %d nodes, %d interrupted; %d launches; workers killed %d times, %d duplicate and %d out-of-order deliveries; "+
		"duplicates %d, orphans %d, PDB violations %d (of %d samples), pods lost %d; provisioned in %s, whole run %s",
		n, len(interrupted), env.Cloud.Stats().Launches, ch.kills.Load(), ch.dups.Load(), ch.reordered.Load(),
		duplicates, orphans, violations.Load(), samples.Load(), lost, provisioned.Round(time.Second), time.Since(start).Round(time.Second))
	if duplicates != 0 || orphans != 0 || violations.Load() != 0 || lost != 0 {
		t.Fatalf("want all zero: duplicates %d, orphans %d, PDB violations %d, pods lost %d", duplicates, orphans, violations.Load(), lost)
	}
	if ch.kills.Load() == 0 || ch.reordered.Load() == 0 {
		t.Fatalf("the chaos did not happen: %d kills, %d reordered", ch.kills.Load(), ch.reordered.Load())
	}
}
