// Package prom is the Prometheus backend of the telemetry seam (prometheus/client_golang) and
// the one small HTTP server each long-running Dovetail process (the agent, a NATS worker)
// serves: /metrics (Prometheus text or OpenMetrics), /healthz (liveness) and /readyz
// (readiness).
package prom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Recorder is a telemetry.Recorder over its own Prometheus registry (not the global one, so
// two in one process — local dev, tests — do not collide).
type Recorder struct {
	reg  *prometheus.Registry
	mu   sync.Mutex
	vecs map[string]any // *prometheus.CounterVec, GaugeVec or HistogramVec by metric name
}

// NewRecorder registers every metric of telemetry.All, plus the Go runtime and process
// collectors, on a new registry. (A family appears in a scrape once it has a series.)
func NewRecorder() *Recorder {
	r := &Recorder{reg: prometheus.NewRegistry(), vecs: map[string]any{}}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, m := range telemetry.All {
		r.vec(m)
	}
	return r
}

// Registry is the recorder's registry (for a caller's own collectors).
func (r *Recorder) Registry() *prometheus.Registry { return r.reg }

// Record implements telemetry.Recorder. A metric not in telemetry.All is registered on first use;
// a second definition under a registered name with another kind or label set is dropped.
func (r *Recorder) Record(m *telemetry.Metric, value float64, labels ...string) {
	if len(labels) != len(m.Labels) {
		r.Record(telemetry.Dropped, 1, m.Name)
		return
	}
	switch v := r.vec(m).(type) {
	case *prometheus.CounterVec:
		if value >= 0 {
			v.WithLabelValues(labels...).Add(value)
		}
	case *prometheus.GaugeVec:
		v.WithLabelValues(labels...).Set(value)
	case *prometheus.HistogramVec:
		v.WithLabelValues(labels...).Observe(value)
	default:
		if m != telemetry.Dropped {
			r.Record(telemetry.Dropped, 1, m.Name)
		}
	}
}

func (r *Recorder) vec(m *telemetry.Metric) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.vecs[m.Name]; ok {
		return v
	}
	var c prometheus.Collector
	switch m.Kind {
	case telemetry.Counter:
		c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, m.Labels)
	case telemetry.Gauge:
		c = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
	case telemetry.Histogram:
		b := m.Buckets
		if b == nil {
			b = telemetry.DurationBuckets()
		}
		c = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: m.Name, Help: m.Help, Buckets: b}, m.Labels)
	default:
		return nil
	}
	if err := r.reg.Register(c); err != nil {
		return nil // a conflicting definition: Record counts it dropped
	}
	r.vecs[m.Name] = c
	return c
}

// Check is a health or readiness probe: nil when healthy, else an error saying why not.
type Check func() error

// Server is the process's HTTP server: /metrics from Recorder, /healthz from Live and /readyz
// from Ready (each 200 "ok" or 503 with the failing check's error; a nil check passes).
type Server struct {
	// Addr is the listen address (host:port; ":0" picks a port, see Listen).
	Addr     string
	Recorder *Recorder
	Live     Check
	Ready    Check
	Logger   *slog.Logger
	// IdleTimeout closes a keep-alive connection idle this long; default DefaultIdleTimeout.
	IdleTimeout time.Duration

	readHeaderTimeout time.Duration // tests shorten ReadHeaderTimeout
}

// The metrics server's timeouts. Scrapes and probes are GETs without a body answered from
// memory, so every phase is bounded in seconds; a scraper keeps its connection between scrapes
// (Prometheus' default interval is 1 minute), so an idle one is closed after a little more.
const (
	ReadHeaderTimeout  = 10 * time.Second
	ReadTimeout        = 30 * time.Second
	WriteTimeout       = 30 * time.Second
	DefaultIdleTimeout = 90 * time.Second
)

// Handler serves the three paths.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.Recorder != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.Recorder.reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	}
	mux.HandleFunc("/healthz", probe(s.Live))
	mux.HandleFunc("/readyz", probe(s.Ready))
	return mux
}

func probe(c Check) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if c != nil {
			if err := c(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, err.Error())
				return
			}
		}
		fmt.Fprintln(w, "ok")
	}
}

// Listen binds Addr and returns the bound address (the port chosen for ":0") and a function that
// serves until ctx ends, then shuts down within 5 seconds.
func (s *Server) Listen() (addr string, serve func(ctx context.Context) error, err error) {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return "", nil, fmt.Errorf("http server on %q: %w", s.Addr, err)
	}
	idle := s.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	header := ReadHeaderTimeout
	if s.readHeaderTimeout > 0 {
		header = s.readHeaderTimeout
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: header, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: idle}
	return ln.Addr().String(), func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return err
			}
			if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}, nil
}

// Start listens and serves in the background until ctx ends; it returns the bound address. An
// empty Addr starts nothing and returns "".
func (s *Server) Start(ctx context.Context) (string, error) {
	if s.Addr == "" {
		return "", nil
	}
	addr, serve, err := s.Listen()
	if err != nil {
		return "", err
	}
	go func() {
		if err := serve(ctx); err != nil {
			log := s.Logger
			if log == nil {
				log = slog.Default()
			}
			log.Error("http server stopped", "addr", addr, "err", err)
		}
	}()
	return addr, nil
}

// ParseText parses a Prometheus text exposition (what /metrics serves without OpenMetrics
// negotiation) into one value per series, keyed as telemetry.SeriesKey spells it but with the
// labels sorted by name (Prometheus's order): counters and gauges by their name, histograms as
// name_bucket{...,le="x"}, name_sum and name_count. For tests and `dovetail` tooling that read a
// scrape.
func ParseText(r io.Reader) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"=\""+l.GetValue()+"\"")
			}
			sort.Strings(labels)
			key := func(n string, extra ...string) string {
				all := append(append([]string(nil), labels...), extra...)
				if len(all) == 0 {
					return n
				}
				return n + "{" + strings.Join(all, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key(name)] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key(name)] = m.GetGauge().GetValue()
			case m.Untyped != nil:
				out[key(name)] = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				h := m.GetHistogram()
				out[key(name+"_count")] = float64(h.GetSampleCount())
				out[key(name+"_sum")] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key(name+"_bucket", "le=\""+strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)+"\"")] = float64(b.GetCumulativeCount())
				}
			case m.Summary != nil:
				out[key(name+"_count")] = float64(m.GetSummary().GetSampleCount())
				out[key(name+"_sum")] = m.GetSummary().GetSampleSum()
			}
		}
	}
	return out, nil
}
