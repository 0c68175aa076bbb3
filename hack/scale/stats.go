package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Dist is a latency distribution: p50, p99 and max of the observed durations.
type Dist struct {
	N             int
	P50, P99, Max time.Duration
}

// Percentile is the nearest-rank percentile of sorted (ascending): the value at rank
// ⌈p/100 × n⌉ (1-based), the definition of NIST's "nearest rank" method; 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := max(int(math.Ceil(p*float64(len(sorted))/100)), 1) // p × n first: exact for whole p
	return sorted[min(rank, len(sorted))-1]
}

// DistOf summarizes ds (it sorts ds in place).
func DistOf(ds []time.Duration) Dist {
	slices.Sort(ds)
	d := Dist{N: len(ds)}
	if len(ds) > 0 {
		d.P50, d.P99, d.Max = Percentile(ds, 50), Percentile(ds, 99), ds[len(ds)-1]
	}
	return d
}

func (d Dist) String() string {
	if d.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s / %s", secs(d.P50), secs(d.P99), secs(d.Max))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }

// Result is one side's run at one N. Durations are wall time; prices USD per hour.
type Result struct {
	Side string
	N    int
	// Per pod: its creation (first seen by the harness's watch) to the NodeClaim of the node it
	// was bound to being created, to that node being Ready, to the pod being bound.
	ToClaim, ToReady, ToBound Dist
	// Stages are the node timeline's steps (Recorder.Timeline).
	Stages                   []Stage
	AllBound                 time.Duration
	Nodes                    int
	PricePerHour, LowerBound float64
	// Requests are the API server's apiserver_request_total deltas over provisioning, by
	// "VERB resource"; Writes sums the non-read verbs.
	Requests      map[string]float64
	Reads, Writes float64
	// Scheduler are kube-scheduler's own counts over provisioning (SchedulerCounts deltas).
	Scheduler map[string]float64
	// PeakRSS is the provisioner's peak resident set (bytes; VmHWM) and what it covers:
	// Dovetail's agent process, Karpenter's controller process.
	PeakRSS     uint64
	PeakRSSWhat string
	// RestPeakRSS is the peak resident set (bytes; VmHWM) of the process that holds the rest of
	// Dovetail's side (NATS, the functions, the fake cloud, the harness; 0 for Karpenter).
	RestPeakRSS     uint64
	RestPeakRSSWhat string
	// Dovetail's own snapshot codec metrics: the agent's dovetail_agent_snapshot_size_bytes
	// (bytes) and dovetail_agent_snapshot_encode_duration_seconds, the functions'
	// dovetail_snapshot_decode_duration_seconds (seconds), each summed over its series.
	AgentSnapshotSize, AgentSnapshotEncode, FunctionSnapshotDecode HistogramTotal
	// Snapshot: the largest compressed payload (bytes, before claim-check) of a snapshot or
	// pods-pending event, and how many there were (Dovetail only).
	SnapshotEvents   int
	SnapshotMaxBytes int
	// LargestDecode and LargestEncode time the largest payload after the run, its control plane
	// still up (median of codecRuns).
	LargestDecode, LargestEncode time.Duration
	Consolidation                *Consolidation
	Unbound                      int
	Notes                        []string
}

// Consolidation is the scale-down phase: replicas cut by Cut, then the time until the nodes
// stop changing (Converged false: the phase's timeout ended it first).
type Consolidation struct {
	Cut                      float64
	PodsAfter                int
	Converge                 time.Duration
	Converged                bool
	NodesDeleted, NodesAdded int
	NodesAfter               int
	PricePerHour, LowerBound float64
}

// ratio is a / b as "×k.kk", or "—" when b is zero.
func ratio(a, b float64) string {
	if b == 0 || a == 0 {
		return "—"
	}
	return fmt.Sprintf("×%.2f", a/b)
}

// PrintTable writes one table per N: a row per measure, a column per side, and Karpenter's
// value over Dovetail's as the ratio (above 1: Dovetail is lower: faster, cheaper, fewer).
func PrintTable(w io.Writer, results []Result) {
	byN := map[int]map[string]*Result{}
	var ns []int
	for i := range results {
		r := &results[i]
		if byN[r.N] == nil {
			byN[r.N] = map[string]*Result{}
			ns = append(ns, r.N)
		}
		byN[r.N][r.Side] = r
	}
	slices.Sort(ns)
	for _, n := range ns {
		d, k := byN[n][sideDovetail], byN[n][sideKarpenter]
		fmt.Fprintf(w, "\nN = %d pods\n", n)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "measure\tDovetail\tKarpenter\tKarpenter / Dovetail")
		row := func(name string, get func(*Result) (string, float64)) {
			cells := []string{name}
			var vals []float64
			for _, r := range []*Result{d, k} {
				if r == nil {
					cells = append(cells, "not run")
					vals = append(vals, 0)
					continue
				}
				s, v := get(r)
				cells = append(cells, s)
				vals = append(vals, v)
			}
			cells = append(cells, ratio(vals[1], vals[0]))
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		dist := func(name string, get func(*Result) Dist) {
			row(name+" p50/p99/max s", func(r *Result) (string, float64) { x := get(r); return x.String(), x.P99.Seconds() })
		}
		dist("creation → NodeClaim", func(r *Result) Dist { return r.ToClaim })
		dist("creation → Node Ready", func(r *Result) Dist { return r.ToReady })
		dist("creation → bound", func(r *Result) Dist { return r.ToBound })
		for i := range max(len(d.stages()), len(k.stages())) {
			dist(stageName(d, k, i), func(r *Result) Dist {
				if i < len(r.Stages) {
					return r.Stages[i].Dist
				}
				return Dist{}
			})
		}
		row("every pod bound after, s", func(r *Result) (string, float64) {
			if r.Unbound > 0 {
				return fmt.Sprintf("%d unbound at timeout", r.Unbound), 0
			}
			return secs(r.AllBound), r.AllBound.Seconds()
		})
		row("nodes", func(r *Result) (string, float64) { return fmt.Sprint(r.Nodes), float64(r.Nodes) })
		row("USD/h", func(r *Result) (string, float64) { return fmt.Sprintf("%.2f", r.PricePerHour), r.PricePerHour })
		row("fit-cut lower bound, USD/h", func(r *Result) (string, float64) { return fmt.Sprintf("%.2f", r.LowerBound), r.LowerBound })
		row("API reads / writes", func(r *Result) (string, float64) {
			return fmt.Sprintf("%.0f / %.0f", r.Reads, r.Writes), r.Reads + r.Writes
		})
		row("kube-scheduler attempts: scheduled / unschedulable", func(r *Result) (string, float64) {
			sc := r.Scheduler
			return fmt.Sprintf("%.0f / %.0f", sc["attempts scheduled"], sc["attempts unschedulable"]), sc["attempts scheduled"] + sc["attempts unschedulable"]
		})
		row("kube-scheduler attempt (binding included) / Filter time, s", func(r *Result) (string, float64) {
			sc := r.Scheduler
			attempts := sc["attempt seconds scheduled"] + sc["attempt seconds unschedulable"] + sc["attempt seconds error"]
			return fmt.Sprintf("%.1f / %.1f", attempts, sc["Filter seconds"]), attempts
		})
		row("peak RSS, MiB", func(r *Result) (string, float64) {
			return fmt.Sprintf("%.0f (%s)", float64(r.PeakRSS)/(1<<20), r.PeakRSSWhat), float64(r.PeakRSS)
		})
		row("peak RSS of the rest, MiB", func(r *Result) (string, float64) {
			if r.RestPeakRSS == 0 {
				return "—", 0
			}
			return fmt.Sprintf("%.0f (%s)", float64(r.RestPeakRSS)/(1<<20), r.RestPeakRSSWhat), 0
		})
		row("snapshot: events, max KiB", func(r *Result) (string, float64) {
			if r.SnapshotEvents == 0 {
				return "—", 0
			}
			return fmt.Sprintf("%d, %.0f", r.SnapshotEvents, float64(r.SnapshotMaxBytes)/1024), 0
		})
		row("largest snapshot, after the run: decode / encode ms", func(r *Result) (string, float64) {
			if r.SnapshotEvents == 0 {
				return "—", 0
			}
			return fmt.Sprintf("%s / %s", ms(r.LargestDecode), ms(r.LargestEncode)), 0
		})
		row("agent metrics: encodes, mean / max≤ KiB, mean ms", func(r *Result) (string, float64) {
			sz, enc := r.AgentSnapshotSize, r.AgentSnapshotEncode
			if sz.Count == 0 {
				return "—", 0
			}
			return fmt.Sprintf("%d, %.0f / %s, %.1f", sz.Count, sz.Mean()/1024, kib(sz.MaxLE), enc.Mean()*1000), 0
		})
		row("functions' metric: decodes, mean ms", func(r *Result) (string, float64) {
			dec := r.FunctionSnapshotDecode
			if dec.Count == 0 {
				return "—", 0
			}
			return fmt.Sprintf("%d, %.1f", dec.Count, dec.Mean()*1000), 0
		})
		cons := func(name string, get func(*Consolidation) (string, float64)) {
			row(name, func(r *Result) (string, float64) {
				if r.Consolidation == nil {
					return "not run", 0
				}
				return get(r.Consolidation)
			})
		}
		cons("scale-down: pods after", func(c *Consolidation) (string, float64) { return fmt.Sprint(c.PodsAfter), 0 })
		cons("scale-down: converged after, s", func(c *Consolidation) (string, float64) {
			if !c.Converged {
				return "not within " + secs(c.Converge), 0
			}
			return secs(c.Converge), c.Converge.Seconds()
		})
		cons("scale-down: nodes deleted / added", func(c *Consolidation) (string, float64) {
			return fmt.Sprintf("%d / %d", c.NodesDeleted, c.NodesAdded), float64(c.NodesDeleted + c.NodesAdded)
		})
		cons("scale-down: nodes after", func(c *Consolidation) (string, float64) { return fmt.Sprint(c.NodesAfter), float64(c.NodesAfter) })
		cons("scale-down: USD/h after", func(c *Consolidation) (string, float64) {
			return fmt.Sprintf("%.2f", c.PricePerHour), c.PricePerHour
		})
		cons("scale-down: lower bound, USD/h", func(c *Consolidation) (string, float64) {
			return fmt.Sprintf("%.2f", c.LowerBound), c.LowerBound
		})
		tw.Flush()
		for _, r := range []*Result{d, k} {
			if r != nil {
				for _, note := range r.Notes {
					fmt.Fprintf(w, "  %s: %s\n", r.Side, note)
				}
			}
		}
	}
}

// stages is r's node-timeline stages (nil for a side not run).
func (r *Result) stages() []Stage {
	if r == nil {
		return nil
	}
	return r.Stages
}

// stageName is the name of stage i from whichever side has it.
func stageName(d, k *Result, i int) string {
	for _, r := range []*Result{d, k} {
		if i < len(r.stages()) {
			return r.Stages[i].Name
		}
	}
	return ""
}

// kib is a size bound in bytes as KiB ("+Inf" above the last bucket).
func kib(b float64) string {
	if math.IsInf(b, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%.0f", b/1024)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// PrintRequests writes the API request deltas of each result, by verb and resource, and
// kube-scheduler's counts, largest first.
func PrintRequests(w io.Writer, results []Result) {
	for _, r := range results {
		fmt.Fprintf(w, "\n%s, N = %d: API server requests during provisioning (apiserver_request_total delta)\n", r.Side, r.N)
		printCounts(w, r.Requests)
		fmt.Fprintf(w, "\n%s, N = %d: kube-scheduler during provisioning (its /metrics, delta)\n", r.Side, r.N)
		printCounts(w, r.Scheduler)
	}
}

func printCounts(w io.Writer, counts map[string]float64) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := -cmpFloat(counts[a], counts[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range keys {
		fmt.Fprintf(tw, "  %s\t%.1f\n", k, counts[k])
	}
	tw.Flush()
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
