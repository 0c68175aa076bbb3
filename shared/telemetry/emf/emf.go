// Package emf is the telemetry seam's CloudWatch backend for Lambda: values are buffered during
// an invocation and written on Flush as CloudWatch Embedded Metric Format documents, one JSON
// line each, to stdout, where Lambda's log stream carries them to CloudWatch Logs and CloudWatch
// extracts the metrics. No API call, no agent.
//
// The format (Amazon CloudWatch User Guide, "Specification: Embedded metric format"): a root
// object with "_aws": {"Timestamp": <ms since epoch>, "CloudWatchMetrics": [{"Namespace",
// "Dimensions": [[names...]], "Metrics": [{"Name", "Unit"}]}]}, and one root member per
// dimension (its value, a string) and per metric (a number or an array of numbers). Limits
// honoured here: at most 100 metrics per document, 30 dimensions per dimension set, 100 values
// per metric array; more values or metrics go to further documents.
package emf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Limits of one EMF document (CloudWatch User Guide, embedded metric format specification).
const (
	MaxMetrics    = 100
	MaxDimensions = 30
	MaxValues     = 100
)

// DefaultNamespace is the CloudWatch namespace of Dovetail's metrics.
const DefaultNamespace = "Dovetail"

// Recorder buffers values per series and writes EMF documents on Flush.
type Recorder struct {
	// Namespace of every metric (default DefaultNamespace).
	Namespace string
	// Dimensions are added to every dimension set (e.g. {"cluster": "prod"}); their names must
	// not be a metric label name.
	Dimensions map[string]string
	Out        io.Writer
	// Now stamps documents (default time.Now).
	Now func() time.Time

	mu     sync.Mutex
	groups map[string]*group // by dimension names and values
}

// group is the values recorded under one set of dimension values.
type group struct {
	dims    [][2]string // sorted by name
	metrics map[string]*series
}

type series struct {
	metric *telemetry.Metric
	values []float64 // one (counter sum, gauge last) or many (histogram observations)
}

// Record implements telemetry.Recorder. A label whose value is empty is left out of the
// dimension set (CloudWatch refuses empty dimension values).
func (r *Recorder) Record(m *telemetry.Metric, value float64, labels ...string) {
	if len(labels) != len(m.Labels) {
		if m != telemetry.Dropped {
			r.Record(telemetry.Dropped, 1, m.Name)
		}
		return
	}
	dims := make([][2]string, 0, len(labels)+len(r.Dimensions))
	for i, l := range m.Labels {
		if labels[i] != "" {
			dims = append(dims, [2]string{l, labels[i]})
		}
	}
	for k, v := range r.Dimensions {
		dims = append(dims, [2]string{k, v})
	}
	sort.Slice(dims, func(i, j int) bool { return dims[i][0] < dims[j][0] })
	if len(dims) > MaxDimensions {
		dims = dims[:MaxDimensions]
	}
	key := fmt.Sprint(dims)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups = map[string]*group{}
	}
	g := r.groups[key]
	if g == nil {
		g = &group{dims: dims, metrics: map[string]*series{}}
		r.groups[key] = g
	}
	s := g.metrics[m.Name]
	if s == nil {
		s = &series{metric: m}
		g.metrics[m.Name] = s
	}
	switch {
	case m.Kind == telemetry.Histogram:
		s.values = append(s.values, value)
	case m.Kind == telemetry.Counter && len(s.values) == 1:
		s.values[0] += value
	default:
		s.values = []float64{value}
	}
}

// Flush writes every buffered value as EMF documents (one line each) and empties the buffer.
// Write errors are returned; the values are dropped either way (a metric must not grow without
// bound in a function that cannot log).
func (r *Recorder) Flush(context.Context) error {
	r.mu.Lock()
	groups := r.groups
	r.groups = nil
	r.mu.Unlock()
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	ts := now().UnixMilli()
	for _, k := range keys {
		for _, doc := range r.documents(groups[k], ts) {
			line, err := json.Marshal(doc)
			if err != nil {
				return fmt.Errorf("emf: %w", err)
			}
			if _, err := r.Out.Write(append(line, '\n')); err != nil {
				return fmt.Errorf("emf: writing metrics: %w", err)
			}
		}
	}
	return nil
}

// documents splits one group into documents of at most MaxMetrics metrics, each metric with at
// most MaxValues values.
func (r *Recorder) documents(g *group, ts int64) []map[string]any {
	names := make([]string, 0, len(g.metrics))
	for n := range g.metrics {
		names = append(names, n)
	}
	sort.Strings(names)
	type chunk struct {
		s      *series
		values []float64
	}
	// Round i of a series' values goes to document round i; metrics of one round share
	// documents of MaxMetrics.
	var rounds [][]chunk
	for _, n := range names {
		s := g.metrics[n]
		for i := 0; i*MaxValues < len(s.values); i++ {
			if len(rounds) <= i {
				rounds = append(rounds, nil)
			}
			rounds[i] = append(rounds[i], chunk{s, s.values[i*MaxValues : min(len(s.values), (i+1)*MaxValues)]})
		}
	}
	ns := r.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	dimNames := make([]string, len(g.dims))
	for i, d := range g.dims {
		dimNames[i] = d[0]
	}
	var docs []map[string]any
	for _, round := range rounds {
		for part := range slices.Chunk(round, MaxMetrics) {
			doc := map[string]any{}
			defs := make([]map[string]string, 0, len(part))
			for _, c := range part {
				defs = append(defs, map[string]string{"Name": c.s.metric.Name, "Unit": string(c.s.metric.Unit)})
				if c.s.metric.Kind == telemetry.Histogram {
					doc[c.s.metric.Name] = c.values
				} else {
					doc[c.s.metric.Name] = c.values[0]
				}
			}
			for _, d := range g.dims {
				doc[d[0]] = d[1]
			}
			doc["_aws"] = map[string]any{"Timestamp": ts, "CloudWatchMetrics": []map[string]any{{
				"Namespace": ns, "Dimensions": [][]string{dimNames}, "Metrics": defs}}}
			docs = append(docs, doc)
		}
	}
	return docs
}

// Document is one parsed EMF document: what CloudWatch would extract from a log line.
type Document struct {
	Timestamp  int64
	Namespace  string
	Dimensions map[string]string
	// Values holds each metric's values by name (a single value as a one-element slice).
	Values map[string][]float64
	Units  map[string]string
}

// Parse reads EMF documents, one JSON object per line (other lines are skipped, as CloudWatch
// skips log lines without "_aws"), checking each against the specification and the limits: a
// document breaking them is an error naming the line and the rule.
func Parse(r io.Reader) ([]Document, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var docs []Document
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"_aws"`) {
			continue
		}
		d, err := parseDocument([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		docs = append(docs, d)
	}
	return docs, nil
}
