package emf

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

func newRecorder(out *bytes.Buffer) *Recorder {
	return &Recorder{Out: out, Dimensions: map[string]string{"cluster": "prod"},
		Now: func() time.Time { return time.UnixMilli(1700000000123) }}
}

func TestFlushWritesDocumentsCloudWatchReads(t *testing.T) {
	var out bytes.Buffer
	r := newRecorder(&out)
	r.Record(telemetry.NodeClaimsCreated, 1, "provisioned", "default", "false")
	r.Record(telemetry.NodeClaimsCreated, 2, "provisioned", "default", "false")
	r.Record(telemetry.NodeClaimsCreated, 1, "drifted", "default", "false")
	r.Record(telemetry.SchedulingDuration, 0.25, "provisioner")
	r.Record(telemetry.SchedulingDuration, 0.5, "provisioner")
	r.Record(telemetry.QueueDepth, 9, "provisioner", "")
	r.Record(telemetry.QueueDepth, 4, "provisioner", "") // a gauge keeps the last value
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	docs, err := Parse(&out)
	if err != nil {
		t.Fatal(err)
	}
	// Three dimension sets: (cluster, min_values_relaxed, nodepool, reason) twice by reason, and
	// (cluster, controller) holding both provisioner metrics (scheduling_id is empty: left out).
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3:\n%s", len(docs), out.String())
	}
	byKey := map[string]Document{}
	for _, d := range docs {
		if d.Timestamp != 1700000000123 || d.Namespace != "Dovetail" || d.Dimensions["cluster"] != "prod" {
			t.Errorf("document header %+v", d)
		}
		byKey[fmt.Sprint(d.Dimensions)] = d
	}
	prov := byKey["map[cluster:prod min_values_relaxed:false nodepool:default reason:provisioned]"]
	if v := prov.Values["karpenter_nodeclaims_created_total"]; len(v) != 1 || v[0] != 3 || prov.Units["karpenter_nodeclaims_created_total"] != "Count" {
		t.Errorf("provisioned created = %v (%s), want [3] Count", v, prov.Units["karpenter_nodeclaims_created_total"])
	}
	sched := byKey["map[cluster:prod controller:provisioner]"]
	if v := sched.Values["karpenter_scheduler_scheduling_duration_seconds"]; len(v) != 2 || v[0] != 0.25 || v[1] != 0.5 {
		t.Errorf("scheduling durations = %v, want [0.25 0.5] (a values array)", v)
	}
	if v := sched.Values["karpenter_scheduler_queue_depth"]; len(v) != 1 || v[0] != 4 {
		t.Errorf("queue depth = %v, want [4]", v)
	}
	out.Reset()
	if err := r.Flush(context.Background()); err != nil || out.Len() != 0 {
		t.Errorf("a second flush wrote %q (err %v), want nothing: values are flushed once", out.String(), err)
	}
}

// TestLimitsSplitDocuments: one dimension set (cluster only) holding 250 observations of one
// histogram and 150 gauges. The first 100 observations and the 150 gauges are 151 metrics: two
// documents (100 and 51 metrics); observations 101-200 and 201-250 one document each. So 4
// documents, 153 metric members, and the histogram's arrays hold 100, 100 and 50 values.
func TestLimitsSplitDocuments(t *testing.T) {
	var out bytes.Buffer
	r := newRecorder(&out)
	for i := range 250 {
		r.Record(telemetry.PodStartupDuration, float64(i))
	}
	for i := range 150 {
		r.Record(&telemetry.Metric{Name: fmt.Sprintf("m%03d", i), Kind: telemetry.Gauge, Unit: telemetry.UnitNone}, float64(i))
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	docs, err := Parse(&out)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	total := 0.0
	metrics := 0
	for _, d := range docs {
		if v, ok := d.Values["karpenter_pods_startup_duration_seconds"]; ok {
			sizes = append(sizes, len(v))
			for _, x := range v {
				total += x
			}
		}
		metrics += len(d.Values)
	}
	if fmt.Sprint(sizes) != "[100 100 50]" || total != 249*250/2 {
		t.Errorf("startup duration arrays %v summing %g, want [100 100 50] summing %d", sizes, total, 249*250/2)
	}
	if len(docs) != 4 || metrics != 153 {
		t.Errorf("%d documents with %d metric members, want 4 and 153", len(docs), metrics)
	}
}

func TestParseRefusesWhatCloudWatchWould(t *testing.T) {
	for name, line := range map[string]string{
		"no timestamp":    `{"_aws":{"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"a","Unit":"Count"}]}]},"a":1}`,
		"missing member":  `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"a","Unit":"Count"}]}]}}`,
		"empty dimension": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["d"]],"Metrics":[{"Name":"a"}]}]},"a":1,"d":""}`,
		"bad unit":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"a","Unit":"Pods"}]}]},"a":1}`,
		"unknown field":   `{"_aws":{"Timestamp":1,"Extra":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"a"}]}]},"a":1}`,
		"101 values":      `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"a"}]}]},"a":[` + strings.Repeat("1,", 100) + `1]}`,
	} {
		if _, err := Parse(strings.NewReader(line)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
