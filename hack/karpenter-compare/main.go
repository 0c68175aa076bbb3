// Command karpenter-compare runs Karpenter core's scheduler (sigs.k8s.io/karpenter v1.15.0)
// and Dovetail's provisioning.Solve side by side on identical pods and instance types — the
// input of Karpenter's own scheduling benchmark — and prints, per pod count, each side's solve
// time (seconds), NodeClaims, unschedulable pods and price (USD per hour).
//
// It is a separate Go module (hack/karpenter-compare/go.mod) so the main module never depends
// on Karpenter. Run it with `make karpenter-compare` or, here, `go run . -pods 1000,5000`.
// See docs/karpenter-compare.md.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	podsFlag := flag.String("pods", "1000,5000,10000", "comma-separated pod counts to solve")
	mix := flag.String("mix", mixDiverse, "pod mix: "+mixDiverse+" (Karpenter's makeDiversePods) or "+mixGeneric+" (resource requests only)")
	seed := flag.Int64("seed", 42, "seed of the pods' random draws (Karpenter's benchmark uses 42)")
	dovetailRuns := flag.Int("dovetail-runs", 3, "Dovetail solves per pod count; the median time is reported")
	karpenterRuns := flag.Int("karpenter-runs", 3, "Karpenter solves per pod count below -karpenter-single-from; the median time is reported")
	singleFrom := flag.Int("karpenter-single-from", 10000, "pod count from which Karpenter solves only once (it is slow)")
	showErrors := flag.Bool("show-errors", false, "print why pods were left unschedulable, per side (reasons counted)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()

	counts, err := parseCounts(*podsFlag)
	if err == nil && (*dovetailRuns < 1 || *karpenterRuns < 1) {
		err = fmt.Errorf("-dovetail-runs and -karpenter-runs must be at least 1")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "karpenter-compare:", err)
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "karpenter-compare: -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(counts, *mix, *seed, *dovetailRuns, *karpenterRuns, *singleFrom, *showErrors); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "karpenter-compare:", err)
		os.Exit(1)
	}
}

func parseCounts(s string) ([]int, error) {
	var counts []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-pods: %q is not a positive pod count", f)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// row is one pod count's outcome: the median run of each side.
type row struct {
	pods                int
	karpenter, dovetail result
	karpenterRuns       int
	dovetailRuns        int
}

func run(counts []int, mix string, seed int64, dovetailRuns, karpenterRuns, singleFrom int, showErrors bool) error {
	its := karpenterInstanceTypes()
	kPool := karpenterNodePool()
	cat, err := dovetailCatalog(its)
	if err != nil {
		return err
	}
	dPool := dovetailNodePool(kPool)
	ctx := karpenterContext()

	fmt.Printf("Karpenter core sigs.k8s.io/karpenter v1.15.0 scheduler vs Dovetail provisioning.Solve\n")
	fmt.Printf("input: %d fake instance types (fake.InstanceTypes), one NodePool without requirements or limits, seed %d\n", len(its), seed)
	fmt.Printf("pod mix: %s\n", mixDescription(mix))
	fmt.Printf("%s, GOMAXPROCS %d, load average at start: %s\n\n", runtime.Version(), runtime.GOMAXPROCS(0), loadAverage())

	var rows []row
	for _, n := range counts {
		pods, err := newPodGen(seed).pods(mix, n)
		if err != nil {
			return err
		}
		kRuns := karpenterRuns
		if n >= singleFrom {
			kRuns = 1
		}
		var ds, ks []result
		for range dovetailRuns {
			runtime.GC()
			r, err := runDovetail(copyPods(pods), cat, dPool, showErrors)
			if err != nil {
				return err
			}
			ds = append(ds, r)
		}
		for range kRuns {
			runtime.GC()
			r, err := runKarpenter(ctx, copyPods(pods), its, kPool, showErrors)
			if err != nil {
				return err
			}
			ks = append(ks, r)
		}
		rw := row{pods: n, karpenter: median(ks), dovetail: median(ds), karpenterRuns: kRuns, dovetailRuns: dovetailRuns}
		rows = append(rows, rw)
		printRow(rw, ks, ds)
	}
	fmt.Printf("load average at end: %s\n\n", loadAverage())
	printSummary(rows)
	return nil
}

// median returns the run with the median solve time (the lower middle one for an even count).
func median(rs []result) result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int { return int(a.Solve - b.Solve) })
	return s[(len(s)-1)/2]
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

func printRow(r row, ks, ds []result) {
	fmt.Printf("== %d pods ==\n", r.pods)
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "solver\truns\tsolve s (median)\tsetup s\tNodeClaims\tunschedulable\tUSD/h\tlower bound USD/h")
	k, d := r.karpenter, r.dovetail
	fmt.Fprintf(tw, "karpenter\t%d\t%s\t%s\t%d\t%d\t%.2f\t-\n", r.karpenterRuns, seconds(k.Solve), seconds(k.Setup), k.NodeClaims, k.Unschedulable, k.PricePerHour)
	fmt.Fprintf(tw, "dovetail\t%d\t%s\t-\t%d\t%d\t%.2f\t%.2f\n", r.dovetailRuns, seconds(d.Solve), d.NodeClaims, d.Unschedulable, d.PricePerHour, d.BoundPerHour)
	tw.Flush()
	fmt.Printf("Karpenter time / Dovetail time: %s×; Dovetail USD/h / Karpenter USD/h: %.3f\n", ratio(k.Solve, d.Solve), d.PricePerHour/k.PricePerHour)
	for _, side := range []struct {
		name string
		rs   []result
	}{{"karpenter", ks}, {"dovetail", ds}} {
		var times []string
		for _, x := range side.rs {
			times = append(times, seconds(x.Solve))
			if x.NodeClaims != side.rs[0].NodeClaims || x.Unschedulable != side.rs[0].Unschedulable || x.PricePerHour != side.rs[0].PricePerHour {
				fmt.Printf("note: %s's runs differ in their plans (%d NodeClaims, %.2f USD/h vs %d, %.2f)\n",
					side.name, x.NodeClaims, x.PricePerHour, side.rs[0].NodeClaims, side.rs[0].PricePerHour)
			}
		}
		fmt.Printf("%s solve times s: %s\n", side.name, strings.Join(times, ", "))
	}
	fmt.Println()
}

// printSummary prints every pod count as one Markdown table.
func printSummary(rows []row) {
	fmt.Println("| pods | Karpenter solve s | Dovetail solve s | time ratio K/D | Karpenter NodeClaims | Dovetail NodeClaims | unschedulable K / D | Karpenter USD/h | Dovetail USD/h | D/K USD/h | Dovetail lower bound USD/h |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		k, d := r.karpenter, r.dovetail
		fmt.Printf("| %d | %s (%d run%s) | %s (median of %d) | %s× | %d | %d | %d / %d | %.2f | %.2f | %.3f | %.2f |\n",
			r.pods, seconds(k.Solve), r.karpenterRuns, plural(r.karpenterRuns), seconds(d.Solve), r.dovetailRuns,
			ratio(k.Solve, d.Solve), k.NodeClaims, d.NodeClaims, k.Unschedulable, d.Unschedulable,
			k.PricePerHour, d.PricePerHour, d.PricePerHour/k.PricePerHour, d.BoundPerHour)
	}
}

// ratio is a/b, with more digits when it is small.
func ratio(a, b time.Duration) string {
	r := a.Seconds() / b.Seconds()
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 2, 64)
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute load averages ("?" where unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// printPodErrors prints, to stderr, how many of n pods were left unschedulable for each reason.
func printPodErrors(side string, n int, errs map[string]string) {
	if len(errs) == 0 {
		return
	}
	count := map[string]int{}
	for _, reason := range errs {
		count[reason]++
	}
	reasons := slices.Sorted(maps.Keys(count))
	fmt.Fprintf(os.Stderr, "%s: %d of %d pods unschedulable\n", side, len(errs), n)
	for _, r := range reasons {
		fmt.Fprintf(os.Stderr, "  %d × %s\n", count[r], r)
	}
}
