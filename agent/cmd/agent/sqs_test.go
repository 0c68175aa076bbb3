package main

// The agent's SQS transport, built from flags as in production, against fauxqs (real SQS and
// S3 wire protocols) reached through the SDK's standard AWS_ENDPOINT_URL setting.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob/azuritetest"
	"github.com/dovetail-dev/dovetail/shared/queue/s3blob"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs/sqstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	sqstest.StopShared()
	azuritetest.StopShared()
	os.Exit(code)
}

func TestSQSTransportRequiresQueues(t *testing.T) {
	_, _, _, _, err := sqsTransport(context.Background(), options{cluster: "c1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--event-queue-url") {
		t.Fatalf("error = %v, want the missing flags named", err)
	}
}

func TestSQSTransportPublishesEventsAndConsumesCommands(t *testing.T) {
	f := sqstest.Shared(t)
	for _, kv := range f.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Two event queues, as for two functions: each gets every event.
	o := options{cluster: "agent-sqs", eventQueueURLs: []string{f.CreateFIFO(ctx, t, "agent-events", nil), f.CreateFIFO(ctx, t, "agent-events-drift", nil)},
		commandQueueURL: f.CreateFIFO(ctx, t, "agent-commands", nil), blobBucket: "agent-claims", blobPrefix: s3blob.DefaultPrefix, s3PathStyle: true}
	if _, err := f.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(o.blobBucket)}); err != nil {
		t.Fatal(err)
	}
	pub, cons, blobs, probe, err := sqsTransport(ctx, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The readiness probe answers while the command queue does, and names the failure when not.
	if err := probe.Check(ctx); err != nil {
		t.Errorf("%s probe: %v, want nil", probe.Name, err)
	}
	missing := o
	missing.commandQueueURL = strings.TrimSuffix(o.commandQueueURL, "agent-commands.fifo") + "no-such-queue.fifo"
	if _, _, _, gone, err := sqsTransport(ctx, missing, nil); err != nil {
		t.Fatal(err)
	} else if err := gone.Check(ctx); err == nil {
		t.Errorf("%s probe of %s: nil, want the missing queue's error", gone.Name, missing.commandQueueURL)
	}
	if err := pub.Publish(ctx, queue.EventsSubject(o.cluster), "pods-pending-1", []byte("event")); err != nil {
		t.Fatal(err)
	}
	for _, url := range o.eventQueueURLs {
		got, err := f.SQS().ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
		if err != nil || len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != "event" {
			t.Fatalf("event queue %s receive: %v %+v", url, err, got)
		}
	}
	// A command sent by a function reaches the agent's consumer.
	if _, err := f.SQS().SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(o.commandQueueURL), MessageBody: aws.String("command"),
		MessageGroupId: aws.String(o.cluster), MessageDeduplicationId: aws.String("cmd-1")}); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	var msg queue.Message
	err = cons.Consume(cctx, func(_ context.Context, m queue.Message) error { msg = m; stop(); return nil })
	if err != nil || string(msg.Data) != "command" || msg.ID != "cmd-1" {
		t.Fatalf("consume: %v, %+v", err, msg)
	}
	uri, err := blobs.Put(ctx, o.cluster+"/x.json.zst", []byte("blob"))
	if err != nil || uri != "s3://agent-claims/"+s3blob.DefaultPrefix+o.cluster+"/x.json.zst" {
		t.Fatalf("claim-check put: %q %v", uri, err)
	}
}
