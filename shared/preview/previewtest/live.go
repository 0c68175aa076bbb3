// Package previewtest holds the hand calculation of the live-cluster preview scenario, which
// both the e2e suite (the cluster built in a real control plane, e2e/livestate_test.go) and
// `make test` (its dump, cmd/dovetail/testdata/liveplan/cluster.yaml) check `dovetail plan
// --disruption` against.
package previewtest

import (
	"fmt"
	"math"
	"strings"

	"github.com/dovetail-dev/dovetail/shared/preview"
)

// LiveNodes names the scenario's nodes by the letters of the calculation.
var LiveNodes = map[string]string{
	"ip-10-0-1-10.ec2.internal": "A", "ip-10-0-1-11.ec2.internal": "B", "ip-10-0-1-12.ec2.internal": "C",
	"ip-10-0-1-13.ec2.internal": "D", "ip-10-0-1-14.ec2.internal": "E", "ip-10-0-1-15.ec2.internal": "F",
	"ip-10-0-1-16.ec2.internal": "H", "ip-10-0-2-20.ec2.internal": "G",
}

// The scenario (e2e/livestate_test.go): NodePool default (on-demand c5/m5 large and xlarge in
// us-east-1a/b, consolidateAfter 5m, the default budget: 10 % of its nodes, rounded up),
// DaemonSet node-agent (100m) on every node; allocatable CPU 3920m (xlarge), 1930m (large).
//
//	A m5.xlarge 1a 0.192  web ×3 (1000m; PDB shop/web allows 1)   free 820m
//	B m5.xlarge 1a 0.192  api (500m)                               free 3320m
//	C m5.large  1a 0.096  worker ×2 (700m), image ami-old: drifted free 430m
//	D c5.large  1b 0.085  cache (800m, zone 1b), expireAfter 1h: expired at --at
//	E m5.large  1b 0.096  report (300m, do-not-disrupt)            free 1530m
//	F m5.large  1b 0.096  db ×2 (600m; PDB shop/db allows 0)       free 630m
//	H m5.large  1a 0.096  empty
//	G t3.medium 1a spot 0.017722 (estimate), node group "system": coredns ×2
//
// Today: 0.192 + 0.192 + 0.096 + 0.085 + 0.096 + 0.096 + 0.096 + 0.017722 = 0.870722 USD/h.
//
// Round 1 (t): the drift function hands expired D to the termination path (no budget); cache
// may only go to zone 1b: first fit by node name, E (1530m free) takes it. D's deletion now
// counts against the budget (1 of 7 nodes: ceil(0.7) = 1 allowed, 1 disrupting), so drifted C
// waits for budget, and so do the consolidation candidates B, C (Underutilized) and H (Empty);
// A is held by PDB shop/web (its 3 pods would need 3 disruptions, 1 allowed), F by PDB shop/db
// (allows 0), E received cache now (consolidateAfter 5m).
// Round 2 (t+5m; 6 nodes, budget 1): C is replaced: its workers (700m each) go first fit to A
// (820m free) and B (3320m); no new node. C disrupting leaves no budget for empty H. A and B
// just received pods (consolidateAfter); E is held by its do-not-disrupt pod shop/report.
// Round 3 (t+10m; 5 nodes, budget 1): emptiness deletes H.
// Round 4 (t+15m; 4 nodes, budget 1): B's worker (700m) fits E (1930 − 100 − 300 − 800 =
// 730m free), its api (500m) fits F (630m free): B is deleted, saving 0.192.
// Round 5: nothing left to do: A (PDB web), E (do-not-disrupt), F (PDB db) stay.
//
// Converged: A 0.192 + E 0.096 + F 0.096 + G 0.017722 = 0.401722 USD/h (saves 0.469).
// Lower bound: kept E, F (held by do-not-disrupt and a PDB allowing 0) and G (no NodePool):
// 0.209722; A's pods (3 × 1000m + 700m = 3700m, 4Gi) need at least one node of 3700m after
// the DaemonSet, and the cheapest that holds them is a c5.xlarge (3820m, 0.17; two c5.large
// would cost 0.17 too and hold only 2 of the 1000m pods): 0.209722 + 0.17 = 0.379722.
var LiveRounds = [][]string{
	{"drift delete Expired D: cache->E 0.085->0"},
	{"drift delete Drifted C (NodeClaim status.imageID): worker->A worker->B 0.096->0"},
	{"consolidate delete Empty H: 0.096->0"},
	{"consolidate delete Underutilized B: api->F worker->E 0.192->0"},
	{},
}

// LiveBlocked are each round's blockers: node, function, kind and a part of the reason.
var LiveBlocked = [][]string{
	{"A consolidate PodDisruptionBudget PodDisruptionBudget shop/web allows 1 disruption(s)",
		"B consolidate DisruptionBudget budget for Underutilized allows 0 node(s) now (1 of 7 nodes already disrupting)",
		"C consolidate DisruptionBudget budget for Underutilized allows 0 node(s) now (1 of 7 nodes already disrupting)",
		"C drift DisruptionBudget budget for Drifted allows no more nodes now (1 of 7 already disrupting)",
		"E consolidate ConsolidateAfter consolidateAfter is 5m0s",
		"F consolidate PodDisruptionBudget PodDisruptionBudget shop/db allows 0 disruption(s)",
		"H consolidate DisruptionBudget budget for Empty allows 0 node(s) now (1 of 7 nodes already disrupting)"},
	{"A consolidate ConsolidateAfter consolidateAfter is 5m0s",
		"B consolidate ConsolidateAfter consolidateAfter is 5m0s",
		"E consolidate DoNotDisrupt pod shop/report-",
		"F consolidate PodDisruptionBudget PodDisruptionBudget shop/db allows 0 disruption(s)",
		"H consolidate DisruptionBudget budget for Empty allows 0 node(s) now (1 of 6 nodes already disrupting)"},
	{"A consolidate PodDisruptionBudget PodDisruptionBudget shop/web allows 1 disruption(s)",
		"E consolidate DoNotDisrupt pod shop/report-",
		"F consolidate PodDisruptionBudget PodDisruptionBudget shop/db allows 0 disruption(s)"},
	{"A consolidate PodDisruptionBudget PodDisruptionBudget shop/web allows 1 disruption(s)",
		"E consolidate DoNotDisrupt pod shop/report-",
		"F consolidate PodDisruptionBudget PodDisruptionBudget shop/db allows 0 disruption(s)"},
	{"A consolidate PodDisruptionBudget PodDisruptionBudget shop/web allows 1 disruption(s)",
		"E consolidate DoNotDisrupt pod shop/report-",
		"F consolidate PodDisruptionBudget PodDisruptionBudget shop/db allows 0 disruption(s)"},
}

// Live figures, USD per hour.
const (
	LiveToday      = 0.870722
	LiveConverged  = 0.401722
	LiveLowerBound = 0.379722
	LiveKept       = 0.209722
)

// LiveConvergedNodes are the nodes left.
var LiveConvergedNodes = []string{"A", "E", "F", "G"}

// CheckLive compares a preview of the scenario with the hand calculation and returns every
// difference (none when it matches).
func CheckLive(res *preview.Result) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > 1e-6 {
			fail("%s: %.6f, want %.6f", what, got, want)
		}
	}
	near("today", res.Today.PricePerHour, LiveToday)
	near("converged", res.Converged.PricePerHour, LiveConverged)
	near("saving", res.SavingPerHour, LiveToday-LiveConverged)
	near("lower bound", res.LowerBoundPerHour, LiveLowerBound)
	near("kept", res.KeptPerHour, LiveKept)
	if !res.Today.Estimated || !res.Converged.Estimated {
		fail("the spot node's price is an estimate: today estimated %v, converged %v", res.Today.Estimated, res.Converged.Estimated)
	}
	var left []string
	for _, n := range res.Converged.Nodes {
		left = append(left, LiveNodes[n.Name])
	}
	if strings.Join(left, " ") != strings.Join(LiveConvergedNodes, " ") {
		fail("converged nodes %v, want %v", left, LiveConvergedNodes)
	}
	if len(res.Rounds) != len(LiveRounds) {
		fail("%d rounds, want %d (%s)", len(res.Rounds), len(LiveRounds), res.Stopped)
		return bad
	}
	for i, r := range res.Rounds {
		var got []string
		for _, d := range r.Decisions {
			got = append(got, Describe(d))
		}
		if strings.Join(got, "\n") != strings.Join(LiveRounds[i], "\n") {
			fail("round %d decisions:\n  %s\nwant\n  %s", r.N, strings.Join(got, "\n  "), strings.Join(LiveRounds[i], "\n  "))
		}
		if len(r.Blocked) != len(LiveBlocked[i]) {
			fail("round %d: %d blockers, want %d: %v", r.N, len(r.Blocked), len(LiveBlocked[i]), r.Blocked)
			continue
		}
		for j, b := range r.Blocked {
			want := LiveBlocked[i][j]
			head := LiveNodes[b.Node] + " " + b.Function + " " + string(b.Kind) + " "
			if !strings.HasPrefix(want, head) || !strings.Contains(b.Reason, strings.TrimPrefix(want, head)) {
				fail("round %d blocker %d: %s%s, want %s", r.N, j, head, b.Reason, want)
			}
		}
	}
	return bad
}

// Describe renders a decision as the calculation writes it: function, action, reason, nodes
// (by letter), the drifted field, each moved pod's workload and where it goes, and the prices.
func Describe(d preview.Decision) string {
	var nodes []string
	for _, n := range d.Nodes {
		nodes = append(nodes, LiveNodes[n.Name])
	}
	s := fmt.Sprintf("%s %s %s %s", d.Function, d.Action, d.Reason, strings.Join(nodes, ","))
	if f := d.DriftedField; f != "" {
		s += " (" + strings.SplitN(f, " (", 2)[0] + ")"
	}
	s += ":"
	for _, m := range d.Moved {
		to := LiveNodes[m.To]
		if to == "" {
			to = m.To
		}
		s += " " + workload(m.Pod) + "->" + to
	}
	for _, l := range d.Launched {
		s += fmt.Sprintf(" launch %s/%s/%s", l.InstanceType, l.CapacityType, l.Zone)
	}
	return s + fmt.Sprintf(" %s->%s", num(d.PricePerHourBefore), num(d.PricePerHourAfter))
}

// workload is a Deployment pod's Deployment: "shop/cache-699574d6c-tglpb" → "cache".
func workload(pod string) string {
	name := pod[strings.IndexByte(pod, '/')+1:]
	parts := strings.Split(name, "-")
	if len(parts) > 2 {
		parts = parts[:len(parts)-2]
	}
	return strings.Join(parts, "-")
}

func num(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", v), "0"), ".")
}
