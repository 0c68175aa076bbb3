// Package localdev runs all of Dovetail on one machine: an embedded NATS JetStream server, the
// fake cloud over the real catalog, an in-memory cluster (or a real one from a kubeconfig), the
// agent and the four functions (provision, consolidate and drift on the events subject,
// interruption on the notices subject), connected exactly as in production: agent → queue →
// function → cloud → commands → agent.
package localdev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dovetail-dev/dovetail/agent"
	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/functions/provision"
	seed "github.com/dovetail-dev/dovetail/localdev/manifests"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/cloudmetrics"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
	"github.com/dovetail-dev/dovetail/shared/cloud/registry"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

// Options configures a local run. The zero value runs the seed scenario in memory.
type Options struct {
	// Policies are the scheduling policies the functions plan under (--min-values-policy,
	// --preference-policy; zero: Strict, Respect).
	Policies provisioning.Policies
	// Cluster names the cluster in events, subjects and instance tags (default "dev").
	Cluster string
	// Kubeconfig selects a real cluster instead of the in-memory one.
	Kubeconfig string
	// Manifests are scenario files or directories; empty means the embedded seed scenario.
	Manifests []string
	// BootDelay is how long a fake instance takes to become a Ready node (default 3 s).
	BootDelay time.Duration
	// RegistrationTTL is how long a launch may wait for its Node before the lifecycle function
	// deletes its NodeClaim (default 15 minutes; tests shorten it).
	RegistrationTTL time.Duration
	// DisableRepair turns node repair off in the lifecycle function (dovetail dev
	// --node-repair=false, as the lifecycle binary's --node-repair; zero: repair on, as issue 27
	// asks, where Karpenter's NodeRepair feature gate must be turned on).
	DisableRepair bool
	// Region is the embedded catalog's region the fake cloud sells from (catalog.EmbeddedRegions;
	// empty: us-east-1).
	Region string
	// NodeClassRefresh is how often the lifecycle function resolves a Ready NodeClass again
	// (default lifecycle.DefaultRefreshInterval); tests shorten it to see a new AMI sooner.
	NodeClassRefresh time.Duration
	// SnapshotInterval is the period of the agent's TypeSnapshot events (zero:
	// agent.DefaultSnapshotInterval, 30 s); tests shorten it to see rules that act on the
	// second of two snapshots (garbage collection of vanished instances) sooner.
	SnapshotInterval time.Duration
	// Timeout bounds the run (default 2 minutes).
	Timeout time.Duration
	// Keep leaves everything running after the summary until ctx ends (kubectl against
	// --control-plane real, for instance).
	Keep bool
	// Out receives the progress lines and the summary (default os.Stdout).
	Out io.Writer
	// Log receives component logs (default: discarded, the progress lines say what matters).
	Log *slog.Logger
	// Namespace is the agent's namespace (default "kube-system"; "dovetail-system" with a real
	// control plane, where agent/rbac.yaml grants it).
	Namespace string
	// ControlPlane is ControlPlaneMemory (default) or ControlPlaneReal; real conflicts with Kubeconfig.
	ControlPlane string
	// RealControlPlane configures the real control plane (binaries, working directory).
	RealControlPlane realcluster.Options
	// InstallCRDs, when set, installs the CRDs into the real control plane in place of applying
	// infra/crds (the e2e chart test installs the Helm chart's crds/ as `helm install` does). It
	// must leave them Established: the seed scenario's NodePools follow at once.
	InstallCRDs func(context.Context, *realcluster.ControlPlane) error
	// CloudProvider is CloudFake (default), CloudAWS or CloudAzure: the provider the functions use.
	CloudProvider string
	// AKSProvisionMode is the Azure provider's provision mode with CloudAzure:
	// azure.ProvisionModeScriptless ("" too: the contract rendered locally into custom data) or
	// azure.ProvisionModeBootstrappingClient (asked of the fake AKS NodeBootstrapping API, the
	// provisioning command run as the VM's CustomScript extension).
	AKSProvisionMode string
	// AWSEndpoint is the EC2/SSM endpoint of CloudAWS; empty starts the fake cloud's own on loopback.
	AWSEndpoint string
	// OnDecision, if set, is told every provision decision (after the progress line), e.g. the
	// e2e suite's record of where the plan put each pod.
	OnDecision func(provision.Decision)
	// AgentHTTPAddr and FunctionsHTTPAddr, when set, serve /metrics, /healthz and /readyz of
	// the agent and of the functions (one server for the NATS workers this process runs), as
	// --http-addr does for each deployed process.
	AgentHTTPAddr, FunctionsHTTPAddr string
	// ExternalAgent leaves the agent to the caller (Env.Agent stays nil): the e2e suite runs
	// the agent binary the Helm chart deploys, with the chart's args, against NATSURL and BlobDir.
	ExternalAgent bool

	// Test hooks: wrap what the provision function publishes with, and how it handles messages
	// (to inject a crash between launch and command, or a duplicate delivery).
	wrapPublisher func(queue.Publisher) queue.Publisher
	wrapHandler   func(queue.Handler) queue.Handler
	// wrapFunction wraps the handler of the consolidate, drift or interruption worker (by name).
	wrapFunction func(name string, h queue.Handler) queue.Handler
}

func (o *Options) defaults() {
	if o.Cluster == "" {
		o.Cluster = "dev"
	}
	if o.BootDelay == 0 {
		o.BootDelay = 3 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
		if o.ControlPlane == ControlPlaneReal {
			o.Timeout = 5 * time.Minute // the control plane itself takes up to a minute to start
		}
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Namespace == "" {
		o.Namespace = "kube-system"
		if o.ControlPlane == ControlPlaneReal {
			o.Namespace = AgentNamespace
		}
	}
}

// Env is a running local environment; tests drive it directly.
type Env struct {
	Options Options
	Set     *manifests.Set
	Catalog *catalog.Catalog
	// NodeSettings is the cloud's NodeClass → node settings rule (shared/cloud/registry).
	NodeSettings provisioning.NodeSettingsFunc
	Cluster      *Cluster
	Cloud        *fake.Cloud
	NATSURL      string
	// NATS is the embedded server (TLS, one nkey user per role): NATS.ClientOptions(role) connect
	// as a role, NATS.AdminOptions() with every permission (tests). NATSFiles are its CA and the
	// roles' seeds on disk, for a process run beside local dev (dovetail audit --nats, the agent
	// binary of the e2e suite).
	NATS      *natsembed.Server
	NATSFiles natsembed.ClientFiles
	Progress  *Progress
	// ControlPlane is the real control plane (nil in memory or with a kubeconfig).
	ControlPlane *realcluster.ControlPlane
	// Agent is the running agent.
	Agent *agent.Agent
	// Provider is what the provision function launches through: Cloud itself, or the AWS provider
	// against EC2API (Options.CloudProvider).
	Provider cloud.Provider
	// EC2API is the fake cloud's in-process EC2/SSM endpoint (CloudAWS without an AWSEndpoint).
	EC2API *ec2api.Server
	// AzureAPI is the fake cloud's Azure Resource Manager face (CloudAzure).
	AzureAPI *azureapi.Server
	// AKSAPI is the fake AKS NodeBootstrapping API (CloudAzure, provision mode bootstrappingclient).
	AKSAPI *azureapi.NodeBootstrapping
	// Functions are the durable consumers of the functions running beside provision
	// ("consolidate", "drift", "interruption").
	Functions []string
	// Snapshots is the interruption function's view of the newest snapshot on the events subject.
	Snapshots *interruption.LatestSnapshot
	// AgentMetrics and FunctionMetrics are the Prometheus recorders of the agent and of the
	// functions; AgentAddr and FunctionsAddr where they are served ("" when not).
	AgentMetrics, FunctionMetrics *prom.Recorder
	AgentAddr, FunctionsAddr      string
	// BlobDir is the claim-check directory the functions and the agent share.
	BlobDir string

	blobs events.BlobStore
	stop  func()
	wg    sync.WaitGroup
	errs  chan error
}

// Run starts everything, applies the scenario, waits until every workload pod is bound and every
// NodeClaim Ready (or the timeout), prints the summary and stops.
func Run(ctx context.Context, o Options) (*Summary, error) {
	o.defaults()
	life := ctx
	if !o.Keep {
		var cancel context.CancelFunc
		life, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	env, err := Start(life, o)
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	wait, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	env.Progress.Printf("waiting for every workload pod to be bound and every NodeClaim Ready (--timeout %s)", o.Timeout)
	if err := env.WaitAllBound(wait); err != nil {
		return nil, err
	}
	if err := env.WaitNodeClaimsReady(wait); err != nil {
		return nil, err
	}
	s, err := Summarize(context.Background(), env.Cluster, env.Provider, o.Cluster, env.Catalog, env.Set)
	if err != nil {
		return nil, err
	}
	s.Print(o.Out)
	if o.Keep {
		env.Progress.Printf("everything keeps running (--keep); interrupt to stop")
		<-ctx.Done()
	}
	return s, nil
}

// Start brings the environment up and applies the scenario.
func Start(ctx context.Context, o Options) (*Env, error) {
	o.defaults()
	switch {
	case o.ControlPlane != "" && o.ControlPlane != ControlPlaneMemory && o.ControlPlane != ControlPlaneReal:
		return nil, fmt.Errorf("--control-plane: %q is not %q or %q", o.ControlPlane, ControlPlaneMemory, ControlPlaneReal)
	case o.ControlPlane == ControlPlaneReal && o.Kubeconfig != "":
		return nil, fmt.Errorf("--control-plane real starts its own cluster: it cannot be combined with --kubeconfig %s", o.Kubeconfig)
	}
	set, err := loadScenario(o.Manifests, o.CloudProvider)
	if err != nil {
		return nil, err
	}
	name := o.CloudProvider
	if name == "" {
		name = registry.Fake
	}
	cl, err := registry.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("--cloud: %w", err)
	}
	cat, err := cl.Catalog(o.Region)
	if err != nil {
		return nil, err
	}
	env := &Env{Options: o, Set: set, Catalog: cat, NodeSettings: cl.NodeSettings, errs: make(chan error, 16), Progress: NewProgress(o.Out),
		AgentMetrics: prom.NewRecorder(), FunctionMetrics: prom.NewRecorder()}
	ctx, cancel := context.WithCancel(ctx)
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: o.Cluster})
	if err != nil {
		cancel()
		return nil, err
	}
	env.NATSURL, env.NATS = url, srv
	blobDir, err := newBlobDir()
	if err != nil {
		cancel()
		srv.Shutdown()
		return nil, err
	}
	credDir, err := os.MkdirTemp("", "dovetail-nats-credentials-*")
	if err == nil {
		env.NATSFiles, err = srv.WriteClientFiles(credDir)
	}
	if err != nil {
		cancel()
		srv.Shutdown()
		os.RemoveAll(blobDir)
		os.RemoveAll(credDir)
		return nil, fmt.Errorf("embedded NATS credentials: %w", err)
	}
	env.blobs, env.BlobDir = events.FileBlobStore{Dir: blobDir}, blobDir
	env.stop = func() {
		cancel()
		env.wg.Wait()
		srv.Shutdown()
		srv.WaitForShutdown()
		os.RemoveAll(blobDir)
		os.RemoveAll(credDir)
	}
	ok := false
	defer func() {
		if !ok {
			env.stop()
		}
	}()
	env.Progress.Printf("embedded NATS JetStream at %s (TLS, one nkey user per role); audit records: dovetail audit --nats %s --cluster %s --nats-nkey-seed %s --nats-tls-ca %s",
		url, url, o.Cluster, env.NATSFiles.Seeds[natsauth.RoleAudit], env.NATSFiles.CA)

	if o.ControlPlane == ControlPlaneReal {
		cp, c, err := startRealControlPlane(ctx, o, env.Progress)
		if err != nil {
			return nil, err
		}
		env.ControlPlane, env.Cluster = cp, c
		stopRest := env.stop
		env.stop = func() { stopRest(); cp.Stop() }
	} else if o.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", o.Kubeconfig, err)
		}
		cfg.QPS, cfg.Burst = agent.DefaultKubeQPS, agent.DefaultKubeBurst
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		env.Cluster = &Cluster{Kube: kc, Dynamic: dc}
		env.Progress.Printf("using the cluster of %s", o.Kubeconfig)
	} else {
		env.Cluster = NewInMemoryCluster()
		env.Progress.Printf("in-memory cluster (local stand-ins for kube-scheduler and the workload controllers)")
	}

	env.Cloud = fake.New(fake.Options{Catalog: cat, Cluster: o.Cluster, BootDelay: o.BootDelay,
		Registrar: &registrar{kube: env.Cluster.Kube, progress: env.Progress}, Logger: o.Log, RepairPolicies: dvaws.RepairPolicies()})
	env.goRun(func() error { env.Cloud.Run(ctx, 100*time.Millisecond); return nil })
	if env.Provider, err = env.provider(ctx); err != nil {
		return nil, err
	}

	// The functions' connection, with the function role's permissions (natsauth.For); the agent
	// has its own (startAgent).
	nc, err := dnats.Connect(url, "dovetail-dev-functions", srv.ClientOptions(natsauth.RoleFunction)...)
	if err != nil {
		return nil, err
	}
	if _, err := dnats.EnsureStream(ctx, nc, dnats.StreamConfig{Cluster: o.Cluster}); err != nil {
		return nil, err
	}
	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		return nil, err
	}
	// Every decision audit record the functions log is also published on the audit subject,
	// where `dovetail audit --nats` reads it.
	base := o.Log
	o.Log = slog.New(telemetry.AuditHandler{Next: base.Handler(), Publish: dnats.PublishAudit(pub, o.Cluster,
		func(err error) { base.Warn("audit record not published", "err", err) })})
	env.Options.Log = o.Log

	pending, err := env.Cluster.Apply(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("applying the scenario: %w", err)
	}
	env.Progress.Printf("applied the scenario: %d NodePool(s), %d existing node(s), %d DaemonSet(s), %d pods pending",
		len(set.NodePools), len(set.Nodes), len(set.DaemonSets), pending)

	// The provision function, as a NATS worker.
	var fnPub queue.Publisher = pub
	if o.wrapPublisher != nil {
		fnPub = o.wrapPublisher(pub)
	}
	onDecision := env.Progress.Decision
	if o.OnDecision != nil {
		onDecision = func(d provision.Decision) { env.Progress.Decision(d); o.OnDecision(d) }
	}
	fn := &provision.Handler{Cluster: o.Cluster, Catalog: cat, NodeSettings: env.NodeSettings, Policies: o.Policies, Provider: env.providerFor(provision.Component),
		Publisher: fnPub, Codec: events.Codec{Blobs: env.blobs}, Log: o.Log, OnDecision: onDecision, Metrics: env.FunctionMetrics}
	cons, err := dnats.NewConsumer(ctx, nc, env.consumer(provision.Component, queue.EventsSubject(o.Cluster), 0, 0))
	if err != nil {
		return nil, err
	}
	handle := runtime.Instrument(provision.Component, fn.Handle, env.FunctionMetrics, nil)
	if o.wrapHandler != nil {
		handle = o.wrapHandler(handle)
	}
	env.goRun(func() error { return cons.Consume(ctx, handle) })
	if err := env.startDisruption(ctx, nc, pub); err != nil {
		return nil, err
	}

	if !o.ExternalAgent {
		if err := env.startAgent(ctx); err != nil {
			return nil, err
		}
	}
	if err := env.serveMetrics(ctx); err != nil {
		return nil, err
	}
	if env.Cluster.InMemory {
		env.goRun(func() error { return env.runStandIns(ctx) })
	}
	ok = true
	return env, nil
}

// providerFor is the cloud provider as function fn sees it: decorated with Karpenter's cloud
// provider metrics under fn's controller label.
func (e *Env) providerFor(fn string) cloud.Provider {
	return cloudmetrics.Decorate(e.Provider, e.FunctionMetrics, telemetry.ControllerOf(fn))
}

// consumer is the NATS consumer configuration of function fn, as runtime.RunNATS builds it.
func (e *Env) consumer(fn, subject string, maxDeliver, maxAckPending int) dnats.ConsumerConfig {
	return dnats.ConsumerConfig{Cluster: e.Options.Cluster, Durable: fn, Subject: subject, Logger: e.Options.Log,
		MaxDeliver: maxDeliver, MaxAckPending: maxAckPending, Metrics: e.FunctionMetrics, PoisonClass: runtime.PoisonClass}
}

// serveMetrics starts the agent's and the functions' HTTP servers where the options ask.
func (e *Env) serveMetrics(ctx context.Context) error {
	a := &prom.Server{Addr: e.Options.AgentHTTPAddr, Recorder: e.AgentMetrics, Logger: e.Options.Log}
	if e.Agent != nil {
		a.Ready = e.Agent.Ready
	} else {
		a.Addr = "" // the caller's agent serves its own
	}
	f := &prom.Server{Addr: e.Options.FunctionsHTTPAddr, Recorder: e.FunctionMetrics, Logger: e.Options.Log}
	var err error
	if e.AgentAddr, err = a.Start(ctx); err != nil {
		return fmt.Errorf("agent http server: %w", err)
	}
	if e.FunctionsAddr, err = f.Start(ctx); err != nil {
		return fmt.Errorf("functions http server: %w", err)
	}
	for _, s := range []struct{ name, addr string }{{"agent", e.AgentAddr}, {"functions", e.FunctionsAddr}} {
		if s.addr != "" {
			e.Progress.Printf("%s: http://%s/metrics, http://%s/healthz and http://%s/readyz", s.name, s.addr, s.addr, s.addr)
		}
	}
	return nil
}

// Stop shuts everything down and waits for it.
func (e *Env) Stop() { e.stop() }

func (e *Env) goRun(f func() error) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := f(); err != nil && !errors.Is(err, context.Canceled) {
			select {
			case e.errs <- err:
			default:
			}
		}
	}()
}

// runStandIns runs the DaemonSet controller and scheduler stand-ins every 100 ms.
func (e *Env) runStandIns(ctx context.Context) error {
	s := e.Cluster.StandIns(e.Progress.Bound)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := s.Pass(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// WaitAllBound waits until every workload pod is bound and the cluster is quiet.
func (e *Env) WaitAllBound(ctx context.Context) error {
	return e.waitFor(ctx, e.count, func(n int) string { return fmt.Sprintf("all %d workload pods are bound", n) },
		func(done, total int) string {
			return fmt.Sprintf("timed out with %d of %d workload pods bound", done, total)
		}, false)
}

// WaitNodeClaimsReady waits until every NodeClaim has Ready=True and a status.nodeName (the
// lifecycle function registered and initialized its Node), or ctx ends.
func (e *Env) WaitNodeClaimsReady(ctx context.Context) error {
	return e.waitFor(ctx, e.readyClaims, func(n int) string { return fmt.Sprintf("all %d NodeClaims Ready", n) },
		func(done, total int) string {
			return fmt.Sprintf("timed out with %d of %d NodeClaims Ready", done, total)
		}, true)
}

// waitFor polls count every 200 ms until done == total (and total > 0 unless zeroOK), printing
// reached; it returns a function's error as soon as one is reported, or timedOut at ctx's end.
func (e *Env) waitFor(ctx context.Context, count func(context.Context) (int, int, error), reached func(int) string,
	timedOut func(int, int) string, zeroOK bool) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-e.errs:
			return err
		case <-ctx.Done():
			done, total, _ := count(context.Background())
			return fmt.Errorf("%s: %w", timedOut(done, total), ctx.Err())
		case <-t.C:
		}
		done, total, err := count(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return err
		}
		if done == total && (total > 0 || zeroOK) {
			e.Progress.Flush()
			e.Progress.Printf("%s", reached(total))
			return nil
		}
	}
}

func (e *Env) readyClaims(ctx context.Context) (ready, total int, err error) {
	list, err := e.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, listAll)
	if err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		nc := &apisv1.NodeClaim{}
		if err := kube.FromUnstructured(&list.Items[i], nc); err != nil {
			return 0, 0, err
		}
		if nc.DeletionTimestamp != nil {
			continue
		}
		total++
		for _, c := range nc.Status.Conditions {
			if c.Type == apisv1.ConditionReady && c.Status == metav1.ConditionTrue && nc.Status.NodeName != "" {
				ready++
			}
		}
	}
	return ready, total, nil
}

func (e *Env) count(ctx context.Context) (bound, total int, err error) {
	pods, err := e.Cluster.Kube.CoreV1().Pods("").List(ctx, listAll)
	if err != nil {
		return 0, 0, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if isWorkloadPod(p) {
			total++
			if p.Spec.NodeName != "" {
				bound++
			}
		}
	}
	return bound, total, nil
}

func loadScenario(paths []string, cloudName string) (*manifests.Set, error) {
	if len(paths) == 0 && cloudName == CloudAzure {
		return loadAzureSeed()
	}
	if len(paths) == 0 {
		return manifests.LoadFS(seed.FS, ".")
	}
	return manifests.Load(paths...)
}
