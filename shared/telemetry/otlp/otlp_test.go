package otlp

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/otlp/otlptest"
)

type staticToken struct{ calls int }

func (s *staticToken) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	s.calls++
	if !slices.Equal(o.Scopes, []string{MonitorScope}) {
		return azcore.AccessToken{}, io.ErrUnexpectedEOF
	}
	return azcore.AccessToken{Token: "t0k3n", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func TestExportPayloadShape(t *testing.T) {
	rc := &otlptest.Receiver{Token: "t0k3n"}
	srv := httptest.NewTLSServer(rc)
	defer srv.Close()
	cred := &staticToken{}
	ctx := context.Background()
	r, err := New(ctx, Options{Endpoint: srv.URL + "/v1/metrics", Function: "provision", Cluster: "prod", Credential: cred,
		Client: srv.Client(), Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(ctx)
	r.Record(telemetry.NodeClaimsCreated, 2, "provisioned", "default", "false")
	r.Record(telemetry.NodeClaimsCreated, 1, "provisioned", "default", "false")
	r.Record(telemetry.QueueDepth, 12, "provisioner", "")
	r.Record(telemetry.SchedulingDuration, 0.3, "provisioner")
	r.Record(telemetry.SchedulingDuration, 7, "provisioner")
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil { // a second export: the token is reused
		t.Fatal(err)
	}
	if errs, got := rc.Errors(), rc.Exports(); len(errs) > 0 || len(got) == 0 {
		t.Fatalf("receiver refused %v, accepted %d exports", errs, len(got))
	}
	if cred.calls != 1 {
		t.Errorf("token fetched %d times, want 1", cred.calls)
	}
	req := rc.Exports()[0]
	if len(req.ResourceMetrics) != 1 {
		t.Fatalf("%d resource metrics, want 1", len(req.ResourceMetrics))
	}
	res := map[string]string{}
	for _, kv := range req.ResourceMetrics[0].Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	for k, v := range map[string]string{"service.name": "dovetail-provision", "faas.name": "provision", "cloud.provider": "azure",
		"cloud.platform": "azure_functions", "dovetail.cluster": "prod"} {
		if res[k] != v {
			t.Errorf("resource %s = %q, want %q", k, res[k], v)
		}
	}
	byName := map[string]*metricspb.Metric{}
	for _, sm := range req.ResourceMetrics[0].ScopeMetrics {
		for _, m := range sm.Metrics {
			byName[m.Name] = m
		}
	}
	created := byName["karpenter_nodeclaims_created_total"].GetSum()
	if created == nil || !created.IsMonotonic || created.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE ||
		len(created.DataPoints) != 1 || created.DataPoints[0].GetAsDouble() != 3 || byName["karpenter_nodeclaims_created_total"].Unit != "1" {
		t.Errorf("karpenter_nodeclaims_created_total = %v, want one monotonic cumulative point of 3, unit 1", byName["karpenter_nodeclaims_created_total"])
	} else if got := pointAttrs(created.DataPoints[0].Attributes); got != "min_values_relaxed=false,nodepool=default,reason=provisioned" {
		t.Errorf("created attributes %s", got)
	}
	depth := byName["karpenter_scheduler_queue_depth"].GetGauge()
	if depth == nil || len(depth.DataPoints) != 1 || depth.DataPoints[0].GetAsDouble() != 12 {
		t.Errorf("karpenter_scheduler_queue_depth = %v, want a gauge of 12", byName["karpenter_scheduler_queue_depth"])
	}
	h := byName["karpenter_scheduler_scheduling_duration_seconds"].GetHistogram()
	if h == nil || len(h.DataPoints) != 1 || byName["karpenter_scheduler_scheduling_duration_seconds"].Unit != "s" {
		t.Fatalf("scheduling duration = %v, want one histogram point, unit s", byName["karpenter_scheduler_scheduling_duration_seconds"])
	}
	p := h.DataPoints[0]
	bounds := telemetry.DurationBuckets()
	if p.Count != 2 || p.GetSum() != 7.3 || !slices.Equal(p.ExplicitBounds, bounds) || len(p.BucketCounts) != len(bounds)+1 {
		t.Errorf("histogram point count %d sum %g bounds %d counts %d", p.Count, p.GetSum(), len(p.ExplicitBounds), len(p.BucketCounts))
	}
	// 0.3 falls in (0.25, 0.3], 7 in (6, 7].
	for i, c := range p.BucketCounts {
		want := uint64(0)
		if i < len(bounds) && (bounds[i] == 0.3 || bounds[i] == 7) {
			want = 1
		}
		if c != want {
			t.Errorf("bucket %d (le %v) = %d, want %d", i, append(bounds, 0)[i], c, want)
		}
	}
}

// TestBearerNeedsTLS: a token is never sent over plain HTTP.
func TestBearerNeedsTLS(t *testing.T) {
	rc := &otlptest.Receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	r, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1/metrics", Function: "f", Credential: &staticToken{}, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.Record(telemetry.QueueDepth, 1, "provisioner", "")
	if err := r.Flush(context.Background()); err == nil || !bytes.Contains([]byte(err.Error()), []byte("refusing to send a bearer token")) {
		t.Errorf("flush over http with a credential = %v, want a refusal", err)
	}
	if got := rc.Exports(); len(got) != 0 {
		t.Errorf("the receiver got %d exports", len(got))
	}
}

// pointAttrs renders a data point's attributes as "k=v,..." sorted by key.
func pointAttrs(kvs []*commonpb.KeyValue) string {
	parts := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		parts = append(parts, kv.Key+"="+kv.Value.GetStringValue())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// UCUM's spellings (the Unified Code for Units of Measure, as OpenTelemetry's semantic
// conventions use them): "s" for seconds, "By" for bytes, "1" for counts and dimensionless values.
func TestUCUM(t *testing.T) {
	for u, want := range map[telemetry.Unit]string{telemetry.UnitSeconds: "s", telemetry.UnitBytes: "By", telemetry.UnitCount: "1", telemetry.UnitNone: "1"} {
		if got := UCUM(u); got != want {
			t.Errorf("UCUM(%s) = %q, want %q", u, got, want)
		}
	}
}
