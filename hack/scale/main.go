// Command scale measures the whole provisioning path at cluster scale, Dovetail and Karpenter's
// own controller side by side: for each pod count N and each side, a fresh real control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler from `make controlplane`, kwok
// playing the kubelets), N pending pods of a hand-made mix (workload.go), then a 30 % scale-down.
// It prints one table per N with both sides and their ratio. Each (side, N) runs in a child
// process of its own, so peak memory figures do not carry over between runs.
//
// A separate Go module (hack/scale/go.mod) so Karpenter never enters the main module. Run it
// with `make scale` (SCALE_ARGS="-n 200,1000"); see docs/scale.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dovetail-dev/dovetail/shared/cloud/registry"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

// opts are the flags a run needs, resolved.
type opts struct {
	bootDelay         time.Duration
	phase             Phase
	workDir           string
	dovetailManifest  string
	karpenterManifest string
	karpenterBin      string
	karpenterDir      string
	agentBin          string
	kwokTypes         []byte
	cpuProfile        string
	// clientQPS is kube-controller-manager's and kube-scheduler's client rate limit
	// (realcluster.Options.ClientQPS), the same on both sides.
	clientQPS int
}

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	counts := flag.String("n", "200,1000", "comma-separated pod counts")
	sides := flag.String("sides", "dovetail,karpenter", "comma-separated sides to run: dovetail, karpenter")
	o := opts{}
	flag.DurationVar(&o.bootDelay, "boot-delay", 2*time.Second, "launch to Node registration on both sides (Dovetail's fake cloud boot delay, Karpenter's KWOKNodeClass nodeRegistrationDelay)")
	flag.DurationVar(&o.phase.BindTimeout, "bind-timeout", 15*time.Minute, "how long to wait for every pod to be bound")
	flag.DurationVar(&o.phase.ConsolidateTimeout, "consolidate-timeout", 10*time.Minute, "how long to wait for the scale-down to settle")
	flag.DurationVar(&o.phase.Quiet, "quiet", 90*time.Second, "no Node or NodeClaim added or deleted for this long: the scale-down has converged")
	flag.Float64Var(&o.phase.Cut, "cut", 0.3, "fraction of each workload's replicas removed in the consolidation phase (0: skip it)")
	flag.StringVar(&o.workDir, "work-dir", "", "directory for the control planes' data and logs (default: a new temporary directory, kept)")
	flag.StringVar(&o.dovetailManifest, "dovetail-manifest", "manifests/dovetail.yaml", "Dovetail's NodePool and EC2NodeClass")
	flag.StringVar(&o.karpenterManifest, "karpenter-manifest", "manifests/karpenter.yaml", "Karpenter's NodePool and KWOKNodeClass")
	flag.StringVar(&o.karpenterBin, "karpenter-bin", "", "Karpenter's kwok controller binary (go build sigs.k8s.io/karpenter/kwok; make scale builds it)")
	flag.StringVar(&o.karpenterDir, "karpenter-dir", "", "the sigs.k8s.io/karpenter module directory, for its CRDs (go list -m -f {{.Dir}} sigs.k8s.io/karpenter)")
	flag.StringVar(&o.agentBin, "agent-bin", "", "Dovetail's agent binary (go build ./agent/cmd/agent; make scale builds it); empty: built into -work-dir")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of each side's process (Dovetail's: NATS, the functions, the fake cloud and the harness; not the agent or the control plane) to this path, suffixed -<side>-<N>.prof")
	flag.IntVar(&o.clientQPS, "control-plane-qps", 100, "kube-controller-manager's and kube-scheduler's --kube-api-qps and --kube-api-burst, as in Kubernetes' 5,000-node scalability jobs (0: the components' defaults, 20 and 50 QPS, under which the ReplicaSet controller's pod creation sets the pace)")
	out := flag.String("out", "", "also write the tables to this file")
	one := flag.String("one", "", "internal: run one side at one N (side:N) and write its result as JSON to -result")
	resultFile := flag.String("result", "", "internal: see -one")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *counts, *sides, *one, *resultFile, *out, o); err != nil {
		log.Printf("scale: %v", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, counts, sides, one, resultFile, out string, o opts) error {
	if one != "" {
		return runOne(ctx, one, resultFile, o)
	}
	ns, err := parseCounts(counts)
	if err != nil {
		return err
	}
	ss, err := parseSides(sides)
	if err != nil {
		return err
	}
	if o.workDir == "" {
		if o.workDir, err = os.MkdirTemp("", "dovetail-scale-*"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		return fmt.Errorf("-work-dir: %w", err)
	}
	log.Printf("control-plane data and logs in %s", o.workDir)
	if slices.Contains(ss, sideDovetail) {
		if o.agentBin == "" {
			o.agentBin, err = buildAgent(ctx, o.workDir)
		} else {
			o.agentBin, err = filepath.Abs(o.agentBin)
		}
		if err != nil {
			return err
		}
	}
	var results []Result
	for _, n := range ns {
		for _, side := range ss {
			r, err := runChild(ctx, side, n, o)
			if err != nil {
				log.Printf("%s N=%d: %v", side, n, err)
				r = Result{Side: side, N: n, Notes: []string{"failed: " + err.Error()}}
			}
			results = append(results, r)
		}
	}
	var buf bytes.Buffer
	PrintTable(&buf, results)
	PrintRequests(&buf, results)
	os.Stdout.Write(buf.Bytes())
	if out != "" {
		return os.WriteFile(out, buf.Bytes(), 0o644)
	}
	return nil
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-n: %q is not a positive pod count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseSides(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "dovetail":
			out = append(out, sideDovetail)
		case "karpenter":
			out = append(out, sideKarpenter)
		default:
			return nil, fmt.Errorf("-sides: %q is not dovetail or karpenter", f)
		}
	}
	return out, nil
}

// runChild runs one side at one N in a child process (this binary with -one) and reads its result.
func runChild(ctx context.Context, side string, n int, o opts) (Result, error) {
	f, err := os.CreateTemp(o.workDir, "result-*.json")
	if err != nil {
		return Result{}, err
	}
	f.Close()
	args := []string{"-one", fmt.Sprintf("%s:%d", side, n), "-result", f.Name(), "-work-dir", o.workDir,
		"-boot-delay", o.bootDelay.String(), "-bind-timeout", o.phase.BindTimeout.String(),
		"-consolidate-timeout", o.phase.ConsolidateTimeout.String(), "-quiet", o.phase.Quiet.String(),
		"-cut", strconv.FormatFloat(o.phase.Cut, 'f', -1, 64), "-dovetail-manifest", o.dovetailManifest,
		"-karpenter-manifest", o.karpenterManifest, "-karpenter-bin", o.karpenterBin, "-karpenter-dir", o.karpenterDir,
		"-agent-bin", o.agentBin, "-cpuprofile", o.cpuProfile, "-control-plane-qps", strconv.Itoa(o.clientQPS)}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	log.Printf("=== %s, N = %d", side, n)
	if err := cmd.Run(); err != nil {
		return Result{}, err
	}
	data, err := os.ReadFile(f.Name())
	if err != nil {
		return Result{}, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return Result{}, fmt.Errorf("reading the result of %s N=%d: %w", side, n, err)
	}
	return r, nil
}

func runOne(ctx context.Context, one, resultFile string, o opts) error {
	sideArg, nArg, ok := strings.Cut(one, ":")
	if !ok || resultFile == "" {
		return fmt.Errorf("-one: %q is not side:N, or -result is missing", one)
	}
	ss, err := parseSides(sideArg)
	if err != nil {
		return err
	}
	ns, err := parseCounts(nArg)
	if err != nil {
		return err
	}
	cl, err := registry.Lookup(registry.Fake)
	if err != nil {
		return err
	}
	cat, err := cl.Catalog("")
	if err != nil {
		return err
	}
	set, err := manifests.Load(o.dovetailManifest)
	if err != nil {
		return err
	}
	if len(set.NodePools) != 1 || len(set.NodeClasses) != 1 {
		return fmt.Errorf("%s: want one NodePool and one NodeClass, have %d and %d", o.dovetailManifest, len(set.NodePools), len(set.NodeClasses))
	}
	b := Bounder{Catalog: cat, NodePools: set.NodePools, NodeClasses: set.NodeClasses, Settings: cl.NodeSettings}
	if o.cpuProfile != "" {
		f, err := os.Create(fmt.Sprintf("%s-%s-%d.prof", o.cpuProfile, ss[0], ns[0]))
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var r Result
	switch ss[0] {
	case sideDovetail:
		if o.agentBin == "" {
			return errors.New("the Dovetail side needs -agent-bin (the parent process builds it)")
		}
		r, err = runDovetail(ctx, ns[0], o, b)
	case sideKarpenter:
		if o.karpenterBin == "" || o.karpenterDir == "" {
			return errors.New("the Karpenter side needs -karpenter-bin and -karpenter-dir (make scale sets them)")
		}
		settings, serr := cl.NodeSettings(set.NodeClasses[0])
		if serr != nil {
			return serr
		}
		if o.kwokTypes, err = KWOKInstanceTypes(cat, set.NodePools[0], settings); err != nil {
			return err
		}
		r, err = runKarpenter(ctx, ns[0], o, b)
	}
	if err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(resultFile, data, 0o600)
}

// waitReady polls url until it answers 200 or timeout passes.
func waitReady(ctx context.Context, url string, timeout time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
