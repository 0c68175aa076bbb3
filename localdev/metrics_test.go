package localdev

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	series, err := prom.ParseText(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing /metrics of %s: %v", addr, err)
	}
	return series
}

// sum adds the values of the series of name whose labels contain every one of match
// (`label="value"` strings).
func sum(series map[string]float64, name string, match ...string) float64 {
	var s float64
	for k, v := range series {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(k, m)
		}
		if ok {
			s += v
		}
	}
	return s
}

// TestSeedScenarioMetrics runs the seed scenario with the agent's and the functions' HTTP
// servers on, then scrapes both /metrics: Karpenter-named series carry the plan's numbers.
// NodeClaims created (agent, where the object is created) and Nodes created (agent, where
// registration lifts karpenter.sh/unregistered) equal the NodeClaims the provision decisions
// launched; the NodePool's usage (lifecycle function) counts them as nodes; every launch went
// through the cloud provider's Create (functions).
func TestSeedScenarioMetrics(t *testing.T) {
	var mu sync.Mutex
	launched := 0
	launchedPrice := 0.0
	var logs bytes.Buffer
	logw := &syncWriter{w: &logs}
	env, out := startEnv(t, Options{AgentHTTPAddr: "127.0.0.1:0", FunctionsHTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnDecision: func(d provision.Decision) {
			mu.Lock()
			defer mu.Unlock()
			launched += len(d.Launched)
			for _, l := range d.Launched {
				launchedPrice += catalog.MustAWS().DearestPrice(l.Instance.InstanceType, l.Instance.Zone, l.Instance.CapacityType)
			}
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := env.WaitNodeClaimsReady(ctx); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mu.Lock()
	n := float64(launched)
	mu.Unlock()
	if n == 0 {
		t.Fatalf("the seed launched nothing:\n%s", out)
	}
	for _, addr := range []string{env.AgentAddr, env.FunctionsAddr} {
		for _, p := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get("http://" + addr + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s%s = %d, want 200", addr, p, resp.StatusCode)
			}
		}
	}
	// The lifecycle publishes NodePool status from snapshots after the launches: wait until the
	// functions' view has caught up with the plan, bounded.
	var agent, fns map[string]float64
	for deadline := time.Now().Add(30 * time.Second); ; {
		agent, fns = scrape(t, env.AgentAddr), scrape(t, env.FunctionsAddr)
		if (sum(agent, "karpenter_nodes_created_total") == n && sum(fns, "karpenter_nodepools_usage", `resource_type="nodes"`) == n) ||
			time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	checks := []struct {
		what      string
		got, want float64
	}{
		{"agent karpenter_nodeclaims_created_total{reason=provisioned,nodepool=default}",
			agent[`karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",reason="provisioned"}`], n},
		{"agent karpenter_nodes_created_total{nodepool=default} over zones",
			sum(agent, "karpenter_nodes_created_total", `nodepool="default"`), n},
		{"functions karpenter_nodepools_usage{resource_type=nodes,nodepool=default}",
			fns[`karpenter_nodepools_usage{nodepool="default",resource_type="nodes"}`], n},
		{"functions karpenter_cloudprovider_duration_seconds_count{controller=provisioner,method=Create,provider=fake}",
			fns[`karpenter_cloudprovider_duration_seconds_count{controller="provisioner",method="Create",provider="fake"}`], n},
		{"functions karpenter_cloudprovider_errors_total", sum(fns, "karpenter_cloudprovider_errors_total"), 0},
		{"functions dovetail_dead_lettered_messages_total", sum(fns, "dovetail_dead_lettered_messages_total"), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %g, want %g", c.what, c.got, c.want)
		}
	}
	// Present with plausible values (how many solves and pods depends on the batching).
	for _, k := range []string{
		`karpenter_scheduler_scheduling_duration_seconds_count{controller="provisioner"}`,
		`dovetail_handler_duration_seconds_count{function="provision",result="ok"}`,
		`dovetail_queue_message_age_seconds_count{function="provision"}`,
		`dovetail_plan_price_usd_per_hour{controller="provisioner"}`,
		`dovetail_plan_lower_bound_usd_per_hour{controller="provisioner"}`,
	} {
		if fns[k] <= 0 {
			t.Errorf("functions %s = %g, want > 0", k, fns[k])
		}
	}
	if _, ok := fns[`karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id=""}`]; !ok {
		t.Errorf("functions: no karpenter_scheduler_queue_depth{controller=provisioner}")
	}
	// Every launch decision left one audit record: its NodeClaims are the launches, its price
	// grew by theirs, and it carries the plan's lower bound and the static group's price for
	// the same pods (m5.2xlarge on demand, 0.384 USD/h each).
	logw.mu.Lock()
	raw := append([]byte(nil), logs.Bytes()...)
	logw.mu.Unlock()
	claims, grew := 0, 0.0
	if err := telemetry.ReadAudit(bytes.NewReader(raw), func(a telemetry.Audit) error {
		if a.Action != telemetry.ActionLaunch || a.Function != provision.Component {
			return nil
		}
		claims += len(a.NodeClaims)
		grew += a.PriceAfter - a.PriceBefore
		if a.LowerBound <= 0 || a.StaticBaseline == nil || a.StaticBaseline.InstanceType != "m5.2xlarge" ||
			math.Abs(a.StaticBaseline.PricePerHour-0.384*float64(a.StaticBaseline.Nodes)) > 1e-9 || len(a.Inputs) == 0 {
			t.Errorf("launch audit record %+v: want a lower bound, pods as inputs and an m5.2xlarge baseline at 0.384 USD/h a node", a)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	wantPrice := launchedPrice
	mu.Unlock()
	if float64(claims) != n || math.Abs(grew-wantPrice) > 1e-9 {
		t.Errorf("audit records name %d NodeClaims adding %.4f USD/h, want %g adding %.4f", claims, grew, n, wantPrice)
	}
	// The same records are on the cluster's audit subject (dovetail audit --nats reads them).
	nc, err := qnats.Connect(env.NATSURL, "metrics-test", env.NATS.ClientOptions(natsauth.RoleAudit)...) // as dovetail audit --nats
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	onSubject := 0
	if err := qnats.ReadAudit(ctx, nc, env.Options.Cluster, false, func(a telemetry.Audit) error {
		if a.Action == telemetry.ActionLaunch && a.Function == provision.Component {
			onSubject += len(a.NodeClaims)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if float64(onSubject) != n {
		t.Errorf("the audit subject's launch records name %d NodeClaims, want %g", onSubject, n)
	}
	if sum(agent, "dovetail_agent_commands_total", `kind="CreateNodeClaim"`, `result="applied"`) < n {
		t.Errorf("agent applied %g CreateNodeClaim commands, want >= %g", sum(agent, "dovetail_agent_commands_total", `kind="CreateNodeClaim"`), n)
	}
}
