//go:build !lambda.norpc

package runtime

// Azure Functions mode: Run chooses it when FUNCTIONS_CUSTOMHANDLER_PORT is set and serves the
// custom handler's documented invocation payloads on that port (the Functions host itself does
// not run offline: the requests here are the host's, as documented). Commands would go to egtest,
// a mock of Event Grid's data plane.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid/egtest"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs/sqstest"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/otlp/otlptest"
)

func TestRunAzureFunctionsServesInvocations(t *testing.T) {
	eg := egtest.New()
	defer eg.Close()
	t.Setenv(eventgrid.EnvNamespaceKey, eg.Key)
	port, err := sqstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvCustomHandlerPort, strconv.Itoa(port))
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "")
	var mu sync.Mutex
	got := map[string]string{} // event id → subject
	f := Function{Name: "interruption", Subject: queue.NoticesSubject,
		Build: func(_ context.Context, tr Transport) (queue.Handler, error) {
			if tr.Mode != ModeAzureFunctions || tr.Publisher == nil {
				return nil, fmt.Errorf("transport %+v", tr)
			}
			return func(_ context.Context, m queue.Message) error {
				mu.Lock()
				got[m.ID] = m.Subject
				mu.Unlock()
				switch m.ID {
				case "bad":
					return fmt.Errorf("%w: type: unknown", queue.ErrPoison)
				case "flaky":
					return errors.New("cloud API throttled")
				}
				return nil
			}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Cluster: "aks1", EventGridNamespace: eg.URL, LogLevel: "error",
			AzureClientOptions: azcore.ClientOptions{Transport: eg.Client()}})
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	post := func(path string, data any) int {
		body, _ := json.Marshal(map[string]any{"Data": map[string]any{DefaultTriggerBinding: data}, "Metadata": map[string]any{}})
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Post(base+path, "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			if time.Now().After(deadline) {
				t.Fatalf("POST %s: %v", path, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ev := func(id string) map[string]any {
		return map[string]any{"specversion": "1.0", "id": id, "source": "aws.ec2", "type": "notice"}
	}
	asString, _ := json.Marshal(ev("as-string"))
	for _, c := range []struct {
		path string
		data any
		want int
	}{
		{"/interruption", ev("notice-1"), 200},
		{"/interruption-events", ev("snapshot-1"), 200},
		{"/interruption", string(asString), 200}, // the event as a JSON string
		{"/interruption", ev("bad"), 500},        // poison, but no dead-letter container: Event Grid's dead-lettering
		{"/interruption", ev("flaky"), 500},
		{"/provision", ev("x"), 404},
	} {
		if got := post(c.path, c.data); got != c.want {
			t.Errorf("POST %s %v: %d, want %d", c.path, c.data, got, c.want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"notice-1": queue.NoticesSubject("aks1"), "snapshot-1": queue.EventsSubject("aks1"),
		"as-string": queue.NoticesSubject("aks1"), "bad": queue.NoticesSubject("aks1"), "flaky": queue.NoticesSubject("aks1")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("handled %v, want %v", got, want)
	}
}

func TestRunAzureFunctionsRequiresNamespace(t *testing.T) {
	t.Setenv(EnvCustomHandlerPort, "1")
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "")
	err := Run(context.Background(), Function{Name: "provision", Build: func(context.Context, Transport) (queue.Handler, error) { return nil, nil }},
		Options{Cluster: "aks1", LogLevel: "error"})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("--eventgrid-namespace-endpoint")) {
		t.Fatalf("err = %v, want the flag named", err)
	}
}

// TestRunAzureFunctionsExportsMetrics: with --otlp-metrics-endpoint, the Azure Functions mode
// records through the OTLP backend (shared/telemetry/otlp): the handler's own metrics (through
// Transport.Metrics) and the runtime's (handler duration by result), exported after every
// invocation, so each invocation's values reach the endpoint before it answers. The endpoint is
// otlptest's strict OTLP/HTTP receiver, standing in for Azure Monitor's ingestion.
func TestRunAzureFunctionsExportsMetrics(t *testing.T) {
	eg := egtest.New()
	defer eg.Close()
	t.Setenv(eventgrid.EnvNamespaceKey, eg.Key)
	rc := &otlptest.Receiver{}
	collector := httptest.NewServer(rc)
	defer collector.Close()
	port, err := sqstest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvCustomHandlerPort, strconv.Itoa(port))
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "")
	f := Function{Name: "interruption", Subject: queue.NoticesSubject,
		Build: func(_ context.Context, tr Transport) (queue.Handler, error) {
			return func(_ context.Context, m queue.Message) error {
				if m.ID == "flaky" {
					return errors.New("cloud API throttled")
				}
				tr.Metrics.Record(telemetry.InterruptionReceived, 1, "spot_interrupted")
				return nil
			}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, f, Options{Cluster: "aks1", EventGridNamespace: eg.URL, LogLevel: "error",
			OTLPEndpoint: collector.URL + "/v1/metrics", AzureClientOptions: azcore.ClientOptions{Transport: eg.Client()}})
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(port) + "/interruption"
	post := func(id string) int {
		ev := map[string]any{"specversion": "1.0", "id": id, "source": "aws.ec2", "type": "notice"}
		body, _ := json.Marshal(map[string]any{"Data": map[string]any{DefaultTriggerBinding: ev}, "Metadata": map[string]any{}})
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Post(base, "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			if time.Now().After(deadline) {
				t.Fatalf("POST %s: %v", base, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := post("notice-1"); got != 200 {
		t.Fatalf("notice-1: %d", got)
	}
	if n := len(rc.Exports()); n == 0 {
		t.Fatal("no export after the first invocation: metrics are not flushed per invocation")
	}
	if got := post("notice-2"); got != 200 {
		t.Fatalf("notice-2: %d", got)
	}
	if got := post("flaky"); got != 500 {
		t.Fatalf("flaky: %d", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if errs := rc.Errors(); len(errs) > 0 {
		t.Fatalf("receiver refused exports: %v", errs)
	}
	m := rc.Metrics()
	received := m["karpenter_interruption_received_messages_total"].GetSum()
	if received == nil || len(received.DataPoints) != 1 || received.DataPoints[0].GetAsDouble() != 2 {
		t.Errorf("karpenter_interruption_received_messages_total = %v, want 2", m["karpenter_interruption_received_messages_total"])
	}
	counts := map[string]uint64{}
	for _, p := range m["dovetail_handler_duration_seconds"].GetHistogram().GetDataPoints() {
		attrs := map[string]string{}
		for _, kv := range p.Attributes {
			attrs[kv.Key] = kv.Value.GetStringValue()
		}
		if attrs["function"] != "interruption" {
			t.Errorf("handler duration point of function %q", attrs["function"])
		}
		counts[attrs["result"]] = p.Count
	}
	if counts["ok"] != 2 || counts["retry"] != 1 {
		t.Errorf("dovetail_handler_duration_seconds counts by result %v, want ok 2, retry 1", counts)
	}
}
