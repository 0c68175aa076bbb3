// Package telemetry is the one seam through which Dovetail's functions, agent and runtime
// report what they do: metrics (Recorder, with the metric definitions in metrics.go, Karpenter's
// names wherever the meaning matches) and decision audit records (audit.go). Each runtime picks
// the backend at start: CloudWatch Embedded Metric Format on stdout under Lambda (package emf),
// OpenTelemetry OTLP/HTTP for Azure Functions (package otlp), Prometheus on /metrics for the
// agent and the NATS workers (package prom).
//
// This package imports only the standard library, so the pure core could import it, but it
// must not: the core decides, the edges record (TestCoreImportsNoTelemetry).
package telemetry

import (
	"context"
	"sync"
)

// Kind is how a metric aggregates.
type Kind int

const (
	// Counter only increases: Record adds value (a delta, >= 0).
	Counter Kind = iota
	// Gauge is a current value: Record sets it.
	Gauge
	// Histogram is a distribution: Record observes one value.
	Histogram
)

func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return "unknown"
}

// Unit is a metric's unit, spelled as CloudWatch's StandardUnit (the EMF "Unit" field); the
// OTLP backend maps it to UCUM ("s", "1", "USD/h").
type Unit string

// Units Dovetail's metrics use.
const (
	UnitCount   Unit = "Count"
	UnitSeconds Unit = "Seconds"
	UnitBytes   Unit = "Bytes"
	UnitNone    Unit = "None" // a value with a unit of its own, named in the metric (USD per hour, a ratio)
)

// Metric defines one metric: its Prometheus name (also the EMF and OTLP name), kind, unit,
// help text and label names. Values passed to Record follow Labels in order.
type Metric struct {
	Name   string
	Kind   Kind
	Unit   Unit
	Help   string
	Labels []string
	// Buckets are a Histogram's upper bounds (nil: DurationBuckets).
	Buckets []float64
}

// Recorder records one value of a metric: a Counter adds value, a Gauge is set to it, a
// Histogram observes it. labels are the values of m.Labels, in order; a call with the wrong
// number of them is dropped (it would mislabel a series) and counted by the backend
// (dovetail_telemetry_dropped_total where it can). A Recorder is safe for concurrent use and
// never blocks on I/O: backends that ship values elsewhere buffer them until Flush.
type Recorder interface {
	Record(m *Metric, value float64, labels ...string)
}

// Flusher is a Recorder that ships what it buffered: EMF writes its documents to stdout, OTLP
// exports to its endpoint. The runtime flushes after each invocation (Lambda, Azure Functions),
// so a frozen or recycled execution environment loses nothing it recorded.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Nop records nothing.
var Nop Recorder = nop{}

type nop struct{}

func (nop) Record(*Metric, float64, ...string) {}

// OrNop returns r, or Nop when r is nil, so callers may leave their Recorder unset.
func OrNop(r Recorder) Recorder {
	if r == nil {
		return Nop
	}
	return r
}

// Flush flushes r when it is a Flusher.
func Flush(ctx context.Context, r Recorder) error {
	if f, ok := r.(Flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

// DurationBuckets are the upper bounds (seconds) of duration histograms: Karpenter's
// (sigs.k8s.io/karpenter pkg/metrics DurationBuckets, itself controller-runtime's plus values
// up to 10 minutes), so dashboards' bucket-based quantiles read the same.
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
		1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}
}

// Memory is a Recorder that keeps every value in memory: counters summed, gauges last, histogram
// observations listed. Tests read it; local dev may too.
type Memory struct {
	mu     sync.Mutex
	values map[string]float64
	obs    map[string][]float64
	// Dropped counts calls with the wrong number of labels.
	Dropped int
}

// Record implements Recorder.
func (m *Memory) Record(metric *Metric, value float64, labels ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(labels) != len(metric.Labels) {
		m.Dropped++
		return
	}
	if m.values == nil {
		m.values, m.obs = map[string]float64{}, map[string][]float64{}
	}
	k := SeriesKey(metric, labels...)
	switch metric.Kind {
	case Counter:
		m.values[k] += value
	case Gauge:
		m.values[k] = value
	case Histogram:
		m.obs[k] = append(m.obs[k], value)
	}
}

// Value is a counter's sum or a gauge's last value for the series (0 if never recorded).
func (m *Memory) Value(metric *Metric, labels ...string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.values[SeriesKey(metric, labels...)]
}

// Observations are a histogram's recorded values for the series.
func (m *Memory) Observations(metric *Metric, labels ...string) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]float64(nil), m.obs[SeriesKey(metric, labels...)]...)
}

// SeriesKey renders a series as Prometheus does: name{label="value",...} in m.Labels order.
func SeriesKey(m *Metric, labels ...string) string {
	s := m.Name
	if len(m.Labels) == 0 {
		return s
	}
	s += "{"
	for i, l := range m.Labels {
		if i > 0 {
			s += ","
		}
		v := ""
		if i < len(labels) {
			v = labels[i]
		}
		s += l + "=\"" + v + "\""
	}
	return s + "}"
}
