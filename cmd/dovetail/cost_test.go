package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// TestCostFromLogFile: `dovetail cost LOGFILE --until ... --html FILE` over a function's log (slog
// JSON, one other log line among the records). The pool costs 1.152 $/h until a consolidation at
// 12:00 takes it to 0.384 $/h; until 13:30 the spend is 0.384 × 1.5 = 0.576 USD, no consolidation
// 1.152 × 1.5 = 1.728 (saving 1.152), and the static baseline 0.384 × 1.5 = 0.576 (saving 0).
func TestCostFromLogFile(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	lg := slog.New(slog.NewJSONHandler(&log, nil))
	lg.Info("consolidation decided")
	noon := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	telemetry.LogAudit(lg, telemetry.Audit{Action: telemetry.ActionDelete, Function: "consolidate", Decision: "d1", Rule: "consolidation/multi", Time: noon,
		NodePools: []telemetry.PoolCost{{NodePool: "default", PriceBefore: 1.152, PriceAfter: 0.384, Consolidation: true, StaticBaseline: 0.384,
			AllocatableMilliCPU: 3920, RequestedMilliCPU: 2100, AllocatableMiB: 14000, RequestedMiB: 3072}}})
	logPath, htmlPath := filepath.Join(dir, "consolidate.log"), filepath.Join(dir, "cost.html")
	if err := os.WriteFile(logPath, log.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newCostCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{logPath, "--until", "2026-12-06T13:30:00Z", "--html", htmlPath})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var total string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "total") {
			total = strings.Join(strings.Fields(l), " ")
		}
	}
	if want := "total 0.5760 0.5760 0.0000 1.7280 1.1520"; !strings.HasPrefix(total, want) {
		t.Errorf("total row %q, want it to start %q\n%s", total, want, out.String())
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `id="total-spend">0.5760<`) {
		t.Errorf("the HTML report lacks the spend")
	}
	for _, bad := range [][]string{{"--until", "noon"}, {"--by", "week"}} {
		c := newCostCommand()
		c.SetOut(&out)
		c.SetErr(&out)
		c.SetArgs(append([]string{logPath}, bad...))
		if err := c.Execute(); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v, want an error naming %s", bad, err, bad[0])
		}
	}
}

// TestCostShowsCommitmentUtilisation: the launches' records carry the commitments' utilisation
// as their plans counted it; `dovetail cost` shows the latest (the 12:30 launch: the Savings Plan
// covers 1.00 of its 1.00 $/h, the reservation 2 of its 2 m6i.xlarge), not the 12:00 one, and a
// later record without commitments (a consolidation) does not erase it.
func TestCostShowsCommitmentUtilisation(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	lg := slog.New(slog.NewJSONHandler(&log, nil))
	at := func(h, m int) time.Time { return time.Date(2026, 12, 6, h, m, 0, 0, time.UTC) }
	pool := func(before, after float64) []telemetry.PoolCost {
		return []telemetry.PoolCost{{NodePool: "default", PriceBefore: before, PriceAfter: after}}
	}
	telemetry.LogAudit(lg, telemetry.Audit{Action: telemetry.ActionLaunch, Function: "provision", Decision: "l1", Time: at(12, 0), NodePools: pool(0, 0.5),
		Commitments: []telemetry.CommitmentUse{{Name: "compute", Kind: "SavingsPlan", CommittedPerHour: 1, UsedPerHour: 0.5, Utilisation: 0.5},
			{Name: "ri-m6i", Kind: "Reservation", Count: 2, Used: 1, Utilisation: 0.5}}})
	telemetry.LogAudit(lg, telemetry.Audit{Action: telemetry.ActionLaunch, Function: "provision", Decision: "l2", Time: at(12, 30), NodePools: pool(0.5, 1),
		Commitments: []telemetry.CommitmentUse{{Name: "compute", Kind: "SavingsPlan", CommittedPerHour: 1, UsedPerHour: 1, Utilisation: 1, SavedPerHour: 0.1},
			{Name: "ri-m6i", Kind: "Reservation", Count: 2, Used: 2, Utilisation: 1, SavedPerHour: 0.2}}})
	telemetry.LogAudit(lg, telemetry.Audit{Action: telemetry.ActionDelete, Function: "consolidate", Decision: "c1", Time: at(13, 0),
		NodePools: []telemetry.PoolCost{{NodePool: "default", PriceBefore: 1, PriceAfter: 0.8, Consolidation: true}}})
	logPath, htmlPath := filepath.Join(dir, "functions.log"), filepath.Join(dir, "cost.html")
	if err := os.WriteFile(logPath, log.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newCostCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{logPath, "--html", htmlPath})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"commitments as the decision of 2026-12-06T12:30:00Z counted them:",
		"Savings Plan compute: 1.0000 of 1.0000 USD/h used (100.0 %)",
		"Reservation ri-m6i: 2 of 2 instances used (100.0 %)",
		// Spend at list: 0.5 $/h 12:00–12:30, 1 $/h 12:30–13:00: 0.75. The 12:30 record saves
		// 0.1 + 0.2 = 0.3 $/h until the last record (13:00): 0.15 USD; 0.75 − 0.15 = 0.60.
		"spend at effective rates: 0.6000 USD (0.7500 at list less 0.1500 the commitments saved)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q\n%s", want, out.String())
		}
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-name="compute"`, `data-name="ri-m6i"`, `<td class="utilisation">100.0%</td>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the HTML report lacks %s", want)
		}
	}
}
