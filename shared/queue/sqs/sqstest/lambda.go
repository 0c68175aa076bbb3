package sqstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// Bootstrap builds the Go command in the current directory as Lambda's "bootstrap" with the
// lambda.norpc tag (the provided.al2023 runtime speaks only the Runtime API), once per test
// binary, keeping the test's GOOS/GOARCH/CGO so the build cache is reused. StopBootstrap removes
// it (call it from TestMain).
func Bootstrap(tb testing.TB) string {
	tb.Helper()
	bootOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dovetail-bootstrap-*")
		if err != nil {
			bootErr = err
			return
		}
		bootDir = dir
		out := filepath.Join(dir, "bootstrap")
		if b, err := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, ".").CombinedOutput(); err != nil {
			bootErr = fmt.Errorf("go build bootstrap: %v\n%s", err, b)
			return
		}
		bootPath = out
	})
	if bootErr != nil {
		tb.Fatal(bootErr)
	}
	return bootPath
}

// StopBootstrap removes what Bootstrap built.
func StopBootstrap() {
	if bootDir != "" {
		os.RemoveAll(bootDir)
	}
}

var (
	bootOnce          sync.Once
	bootPath, bootDir string
	bootErr           error
)

// RunRIE runs bootstrap under aws-lambda-rie on loopback with env added to the test's
// environment and returns the invoke URL; the emulator is killed (by its own process) when the
// test ends, and its output logged when the test failed.
func RunRIE(tb testing.TB, bootstrap string, env []string) string {
	tb.Helper()
	url, _ := RunRIEWithOutput(tb, bootstrap, env)
	return url
}

// RunRIEWithOutput is RunRIE that also returns what the emulator and the bootstrap have written
// so far (stdout and stderr interleaved: the function's log stream, EMF documents included).
func RunRIEWithOutput(tb testing.TB, bootstrap string, env []string) (string, func() string) {
	tb.Helper()
	bin := RIE(tb)
	apiPort, err := FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	rtPort, err := FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "--runtime-interface-emulator-address", "127.0.0.1:"+strconv.Itoa(apiPort),
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(rtPort), bootstrap)
	cmd.Env = append(os.Environ(), env...)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if tb.Failed() {
			tb.Logf("aws-lambda-rie and bootstrap output:\n%s", logs.String())
		}
	})
	return "http://127.0.0.1:" + strconv.Itoa(apiPort) + "/2015-03-31/functions/function/invocations", logs.String
}

// Invoke POSTs an SQS event as Lambda would, retrying while the emulator is not yet listening
// (at most 20 s), and returns the partial batch response.
func Invoke(tb testing.TB, url string, ev lambdaevents.SQSEvent) lambdaevents.SQSEventResponse {
	tb.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			if time.Now().After(deadline) {
				tb.Fatalf("invoke: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			tb.Fatalf("invoke: HTTP %d: %s", resp.StatusCode, b)
		}
		var out lambdaevents.SQSEventResponse
		if err := json.Unmarshal(b, &out); err != nil {
			tb.Fatalf("response %s: %v", b, err)
		}
		return out
	}
}
