package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

func TestPodsPerKindSumsToN(t *testing.T) {
	// 1,000 pods: api round(200), cache round(50), batch round(200), db round(50), web the
	// remaining 500.
	got, err := PodsPerKind(1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{200, 50, 200, 50, 500}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("PodsPerKind(1000) = %v, want %v", got, want)
		}
	}
	// 7 pods: api round(1.4)=1, cache round(0.35)=0, batch 1, db 0, web 5.
	got, _ = PodsPerKind(7)
	if want := []int{1, 0, 1, 0, 5}; len(got) != 5 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] || got[4] != want[4] {
		t.Fatalf("PodsPerKind(7) = %v, want %v", got, want)
	}
	if _, err := PodsPerKind(0); err == nil || !strings.Contains(err.Error(), "-n") {
		t.Fatalf("PodsPerKind(0) error = %v, want one naming -n", err)
	}
}

func TestWorkloadsReplicasSumToN(t *testing.T) {
	for _, n := range []int{1, 7, 200, 1000, 10001} {
		ws, err := Workloads(n)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, w := range ws {
			total += w.Replicas
			var set int
			for _, p := range []bool{w.Deployment != nil, w.Job != nil, w.StatefulSet != nil} {
				if p {
					set++
				}
			}
			if set != 1 {
				t.Fatalf("workload %s: %d objects set, want 1", w.Name, set)
			}
		}
		if total != n {
			t.Fatalf("Workloads(%d): replicas sum to %d", n, total)
		}
	}
	// 1,000 pods: api 200/20 = 10 Deployments, cache 50/10 = 5, batch 200/20 = 10 Jobs,
	// db 50/10 = 5 StatefulSets, web 500/25 = 20: 50 workloads.
	ws, _ := Workloads(1000)
	if len(ws) != 50 {
		t.Fatalf("Workloads(1000): %d workloads, want 50", len(ws))
	}
	cache := ws[10]
	if cache.Name != "cache-0" || cache.Deployment.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname {
		t.Fatalf("ws[10] = %s, want cache-0 with hostname anti-affinity", cache.Name)
	}
}

func TestScaledDown(t *testing.T) {
	// r − round(0.3 r): 20 → 14, 25 → 17 (7.5 rounds to 8), 10 → 7, 1 → 1 (0.3 rounds to 0).
	for r, want := range map[int]int{20: 14, 25: 17, 10: 7, 1: 1} {
		if got := ScaledDown(r, 0.3); got != want {
			t.Errorf("ScaledDown(%d, 0.3) = %d, want %d", r, got, want)
		}
	}
}

func TestPercentileNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	// Nearest rank: p50 of 200 values is rank 100, p99 rank 198, max the 200th.
	d := DistOf(ds)
	if d.P50 != 100*time.Second || d.P99 != 198*time.Second || d.Max != 200*time.Second || d.N != 200 {
		t.Fatalf("DistOf(1..200 s) = %+v", d)
	}
	if Percentile(nil, 50) != 0 || DistOf(nil).String() != "—" {
		t.Fatal("an empty distribution is not zero")
	}
	if got := Percentile([]time.Duration{7}, 99); got != 7 {
		t.Fatalf("Percentile of one value = %s", got)
	}
}

func TestDiffRequests(t *testing.T) {
	before := map[string]float64{"LIST pods": 10, "POST pods": 5, "GET nodes": 3}
	after := map[string]float64{"LIST pods": 12, "POST pods": 25, "GET nodes": 3, "PATCH nodes/status": 7}
	delta, reads, writes := DiffRequests(before, after)
	if len(delta) != 3 || delta["LIST pods"] != 2 || delta["POST pods"] != 20 || delta["PATCH nodes/status"] != 7 {
		t.Fatalf("delta = %v", delta)
	}
	if reads != 2 || writes != 27 {
		t.Fatalf("reads, writes = %v, %v; want 2, 27", reads, writes)
	}
}

func TestParseVmHWM(t *testing.T) {
	got, err := parseVmHWM(strings.NewReader("Name:\tx\nVmPeak:\t 9 kB\nVmHWM:\t  2048 kB\n"))
	if err != nil || got != 2048*1024 {
		t.Fatalf("parseVmHWM = %d, %v; want 2 MiB", got, err)
	}
	if _, err := parseVmHWM(strings.NewReader("VmHWM: 12 MB\n")); err == nil || !strings.Contains(err.Error(), "VmHWM") {
		t.Fatalf("a unit other than kB: error %v", err)
	}
	if _, err := parseVmHWM(strings.NewReader("Name: x\n")); err == nil {
		t.Fatal("no VmHWM line: no error")
	}
}

// TestAgentMetricsScrape serves a Prometheus registry holding the snapshot codec metrics as
// the agent's /metrics does and reads it back as the harness does: summed over the series,
// with the smallest bucket bound above every observation.
func TestAgentMetricsScrape(t *testing.T) {
	rec := prom.NewRecorder()
	rec.Record(telemetry.SnapshotSize, 3000, events.TypeSnapshot)
	rec.Record(telemetry.SnapshotSize, 70000, events.TypePodsPending)
	rec.Record(telemetry.SnapshotEncode, 0.002, events.TypeSnapshot)
	rec.Record(telemetry.SnapshotEncode, 0.004, events.TypePodsPending)
	srv := httptest.NewServer((&prom.Server{Recorder: rec}).Handler())
	defer srv.Close()
	fams, err := (&agentProc{addr: strings.TrimPrefix(srv.URL, "http://")}).metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 70,000 bytes: above 2^16 = 65,536, at or below 2^17 = 131,072.
	if got, want := histogramTotal(fams, telemetry.SnapshotSize), (HistogramTotal{Count: 2, Sum: 73000, MaxLE: 131072}); got != want {
		t.Errorf("size: %+v, want %+v", got, want)
	}
	// 2 ms and 4 ms: mean 3 ms; every one at or below the 5 ms bound (2.5 ms holds only one).
	enc := histogramTotal(fams, telemetry.SnapshotEncode)
	if enc.Count != 2 || math.Abs(enc.Mean()-0.003) > 1e-12 || enc.MaxLE != 0.005 {
		t.Errorf("encode: %+v (mean %g), want 2 observations, mean 0.003 s, max at or below 0.005 s", enc, enc.Mean())
	}
	if got := histogramTotal(fams, telemetry.SnapshotDecode); got != (HistogramTotal{}) {
		t.Errorf("decode, never recorded: %+v, want zero", got)
	}
	// Above the last bound (128 MiB): no finite bound holds it.
	rec.Record(telemetry.SnapshotSize, 200<<20, events.TypeSnapshot)
	gathered, err := rec.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if got := histogramTotal(byName(gathered), telemetry.SnapshotSize); got.Count != 3 || !math.IsInf(got.MaxLE, 1) {
		t.Errorf("size with one above 128 MiB: %+v, want 3 observations, MaxLE +Inf", got)
	}
}

func TestPrintTableRatios(t *testing.T) {
	res := []Result{
		{Side: sideDovetail, N: 10, AllBound: 10 * time.Second, Nodes: 4, PricePerHour: 2,
			PeakRSS: 80 << 20, PeakRSSWhat: "agent process", RestPeakRSS: 300 << 20, RestPeakRSSWhat: "harness process"},
		{Side: sideKarpenter, N: 10, AllBound: 30 * time.Second, Nodes: 5, PricePerHour: 3, PeakRSS: 140 << 20, PeakRSSWhat: "Karpenter controller process"},
	}
	var buf bytes.Buffer
	PrintTable(&buf, res)
	out := buf.String()
	// Karpenter / Dovetail: 30 s / 10 s = 3, 5 / 4 nodes = 1.25, 3 / 2 USD/h = 1.5, 140 / 80
	// MiB = 1.75 (the agent against the controller; the rest of Dovetail's side has no ratio).
	for _, want := range []string{"×3.00", "×1.25", "×1.50", "×1.75", "N = 10 pods", "80 (agent process)", "140 (Karpenter controller process)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestKWOKInstanceTypes checks the generated file reads back as Karpenter's own kwok
// InstanceTypeOptions, with the allocatable + kube-reserved rule and the catalog's prices.
func TestKWOKInstanceTypes(t *testing.T) {
	it := &catalog.InstanceType{
		Name:   "m7i.large",
		Labels: map[string]string{corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", "karpenter.k8s.aws/instance-category": "m"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods: resource.MustParse("29")},
		Overhead: catalog.Overhead{KubeReserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("70m"),
			corev1.ResourceMemory: resource.MustParse("1Gi")}},
		Offerings: []catalog.Offering{
			{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.1008, Available: true},
			{Zone: "us-east-1a", CapacityType: "spot", PricePerHour: 0.04, Available: true},
			{Zone: "us-east-1b", CapacityType: "on-demand", PricePerHour: 0.1008, Available: false},
		},
	}
	other := &catalog.InstanceType{Name: "t3.large", Labels: map[string]string{corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
		"karpenter.k8s.aws/instance-category": "t"}, Capacity: it.Capacity,
		Offerings: []catalog.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.08, Available: true}}}
	cat := catalog.New("us-east-1", []*catalog.InstanceType{it, other})
	pool := &apisv1.NodePool{}
	pool.Name = "default"
	pool.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
	}
	data, err := KWOKInstanceTypes(cat, pool, catalog.NodeSettings{})
	if err != nil {
		t.Fatal(err)
	}
	var got []kwok.InstanceTypeOptions
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("the file does not read as kwok.InstanceTypeOptions: %v", err)
	}
	// t3 fails the category requirement; spot fails the capacity type; the unavailable b offering
	// is left out.
	if len(got) != 1 || got[0].Name != "m7i.large" || len(got[0].Offerings) != 1 {
		t.Fatalf("got %+v, want m7i.large with its one available on-demand offering", got)
	}
	o := got[0]
	// Allocatable 2000m − 70m = 1930m, + 100m kwok kube-reserved = 2030m; 8Gi − 1Gi + 10Mi = 7178Mi.
	if cpu := o.Resources[corev1.ResourceCPU]; cpu.MilliValue() != 2030 {
		t.Errorf("cpu = %s, want 2030m", cpu.String())
	}
	if mem := o.Resources[corev1.ResourceMemory]; mem.Value() != 7178<<20 {
		t.Errorf("memory = %s, want 7178Mi", mem.String())
	}
	if pods := o.Resources[corev1.ResourcePods]; pods.Value() != 29 {
		t.Errorf("pods = %s, want 29", pods.String())
	}
	if o.Architecture != "amd64" || len(o.OperatingSystems) != 1 || o.OperatingSystems[0] != corev1.Linux {
		t.Errorf("arch %q os %v", o.Architecture, o.OperatingSystems)
	}
	off := o.Offerings[0]
	if off.Price != 0.1008 || len(off.Requirements) != 2 || off.Requirements[0].Values[0] != "on-demand" || off.Requirements[1].Values[0] != "us-east-1a" {
		t.Errorf("offering = %+v", off)
	}

	pool.Spec.Template.Spec.Requirements[0].Values = []string{"x"}
	if _, err := KWOKInstanceTypes(cat, pool, catalog.NodeSettings{}); err == nil || !strings.Contains(err.Error(), "NodePool default") {
		t.Fatalf("no type matches: error %v, want one naming the NodePool", err)
	}
}

func TestTemplatePodsFollowTheWorkloads(t *testing.T) {
	ws, err := Workloads(200)
	if err != nil {
		t.Fatal(err)
	}
	pods := TemplatePods(ws, func(w Workload) int { return ScaledDown(w.Replicas, 0.3) })
	// 200 pods: api 2×20, cache 1×10, batch 2×20, db 1×10, web 4×25; cut by 30 %: 20−6=14,
	// 10−3=7, 25−8=17, so 2×14 + 7 + 2×14 + 7 + 4×17 = 138.
	if len(pods) != 138 {
		t.Fatalf("%d pods, want 138", len(pods))
	}
	for _, p := range pods {
		if p.Namespace != Namespace || p.Spec.NodeName != "" || len(p.Spec.Tolerations) != 0 {
			t.Fatalf("pod %s/%s on %q with tolerations %v, want pending in %s with none", p.Namespace, p.Name, p.Spec.NodeName, p.Spec.Tolerations, Namespace)
		}
	}
	if c := pods[0].Spec.Containers[0].Resources.Requests.Cpu().String(); pods[0].Name != "api-0-0" || c != "1" {
		t.Fatalf("first pod %s requests %s CPU, want api-0-0 with 1", pods[0].Name, c)
	}
}

func TestTimelineSteps(t *testing.T) {
	r := newRecorder()
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	r.claimSeen["nc-a"], r.claimNode["nc-a"] = at(10), "node-a"
	r.nodeAdded["node-a"], r.nodeReady["node-a"] = at(12), at(12.5)
	r.nodeRegistered["node-a"], r.nodeOpen["node-a"], r.nodeInit["node-a"] = at(14), at(20), at(15)
	for i, b := range []float64{16, 18} {
		name := fmt.Sprintf("p%d", i)
		r.podSeen[name], r.podBound[name], r.podNode[name], r.podNominated[name] = at(1), at(b), "node-a", at(13)
	}
	rows, stages := r.Timeline(t0)
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	want := NodeTimeline{Node: "node-a", Claim: 10 * time.Second, Added: 12 * time.Second, Ready: 500 * time.Millisecond,
		Registered: 2 * time.Second, Open: 8 * time.Second, Initialized: 3 * time.Second, FirstBound: 4 * time.Second, LastBound: 6 * time.Second, Pods: 2}
	if rows[0] != want {
		t.Fatalf("row %+v, want %+v", rows[0], want)
	}
	// Steps from Ready (12.5 s): registered 1.5, open 7.5, initialized 2.5, first bound 3.5;
	// pods Ready → bound 3.5 and 5.5, nominated (13) → bound 3 and 5.
	got := map[string]time.Duration{}
	for _, s := range stages {
		got[s.Name] = s.Dist.Max
	}
	for name, d := range map[string]time.Duration{"node created → Ready": 500 * time.Millisecond, "node Ready → unregistered taint gone": 1500 * time.Millisecond,
		"node Ready → no NoSchedule/NoExecute taint": 7500 * time.Millisecond, "node Ready → initialized label": 2500 * time.Millisecond,
		"node Ready → its first pod bound": 3500 * time.Millisecond, "pod: its node Ready → bound": 5500 * time.Millisecond, "pod: nominated → bound": 5 * time.Second} {
		if got[name] != d {
			t.Errorf("%s: max %s, want %s", name, got[name], d)
		}
	}
}

// The Jobs ignore a pod failure caused by a disruption (a consolidation's eviction), the rule
// Kubernetes documents for it (podFailurePolicy Ignore on DisruptionTarget, restartPolicy
// Never): without it a scale-down's drains counted against the backoffLimit and the Job
// controller failed the Job and deleted its pods.
func TestJobsIgnoreDisruptions(t *testing.T) {
	ws, err := Workloads(1000)
	if err != nil {
		t.Fatal(err)
	}
	jobs := 0
	for _, w := range ws {
		if w.Job == nil {
			continue
		}
		jobs++
		p := w.Job.Spec.PodFailurePolicy
		if w.Job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || p == nil || len(p.Rules) != 1 ||
			p.Rules[0].Action != batchv1.PodFailurePolicyActionIgnore || len(p.Rules[0].OnPodConditions) != 1 ||
			p.Rules[0].OnPodConditions[0].Type != corev1.DisruptionTarget || p.Rules[0].OnPodConditions[0].Status != corev1.ConditionTrue {
			t.Errorf("Job %s: restartPolicy %s, podFailurePolicy %+v; want Never and Ignore on DisruptionTarget=True", w.Name, w.Job.Spec.Template.Spec.RestartPolicy, p)
		}
	}
	if jobs != 10 {
		t.Errorf("%d Jobs at N = 1,000, want 10 (batch: 200 pods, 20 each)", jobs)
	}
}

// A StatefulSet pod evicted in the scale-down comes back under its name with a new UID: it is a
// new pod, seen and then bound, not the deleted one (the scale-down never settled: 13 recreated
// pods stayed counted as deleted, 677 seen of 690).
func TestRecreatedPodUnderTheSameNameCounts(t *testing.T) {
	r := newRecorder()
	at := func(s int) time.Time { return time.Date(2026, 12, 7, 6, 0, s, 0, time.UTC) }
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0-6", UID: "uid-1"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	r.pod(old, at(1))
	gone := old.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{Time: at(2)}
	r.pod(gone, at(2))
	if seen, bound := r.Progress(); seen != 0 || bound != 0 {
		t.Fatalf("after the eviction: seen %d bound %d, want 0 0", seen, bound)
	}
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0-6", UID: "uid-2"}}
	r.pod(fresh, at(3))
	if seen, bound := r.Progress(); seen != 1 || bound != 0 {
		t.Fatalf("recreated, pending: seen %d bound %d, want 1 0", seen, bound)
	}
	fresh.Spec.NodeName = "n2"
	r.pod(fresh, at(5))
	if seen, bound := r.Progress(); seen != 1 || bound != 1 || r.podNode["db-0-6"] != "n2" || !r.podSeen["db-0-6"].Equal(at(3)) {
		t.Fatalf("recreated, bound: seen %d bound %d node %s seen at %s; want 1 1 n2 %s", seen, bound, r.podNode["db-0-6"], r.podSeen["db-0-6"], at(3))
	}
}

func TestSchedulerCounts(t *testing.T) {
	// kube-scheduler's exposition, cut to the families SchedulerCounts reads (names and labels of
	// v1.34's pkg/scheduler/metrics).
	const text = `# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 900
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 250
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="scheduled",le="+Inf"} 900
scheduler_scheduling_attempt_duration_seconds_sum{profile="default-scheduler",result="scheduled"} 4.5
scheduler_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="scheduled"} 900
# TYPE scheduler_framework_extension_point_duration_seconds histogram
scheduler_framework_extension_point_duration_seconds_bucket{extension_point="Filter",profile="default-scheduler",status="Success",le="+Inf"} 900
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",profile="default-scheduler",status="Success"} 2
scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",profile="default-scheduler",status="Success"} 900
scheduler_framework_extension_point_duration_seconds_bucket{extension_point="Filter",profile="default-scheduler",status="Unschedulable",le="+Inf"} 250
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",profile="default-scheduler",status="Unschedulable"} 1.25
scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",profile="default-scheduler",status="Unschedulable"} 250
# TYPE scheduler_queue_incoming_pods_total counter
scheduler_queue_incoming_pods_total{event="NodeAdd",queue="active"} 30
scheduler_queue_incoming_pods_total{event="NodeAdd",queue="backoff"} 12
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	got := schedulerCounts(fams)
	want := map[string]float64{
		"attempts scheduled": 900, "attempts unschedulable": 250,
		"attempt seconds scheduled": 4.5,
		"Filter seconds":            3.25, // 2 + 1.25 over the status label
		"queued by NodeAdd":         42,   // 30 + 12 over the queue label
	}
	if !maps.Equal(got, want) {
		t.Errorf("schedulerCounts = %v, want %v", got, want)
	}
}

// TestResultWithAnInfiniteBucketCrossesProcesses: a result whose histogram's largest observation
// fell above the last bucket (MaxLE +Inf, as at N = 10,000) goes through the JSON the -one child
// writes and comes back the same.
func TestResultWithAnInfiniteBucketCrossesProcesses(t *testing.T) {
	in := Result{Side: sideDovetail, N: 10000, AgentSnapshotEncode: HistogramTotal{Count: 3, Sum: 4.5, MaxLE: math.Inf(1)},
		AgentSnapshotSize: HistogramTotal{Count: 3, Sum: 1 << 20, MaxLE: 524288}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Result
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.AgentSnapshotEncode.Count != 3 || !math.IsInf(out.AgentSnapshotEncode.MaxLE, 1) || out.AgentSnapshotSize != in.AgentSnapshotSize {
		t.Errorf("after the round trip: %+v, %+v", out.AgentSnapshotEncode, out.AgentSnapshotSize)
	}
}
