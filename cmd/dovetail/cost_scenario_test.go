package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// TestCostOfConsolidationScenarioFromNATS is issue 30's acceptance for the cost ledger: the
// consolidation scenario (`dovetail dev --scenario consolidation`) runs with the consolidate
// function's logger publishing its decision audit records to a real embedded JetStream server
// as a NATS worker does (telemetry.AuditHandler + qnats.PublishAudit, shared/runtime), and
// `dovetail cost --nats` reads them back; its table and its --html report equal a hand
// calculation from the scenario's own setup.
//
// Prices come from the embedded AWS catalog by name, not from the records: m5.xlarge on demand
// in us-east-1a is 0.192 $/h (six of them: 1.152 $/h), the static baseline m5.2xlarge
// (provisioning.BaselineInstanceType) 0.384 $/h, and each replacement's type (checked against
// the instance the fake cloud ran for its NodeClaim) likewise. The pool's $/h after a decision is
// the $/h before, less the m5.xlarge it deletes, plus the replacement it launches (the steps
// below). The records give only the times: spend is each rate × the hours it held, from the first record to --until
// (one hour after the last); "no consolidation" pays 1.152 $/h throughout; the static group
// holds the 6 remaining 700m/1Gi pods on one m5.2xlarge (4.2 of its 8 vCPU), priced from the
// first record on (before it no record had priced it).
func TestCostOfConsolidationScenarioFromNATS(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: scenarios.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := qnats.Connect(url, "cost-test", srv.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	if _, err := qnats.EnsureStream(ctx, nc, qnats.StreamConfig{Cluster: scenarios.Cluster, Memory: true}); err != nil {
		t.Fatal(err)
	}
	pub, err := qnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	var logs, out bytes.Buffer
	var pubErrs []error
	log := slog.New(telemetry.AuditHandler{Next: slog.NewJSONHandler(&logs, nil),
		Publish: qnats.PublishAudit(pub, scenarios.Cluster, func(err error) { pubErrs = append(pubErrs, err) })})
	res, err := scenarios.ConsolidationLogged(ctx, &out, log)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(pubErrs) > 0 {
		t.Fatalf("publishing the audit records: %v", pubErrs)
	}
	// The log stream's copy of the records, for their times and the nodes each names.
	var recs []telemetry.Audit
	if err := telemetry.ReadAudit(&logs, func(a telemetry.Audit) error { recs = append(recs, a); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("the scenario decided nothing\n%s", out.String())
	}

	cat := catalog.MustAWS()
	offering := func(instanceType, zone, capacityType string) float64 {
		t.Helper()
		it := cat.Get(instanceType)
		if it == nil {
			t.Fatalf("instance type %s: not in the embedded catalog", instanceType)
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == capacityType {
				return o.PricePerHour
			}
		}
		t.Fatalf("%s %s %s: no such offering in the embedded catalog", instanceType, zone, capacityType)
		return 0
	}
	m5xlarge := offering("m5.xlarge", "us-east-1a", apisv1.CapacityTypeOnDemand)
	m52xlarge := offering(provisioning.BaselineInstanceType, "us-east-1a", apisv1.CapacityTypeOnDemand)
	if m5xlarge != 0.192 || m52xlarge != 0.384 {
		t.Fatalf("catalog: m5.xlarge %.4f, m5.2xlarge %.4f $/h; the hand calculation says 0.192 and 0.384", m5xlarge, m52xlarge)
	}
	// The scenario's decisions, worked by hand: 6 pods of 700m/1Gi on six m5.xlarge (3.92 vCPU
	// allocatable each, 5 pods at most) after the scale-down.
	//   1. delete three m5.xlarge (their pods fit the rest): 1.152 − 3 × 0.192           = 0.576 $/h
	//   2. replace two m5.xlarge by one c7a.medium:          0.576 − 2 × 0.192 + 0.05132 = 0.24332 $/h
	//   3. replace the last m5.xlarge by one c6a.xlarge:     0.24332 − 0.192 + 0.153     = 0.20432 $/h
	// With the decisions 90 s apart (the records' times) and --until an hour after the last:
	// spend 0.576 × 0.025 + 0.24332 × 0.025 + 0.20432 × 1 = 0.22480 USD, no consolidation
	// 1.152 × 1.05 = 1.2096, static baseline 0.384 × 1.05 = 0.4032.
	// (c7a.medium 0.05132 and c6a.xlarge 0.153 $/h on demand in us-east-1a, embedded catalog).
	// The instance type each NodeClaim launched as is the fake cloud's, not the record's.
	steps := []struct {
		removed  int    // m5.xlarge nodes the decision deletes
		launched string // the replacement's instance type ("" none)
	}{{3, ""}, {2, "c7a.medium"}, {1, "c6a.xlarge"}}
	launchedAs := map[string]string{} // NodeClaim → instance type
	seeds := map[string]bool{}        // the six m5.xlarge the scenario starts with
	for _, r := range res.Instances {
		launchedAs[r.Tags[apisv1.TagNodeClaim]] = r.InstanceType
		if strings.HasPrefix(r.Tags[apisv1.TagNodeClaim], "node-") && r.InstanceType == "m5.xlarge" && r.Zone == "us-east-1a" && r.CapacityType == apisv1.CapacityTypeOnDemand {
			seeds[r.Tags[apisv1.TagNodeClaim]] = true
		}
	}
	if len(seeds) != 6 {
		t.Fatalf("%d seed m5.xlarge in the fake cloud, want 6", len(seeds))
	}
	if len(recs) != len(steps) {
		t.Fatalf("%d decisions, want %d (the hand calculation below)\n%s", len(recs), len(steps), out.String())
	}

	before := 6 * m5xlarge // 1.152 $/h
	rate := before
	var spend, noConsolidation float64
	at := recs[0].Time
	for i, a := range recs {
		h := a.Time.Sub(at).Hours()
		spend += rate * h
		noConsolidation += before * h
		at = a.Time
		for _, n := range a.Nodes {
			if !seeds[n] {
				t.Errorf("decision %d deletes %s, not one of the six m5.xlarge", i+1, n)
			}
		}
		if len(a.Nodes) != steps[i].removed {
			t.Errorf("decision %d deletes %v, want %d m5.xlarge", i+1, a.Nodes, steps[i].removed)
		}
		rate -= float64(steps[i].removed) * m5xlarge
		var launched []string
		for _, c := range a.NodeClaims {
			launched = append(launched, launchedAs[c])
		}
		if want := steps[i].launched; (want == "" && len(launched) != 0) || (want != "" && (len(launched) != 1 || launched[0] != want)) {
			t.Errorf("decision %d launched %v (%v), want %q", i+1, a.NodeClaims, launched, want)
		}
		if steps[i].launched != "" {
			rate += offering(steps[i].launched, "us-east-1a", apisv1.CapacityTypeOnDemand)
		}
		t.Logf("%s decision %d: -%v +%v: %.5f $/h", a.Time.Format(time.RFC3339), i+1, a.Nodes, launched, rate)
	}
	if math.Abs(rate-0.20432) > 1e-9 {
		t.Errorf("$/h after the last decision %.5f, want 0.20432 (the comment's hand calculation)", rate)
	}
	until := recs[len(recs)-1].Time.Add(time.Hour)
	h := until.Sub(at).Hours()
	spend += rate * h
	noConsolidation += before * h
	// The static group is priced from the first record on, over the whole ledger, so its saving
	// is against all of the spend.
	baseline := m52xlarge * until.Sub(recs[0].Time).Hours()
	if math.Abs(rate-res.After) > 1e-9 {
		t.Errorf("hand-computed $/h after the last decision %.4f, the scenario's nodes cost %.4f", rate, res.After)
	}
	if !(spend < noConsolidation) {
		t.Errorf("spend %.4f is not below no consolidation %.4f: the scenario saved nothing", spend, noConsolidation)
	}

	files, err := srv.WriteClientFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	htmlPath := filepath.Join(t.TempDir(), "cost.html")
	code, table, stderr := runCLI(t, "cost", "--nats", url, "--cluster", scenarios.Cluster, "--until", until.UTC().Format(time.RFC3339), "--html", htmlPath,
		"--nats-nkey-seed", files.Seeds[natsauth.RoleAudit], "--nats-tls-ca", files.CA)
	if code != 0 {
		t.Fatalf("dovetail cost --nats: exit %d: %s", code, stderr)
	}
	// The table prints 4 decimals: compare each column with the hand calculation rounded so.
	want := map[string]float64{"spend": spend, "static baseline": baseline, "saving vs static": baseline - spend,
		"no consolidation": noConsolidation, "saving vs no consolidation": noConsolidation - spend}
	cols := []string{"spend", "static baseline", "saving vs static", "no consolidation", "saving vs no consolidation"}
	var total []string
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "total" {
			total = f[1:]
		}
	}
	if len(total) < len(cols) {
		t.Fatalf("no total row in the table:\n%s", table)
	}
	for i, c := range cols {
		got, err := strconv.ParseFloat(total[i], 64)
		if err != nil {
			t.Fatalf("total row, %s: %v\n%s", c, err, table)
		}
		if w := fmt.Sprintf("%.4f", want[c]); total[i] != w {
			t.Errorf("table total %s = %.4f, want %s (hand calculation)", c, got, w)
		}
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	for id, v := range map[string]float64{"total-spend": spend, "total-baseline": baseline, "total-saving-static": baseline - spend,
		"total-noconsolidation": noConsolidation, "total-saving-noconsolidation": noConsolidation - spend} {
		if cell := fmt.Sprintf(`id="%s">%.4f<`, id, v); !strings.Contains(string(page), cell) {
			t.Errorf("the HTML report lacks %s", cell)
		}
	}
	t.Logf("spend %.4f, static baseline %.4f, no consolidation %.4f USD\n%s", spend, baseline, noConsolidation, table)
}
