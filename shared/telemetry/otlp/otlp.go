// Package otlp is the telemetry seam's Azure Monitor backend for Azure Functions: the
// OpenTelemetry metrics SDK exporting OTLP/HTTP (protobuf, gzip) to an endpoint, with an Entra ID
// bearer token when a credential is given.
//
// Why OTLP rather than the Logs Ingestion API (azlogs): the azlogs module is not served to this
// build, and OTLP is what Azure Monitor's own OpenTelemetry ingestion takes (Application
// Insights' OTLP endpoints, the Azure Monitor Agent, or an OpenTelemetry Collector with the
// azuremonitor exporter), so the same exporter also serves any OTLP backend (Grafana, a
// collector in the cluster). Counters are monotonic cumulative sums per process, gauges
// gauges, histograms explicit-bucket histograms with the seam's buckets; every label is an
// attribute. The resource names the function (service.name dovetail-<function>, faas.name),
// the cloud (cloud.provider azure, cloud.platform azure_functions) and the cluster.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// MonitorScope is the Entra ID scope of Azure Monitor's ingestion endpoints.
const MonitorScope = "https://monitor.azure.com/.default"

// Options configure a Recorder.
type Options struct {
	// Endpoint is the OTLP/HTTP metrics URL (e.g. https://<ingestion host>/v1/metrics); required.
	Endpoint string
	// Function and Cluster name the resource.
	Function, Cluster string
	// Credential, when set, signs every export with a bearer token for Scope (default
	// MonitorScope): a managed identity through azidentity in Azure.
	Credential azcore.TokenCredential
	Scope      string
	// Headers are added to every export (e.g. an API key of a collector).
	Headers map[string]string
	// Client is the base HTTP client (nil: a new one with a 10 s timeout).
	Client *http.Client
	// Interval is how often values are exported besides Flush (default 60 s).
	Interval time.Duration
}

// Recorder records into OpenTelemetry instruments and exports them over OTLP/HTTP.
type Recorder struct {
	provider *sdkmetric.MeterProvider
	meter    metric.Meter

	mu         sync.Mutex
	counters   map[string]metric.Float64Counter
	gauges     map[string]metric.Float64Gauge
	histograms map[string]metric.Float64Histogram
}

// New builds a Recorder exporting to o.Endpoint.
func New(ctx context.Context, o Options) (*Recorder, error) {
	if o.Endpoint == "" {
		return nil, errors.New("otlp: endpoint: required (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)")
	}
	client := o.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Credential != nil {
		scope := o.Scope
		if scope == "" {
			scope = MonitorScope
		}
		base := client.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		c := *client
		c.Transport = &bearer{base: base, cred: o.Credential, scope: scope}
		client = &c
	}
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(o.Endpoint), otlpmetrichttp.WithHTTPClient(client),
		otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression), otlpmetrichttp.WithHeaders(o.Headers))
	if err != nil {
		return nil, fmt.Errorf("otlp: exporter for %s: %w", o.Endpoint, err)
	}
	interval := o.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "dovetail-"+o.Function), attribute.String("service.namespace", "dovetail"),
		attribute.String("faas.name", o.Function), attribute.String("cloud.provider", "azure"),
		attribute.String("cloud.platform", "azure_functions"), attribute.String("dovetail.cluster", o.Cluster))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval))))
	return &Recorder{provider: mp, meter: mp.Meter("github.com/dovetail-dev/dovetail"),
		counters: map[string]metric.Float64Counter{}, gauges: map[string]metric.Float64Gauge{},
		histograms: map[string]metric.Float64Histogram{}}, nil
}

// UCUM maps a seam unit to the unit OTLP carries (UCUM, as OpenTelemetry's semantic conventions
// spell it): Seconds "s", Bytes "By", Count "1", None "1".
func UCUM(u telemetry.Unit) string {
	switch u {
	case telemetry.UnitSeconds:
		return "s"
	case telemetry.UnitBytes:
		return "By"
	}
	return "1"
}

// Record implements telemetry.Recorder.
func (r *Recorder) Record(m *telemetry.Metric, value float64, labels ...string) {
	if len(labels) != len(m.Labels) {
		if m != telemetry.Dropped {
			r.Record(telemetry.Dropped, 1, m.Name)
		}
		return
	}
	attrs := make([]attribute.KeyValue, len(labels))
	for i, l := range m.Labels {
		attrs[i] = attribute.String(l, labels[i])
	}
	opt := metric.WithAttributes(attrs...)
	ctx := context.Background()
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	switch m.Kind {
	case telemetry.Counter:
		c, ok := r.counters[m.Name]
		if !ok {
			if c, err = r.meter.Float64Counter(m.Name, metric.WithDescription(m.Help), metric.WithUnit(UCUM(m.Unit))); err == nil {
				r.counters[m.Name] = c
			}
		}
		if err == nil && value >= 0 {
			c.Add(ctx, value, opt)
		}
	case telemetry.Gauge:
		g, ok := r.gauges[m.Name]
		if !ok {
			if g, err = r.meter.Float64Gauge(m.Name, metric.WithDescription(m.Help), metric.WithUnit(UCUM(m.Unit))); err == nil {
				r.gauges[m.Name] = g
			}
		}
		if err == nil {
			g.Record(ctx, value, opt)
		}
	case telemetry.Histogram:
		h, ok := r.histograms[m.Name]
		if !ok {
			b := m.Buckets
			if b == nil {
				b = telemetry.DurationBuckets()
			}
			if h, err = r.meter.Float64Histogram(m.Name, metric.WithDescription(m.Help), metric.WithUnit(UCUM(m.Unit)),
				metric.WithExplicitBucketBoundaries(b...)); err == nil {
				r.histograms[m.Name] = h
			}
		}
		if err == nil {
			h.Record(ctx, value, opt)
		}
	}
}

// Flush exports what was recorded (the runtime calls it after every invocation: a Consumption
// plan instance may be frozen or recycled between requests).
func (r *Recorder) Flush(ctx context.Context) error { return r.provider.ForceFlush(ctx) }

// Shutdown flushes and stops the periodic export.
func (r *Recorder) Shutdown(ctx context.Context) error { return r.provider.Shutdown(ctx) }

// bearer adds "Authorization: Bearer <token>" from an Entra ID credential, reusing a token
// until 5 minutes before it expires (azidentity caches too; this saves the call).
type bearer struct {
	base  http.RoundTripper
	cred  azcore.TokenCredential
	scope string

	mu    sync.Mutex
	token azcore.AccessToken
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("otlp: refusing to send a bearer token over %s to %s", req.URL.Scheme, req.URL.Host)
	}
	b.mu.Lock()
	if time.Until(b.token.ExpiresOn) < 5*time.Minute {
		tok, err := b.cred.GetToken(req.Context(), policy.TokenRequestOptions{Scopes: []string{b.scope}})
		if err != nil {
			b.mu.Unlock()
			return nil, fmt.Errorf("otlp: token for %s: %w", b.scope, err)
		}
		b.token = tok
	}
	token := b.token.Token
	b.mu.Unlock()
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return b.base.RoundTrip(r)
}
