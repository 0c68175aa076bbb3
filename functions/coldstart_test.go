package functions_test

import (
	"bytes"
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
//   - ms/init: the emulator's "Init Duration" (the bootstrap's exec, Go runtime start, flag and
//     environment parsing, the SDK clients, the handler's Build: the embedded catalog decompressed
//     and parsed, the cloud provider), what Lambda's REPORT line shows as Init Duration;
//   - ms/first-invoke: the first invocation's round trip as a client sees it (init plus the
//     invocation), the figure the < 100 ms target is read against.
//
// The bootstrap is built as hack/package.sh builds it (static, -trimpath, -s -w, -tags
// lambda.norpc) for the machine's architecture; the cloud is the fake one (embedded catalog, no
// network call), the queue URLs are never contacted by an empty batch.
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
			var inits, firsts []float64
			for i := 0; i < b.N; i++ {
				url, report, stop := startRIE(b, rie, boot)
				start := time.Now()
				invokeEmpty(b, url)
				firsts = append(firsts, float64(time.Since(start).Microseconds())/1000)
				inits = append(inits, initDuration(b, report))
				stop()
			}
			b.ReportMetric(median(inits), "ms/init")
			b.ReportMetric(median(firsts), "ms/first-invoke")
			b.ReportMetric(0, "ns/op") // an iteration's wall time includes the emulator's own start
		})
	}
}

func buildBootstrap(b *testing.B, pkg string) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", lambdaTags, "-ldflags", "-s -w -buildid=", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, o)
	}
	return out
}

// startRIE starts the emulator with bootstrap and waits until it accepts connections (it starts
// the bootstrap only on the first invocation). report returns what it printed so far.
func startRIE(b *testing.B, rie, bootstrap string) (url string, report func() string, stop func()) {
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
	return "http://" + addr + "/2015-03-31/functions/function/invocations", out.String, stop
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

var initRE = regexp.MustCompile(`Init Duration: ([0-9.]+) ms`)

// initDuration reads the emulator's REPORT line (printed after the response, so it is awaited).
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
