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
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid/egtest"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs/sqstest"
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
