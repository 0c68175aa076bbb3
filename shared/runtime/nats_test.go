//go:build !lambda.norpc

package runtime

// NATS mode runs against an embedded JetStream server (not in the Lambda build: nats_lambda.go).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	devents "github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

// embeddedNATS starts a JetStream server for the test and connects to it; both stop with the test.
func embeddedNATS(t *testing.T) *natsgo.Conn {
	t.Helper()
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := qnats.Connect(url, "runtime-test", srv.AdminOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestRunNATSWorker(t *testing.T) {
	nc := embeddedNATS(t)
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
	if transport.Mode != ModeNATS || transport.Cluster != "c1" || transport.Publisher == nil || transport.Blobs == nil || transport.Follow == nil {
		t.Errorf("transport = %+v", transport)
	}
}

// TestRunNATSWorkerServesMetricsAndProbes: a NATS worker with --http-addr is ready once its
// consumer runs, and its /metrics counts the handled message (ok) and the poison one, which is
// dead-lettered with its reason class.
func TestRunNATSWorkerServesMetricsAndProbes(t *testing.T) {
	nc := embeddedNATS(t)
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

// A NATS worker's credential flags read their DOVETAIL_* environment variables (how the chart
// and a Functions app pass settings), and a worker without credentials refuses to start, naming
// the flags, before dialing anything.
func TestNATSWorkerCredentials(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "function.nk")
	if err := os.WriteFile(seed, []byte("not read before connect"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOVETAIL_NATS_NKEY_SEED", seed)
	t.Setenv("DOVETAIL_NATS_TLS_CA", "/etc/dovetail/nats/tls/ca.crt")
	t.Setenv(EnvLambdaRuntimeAPI, "")
	t.Setenv(EnvCustomHandlerPort, "")
	cmd := Command(Function{Name: "probe"})
	for flag, want := range map[string]string{"nats-nkey-seed": seed, "nats-tls-ca": "/etc/dovetail/nats/tls/ca.crt", "nats-insecure-no-auth": "false"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s default %q, want %q", flag, got, want)
		}
	}
	build := func(context.Context, Transport) (queue.Handler, error) { return nil, nil }
	err := Run(context.Background(), Function{Name: "probe", Build: build},
		Options{Cluster: "c1", LogLevel: "error", NATSURL: "nats://nats.dovetail-system.svc:4222"})
	if err == nil || !strings.Contains(err.Error(), "--nats-creds or --nats-nkey-seed: required") {
		t.Errorf("worker without credentials: %v", err)
	}
	// A CA that is not there fails at start naming its flag, not at the first reconnect.
	err = Run(context.Background(), Function{Name: "probe", Build: build},
		Options{Cluster: "c1", LogLevel: "error", NATSURL: "nats://nats.dovetail-system.svc:4222",
			NATSAuth: natsauth.Client{NkeySeedFile: seed, TLSCAFile: "/nonexistent/ca.crt"}})
	if err == nil || !strings.Contains(err.Error(), "--nats-tls-ca /nonexistent/ca.crt") {
		t.Errorf("worker with a missing CA: %v", err)
	}
}
