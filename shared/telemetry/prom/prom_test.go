package prom

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestServerMetricsAndProbes(t *testing.T) {
	rec := NewRecorder()
	var ready atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Server{Addr: "127.0.0.1:0", Recorder: rec,
		Ready: func() error {
			if !ready.Load() {
				return errors.New("informer caches not synced")
			}
			return nil
		}}
	addr, err := s.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "informer caches not synced") {
		t.Fatalf("/readyz before ready: %d %q, want 503 naming the reason", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d, want 200", code)
	}
	ready.Store(true)
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/readyz when ready: %d %q", code, body)
	}

	rec.Record(telemetry.NodeClaimsCreated, 1, "provisioned", "default", "false")
	rec.Record(telemetry.NodeClaimsCreated, 2, "provisioned", "default", "false")
	rec.Record(telemetry.QueueDepth, 7, "provisioner", "")
	rec.Record(telemetry.QueueDepth, 3, "provisioner", "")
	rec.Record(telemetry.SchedulingDuration, 0.2, "provisioner")
	rec.Record(telemetry.SchedulingDuration, 0.03, "provisioner")
	rec.Record(telemetry.NodeClaimsCreated, 1, "only-one-label") // dropped and counted

	_, body := get(t, base+"/metrics")
	series, err := ParseText(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",reason="provisioned"}`: 3,
		`karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id=""}`:                             3,
		`karpenter_scheduler_scheduling_duration_seconds_count{controller="provisioner"}`:                        2,
		`karpenter_scheduler_scheduling_duration_seconds_sum{controller="provisioner"}`:                          0.23,
		`karpenter_scheduler_scheduling_duration_seconds_bucket{controller="provisioner",le="0.05"}`:             1,
		`karpenter_scheduler_scheduling_duration_seconds_bucket{controller="provisioner",le="0.2"}`:              2,
		`dovetail_telemetry_dropped_total{metric="karpenter_nodeclaims_created_total"}`:                          1,
	}
	for k, v := range want {
		got, ok := series[k]
		if !ok {
			t.Errorf("missing series %s", k)
			continue
		}
		if d := got - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %g, want %g", k, got, v)
		}
	}
}
