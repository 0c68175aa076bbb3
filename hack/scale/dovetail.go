package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
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
		RealControlPlane: realcluster.Options{Dir: dir, Logf: log.Printf, ClientQPS: o.clientQPS},
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
	snaps.fill(&r, dir)
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
// blob store) and keeps the largest payload. It decodes nothing during the run: the harness
// shares the machine with the side it measures, and decoding and encoding every event again
// here (as it did until the eighth pass, docs/scale.md) cost Dovetail's side about as much CPU
// as its functions' own decoding, a load Karpenter's side did not carry. The run's codec times
// come from the agent's and the functions' own metrics (codecMetrics); the largest payload is
// timed after the run (fill), with the control plane and the functions still up.
type snapshotWatch struct {
	sub     *natsgo.Subscription
	nc      *natsgo.Conn
	mu      sync.Mutex
	count   int
	largest []byte // the largest payload seen
	typ     string // its event type
	errs    []string
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
		w.mu.Lock()
		defer w.mu.Unlock()
		w.count++
		if len(data) > len(w.largest) {
			w.largest, w.typ = data, ev.Type
		}
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return w, nil
}

// codecRuns is how many times fill decodes and encodes the largest payload; it reports the median.
const codecRuns = 3

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

// fill reports what the watch saw, times the largest payload, and keeps it in dir as
// largest-<snapshot|podspending>.json.zst (a real payload to profile the codec on).
func (w *snapshotWatch) fill(r *Result, dir string) {
	// Read what was seen, then write and time the payload without the lock: the subscription
	// still delivers while the codec runs.
	w.mu.Lock()
	r.SnapshotEvents, r.SnapshotMaxBytes = w.count, len(w.largest)
	for _, e := range w.errs {
		r.Notes = append(r.Notes, "snapshot watch: "+e)
	}
	largest, typ := w.largest, w.typ
	w.mu.Unlock()
	if largest == nil {
		return
	}
	name := "largest-snapshot.json.zst"
	if typ == events.TypePodsPending {
		name = "largest-podspending.json.zst"
	}
	if err := os.WriteFile(filepath.Join(dir, name), largest, 0o600); err != nil {
		r.Notes = append(r.Notes, "snapshot watch: "+err.Error())
	}
	var dec, enc []time.Duration
	for range codecRuns {
		d, e, err := timeCodec(typ, largest)
		if err != nil {
			r.Notes = append(r.Notes, "snapshot watch: the largest payload: "+err.Error())
			return
		}
		dec, enc = append(dec, d), append(enc, e)
	}
	r.LargestDecode, r.LargestEncode = DistOf(dec).P50, DistOf(enc).P50
}

// timeCodec decodes a payload of event type typ as the functions do (events.DecodeSnapshot /
// DecodePodsPending, without the memo) and encodes the result again as the agent does.
func timeCodec(typ string, data []byte) (dec, enc time.Duration, err error) {
	begin := time.Now()
	if typ == events.TypeSnapshot {
		var s *events.Snapshot
		if s, err = events.DecodeSnapshot(data); err != nil {
			return 0, 0, err
		}
		dec, begin = time.Since(begin), time.Now()
		_, err = events.EncodeSnapshot(s)
	} else {
		var p *events.PodsPending
		if p, err = events.DecodePodsPending(data); err != nil {
			return 0, 0, err
		}
		dec, begin = time.Since(begin), time.Now()
		_, err = events.EncodePodsPending(p)
	}
	return dec, time.Since(begin), err
}

// prefixed is a writer that logs each write with a prefix (localdev's progress lines).
type prefixed string

func (p prefixed) Write(b []byte) (int, error) {
	log.Printf("%s%s", string(p), b)
	return len(b), nil
}
