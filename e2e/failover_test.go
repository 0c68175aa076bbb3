//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dovetail-dev/dovetail/agent"
	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// failoverScenario: a NodePool whose budget lets one node be disrupted at a time, and three
// replicas that each need a node of their own (required anti-affinity on the hostname), so the
// provision function launches three nodes; scaled to zero, all three are empty and consolidation
// deletes them one by one.
// devEC2NodeClass is the EC2NodeClass "default" of local dev's fake account (its role, and the
// subnets and security groups tagged for discovery), shared by the scenarios of this package.
const devEC2NodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: bottlerocket@latest
  role: KarpenterNodeRole-dovetail-dev
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: dovetail-dev
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: dovetail-dev
`

const failoverScenario = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: ha
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["5"]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets:
      - nodes: "1"
---
` + devEC2NodeClass + `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  app: web
      containers:
        - name: app
          image: registry.k8s.io/pause:3.10
          resources:
            requests:
              cpu: 500m
              memory: 256Mi
`

// failoverBudget is the ha pool's budget (nodes: "1").
const failoverBudget = 1

// Leader election timings of the test's replicas: client-go's rule LeaseDuration > RenewDeadline
// > RetryPeriod, shortened so the standby takes over within seconds of the leader's death.
const (
	failoverLease   = 4 * time.Second
	failoverRenew   = 3 * time.Second
	failoverRetry   = 500 * time.Millisecond
	failoverAckWait = 3 * time.Second
)

// TestLeaderFailoverMidConsolidation runs two agent replicas with leader election against the
// real control plane (kube-apiserver's Leases, the ledger ConfigMap's resourceVersion
// compare-and-swap, RBAC as agent/rbac.yaml grants it) and local dev's functions on embedded NATS
// JetStream. When the leader has applied the first consolidation taint and before it
// acknowledged that command, it dies: its NATS connection closes (no ack), its API connections
// fail (the Lease is not released) and its context ends. The test asserts:
//   - the standby takes the Lease once it expires, reserves its snapshot revisions above the
//     dead leader's (the floor on the ledger ConfigMap) and publishes only above them;
//   - every budget unit it grants is read from and written to the ledger ConfigMap;
//   - at no observation (a Node or NodeClaim watch event) does the pool have more disrupting nodes
//     than its budget, and consolidation still deletes all three empty nodes;
//   - no command is lost: every command on the commands subject is settled by an agent, applied
//     at most once and refused with an Event otherwise (the dead leader's unacknowledged taint
//     is redelivered by JetStream and refused as made from a revision before the new leader's);
//     the agents' durable consumer ends with nothing pending or unacknowledged.
func TestLeaderFailoverMidConsolidation(t *testing.T) {
	if _, _, _, err := (&realcluster.Options{}).Binaries(); err != nil {
		t.Fatalf("the e2e suite needs the control-plane binaries: %v", err)
	}
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	scenario := filepath.Join(dir, "failover.yaml")
	if err := os.WriteFile(scenario, []byte(failoverScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	env, err := localdev.Start(ctx, localdev.Options{
		Cluster: "failover", ControlPlane: localdev.ControlPlaneReal, Manifests: []string{scenario},
		BootDelay: time.Second, ExternalAgent: true, Out: logs, Log: log,
		RealControlPlane: realcluster.Options{Dir: t.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	defer func() {
		if t.Failed() {
			t.Logf("agent and function logs (warnings, errors, refusals, leadership):\n%s",
				logs.filter("level=WARN", "level=ERROR", "command refused", "leading", "standing by", "revisions reserved", "consolidate ("))
		}
	}()
	kc := env.Cluster.Kube

	obs := watchBudget(ctx, t, kc, env.Cluster.Dynamic, "ha")
	token, err := env.ControlPlane.ServiceAccountToken(ctx, localdev.AgentNamespace, localdev.AgentServiceAccount, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Each replica is a separate "process": its own NATS connection, API connections and
	// context. agent-b is made first, so its own revisions (counted from its clock) are below
	// agent-a's; agent-a runs first and leads, agent-b stands by.
	b := newReplica(ctx, t, env, token, "agent-b", log)
	a := newReplica(ctx, t, env, token, "agent-a", log)
	a.run(ctx, t)
	waitFor(ctx, t, 30*time.Second, "agent-a to take the Lease", func(context.Context) bool { return a.agent.Leading() })
	floorA := ledgerFloor(ctx, t, kc)
	b.run(ctx, t)
	waitFor(ctx, t, 30*time.Second, "agent-b's caches to sync", func(context.Context) bool {
		select {
		case <-b.agent.Synced():
			return true
		default:
			return false
		}
	})

	if err := env.WaitAllBound(ctx); err != nil {
		t.Fatalf("provisioning the three web pods: %v", err)
	}
	if err := env.WaitNodeClaimsReady(ctx); err != nil {
		t.Fatalf("provisioning the three web pods: %v", err)
	}
	pool := poolNodes(ctx, t, kc, "ha")
	if len(pool) != 3 {
		t.Fatalf("pool ha has nodes %v, want 3 (one per web replica)", pool)
	}
	if b.agent.Leading() {
		t.Fatal("agent-b leads while agent-a is alive")
	}
	t.Logf("timing: 3 nodes provisioned by agent-a %s after start", time.Since(begin).Round(100*time.Millisecond))

	// kubectl scale deployment web --replicas=0: three empty nodes to consolidate.
	a.armKill()
	if _, err := kc.AppsV1().Deployments("default").UpdateScale(ctx, "web", scaleTo(ctx, t, kc, 0), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var killed *events.Command
	waitFor(ctx, t, 60*time.Second, "agent-a to apply a consolidation taint (and die)", func(context.Context) bool {
		killed = a.killedOn()
		return killed != nil
	})
	killedAt := time.Now()
	t.Logf("agent-a killed after applying %s (TaintNode %s, budget %s/%s) %s after start", killed.ID, killed.NodeName,
		killed.Budget.NodePool, killed.Budget.Reason, time.Since(begin).Round(100*time.Millisecond))
	if n, err := kc.CoreV1().Nodes().Get(ctx, killed.NodeName, metav1.GetOptions{}); err != nil || !tainted(n) {
		t.Fatalf("the node agent-a tainted: %v (err %v); want it there and tainted: the kill is mid-consolidation", n, err)
	}
	if err := a.wait(20 * time.Second); err != nil {
		t.Fatalf("agent-a after its kill: %v", err)
	}

	// The standby takes the Lease once it expires (agent-a did not release it).
	waitFor(ctx, t, failoverLease+10*time.Second, "agent-b to take the Lease", func(ctx context.Context) bool {
		l, err := kc.CoordinationV1().Leases(localdev.AgentNamespace).Get(ctx, agent.DefaultLeaseName, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "agent-b" && b.agent.Leading()
	})
	t.Logf("agent-b leads %s after the kill", time.Since(killedAt).Round(100*time.Millisecond))
	if base := b.agent.Watcher().Revisions().Base(); base < floorA {
		t.Errorf("agent-b's revisions start at %d, below the floor %d agent-a reserved up to: functions would take agent-a's snapshots for the freshest", base, floorA)
	}

	// Consolidation goes on under agent-b until all three empty nodes are gone.
	waitFor(ctx, t, 90*time.Second, "consolidation to delete the three empty nodes", func(ctx context.Context) bool {
		return len(poolNodes(ctx, t, kc, "ha")) == 0
	})
	t.Logf("timing: the three nodes consolidated %s after the kill", time.Since(killedAt).Round(100*time.Millisecond))

	// No command lost: every command published is delivered, settled and acknowledged.
	waitFor(ctx, t, 30*time.Second, "the agents' consumer to have nothing pending or unacknowledged", func(ctx context.Context) bool {
		info, err := commandConsumer(ctx, t, env)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	published := publishedCommands(ctx, t, env)
	outcomes := mergeOutcomes(a, b)
	for _, id := range published {
		var applied, refused int
		var seen []string
		for _, o := range outcomes[id] {
			seen = append(seen, o.agent+":"+o.result)
			switch o.result {
			case "applied", "incomplete":
				applied++
			case "refused":
				refused++
			}
		}
		switch {
		case len(seen) == 0:
			t.Errorf("command %s was published and no agent handled it (lost)", id)
		case applied > 1:
			t.Errorf("command %s applied %d times (%s), want once", id, applied, strings.Join(seen, ", "))
		case applied == 0 && refused == 0:
			t.Errorf("command %s never settled: %s", id, strings.Join(seen, ", "))
		}
	}
	// The command in flight at the kill: applied by agent-a, redelivered by JetStream (never
	// acknowledged), refused by agent-b with its reason.
	if got := outcomes[killed.ID]; len(got) != 2 || got[0].agent != "agent-a" || got[0].result != "applied" || got[1].agent != "agent-b" || got[1].result != "refused" {
		t.Errorf("the command in flight at the kill: %+v, want applied by agent-a then redelivered to agent-b and refused", got)
	}
	if !refusalRecorded(ctx, t, kc, killed.ID, "predates this agent") {
		t.Errorf("no CommandRefused Event for %s saying its revision predates agent-b", killed.ID)
	}

	// Revisions: every snapshot agent-b published is above every one agent-a published.
	if maxA, minB := a.maxRevision(), b.minRevision(); maxA == 0 || minB == 0 || minB <= maxA {
		t.Errorf("agent-a published revisions up to %d, agent-b from %d: want agent-b's above", maxA, minB)
	}
	// Every unit of the budget agent-b granted was read from and written to the ledger ConfigMap.
	if grants := b.budgetGrants(); len(grants) == 0 {
		t.Error("agent-b granted no budget unit: consolidation did not go on through it")
	} else {
		for _, g := range grants {
			if !g.readLedger || !g.wroteLedger {
				t.Errorf("agent-b granted %s (TaintNode of %s) without reading (%v) and writing (%v) the ledger ConfigMap", g.id, g.node, g.readLedger, g.wroteLedger)
			}
		}
	}
	for _, r := range []*replica{a, b} {
		counts := map[string]int{}
		r.mu.Lock()
		for _, o := range r.outcomes {
			counts[o.result]++
		}
		r.mu.Unlock()
		t.Logf("%s: commands %v; budget units granted %d; snapshot revisions %d..%d", r.name, counts, len(r.budgetGrants()), r.minRevision(), r.maxRevision())
	}
	most, at := obs.worst()
	if most > failoverBudget {
		t.Errorf("%d nodes of pool ha disrupting at once (%s), over its budget of %d", most, at, failoverBudget)
	}
	if d := obs.disrupted(); len(d) != 3 {
		t.Errorf("nodes seen disrupting: %v, want the three consolidated", d)
	}
	t.Logf("timing: %s in all; at most %d node(s) disrupting at once; %d commands published", time.Since(begin).Round(100*time.Millisecond), most, len(published))
}

// replica is one agent "process" of the test.
type replica struct {
	name    string
	agent   *agent.Agent
	cancel  context.CancelFunc
	done    chan error
	nc      interface{ Close() }
	results *lastResult
	api     *apiLog

	mu        sync.Mutex
	armed     bool
	killed    *events.Command
	outcomes  []outcome
	grants    []grant
	revisions []int64
}

type outcome struct{ agent, id, kind, result string }

type grant struct {
	id, node                string
	readLedger, wroteLedger bool
}

// newReplica makes an agent with leader election (identity name) under the agent's
// ServiceAccount token, its own NATS connection as the agent role, and the durable consumer the
// chart's agents share; run runs it.
func newReplica(ctx context.Context, t *testing.T, env *localdev.Env, token, name string, log *slog.Logger) *replica {
	t.Helper()
	r := &replica{name: name, results: &lastResult{}, api: &apiLog{}, done: make(chan error, 1)}
	nc, err := dnats.Connect(env.NATSURL, name, env.NATS.ClientOptions(natsauth.RoleAgent)...)
	if err != nil {
		t.Fatal(err)
	}
	r.nc = nc
	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := dnats.NewConsumer(ctx, nc, dnats.ConsumerConfig{Cluster: env.Options.Cluster, Durable: natsauth.AgentDurable,
		Subject: queue.CommandsSubject(env.Options.Cluster), Logger: log, AckWait: failoverAckWait})
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.ControlPlane.TokenConfig(token)
	cfg.QPS, cfg.Burst = agent.DefaultKubeQPS, agent.DefaultKubeBurst
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &recordingTransport{next: rt, log: r.api} }
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Cluster: env.Options.Cluster, Namespace: localdev.AgentNamespace, NodeClassKind: apisv1.KindEC2NodeClass,
		Kube: kc, Dynamic: dc, Publisher: &revisionRecorder{next: pub, r: r}, Commands: &watchedConsumer{next: cons, r: r},
		Blobs: events.FileBlobStore{Dir: env.BlobDir}, Logger: log.With("replica", name), Metrics: r.results,
		SnapshotInterval: 2 * time.Second,
		LeaderElection:   &agent.LeaderElection{Identity: name, LeaseDuration: failoverLease, RenewDeadline: failoverRenew, RetryPeriod: failoverRetry}})
	if err != nil {
		t.Fatal(err)
	}
	r.agent = a
	t.Cleanup(nc.Close)
	return r
}

func (r *replica) run(ctx context.Context, t *testing.T) {
	actx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go func() { r.done <- r.agent.Run(actx) }()
	t.Cleanup(func() {
		cancel()
		if err := r.wait(30 * time.Second); err != nil {
			t.Errorf("%s: %v", r.name, err)
		}
	})
}

// wait waits at most d for the agent's Run to return; a killed agent may return an error.
func (r *replica) wait(d time.Duration) error {
	select {
	case err := <-r.done:
		r.done <- err // the cleanup waits again
		return nil
	case <-time.After(d):
		return fmt.Errorf("Run did not return within %s of its context ending", d)
	}
}

func (r *replica) armKill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = true
}

func (r *replica) killedOn() *events.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.killed
}

// kill is the process's death right after it applied cmd and before the ack: the NATS
// connection closes (the ack cannot be sent), every API request fails from now on (the Lease is
// not released: the standby waits for it to expire), and the agent's context ends.
func (r *replica) kill(cmd *events.Command) {
	r.mu.Lock()
	r.killed = cmd
	r.mu.Unlock()
	r.api.die()
	r.nc.Close()
	r.cancel()
}

// watchedConsumer records what the agent did with each command (the agent's own
// dovetail_agent_commands_total result label) and kills the replica on its first consolidation
// taint once armed.
type watchedConsumer struct {
	next queue.Consumer
	r    *replica
}

func (w *watchedConsumer) Consume(ctx context.Context, h queue.Handler) error {
	return w.next.Consume(ctx, func(ctx context.Context, msg queue.Message) error {
		cmd := decodeCommand(msg)
		before := w.r.api.len()
		err := h(ctx, msg)
		_, result := w.r.results.get()
		if cmd == nil {
			return err
		}
		r := w.r
		r.mu.Lock()
		r.outcomes = append(r.outcomes, outcome{agent: r.name, id: cmd.ID, kind: string(cmd.Kind), result: result})
		budgeted := cmd.Kind == events.CommandTaintNode && cmd.Budget != nil && result == "applied"
		if budgeted {
			reqs := r.api.since(before)
			r.grants = append(r.grants, grant{id: cmd.ID, node: cmd.NodeName,
				readLedger: hasRequest(reqs, http.MethodGet, ledgerPath), wroteLedger: hasRequest(reqs, http.MethodPut, ledgerPath)})
		}
		kill := r.armed && r.killed == nil && budgeted &&
			(cmd.Budget.Reason == apisv1.DisruptionReasonEmpty || cmd.Budget.Reason == apisv1.DisruptionReasonUnderutilized)
		r.mu.Unlock()
		if kill {
			r.kill(cmd)
		}
		return err
	})
}

func decodeCommand(msg queue.Message) *events.Command {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return nil
	}
	cmd, err := events.Codec{}.Command(context.Background(), env)
	if err != nil {
		return nil
	}
	return cmd
}

// lastResult keeps the labels of the agent's last dovetail_agent_commands_total record: the
// agent handles one command at a time, and records its result before HandleCommand returns.
type lastResult struct {
	mu           sync.Mutex
	kind, result string
}

func (l *lastResult) Record(m *telemetry.Metric, _ float64, labels ...string) {
	if m != telemetry.CommandsApplied || len(labels) != 2 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kind, l.result = labels[0], labels[1]
}

func (l *lastResult) get() (string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kind, l.result
}

// revisionRecorder records the snapshot revision of every event the agent publishes (its ID:
// "snapshot-<revision>-<unix>" or "pods-pending-<revision>").
type revisionRecorder struct {
	next queue.Publisher
	r    *replica
}

func (p *revisionRecorder) Publish(ctx context.Context, subject, id string, data []byte) error {
	err := p.next.Publish(ctx, subject, id, data)
	if err == nil {
		var rev string
		switch {
		case strings.HasPrefix(id, "snapshot-"):
			rev, _, _ = strings.Cut(strings.TrimPrefix(id, "snapshot-"), "-")
		case strings.HasPrefix(id, "pods-pending-"):
			rev = strings.TrimPrefix(id, "pods-pending-")
		}
		if n, perr := strconv.ParseInt(rev, 10, 64); perr == nil {
			p.r.mu.Lock()
			p.r.revisions = append(p.r.revisions, n)
			p.r.mu.Unlock()
		}
	}
	return err
}

func (r *replica) maxRevision() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var m int64
	for _, v := range r.revisions {
		m = max(m, v)
	}
	return m
}

func (r *replica) minRevision() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var m int64
	for i, v := range r.revisions {
		if i == 0 || v < m {
			m = v
		}
	}
	return m
}

func (r *replica) budgetGrants() []grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]grant(nil), r.grants...)
}

// mergeOutcomes lists, per command ID, what each agent did with it, agent-a's first (it died
// before agent-b led).
func mergeOutcomes(rs ...*replica) map[string][]outcome {
	out := map[string][]outcome{}
	for _, r := range rs {
		r.mu.Lock()
		for _, o := range r.outcomes {
			out[o.id] = append(out[o.id], o)
		}
		r.mu.Unlock()
	}
	return out
}

// ledgerPath is the disruption ledger's path on the API server.
var ledgerPath = "/api/v1/namespaces/" + localdev.AgentNamespace + "/configmaps/" + kube.DisruptionLedgerConfigMap

// apiLog records the method and path of every API request of one replica, and makes them all
// fail once the replica died.
type apiLog struct {
	mu   sync.Mutex
	reqs []apiRequest
	dead bool
}

type apiRequest struct{ method, path string }

func (l *apiLog) die() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead = true
}

func (l *apiLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *apiLog) since(i int) []apiRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]apiRequest(nil), l.reqs[i:]...)
}

func hasRequest(reqs []apiRequest, method, path string) bool {
	for _, r := range reqs {
		if r.method == method && r.path == path {
			return true
		}
	}
	return false
}

type recordingTransport struct {
	next http.RoundTripper
	log  *apiLog
}

var errProcessDead = errors.New("connection refused (the replica's process is dead)")

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.log.mu.Lock()
	dead := t.log.dead
	if !dead {
		t.log.reqs = append(t.log.reqs, apiRequest{req.Method, req.URL.Path})
	}
	t.log.mu.Unlock()
	if dead {
		return nil, errProcessDead
	}
	return t.next.RoundTrip(req)
}

// budgetObserver counts, at every Node and NodeClaim watch event, the pool's nodes that hold a
// unit of its budget by the rule the agent and the functions count with (disruption.BudgetPool,
// disruption.Disrupting).
type budgetObserver struct {
	mu       sync.Mutex
	most     int
	mostAt   string
	seen     map[string]bool
	nodes    cache.Store
	claims   cache.Store
	poolName string
}

func watchBudget(ctx context.Context, t *testing.T, kc kubernetes.Interface, dc dynamic.Interface, pool string) *budgetObserver {
	t.Helper()
	o := &budgetObserver{seen: map[string]bool{}, poolName: pool}
	nf := informers.NewSharedInformerFactory(kc, 0)
	df := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	ni := nf.Core().V1().Nodes().Informer()
	ci := df.ForResource(kube.NodeClaimGVR).Informer()
	o.nodes, o.claims = ni.GetStore(), ci.GetStore()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { o.observe() },
		UpdateFunc: func(any, any) { o.observe() },
		DeleteFunc: func(any) { o.observe() },
	}
	if _, err := ni.AddEventHandler(h); err != nil {
		t.Fatal(err)
	}
	if _, err := ci.AddEventHandler(h); err != nil {
		t.Fatal(err)
	}
	nf.Start(ctx.Done())
	df.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), ni.HasSynced, ci.HasSynced) {
		t.Fatal("the budget observer's informers did not sync within 30s")
	}
	return o
}

func (o *budgetObserver) observe() {
	claims := map[string]*apisv1.NodeClaim{}
	for _, obj := range o.claims.List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		nc := &apisv1.NodeClaim{}
		if kube.FromUnstructured(u, nc) != nil {
			continue
		}
		if nc.Status.NodeName != "" {
			claims[nc.Status.NodeName] = nc
		}
	}
	var disrupting []string
	for _, obj := range o.nodes.List() {
		n, ok := obj.(*corev1.Node)
		if !ok {
			continue
		}
		nc := claims[n.Name]
		if disruption.BudgetPool(n, nc) == o.poolName && disruption.Disrupting(n, nc) {
			disrupting = append(disrupting, n.Name)
		}
	}
	sort.Strings(disrupting)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range disrupting {
		o.seen[n] = true
	}
	if len(disrupting) > o.most {
		o.most, o.mostAt = len(disrupting), strings.Join(disrupting, ", ")
	}
}

func (o *budgetObserver) worst() (int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most, o.mostAt
}

func (o *budgetObserver) disrupted() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]string, 0, len(o.seen))
	for n := range o.seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// waitFor polls cond every 200 ms for at most d, failing the test with what it waited for.
func waitFor(ctx context.Context, t *testing.T, d time.Duration, what string, cond func(context.Context) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, d, true, func(ctx context.Context) (bool, error) { return cond(ctx), nil }); err != nil {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

func poolNodes(ctx context.Context, t *testing.T, kc kubernetes.Interface, pool string) []string {
	t.Helper()
	l, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apisv1.LabelNodePool + "=" + pool})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	var out []string
	for _, n := range l.Items {
		out = append(out, n.Name)
	}
	return out
}

func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == apisv1.TaintKeyDisrupted {
			return true
		}
	}
	return false
}

func scaleTo(ctx context.Context, t *testing.T, kc kubernetes.Interface, replicas int32) *autoscalingv1.Scale {
	t.Helper()
	s, err := kc.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = replicas
	return s
}

// ledgerFloor reads the revision floor on the ledger ConfigMap (kube.RevisionFloorAnnotation).
func ledgerFloor(ctx context.Context, t *testing.T, kc kubernetes.Interface) int64 {
	t.Helper()
	cm, err := kc.CoreV1().ConfigMaps(localdev.AgentNamespace).Get(ctx, kube.DisruptionLedgerConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ledger ConfigMap after the first leader reserved its revisions: %v", err)
	}
	f, err := strconv.ParseInt(cm.Annotations[kube.RevisionFloorAnnotation], 10, 64)
	if err != nil {
		t.Fatalf("the ledger ConfigMap's %s: %v", kube.RevisionFloorAnnotation, err)
	}
	return f
}

func refusalRecorded(ctx context.Context, t *testing.T, kc kubernetes.Interface, id, reason string) bool {
	t.Helper()
	l, err := kc.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + kube.ReasonCommandRefused})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	for _, ev := range l.Items {
		if strings.Contains(ev.Message, id) && strings.Contains(ev.Message, reason) {
			return true
		}
	}
	return false
}

// commandConsumer reads the agents' durable consumer's state with the admin's connection.
func commandConsumer(ctx context.Context, t *testing.T, env *localdev.Env) (*jetstream.ConsumerInfo, error) {
	t.Helper()
	nc, err := dnats.Connect(env.NATSURL, "failover-test", env.NATS.AdminOptions()...)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	c, err := js.Consumer(ctx, dnats.StreamName(env.Options.Cluster), natsauth.AgentDurable)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// publishedCommands lists the message IDs of every command on the stream's commands subject
// (the functions' publishes; JetStream deduplicated repeats by ID).
func publishedCommands(ctx context.Context, t *testing.T, env *localdev.Env) []string {
	t.Helper()
	nc, err := dnats.Connect(env.NATSURL, "failover-test", env.NATS.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.OrderedConsumer(ctx, dnats.StreamName(env.Options.Cluster), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{queue.CommandsSubject(env.Options.Cluster)}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := int(info.NumPending)
	var ids []string
	for len(ids) < total {
		batch, err := c.Fetch(min(total-len(ids), 100), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			n++
		}
		if n == 0 {
			t.Fatalf("read %d of the %d commands on the stream, then nothing within 5s", len(ids), total)
		}
	}
	return ids
}
