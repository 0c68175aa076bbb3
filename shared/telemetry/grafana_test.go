package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboardReadsDefinedMetrics: every metric name a query of the cost dashboard reads
// is one this package defines (Dovetail's own, or Karpenter's names it keeps), and the ledger's
// rates are all on it.
func TestGrafanaDashboardReadsDefinedMetrics(t *testing.T) {
	data, err := os.ReadFile("../../infra/grafana/dovetail-cost.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	defined := map[string]bool{}
	for _, m := range All {
		defined[m.Name] = true
	}
	name := regexp.MustCompile(`\b(?:karpenter|dovetail)_[a-z_]+\b`)
	read := map[string]bool{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				read[n] = true
				if !defined[n] {
					t.Errorf("panel %q reads %s, which no backend exports", p.Title, n)
				}
			}
		}
	}
	for _, m := range []*Metric{NodePoolPrice, NodePoolStaticBaseline, NodePoolWaste, ConsolidationSavings} {
		if !read[m.Name] {
			t.Errorf("the dashboard does not read %s", m.Name)
		}
	}
	if !strings.Contains(string(data), "karpenter_nodepools_usage") {
		t.Error("the dashboard lost Karpenter's usage panel")
	}
}
