package functions_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/queue/sqs/sqstest"
)

// BenchmarkColdStart measures each function's Lambda cold start under the Lambda Runtime
// Interface Emulator (aws-lambda-rie, hack/tools.sh): every iteration starts a new emulator, which
// executes the bootstrap on the first invocation (as Lambda does for a new execution
// environment), and invokes it once with an empty SQS batch. Reported, as medians over b.N cold
// starts (run it with -benchtime 10x):
//
//   - ms/init: the emulator's INIT phase (its "INIT REPORT(durationMs)": the bootstrap's start,
//     Go runtime and package initialisation, flag and environment parsing, the SDK clients, the
//     handler's Build — the embedded catalog decompressed and parsed, the cloud provider — until
//     the runtime asks for its first event), what Lambda reports as Init Duration;
//   - ms/first-invoke: the first invocation's round trip as a client sees it (init plus the
//     invocation), the figure the < 100 ms target is read against;
//   - ms-cpu/cold: the CPU time the bootstrap's threads ran by then (Linux schedstat, summed over
//     threads), the cold start's cost independent of how busy the machine is (wall times on a
//     shared machine include the wait for a core; schedstat's run-queue wait is that wait).
//
// The bootstrap is built as hack/package.sh builds it (static, -trimpath, -s -w, -tags
// lambda.norpc, the AWS SDK without inlining) for the machine's architecture; the cloud is the
// fake one (embedded catalog, no network call), the queue URLs are never contacted by an empty
// batch.
//
//	go test -run '^$' -bench ColdStart -benchtime 10x ./functions/   (make coldstart)
func BenchmarkColdStart(b *testing.B) {
	rie := sqstest.RIE(b)
	mains, err := filepath.Glob("*/cmd/*")
	if err != nil || len(mains) == 0 {
		b.Fatalf("function mains: %v %v", mains, err)
	}
	for _, m := range mains {
		fn := filepath.Base(m)
		b.Run(fn, func(b *testing.B) {
			boot := buildBootstrap(b, "./"+filepath.ToSlash(m))
			var inits, firsts, cpus, waits []float64
			for i := 0; i < b.N; i++ {
				url, report, pid, stop := startRIE(b, rie, boot)
				start := time.Now()
				invokeEmpty(b, url)
				firsts = append(firsts, float64(time.Since(start).Microseconds())/1000)
				inits = append(inits, initDuration(b, report))
				run, wait := schedstat(b, pid)
				cpus, waits = append(cpus, run), append(waits, wait)
				stop()
			}
			b.ReportMetric(median(inits), "ms/init")
			b.ReportMetric(median(firsts), "ms/first-invoke")
			b.ReportMetric(median(cpus), "ms-cpu/cold")
			b.ReportMetric(median(waits), "ms-runqueue/cold")
			b.ReportMetric(0, "ns/op") // an iteration's wall time includes the emulator's own start
		})
	}
}

func buildBootstrap(b *testing.B, pkg string) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", lambdaTags, "-gcflags", lambdaGCFlags, "-ldflags", "-s -w -buildid=", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, o)
	}
	return out
}

// startRIE starts the emulator with bootstrap and waits until it accepts connections (it starts
// the bootstrap only on the first invocation). report returns what it printed so far.
func startRIE(b *testing.B, rie, bootstrap string) (url string, report func() string, pid int, stop func()) {
	b.Helper()
	port, err := sqstest.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	rtPort, err := sqstest.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", "127.0.0.1:"+strconv.Itoa(rtPort), bootstrap)
	cmd.Env = append(os.Environ(), "DOVETAIL_CLUSTER=coldstart", "DOVETAIL_CLOUD=fake",
		"DOVETAIL_COMMAND_QUEUE_URL=http://127.0.0.1:1/000000000000/coldstart-commands.fifo",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=coldstart", "AWS_SECRET_ACCESS_KEY=coldstart")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() { _ = cmd.Process.Kill(); <-done }
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			b.Fatalf("aws-lambda-rie did not listen on %s: %v\n%s", addr, err, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "http://" + addr + "/2015-03-31/functions/function/invocations", out.String, cmd.Process.Pid, stop
}

// schedstat sums, over the threads of rie's child (the bootstrap), the time they ran on a CPU
// and the time they waited for one (/proc/<pid>/task/<tid>/schedstat: ns), in ms.
func schedstat(b *testing.B, rie int) (run, wait float64) {
	b.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", rie))
	var kids []string
	for _, t := range tasks {
		c, err := os.ReadFile(t)
		if err == nil {
			kids = append(kids, strings.Fields(string(c))...)
		}
	}
	if len(kids) != 1 {
		b.Fatalf("aws-lambda-rie (pid %d) has children %v, want the bootstrap alone", rie, kids)
	}
	stats, _ := filepath.Glob("/proc/" + kids[0] + "/task/*/schedstat")
	for _, st := range stats {
		c, err := os.ReadFile(st)
		if err != nil {
			continue // a thread that ended
		}
		f := strings.Fields(string(c))
		r, _ := strconv.ParseFloat(f[0], 64)
		w, _ := strconv.ParseFloat(f[1], 64)
		run, wait = run+r/1e6, wait+w/1e6
	}
	return run, wait
}

func invokeEmpty(b *testing.B, url string) {
	b.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"Records":[]}`))
	if err != nil {
		b.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "batchItemFailures") {
		b.Fatalf("invoke: HTTP %d %s", resp.StatusCode, body.String())
	}
}

var initRE = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// initDuration reads the emulator's INIT REPORT line.
func initDuration(b *testing.B, report func() string) float64 {
	b.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if m := initRE.FindStringSubmatch(report()); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				b.Fatal(err)
			}
			return v
		}
		if time.Now().After(deadline) {
			b.Fatalf("no Init Duration in the emulator's output:\n%s", report())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
