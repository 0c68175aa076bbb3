package main

// The provision bootstrap, built as for Lambda (-tags lambda.norpc), runs under the Lambda
// Runtime Interface Emulator (aws-lambda-rie) on loopback; an SQS event is POSTed to it as Lambda
// would invoke it, and the partial batch response is checked. The dead-letter queue is fauxqs,
// reached with the real SDK from inside the bootstrap.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs/sqstest"
	"github.com/dovetail-dev/dovetail/shared/telemetry/emf"
)

const cluster = "rie-test"

func TestMain(m *testing.M) {
	code := m.Run()
	sqstest.StopShared()
	sqstest.StopBootstrap()
	os.Exit(code)
}

func buildBootstrap(t *testing.T) string { return sqstest.Bootstrap(t) }

func invoke(t *testing.T, url string, ev lambdaevents.SQSEvent) lambdaevents.SQSEventResponse {
	return sqstest.Invoke(t, url, ev)
}

// snapshotEvent is a valid snapshot event with nothing pending, dated now (the function decides
// on its own clock): provision solves nothing pending and succeeds without publishing.
func snapshotEvent(t *testing.T, rev int64) string {
	t.Helper()
	snap := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: rev,
		Time: metav1.NewTime(time.Now().UTC().Truncate(time.Second))}
	b, err := events.NewEvent(cluster, "agent", events.TypeSnapshot, fmt.Sprintf("snapshot-%d", rev), snap)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sqsEvent is an SQS event as Lambda delivers a FIFO batch: one group (the cluster), first receive.
func sqsEvent(t *testing.T) (lambdaevents.SQSEvent, string) {
	bodies := []string{snapshotEvent(t, 1), snapshotEvent(t, 2), "this is not a CloudEvent", snapshotEvent(t, 3)}
	var ev lambdaevents.SQSEvent
	for i, b := range bodies {
		id := fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i+1)
		ev.Records = append(ev.Records, lambdaevents.SQSMessage{
			MessageId: id, ReceiptHandle: "rh-" + id, Body: b, EventSource: "aws:sqs", AWSRegion: sqstest.Region,
			EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:dovetail-events.fifo",
			Attributes: map[string]string{"ApproximateReceiveCount": "1", "MessageGroupId": cluster,
				"SentTimestamp":          fmt.Sprint(time.Now().Add(-time.Second).UnixMilli()),
				"MessageDeduplicationId": fmt.Sprintf("dedup-%d", i)},
			MessageAttributes: map[string]lambdaevents.SQSMessageAttribute{
				sqs.AttrSubject: {DataType: "String", StringValue: aws.String(queue.EventsSubject(cluster))}},
		})
	}
	return ev, ev.Records[2].MessageId
}

func TestLambdaPartialBatchReportsOnlyThePoisonMessage(t *testing.T) {
	sqstest.RIE(t) // fail or skip before the build when the emulator is missing
	url, output := sqstest.RunRIEWithOutput(t, buildBootstrap(t), []string{
		"DOVETAIL_CLUSTER=" + cluster,
		// Commands would go here; this batch decides no launch, so nothing is sent.
		"DOVETAIL_COMMAND_QUEUE_URL=http://127.0.0.1:1/000000000000/unused.fifo",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
	})
	ev, poisonID := sqsEvent(t)
	resp := invoke(t, url, ev)
	// No DLQ URL configured: the poison record is reported, for the redrive policy to move after
	// maxReceiveCount; the three valid snapshots (before and after it) succeed.
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != poisonID {
		t.Fatalf("batchItemFailures = %+v, want exactly [%s]", resp.BatchItemFailures, poisonID)
	}
	// The batch's metrics, as CloudWatch Embedded Metric Format on the function's stdout:
	// three snapshots handled (ok), one poison, each with its queue age; three solves of
	// nothing pending by the provisioner.
	values := func(docs []emf.Document, metric string, dims map[string]string) []float64 {
		var out []float64
		for _, d := range docs {
			match := d.Namespace == "Dovetail" && d.Dimensions["cluster"] == cluster
			for k, v := range dims {
				match = match && d.Dimensions[k] == v
			}
			if match {
				out = append(out, d.Values[metric]...)
			}
		}
		return out
	}
	checks := []struct {
		metric string
		dims   map[string]string
		want   int
	}{
		{"dovetail_handler_duration_seconds", map[string]string{"function": "provision", "result": "ok"}, 3},
		{"dovetail_handler_duration_seconds", map[string]string{"function": "provision", "result": "poison"}, 1},
		{"dovetail_queue_message_age_seconds", map[string]string{"function": "provision"}, 4},
		{"karpenter_scheduler_scheduling_duration_seconds", map[string]string{"controller": "provisioner"}, 3},
		{"karpenter_scheduler_queue_depth", map[string]string{"controller": "provisioner"}, 1},
	}
	docs := emfDocuments(t, output, func(docs []emf.Document) bool {
		for _, c := range checks {
			if len(values(docs, c.metric, c.dims)) < c.want {
				return false
			}
		}
		return true
	})
	for _, c := range checks {
		if got := values(docs, c.metric, c.dims); len(got) != c.want {
			t.Errorf("EMF %s%v: %d values, want %d", c.metric, c.dims, len(got), c.want)
		}
	}
	if v := values(docs, "karpenter_scheduler_queue_depth", map[string]string{"controller": "provisioner"}); len(v) != 1 || v[0] != 0 {
		t.Errorf("EMF karpenter_scheduler_queue_depth{controller=provisioner} = %v, want [0] (nothing pending)", v)
	}
}

// emfDocuments waits until the EMF documents on the function's output satisfy complete, and
// returns every document parsed strictly (emf.Parse). The invocation's answer can come before
// its output has been copied through the emulator's pipe (one line per document, written one by
// one), so a test waits for every document it checks, not just the first. The bound (20 s) only
// ends a failing test; after it the documents so far are returned for the caller's checks to
// report.
func emfDocuments(t *testing.T, output func() string, complete func([]emf.Document) bool) []emf.Document {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		out := output()
		out = out[:strings.LastIndexByte(out, '\n')+1] // whole lines: the last may be half copied
		docs, err := emf.Parse(strings.NewReader(out))
		if err != nil {
			t.Fatalf("EMF on stdout: %v", err)
		}
		if complete(docs) {
			return docs
		}
		if time.Now().After(deadline) {
			t.Logf("the function's output after 20 s:\n%s", output())
			return docs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLambdaSendsPoisonToDLQWithReason(t *testing.T) {
	sqstest.RIE(t)
	f := sqstest.Shared(t)
	ctx := context.Background()
	dlq := f.CreateFIFO(ctx, t, "provision-events-dlq", nil)
	url, output := sqstest.RunRIEWithOutput(t, buildBootstrap(t), append(f.Env(),
		"DOVETAIL_CLUSTER="+cluster,
		"DOVETAIL_COMMAND_QUEUE_URL="+f.CreateFIFO(ctx, t, "provision-commands", nil),
		"DOVETAIL_DLQ_URL="+dlq,
	))
	ev, poisonID := sqsEvent(t)
	resp := invoke(t, url, ev)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batchItemFailures = %+v, want none (poison moved to the DLQ directly)", resp.BatchItemFailures)
	}
	out, err := f.SQS().ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), WaitTimeSeconds: 2,
		MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("dlq holds %d messages, want 1", len(out.Messages))
	}
	m := out.Messages[0]
	attr := func(n string) string { return aws.ToString(m.MessageAttributes[n].StringValue) }
	if aws.ToString(m.Body) != "this is not a CloudEvent" || attr(sqs.AttrDLQMessageID) != poisonID ||
		attr(sqs.AttrDLQSource) != ev.Records[2].EventSourceARN || m.Attributes["MessageGroupId"] != cluster {
		t.Errorf("dead letter = body %q attrs %v system %v", aws.ToString(m.Body), m.MessageAttributes, m.Attributes)
	}
	if r := attr(sqs.AttrDLQReason); len(r) < len("poison message: ") || r[:len("poison message: ")] != "poison message: " {
		t.Errorf("reason = %q, want the handler's poison error", r)
	}
	deadLettered := func(docs []emf.Document) []float64 {
		var dead []float64
		for _, d := range docs {
			if d.Dimensions["function"] == "provision" && d.Dimensions["reason"] == "malformed" {
				dead = append(dead, d.Values["dovetail_dead_lettered_messages_total"]...)
			}
		}
		return dead
	}
	dead := deadLettered(emfDocuments(t, output, func(docs []emf.Document) bool { return len(deadLettered(docs)) > 0 }))
	if len(dead) != 1 || dead[0] != 1 {
		t.Errorf("EMF dovetail_dead_lettered_messages_total{function=provision,reason=malformed} = %v, want [1]", dead)
	}
}
