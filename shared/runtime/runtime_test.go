package runtime

// LambdaHandler is called in-process with aws-lambda-go's own event types (the bootstrap under
// the Runtime Interface Emulator is tested in functions/provision/cmd/provision); NATS mode in
// nats_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
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
