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
