package runtime

// LambdaHandler is called in-process with aws-lambda-go's own event types (the bootstrap under
// the Runtime Interface Emulator is tested in functions/provision/cmd/provision); NATS mode runs
// against an embedded JetStream server.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	devents "github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func record(id, group, body string) events.SQSMessage {
	r := events.SQSMessage{MessageId: id, Body: body, Attributes: map[string]string{"ApproximateReceiveCount": "2"},
		MessageAttributes: map[string]events.SQSMessageAttribute{sqs.AttrID: {DataType: "String", StringValue: aws.String("ev-" + id)}}}
	if group != "" {
		r.Attributes["MessageGroupId"] = group
	}
	return r
}

func failures(r events.SQSEventResponse) string {
	var ids []string
	for _, f := range r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return strings.Join(ids, ",")
}

func TestLambdaHandlerFIFOGroupsAndPoison(t *testing.T) {
	var mu sync.Mutex
	var ran []string
	h := func(_ context.Context, m queue.Message) error {
		mu.Lock()
		ran = append(ran, m.ID)
		mu.Unlock()
		if m.Attempt != 2 {
			return fmt.Errorf("attempt %d, want 2 (ApproximateReceiveCount)", m.Attempt)
		}
		switch string(m.Data) {
		case "transient":
			return errors.New("throttled")
		case "poison":
			return fmt.Errorf("%w: type: unknown", queue.ErrPoison)
		case "panic":
			panic("boom")
		}
		return nil
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{
		record("a1", "a", "ok"),
		record("a2", "a", "transient"), // fails: a3 must not run before it (FIFO order)
		record("a3", "a", "ok"),
		record("b1", "b", "poison"), // reported (no DLQ configured); b2 still runs
		record("b2", "b", "ok"),
		record("c1", "c", "panic"), // a panic is a failure, not a crash
		record("s1", "", "ok"),     // standard queue record
	}}
	resp, err := LambdaHandler(h, LambdaOptions{Logger: quiet})(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := failures(resp); got != "a2,a3,b1,c1" {
		t.Errorf("batchItemFailures = %s, want a2,a3,b1,c1", got)
	}
	if got := strings.Join(ran, ","); got != "ev-a1,ev-a2,ev-b1,ev-b2,ev-c1,ev-s1" {
		t.Errorf("ran %s, want every record except a3, in order", got)
	}
}

func TestLambdaHandlerOutOfTimeReportsTheRest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := func(context.Context, queue.Message) error { cancel(); return nil } // the deadline passes during the first record
	resp, _ := LambdaHandler(h, LambdaOptions{Logger: quiet})(ctx, events.SQSEvent{Records: []events.SQSMessage{
		record("1", "g", "ok"), record("2", "g", "ok"), record("3", "h", "ok")}})
	if got := failures(resp); got != "2,3" {
		t.Errorf("batchItemFailures = %s, want 2,3 (not run, so redelivered)", got)
	}
}

func TestEnvDefaults(t *testing.T) {
	if EnvName("command-queue-url") != "DOVETAIL_COMMAND_QUEUE_URL" {
		t.Errorf("EnvName = %s", EnvName("command-queue-url"))
	}
	t.Setenv("DOVETAIL_CLUSTER", "from-env")
	t.Setenv("DOVETAIL_ENSURE_STREAM", "false")
	t.Setenv(EnvLambdaRuntimeAPI, "")
	cmd := Command(Function{Name: "probe"})
	if v, _ := cmd.Flags().GetString("cluster"); v != "from-env" {
		t.Errorf("--cluster default = %q, want the env value", v)
	}
	if v, _ := cmd.Flags().GetBool("ensure-stream"); v {
		t.Error("--ensure-stream default ignored DOVETAIL_ENSURE_STREAM=false")
	}
	if InLambda() {
		t.Error("InLambda with an empty AWS_LAMBDA_RUNTIME_API")
	}
	err := Run(context.Background(), Function{Name: "probe", Build: func(context.Context, Transport) (queue.Handler, error) { return nil, nil }},
		Options{Cluster: "Not_A_Label", LogLevel: "info"})
	if err == nil || !strings.Contains(err.Error(), "--cluster (DOVETAIL_CLUSTER)") {
		t.Errorf("bad cluster error = %v", err)
	}
}

func TestRunNATSWorker(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := qnats.Connect(url, "runtime-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := make(chan queue.Message, 1)
	var transport Transport
	f := Function{Name: "probe", Build: func(_ context.Context, tr Transport) (queue.Handler, error) {
		transport = tr
		return func(_ context.Context, m queue.Message) error { got <- m; return nil }, nil
	}}
	done := make(chan error, 1)
	go func() {
		done <- RunNATS(ctx, f, nc, Options{Cluster: "c1", EnsureStream: true, BlobDir: t.TempDir()}, quiet)
	}()
	pub, err := qnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The stream exists once RunNATS has ensured it; retry the publish until then.
	for {
		if err := pub.Publish(ctx, queue.EventsSubject("c1"), "ev-1", []byte("hello")); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("stream never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case m := <-got:
		if m.ID != "ev-1" || string(m.Data) != "hello" || m.Subject != queue.EventsSubject("c1") {
			t.Errorf("delivered %+v", m)
		}
	case <-ctx.Done():
		t.Fatal("no delivery")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if transport.Mode != ModeNATS || transport.Cluster != "c1" || transport.Publisher == nil || transport.Blobs == nil {
		t.Errorf("transport = %+v", transport)
	}
}

// TestRunNATSWorkerServesMetricsAndProbes: a NATS worker with --http-addr is ready once its
// consumer runs, and its /metrics counts the handled message (ok) and the poison one, which is
// dead-lettered with its reason class.
func TestRunNATSWorkerServesMetricsAndProbes(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := qnats.Connect(url, "runtime-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	handled := make(chan struct{}, 2)
	f := Function{Name: "probe", Build: func(_ context.Context, tr Transport) (queue.Handler, error) {
		return func(_ context.Context, m queue.Message) error {
			defer func() { handled <- struct{}{} }()
			if string(m.Data) == "bad" {
				return fmt.Errorf("%w: %w: not an envelope", queue.ErrPoison, devents.ErrMalformed)
			}
			return nil
		}, nil
	}}
	done := make(chan error, 1)
	go func() {
		done <- RunNATS(ctx, f, nc, Options{Cluster: "c1", EnsureStream: true, HTTPAddr: addr}, quiet)
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for {
		if code, _ := get("/readyz"); code == http.StatusOK {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("/readyz never became 200")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}
	pub, err := qnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range []string{"good", "bad"} {
		if err := pub.Publish(ctx, queue.EventsSubject("c1"), fmt.Sprint("ev-", i), []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-handled:
		case <-ctx.Done():
			t.Fatal("messages not handled")
		}
	}
	want := map[string]float64{
		`dovetail_handler_duration_seconds_count{function="probe",result="ok"}`:      1,
		`dovetail_handler_duration_seconds_count{function="probe",result="poison"}`:  1,
		`dovetail_dead_lettered_messages_total{function="probe",reason="malformed"}`: 1,
		`dovetail_queue_message_age_seconds_count{function="probe"}`:                 2,
	}
	var series map[string]float64
	for { // the dead letter is counted after the handler returns: wait for it
		_, body := get("/metrics")
		if series, err = prom.ParseText(strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		if series[`dovetail_dead_lettered_messages_total{function="probe",reason="malformed"}`] == 1 || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for k, v := range want {
		if series[k] != v {
			t.Errorf("%s = %g, want %g", k, series[k], v)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
