// Package otlptest is a local OTLP/HTTP metrics endpoint for tests, as strict as the
// specification (OTLP 1.x, "OTLP/HTTP"): POST to /v1/metrics, Content-Type
// application/x-protobuf, a gzip body when Content-Encoding says so, an
// ExportMetricsServiceRequest that unmarshals, and — when a token is expected — "Authorization:
// Bearer <token>". It answers an empty ExportMetricsServiceResponse. No Azure Monitor ingestion
// endpoint runs offline; this is the edge it stands in for.
package otlptest

import (
	"compress/gzip"
	"io"
	"net/http"
	"sync"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is an http.Handler taking OTLP/HTTP metric exports.
type Receiver struct {
	// Token, when set, is the bearer token every export must carry.
	Token string

	mu   sync.Mutex
	got  []*colmetrics.ExportMetricsServiceRequest
	errs []string
}

// Exports returns the accepted exports, in order.
func (rc *Receiver) Exports() []*colmetrics.ExportMetricsServiceRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*colmetrics.ExportMetricsServiceRequest(nil), rc.got...)
}

// Errors returns why refused exports were refused.
func (rc *Receiver) Errors() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.errs...)
}

// Metrics returns the metrics of every accepted export by name, a later export's replacing an
// earlier's (cumulative temporality: the last is the total).
func (rc *Receiver) Metrics() map[string]*metricspb.Metric {
	out := map[string]*metricspb.Metric{}
	for _, req := range rc.Exports() {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					out[m.Name] = m
				}
			}
		}
	}
	return out
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		rc.mu.Lock()
		rc.errs = append(rc.errs, msg)
		rc.mu.Unlock()
		http.Error(w, msg, code)
	}
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/metrics":
		fail(http.StatusNotFound, r.Method+" "+r.URL.Path)
		return
	case r.Header.Get("Content-Type") != "application/x-protobuf":
		fail(http.StatusUnsupportedMediaType, "content type "+r.Header.Get("Content-Type"))
		return
	case rc.Token != "" && r.Header.Get("Authorization") != "Bearer "+rc.Token:
		fail(http.StatusUnauthorized, "authorization "+r.Header.Get("Authorization"))
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	req := &colmetrics.ExportMetricsServiceRequest{}
	if err := proto.Unmarshal(raw, req); err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	rc.mu.Lock()
	rc.got = append(rc.got, req)
	rc.mu.Unlock()
	out, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}
