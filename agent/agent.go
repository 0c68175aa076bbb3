// Package agent is Dovetail's in-cluster agent. It watches the cluster (shared/kube informers),
// publishes batched pending-pod events and periodic snapshots to the queue, and applies the
// commands the functions send back. It decides nothing: every decision is made by a function
// from the snapshot the agent published.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// DefaultSnapshotInterval is how often a TypeSnapshot event is published: the clock the
// consolidation, drift and expiry functions run on.
const DefaultSnapshotInterval = 30 * time.Second

// DefaultChangeSnapshotInterval is how soon after a Node or NodeClaim changes (or a pod is
// deleted) a TypeSnapshot event follows, at most one per interval: the lifecycle function's clock
// for registration, initialization and termination steps, which should not wait for the timer.
const DefaultChangeSnapshotInterval = time.Second

// DefaultKubeQPS and DefaultKubeBurst are the agent's client-side rate limit on the API server:
// Karpenter's defaults (KUBE_CLIENT_QPS 200, KUBE_CLIENT_BURST 300). client-go's own 5 QPS made a
// 33-pod nomination (a read and two writes per pod) take 20 seconds, and every command behind it
// wait.
const (
	DefaultKubeQPS   = 200
	DefaultKubeBurst = 300
)

// Component is the agent's CloudEvents source component: "dovetail/<cluster>/agent".
const Component = "agent"

// Config is what Run needs. Kube, Dynamic, Publisher, Cluster and Namespace are required.
type Config struct {
	// Cluster names the cluster in subjects and event sources (an RFC 1123 label).
	Cluster string
	// Namespace is the agent's own namespace (its ConfigMap of unavailable offerings).
	Namespace string
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	// Publisher receives events on queue.EventsSubject(Cluster).
	Publisher queue.Publisher
	// Commands, if set, delivers commands from queue.CommandsSubject(Cluster).
	Commands queue.Consumer
	// Blobs claim-checks payloads larger than an event may carry (nil: such events fail), and
	// keeps the latest snapshot under events.LatestSnapshotKey for functions that read it there.
	Blobs events.BlobStore
	// Clock drives batching, the snapshot timer and timestamps (nil: real clock).
	Clock clock.WithTicker
	// BatchIdle and BatchMax bound a pending-pod window (defaults 1 s and 10 s).
	BatchIdle, BatchMax time.Duration
	// SnapshotInterval is the period of TypeSnapshot events (default 30 s; negative disables).
	SnapshotInterval time.Duration
	// ChangeSnapshotInterval is how often the agent checks for Node and NodeClaim changes and
	// pod deletions, publishing a TypeSnapshot event when there were some (default 1 s;
	// negative disables).
	ChangeSnapshotInterval time.Duration
	// EvictionTimeout bounds each Eviction API call of a drain (default 10 s).
	EvictionTimeout time.Duration
	// SyncTimeout bounds the initial cache sync (default 2 minutes).
	SyncTimeout time.Duration
	// NodeClassKind is the NodeClass kind the cluster's NodePools reference: EC2NodeClass
	// (default) or AKSNodeClass; the agent watches that CRD only.
	NodeClassKind string
	// Logger receives the agent's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Metrics receives the agent's metrics (Karpenter's NodeClaim and Node counters, pod startup
	// durations, commands and events; nil: none).
	Metrics telemetry.Recorder
	// Dependencies are probed every ProbeInterval (default DefaultProbeInterval): an unreachable
	// one is logged (rate-limited) and makes Ready fail, naming it.
	Dependencies  []Dependency
	ProbeInterval time.Duration
	// LeaderElection, if set, makes this agent one of several replicas: only the holder of the
	// Lease publishes events and applies commands; the others keep their caches synced and
	// stand by (nil: this agent leads alone, as a single replica).
	LeaderElection *LeaderElection
}

func (c *Config) validate() error {
	var errs []string
	if !events.ValidName(c.Cluster) {
		errs = append(errs, fmt.Sprintf("cluster %q: must be an RFC 1123 label (lowercase alphanumerics and '-', at most 63)", c.Cluster))
	}
	if c.Namespace == "" {
		errs = append(errs, "namespace: required (the agent's own namespace)")
	}
	if c.Kube == nil {
		errs = append(errs, "kube: required")
	}
	if c.Dynamic == nil {
		errs = append(errs, "dynamic: required")
	}
	if c.Publisher == nil {
		errs = append(errs, "publisher: required")
	}
	if len(errs) > 0 {
		return fmt.Errorf("agent config: %s", strings.Join(errs, "; "))
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.ChangeSnapshotInterval == 0 {
		c.ChangeSnapshotInterval = DefaultChangeSnapshotInterval
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	for i, d := range c.Dependencies {
		if d.Name == "" || d.Check == nil {
			return fmt.Errorf("agent config: dependencies[%d]: name and check are required", i)
		}
	}
	if c.LeaderElection != nil {
		return c.LeaderElection.validate(c.Namespace)
	}
	return nil
}

// Agent is a running agent's parts; Run builds and runs one.
type Agent struct {
	cfg     Config
	watcher *kube.Watcher
	builder *kube.SnapshotBuilder
	applier *kube.Applier
	batcher *Batcher
	codec   events.Codec
	synced  chan struct{}
	health  health
	// facts are the cluster facts last discovered (nil before the first discovery).
	facts atomic.Pointer[events.ClusterFacts]
	// leading is true while this agent publishes and applies (always, without LeaderElection).
	leading atomic.Bool
	// revisionsEnd is the end (exclusive) of the snapshot revisions this agent reserved when it
	// began to lead (kube.Applier.ReserveRevisions; 0 before).
	revisionsEnd atomic.Int64
}

// New builds an agent (nothing runs until Run).
func New(cfg Config) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:     cfg,
		batcher: NewBatcher(cfg.BatchIdle, cfg.BatchMax, cfg.Clock),
		codec:   events.Codec{Blobs: cfg.Blobs, Now: cfg.Clock.Now},
		synced:  make(chan struct{}),
		health:  health{state: map[string]*depState{}},
	}
	w, err := kube.NewWatcher(cfg.Kube, cfg.Dynamic, kube.WatcherOptions{
		Namespace:     cfg.Namespace,
		Clock:         cfg.Clock,
		SyncTimeout:   cfg.SyncTimeout,
		OnPendingPod:  a.batcher.Trigger,
		OnPodReady:    a.podReady,
		NodeClassKind: cfg.NodeClassKind,
	})
	if err != nil {
		return nil, err
	}
	a.watcher = w
	a.builder = kube.NewSnapshotBuilder(w, cfg.Cluster, cfg.Clock)
	a.builder.Logger = cfg.Logger
	a.builder.Facts = a.facts.Load
	a.applier = kube.NewApplier(cfg.Kube, cfg.Dynamic, w, kube.ApplierOptions{
		Logger:    cfg.Logger,
		Namespace: cfg.Namespace, Clock: cfg.Clock, EvictionTimeout: cfg.EvictionTimeout,
		Component: "dovetail-agent", Metrics: cfg.Metrics,
	})
	return a, nil
}

// podReady records karpenter_pods_startup_duration_seconds: creation until the PodReady
// condition turned True (Karpenter's rule, for pods the agent saw before they were ready).
func (a *Agent) podReady(p *corev1.Pod, readyAt time.Time) {
	if d := readyAt.Sub(p.CreationTimestamp.Time); !p.CreationTimestamp.IsZero() && d >= 0 {
		a.metrics().Record(telemetry.PodStartupDuration, d.Seconds())
	}
}

func (a *Agent) metrics() telemetry.Recorder { return telemetry.OrNop(a.cfg.Metrics) }

// Synced is closed once the informer caches are synced and the agent publishes and applies.
func (a *Agent) Synced() <-chan struct{} { return a.synced }

// Ready is the agent's readiness (/readyz): nil once its informer caches are synced, so it
// publishes complete snapshots and applies commands, and while every Dependency answered its
// last probe; else an error saying which is missing.
func (a *Agent) Ready() error {
	down := a.unreachable()
	select {
	case <-a.synced:
		return down
	default:
		if down != nil {
			return fmt.Errorf("informer caches not synced yet; %w", down)
		}
		return errors.New("informer caches not synced yet")
	}
}

// Watcher returns the agent's informers (for revision checks and tests).
func (a *Agent) Watcher() *kube.Watcher { return a.watcher }

// Run starts the informers, the batcher, the snapshot timer and the command consumer, and runs
// until ctx ends (returning nil) or a part fails (returning its error). With LeaderElection the
// snapshot timers and the command consumer run only while this agent holds the Lease, and Run
// returns an error when it loses the Lease without being stopped (the pod restarts and stands
// by: a deposed leader never resumes on its own state).
func Run(ctx context.Context, cfg Config) error {
	a, err := New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Run runs a built agent (once); see the package Run.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		a.watcher.Shutdown()
	}()
	// The batcher runs before the informers start: the initial list already triggers it, and
	// its flushes wait for the sync so no partial snapshot is published.
	wg.Add(1)
	go func() { defer wg.Done(); a.batcher.Run(ctx, a.publishPending) }()
	// Probes start before the informers: an API server unreachable at start is logged while
	// the caches wait for it, not after.
	wg.Add(1)
	go func() { defer wg.Done(); a.probeLoop(ctx) }()

	if err := a.watcher.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while syncing
		}
		return err
	}
	close(a.synced)
	a.log().Info("agent caches synced", "cluster", a.cfg.Cluster, "revision", a.watcher.Revision(), "nodeOverlays", a.watcher.WatchesNodeOverlays())
	if !a.watcher.WatchesNodeOverlays() {
		a.log().Info("NodeOverlay CRD (nodeoverlays.karpenter.sh/v1alpha1) not served: planning without overlays; restart the agent after installing it")
	}
	if a.cfg.LeaderElection == nil {
		return a.lead(ctx)
	}
	return a.elect(ctx)
}

// lead reserves its snapshot revisions (reserveRevisions), then publishes and applies until ctx
// ends (nil), the command consumer fails or the reservation is used up (its error): the leader's
// part of Run.
func (a *Agent) lead(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	defer func() {
		cancel()
		wg.Wait()
		a.leading.Store(false)
	}()
	// Before anything is published: this leader's revisions start above every earlier one's.
	if err := a.reserveRevisions(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// The first snapshot carries the cluster facts: they are read before any is published.
	a.discoverFacts(ctx)
	a.leading.Store(true)
	wg.Add(1)
	go func() { defer wg.Done(); a.factsLoop(ctx) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.watchRevisions(ctx); err != nil {
			errc <- err
		}
	}()

	if a.cfg.SnapshotInterval > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); a.snapshotLoop(ctx) }()
	}
	if a.cfg.ChangeSnapshotInterval > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); a.changeLoop(ctx) }()
	}
	if a.cfg.Commands != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.cfg.Commands.Consume(ctx, a.HandleCommand); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("command consumer: %w", err)
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// reserveRevisions reserves this leader's snapshot revisions (kube.Applier.ReserveRevisions),
// trying 5 times from 200 ms on API errors: a leader that cannot reserve them publishes nothing
// and gives the Lease up.
func (a *Agent) reserveRevisions(ctx context.Context) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 5},
		func(ctx context.Context) (bool, error) {
			from, end, err := a.applier.ReserveRevisions(ctx)
			if last = err; err != nil {
				a.log().Warn("reserving snapshot revisions", "err", err)
				return false, nil
			}
			a.revisionsEnd.Store(end)
			a.log().Info("snapshot revisions reserved", "from", from, "end", end)
			return true, nil
		})
	if err != nil && last != nil {
		err = last
	}
	return err
}

// errRevisionsExhausted ends a leader that used up its reserved revisions: its successor (or
// its restart) reserves new ones.
var errRevisionsExhausted = errors.New("the snapshot revisions reserved when this agent began to lead are used up; exiting so that a restart reserves more")

// checkRevision refuses to publish a snapshot of a revision beyond this leader's reservation.
func (a *Agent) checkRevision(rev int64) error {
	if end := a.revisionsEnd.Load(); end != 0 && rev >= end {
		return errRevisionsExhausted
	}
	return nil
}

// watchRevisions returns errRevisionsExhausted once the revisions reach the reservation's end
// (checked every minute; publishing stops at the end in any case), nil when ctx ends.
func (a *Agent) watchRevisions(ctx context.Context) error {
	t := a.cfg.Clock.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if err := a.checkRevision(a.watcher.Revision()); err != nil {
				return err
			}
		}
	}
}

// publishPending is the batcher's flush: it publishes a TypePodsPending event naming the pods of
// the window that are still pending, with a fresh snapshot. An error makes the batcher retry.
func (a *Agent) publishPending(ctx context.Context, keys []string) error {
	select {
	case <-a.synced:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !a.leading.Load() {
		// A standby keeps the batch (the batcher retries it after BatchIdle) and publishes it
		// if it comes to lead: pods that turned pending just before a failover are not lost.
		return errStandby
	}
	snap, err := a.builder.Build()
	if err != nil {
		a.log().Error("building snapshot for pending pods", "err", err)
		return err
	}
	if err := a.checkRevision(snap.Revision); err != nil {
		return err
	}
	pending := make(map[string]bool, len(snap.PendingPods))
	for i := range snap.PendingPods {
		pending[snap.PendingPods[i].Namespace+"/"+snap.PendingPods[i].Name] = true
	}
	var pods []string
	for _, k := range keys {
		if pending[k] { // bound or deleted since it triggered: not part of this batch
			pods = append(pods, k)
		}
	}
	if len(pods) == 0 {
		return nil
	}
	// Same revision means same cluster state and same triggers, so the id doubles as the
	// queue's deduplication key.
	id := "pods-pending-" + strconv.FormatInt(snap.Revision, 10)
	var latest []byte // the snapshot alone, for the latest-snapshot key
	encoded, err := a.encode(events.TypePodsPending, func() ([]byte, error) {
		if a.cfg.Blobs == nil {
			return events.EncodePodsPending(&events.PodsPending{Pods: pods, Snapshot: snap})
		}
		// One validation and one marshal of the snapshot for both payloads.
		s, p, err := events.EncodeSnapshotWithPods(snap, pods)
		latest = s
		return p, err
	})
	if latest != nil {
		if err := events.PutLatestSnapshot(ctx, a.cfg.Blobs, a.cfg.Cluster, latest); err != nil {
			a.log().Warn("storing the latest snapshot", "err", err)
		}
	}
	if err != nil {
		err = fmt.Errorf("encode %s event %s: %w", events.TypePodsPending, id, err)
	} else {
		err = a.publish(ctx, events.TypePodsPending, id, encoded, events.WithRevision(snap.Revision))
	}
	if err != nil {
		// ErrTooLarge needs a BlobStore (--blob-dir); other errors are the queue's. Either way
		// the batch is retried after the idle time.
		a.log().Error("publishing pending pods; batch will be retried", "err", err, "pods", len(pods))
		return err
	}
	a.log().Info("pending pods published", "id", id, "pods", len(pods), "revision", snap.Revision)
	return nil
}

func (a *Agent) snapshotLoop(ctx context.Context) {
	t := a.cfg.Clock.NewTicker(a.cfg.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := a.PublishSnapshot(ctx); err != nil && ctx.Err() == nil {
				a.log().Error("publishing periodic snapshot", "err", err)
			}
		}
	}
}

// FactsInterval is how often the agent re-reads the cluster facts: 5 minutes, the period of
// Karpenter's version controller (karpenter-provider-aws pkg/controllers/providers/version
// requeues after 5 minutes), so a control plane upgrade reaches AMI alias resolution within it.
const FactsInterval = 5 * time.Minute

// discoverFacts reads the cluster facts (kube.DiscoverClusterFacts, 10 s at most) and keeps
// what was read. A failed read is logged and keeps the previous value of that fact: the
// functions then fall back to their flags, never to a guess.
func (a *Agent) discoverFacts(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	f, err := kube.DiscoverClusterFacts(ctx, a.cfg.Kube)
	if err != nil {
		a.log().Warn("discovering cluster facts", "err", err)
	}
	fresh := *f
	if prev := a.facts.Load(); prev != nil {
		for _, p := range []struct{ now, before *string }{{&f.KubernetesVersion, &prev.KubernetesVersion}, {&f.ClusterDNSIP, &prev.ClusterDNSIP},
			{&f.ServiceCIDR, &prev.ServiceCIDR}, {&f.IPFamily, &prev.IPFamily}} {
			if *p.now == "" && err != nil {
				*p.now = *p.before
			}
		}
	}
	// A kept fact must still agree with the fresh ones (a moved service range); else only the
	// fresh ones are published.
	if validate.ClusterNetwork(f.KubernetesVersion, f.ClusterDNSIP, f.ServiceCIDR, f.IPFamily, nil) != nil {
		f = &fresh
	}
	a.facts.Store(f)
}

func (a *Agent) factsLoop(ctx context.Context) {
	t := a.cfg.Clock.NewTicker(FactsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			a.discoverFacts(ctx)
		}
	}
}

// changeLoop publishes a snapshot after Nodes, NodeClaims, NodePools, NodeClasses or NodeOverlays
// changed, a ProvisioningRequest was created or deleted, or a pod or VolumeAttachment was deleted (a drain or a volume detach progressing),
// checking every ChangeSnapshotInterval: a NodeClass that just became Ready lets its pending pods
// launch at once, and a new NodeOverlay gets its status and reprices the next plan.
func (a *Agent) changeLoop(ctx context.Context) {
	revs := a.watcher.Revisions()
	mark := func() int64 {
		return max(revs.LastChange(kube.KindNode), revs.LastChange(kube.KindNodeClaim), revs.LastDelete(kube.KindPod),
			revs.LastChange(kube.KindNodeClass), revs.LastChange(kube.KindNodePool), revs.LastChange(kube.KindNodeOverlay),
			revs.LastDelete(kube.KindVolumeAttachment), revs.LastChange(kube.KindProvisioningRequest))
	}
	seen := mark()
	t := a.cfg.Clock.NewTicker(a.cfg.ChangeSnapshotInterval)
	defer t.Stop()
	var pace changePacer
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if m := mark(); m != seen && pace.ready(a.cfg.Clock.Now()) {
				start := a.cfg.Clock.Now()
				cost, err := a.publishSnapshot(ctx)
				pace.published(start, ChangeSnapshotHoldoff(cost, a.holdoffCeiling()))
				if err != nil {
					if ctx.Err() == nil {
						a.log().Error("publishing snapshot after node changes", "err", err)
					}
					continue
				}
				seen = m
			}
		}
	}
}

// ChangeSnapshotCostFactor is how many times its own cost (building and encoding it, wall time)
// a change snapshot holds the next one back: the agent spends at most a quarter of its
// time on them, and so do the functions, whose decoding of a snapshot costs about what its
// encoding does (make scale at 10,000 pods: about 1 s each on a loaded 2-core machine, where
// change snapshots came every 1.5 s, 510 of the run's 580 events, and the functions' process
// spent half its CPU time decoding them; docs/scale.md, "Ninth pass"). A small cluster's
// snapshot costs milliseconds, so it keeps the ChangeSnapshotInterval.
const ChangeSnapshotCostFactor = 4

// ChangeSnapshotHoldoff is how long after a change snapshot whose building and encoding took cost
// (wall time) the next may start: ChangeSnapshotCostFactor times the cost, at most ceiling (the
// periodic snapshot's interval: past it, the periodic one would carry the changes anyway). The
// blob write and the queue's publish are not part of the cost: a queue that is slow or down
// would otherwise hold change snapshots back long after it recovered. The change loop's ticker
// still sets the floor (ChangeSnapshotInterval); changes seen in the holdoff are published once
// it ends, in one snapshot, and pods-pending batches and the periodic snapshot are not held back.
func ChangeSnapshotHoldoff(cost, ceiling time.Duration) time.Duration {
	return min(ChangeSnapshotCostFactor*max(cost, 0), max(ceiling, 0))
}

// holdoffCeiling is ChangeSnapshotHoldoff's ceiling: the periodic snapshot's interval, or its
// default when periodic snapshots are disabled.
func (a *Agent) holdoffCeiling() time.Duration {
	if a.cfg.SnapshotInterval > 0 {
		return a.cfg.SnapshotInterval
	}
	return DefaultSnapshotInterval
}

// changePacer holds change snapshots back (ChangeSnapshotHoldoff); the zero value is ready at
// once.
type changePacer struct{ next time.Time }

// ready reports whether a change snapshot may start at now.
func (p *changePacer) ready(now time.Time) bool { return !now.Before(p.next) }

// published notes a change snapshot that started at start (on the agent's clock) and the
// holdoff it earned (failed or not: its building and encoding were done either way).
func (p *changePacer) published(start time.Time, holdoff time.Duration) {
	p.next = start.Add(holdoff)
}

// PublishSnapshot builds a snapshot and publishes it as a TypeSnapshot event. Its id carries the
// revision and the clock's second, so an unchanged cluster still ticks (the clock of consolidation
// and expiry) while a repeat within the same second is deduplicated.
func (a *Agent) PublishSnapshot(ctx context.Context) error {
	_, err := a.publishSnapshot(ctx)
	return err
}

// publishSnapshot is PublishSnapshot, also returning what building and encoding the snapshot
// cost (wall time on the real clock: the work is CPU-bound, and tests stop the injected one),
// whether or not the rest succeeded. When a BlobStore is configured the encoding is also written
// as the cluster's latest snapshot (events.LatestSnapshotKey); a failed write is logged, since
// the events still carry every snapshot.
func (a *Agent) publishSnapshot(ctx context.Context) (time.Duration, error) {
	begin := time.Now()
	snap, err := a.builder.Build()
	if err != nil {
		return time.Since(begin), err
	}
	if err := a.checkRevision(snap.Revision); err != nil {
		return time.Since(begin), err
	}
	id := fmt.Sprintf("snapshot-%d-%d", snap.Revision, snap.Time.Unix())
	encoded, err := a.encode(events.TypeSnapshot, func() ([]byte, error) { return events.EncodeSnapshot(snap) })
	cost := time.Since(begin)
	if err != nil {
		return cost, fmt.Errorf("encode %s event %s: %w", events.TypeSnapshot, id, err)
	}
	if a.cfg.Blobs != nil {
		if err := events.PutLatestSnapshot(ctx, a.cfg.Blobs, a.cfg.Cluster, encoded); err != nil {
			a.log().Warn("storing the latest snapshot", "err", err)
		}
	}
	return cost, a.publish(ctx, events.TypeSnapshot, id, encoded, events.WithRevision(snap.Revision))
}

// encode runs one of the snapshot codec's encoders for an event of type typ and records what it
// cost (telemetry.SnapshotEncode, wall time in seconds: the work is CPU-bound, so the injected
// clock, which tests stop, would read 0) and the payload's size (telemetry.SnapshotSize, bytes,
// before claim-check). An encoding error records nothing.
func (a *Agent) encode(typ string, enc func() ([]byte, error)) ([]byte, error) {
	begin := time.Now()
	data, err := enc()
	took := time.Since(begin)
	if err != nil {
		return nil, err
	}
	a.metrics().Record(telemetry.SnapshotEncode, took.Seconds(), typ)
	a.metrics().Record(telemetry.SnapshotSize, float64(len(data)), typ)
	return data, nil
}

// publish encodes and publishes with a short exponential backoff (5 tries from 100 ms) for
// transient queue errors; an encoding error is returned at once.
func (a *Agent) publish(ctx context.Context, typ, id string, payload any, opts ...events.Option) error {
	data, err := a.codec.NewEvent(ctx, a.cfg.Cluster, Component, typ, id, payload, opts...)
	if err != nil {
		return fmt.Errorf("encode %s event %s: %w", typ, id, err)
	}
	subject := queue.EventsSubject(a.cfg.Cluster)
	var last error
	err = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 5},
		func(ctx context.Context) (bool, error) {
			last = a.cfg.Publisher.Publish(ctx, subject, id, data)
			return last == nil, nil
		})
	if err != nil {
		if last != nil {
			err = last
		}
		return fmt.Errorf("publish %s event %s on %s: %w", typ, id, subject, err)
	}
	a.metrics().Record(telemetry.EventsPublished, 1, typ)
	a.log().Debug("published", "type", typ, "id", id, "bytes", len(data))
	return nil
}

// DefaultCommandWorkers is how many commands the agent applies at once (one per ordering key,
// events.Command.OrderingKey). Eight: every request of every worker goes through the client's
// rate limiter (DefaultKubeQPS, DefaultKubeBurst), so workers cannot overload the API server,
// only wait on the limiter; one worker whose requests take tens of milliseconds (an API server
// under the load of docs/scale.md's N = 1,000 run) sends a few dozen a second, eight bring that
// to the limiter's order, and more would mostly queue on it. It is also the parallelism the
// applier already uses inside one command (drain evictions, nominations, Events).
const DefaultCommandWorkers = 8

// CommandKey is the command consumer's ordering key (the NATS consumer's Key): the command's
// events.Command.OrderingKey. It reads the command as HandleCommand does, but never fetches a
// claim-checked payload (one over events.DefaultMaxInlineBytes compressed; no command comes
// near it), so it is a pure function of the message, the same on every delivery. A
// claim-checked, undecodable or invalid command gets the key "" (HandleCommand then applies it,
// or dead-letters it as poison).
func CommandKey(msg queue.Message) string {
	env, err := events.Decode(msg.Data)
	if err != nil || env.Type != events.TypeCommand || env.DataRef != "" {
		return ""
	}
	cmd, err := events.DecodeCommand(env.Data)
	if err != nil {
		return ""
	}
	return cmd.OrderingKey()
}

// HandleCommand is the command consumer's handler. A message that is not a valid command event
// for this cluster, or a command that can never apply, is poison (dead-lettered with the reason);
// a refused stale command is acknowledged (its Event is recorded), and so is a drain that PDBs
// hold (the function drains again on a later snapshot); any other failure asks for redelivery.
func (a *Agent) HandleCommand(ctx context.Context, msg queue.Message) error {
	kind, err := a.handleCommand(ctx, msg)
	result := "applied"
	var refused *kube.RefusedError
	var incomplete *kube.DrainIncompleteError
	switch {
	case errors.As(err, &refused):
		result = "refused"
	case errors.As(err, &incomplete):
		result = "incomplete"
	case errors.Is(err, queue.ErrPoison):
		result = "poison"
	case err != nil:
		result = "retry"
	}
	a.metrics().Record(telemetry.CommandsApplied, 1, kind, result)
	if refused != nil || incomplete != nil {
		return nil
	}
	return err
}

// handleCommand decodes and applies one command; it returns the command's kind ("" when
// undecodable) and the outcome, refusals and incomplete drains included (HandleCommand
// acknowledges those).
func (a *Agent) handleCommand(ctx context.Context, msg queue.Message) (string, error) {
	env, err := events.Decode(msg.Data)
	if err != nil {
		return "", fmt.Errorf("%w: %v", queue.ErrPoison, err)
	}
	cmd, err := a.codec.Command(ctx, env)
	if err != nil {
		if errors.Is(err, events.ErrMalformed) {
			return "", fmt.Errorf("%w: %v", queue.ErrPoison, err)
		}
		return "", err
	}
	kind := string(cmd.Kind)
	if cmd.Cluster != a.cfg.Cluster || env.Cluster != a.cfg.Cluster {
		return kind, fmt.Errorf("%w: command.cluster: %q (event source cluster %q) is not this agent's cluster %q",
			queue.ErrPoison, cmd.Cluster, env.Cluster, a.cfg.Cluster)
	}
	err = a.applier.Apply(kube.WithOrigin(ctx, env.Component), cmd)
	var incomplete *kube.DrainIncompleteError
	switch {
	case err == nil:
		a.log().Debug("command applied", "id", cmd.ID, "kind", cmd.Kind)
		return kind, nil
	case errors.As(err, &incomplete):
		// A drain a PDB (or a do-not-disrupt pod) holds is acknowledged, not redelivered: every
		// function that drains asks again on a later snapshot, and a redelivery would hold up
		// the commands behind it (the registration of the very node the evicted pods need).
		a.log().Info("drain incomplete; the deciding function asks again on a later snapshot", "id", cmd.ID, "node", incomplete.Node,
			"evicted", len(incomplete.Evicted), "blocked", strings.Join(incomplete.Blocked, "; "))
		return kind, err
	case errors.Is(err, kube.ErrInvalidCommand):
		return kind, fmt.Errorf("%w: %v", queue.ErrPoison, err)
	default:
		var refused *kube.RefusedError
		if errors.As(err, &refused) {
			return kind, err
		}
		return kind, fmt.Errorf("apply command %s (%s): %w", cmd.ID, cmd.Kind, err)
	}
}

func (a *Agent) log() *slog.Logger {
	if a.cfg.Logger != nil {
		return a.cfg.Logger
	}
	return slog.Default()
}
