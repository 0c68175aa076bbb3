package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/localdev"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Cluster names the cluster in Dovetail's subjects, events and instance tags.
const Cluster = "scale"

// runDovetail measures Dovetail at n pods: a fresh real control plane; embedded NATS JetStream,
// the functions and the fake cloud in this process (localdev.Start, as the e2e suite runs
// them); the agent binary as a process of its own (agentProc), so its peak memory is its own;
// the scenario's NodePool and EC2NodeClass (manifests/dovetail.yaml).
func runDovetail(ctx context.Context, n int, o opts, b Bounder) (Result, error) {
	r := Result{Side: sideDovetail, N: n}
	dir, err := os.MkdirTemp(o.workDir, fmt.Sprintf("dovetail-%d-*", n))
	if err != nil {
		return r, err
	}
	env, err := localdev.Start(ctx, localdev.Options{
		Cluster:          Cluster,
		ControlPlane:     localdev.ControlPlaneReal,
		Manifests:        []string{o.dovetailManifest},
		BootDelay:        o.bootDelay,
		Out:              prefixed("dovetail: "),
		Log:              slog.New(slog.NewTextHandler(io.Discard, nil)),
		RealControlPlane: realcluster.Options{Dir: dir, Logf: log.Printf},
		ExternalAgent:    true,
	})
	if err != nil {
		return r, fmt.Errorf("starting Dovetail: %w", err)
	}
	defer env.Stop()
	// The token outlives the run: both phases' timeouts and a margin for the start.
	ttl := o.phase.BindTimeout + o.phase.ConsolidateTimeout + 30*time.Minute
	agent, err := startAgentProc(ctx, env, o.agentBin, dir, ttl, 3*time.Minute)
	if err != nil {
		return r, err
	}
	defer agent.stop()
	snaps, err := watchSnapshots(env)
	if err != nil {
		return r, err
	}
	defer snaps.stop()
	cfg := *env.ControlPlane.Config
	cfg.QPS, cfg.Burst = 200, 400
	kc, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return r, err
	}
	dc, err := dynamic.NewForConfig(&cfg)
	if err != nil {
		return r, err
	}
	if err := Measure(ctx, &r, kc, dc, env.ControlPlane.SchedulerURL, o.phase, Pricer(env.Catalog), b); err != nil {
		return r, err
	}
	snaps.fill(&r)
	if err := codecMetrics(ctx, &r, agent, env); err != nil {
		r.Notes = append(r.Notes, err.Error())
	}
	if r.PeakRSS, err = PeakRSS(agent.cmd.Process.Pid); err != nil {
		return r, err
	}
	r.PeakRSSWhat = "agent process"
	if r.RestPeakRSS, err = PeakRSS(0); err != nil {
		return r, err
	}
	r.RestPeakRSSWhat = "harness process: NATS, functions, fake cloud, harness"
	return r, nil
}

// codecMetrics reads Dovetail's own snapshot codec metrics: the agent's encodings (size and
// time, from its /metrics) and the functions' decodings (from the registry the functions of
// this process record in).
func codecMetrics(ctx context.Context, r *Result, agent *agentProc, env *localdev.Env) error {
	fams, err := agent.metrics(ctx)
	if err != nil {
		return err
	}
	r.AgentSnapshotSize = histogramTotal(fams, telemetry.SnapshotSize)
	r.AgentSnapshotEncode = histogramTotal(fams, telemetry.SnapshotEncode)
	gathered, err := env.FunctionMetrics.Registry().Gather()
	if err != nil {
		return fmt.Errorf("gathering the functions' metrics: %w", err)
	}
	r.FunctionSnapshotDecode = histogramTotal(byName(gathered), telemetry.SnapshotDecode)
	return nil
}

// snapshotWatch reads every event the agent publishes (a core NATS subscription beside the
// functions' JetStream consumers) and, for each snapshot and pods-pending event, records the
// compressed payload size (before claim-check: the bytes the codec encoded, inline or in the
// blob store) and how long decoding it (events.DecodeSnapshot / DecodePodsPending, what the
// functions run) and encoding it again (events.EncodeSnapshot / EncodePodsPending, what the
// agent runs) take here.
type snapshotWatch struct {
	sub            *natsgo.Subscription
	nc             *natsgo.Conn
	mu             sync.Mutex
	count, maxSize int
	decode, encode []time.Duration
	errs           []string
}

func watchSnapshots(env *localdev.Env) (*snapshotWatch, error) {
	nc, err := dnats.Connect(env.NATSURL, "dovetail-scale-harness", env.NATS.AdminOptions()...)
	if err != nil {
		return nil, err
	}
	w := &snapshotWatch{nc: nc}
	codec := events.Codec{Blobs: events.FileBlobStore{Dir: env.BlobDir}}
	w.sub, err = nc.Subscribe(queue.EventsSubject(Cluster), func(m *natsgo.Msg) {
		ev, err := events.Decode(m.Data)
		if err != nil || (ev.Type != events.TypeSnapshot && ev.Type != events.TypePodsPending) {
			return
		}
		data, err := codec.Payload(context.Background(), ev)
		if err != nil {
			w.fail(fmt.Sprintf("event %s: %v", ev.ID, err))
			return
		}
		begin := time.Now()
		var dec, enc time.Duration
		if ev.Type == events.TypeSnapshot {
			s, err := events.DecodeSnapshot(data)
			dec = time.Since(begin)
			if err == nil {
				begin = time.Now()
				_, err = events.EncodeSnapshot(s)
				enc = time.Since(begin)
			}
			if err != nil {
				w.fail(err.Error())
				return
			}
		} else {
			p, err := events.DecodePodsPending(data)
			dec = time.Since(begin)
			if err == nil {
				begin = time.Now()
				_, err = events.EncodePodsPending(p)
				enc = time.Since(begin)
			}
			if err != nil {
				w.fail(err.Error())
				return
			}
		}
		w.mu.Lock()
		w.count++
		w.maxSize = max(w.maxSize, len(data))
		w.decode, w.encode = append(w.decode, dec), append(w.encode, enc)
		w.mu.Unlock()
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return w, nil
}

func (w *snapshotWatch) fail(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) < 5 {
		w.errs = append(w.errs, msg)
	}
}

func (w *snapshotWatch) stop() {
	_ = w.sub.Unsubscribe()
	w.nc.Close()
}

func (w *snapshotWatch) fill(r *Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r.SnapshotEvents, r.SnapshotMaxBytes = w.count, w.maxSize
	r.SnapshotDecode, r.Encode = DistOf(append([]time.Duration(nil), w.decode...)), DistOf(append([]time.Duration(nil), w.encode...))
	for _, e := range w.errs {
		r.Notes = append(r.Notes, "snapshot watch: "+e)
	}
}

// prefixed is a writer that logs each write with a prefix (localdev's progress lines).
type prefixed string

func (p prefixed) Write(b []byte) (int, error) {
	log.Printf("%s%s", string(p), b)
	return len(b), nil
}
