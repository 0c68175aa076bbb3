package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// SchedulerCounts scrapes kube-scheduler's /metrics at url (realcluster.ControlPlane.SchedulerURL:
// a self-signed certificate, no credentials needed for /metrics) and returns what says how hard
// the scheduler worked, keyed for the report:
//
//   - "attempts <result>": scheduler_schedule_attempts_total by result (scheduled, unschedulable,
//     error);
//   - "attempt seconds <result>": the sum of scheduler_scheduling_attempt_duration_seconds; v1.34
//     observes it when an attempt's binding cycle ends, so a scheduled attempt's time includes
//     the Bind extension point (which runs off the scheduling loop, concurrently);
//   - "<extension point> seconds": the sum of scheduler_framework_extension_point_duration_seconds
//     over the status and profile labels (Filter, Score, Permit, PreBind, Bind ...);
//   - "queued by <event>": scheduler_queue_incoming_pods_total by event, the cluster events and
//     scheduler transitions that put a pod back into a queue (NodeAdd, AssignedPodUpdate,
//     ScheduleAttemptFailure, UnschedulableTimeout ...).
//
// Metric names: kube-scheduler v1.34's pkg/scheduler/metrics.
func SchedulerCounts(ctx context.Context, url string) (map[string]float64, error) {
	// The control plane's scheduler serves a certificate it signed itself at start: there is
	// nothing to verify it against, and it is on loopback.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping kube-scheduler's /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping kube-scheduler's /metrics: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing kube-scheduler's /metrics: %w", err)
	}
	return schedulerCounts(fams), nil
}

// schedulerCounts picks SchedulerCounts' keys out of parsed families.
func schedulerCounts(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	each := func(name string, f func(labels map[string]string, m *dto.Metric)) {
		for _, m := range fams[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			f(labels, m)
		}
	}
	each("scheduler_schedule_attempts_total", func(l map[string]string, m *dto.Metric) {
		out["attempts "+l["result"]] += m.GetCounter().GetValue()
	})
	each("scheduler_scheduling_attempt_duration_seconds", func(l map[string]string, m *dto.Metric) {
		out["attempt seconds "+l["result"]] += m.GetHistogram().GetSampleSum()
	})
	each("scheduler_framework_extension_point_duration_seconds", func(l map[string]string, m *dto.Metric) {
		out[l["extension_point"]+" seconds"] += m.GetHistogram().GetSampleSum()
	})
	each("scheduler_queue_incoming_pods_total", func(l map[string]string, m *dto.Metric) {
		out["queued by "+l["event"]] += m.GetCounter().GetValue()
	})
	return out
}
