package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	s3api "github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/queue/s3blob"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs/sqstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	sqstest.StopShared()
	sqstest.StopBootstrap()
	os.Exit(code)
}

// The interruption bootstrap under the Lambda Runtime Interface Emulator, against fauxqs (SQS and
// S3 through the real SDK): no snapshot event reaches it, it reads the cluster's latest snapshot
// from the claim-check bucket where the agent writes it. The notice arrives before any snapshot
// shows its instance; the invocation reports the record failed and re-drives it with
// ChangeMessageVisibility, so the notice queue (visibility timeout 120 s) delivers it again
// within seconds; by then the agent has written a snapshot showing the node, and the second
// invocation (another process could run it: nothing is kept) taints and drains it (the notice
// then waits on, re-driven alike, for a snapshot that shows the taint).
func TestLambdaRedrivesWaitingNoticeWithinSeconds(t *testing.T) {
	sqstest.RIE(t)
	f := sqstest.Shared(t)
	ctx := context.Background()
	client := f.SQS()
	const visibility = 120 * time.Second // the notice queue's: what a notice not re-driven waits
	nq, err := client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("rie-notices"),
		Attributes: map[string]string{"VisibilityTimeout": fmt.Sprint(int(visibility / time.Second))}})
	if err != nil {
		t.Fatal(err)
	}
	noticeURL := aws.ToString(nq.QueueUrl)
	commandsURL := f.CreateFIFO(ctx, t, "rie-interruption-commands", nil)
	const bucket = "rie-claims"
	if _, err := f.S3().CreateBucket(ctx, &s3api.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil && !strings.Contains(err.Error(), "BucketAlready") {
		t.Fatal(err)
	}
	store := &s3blob.Store{Client: f.S3(), Bucket: bucket}
	const rieCluster = "rie-int"
	putSnapshot := func(at time.Time, rev int64, withNode bool) {
		s := &events.Snapshot{Cluster: rieCluster, Revision: rev, Time: metav1.NewTime(at), Complete: true}
		if withNode {
			s.Nodes = []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{apisv1.LabelNodePool: "default",
				corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a", apisv1.LabelCapacityType: "spot"}},
				Spec:   corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
		}
		enc, err := events.EncodeSnapshot(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := events.PutLatestSnapshot(ctx, store, rieCluster, enc); err != nil {
			t.Fatal(err)
		}
	}
	noticeAt := time.Now().UTC().Truncate(time.Second)
	putSnapshot(noticeAt.Add(-20*time.Second), 1, false) // taken before the instance registered
	body := string(spotNoticeAt("n-rie", noticeAt))
	if _, err := client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(noticeURL), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	url := sqstest.RunRIE(t, sqstest.Bootstrap(t), append(f.Env(),
		"DOVETAIL_CLUSTER="+rieCluster, "DOVETAIL_COMMAND_QUEUE_URL="+commandsURL,
		"DOVETAIL_BLOB_BUCKET="+bucket, "DOVETAIL_S3_PATH_STYLE=true"))
	arn := f.QueueARN(ctx, t, noticeURL)
	// Lambda's poller: receive, invoke, delete what succeeded.
	deliver := func(wait time.Duration) (lambdaevents.SQSEventResponse, bool) {
		out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(noticeURL), WaitTimeSeconds: int32(wait / time.Second),
			MaxNumberOfMessages: 10, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return lambdaevents.SQSEventResponse{}, false
		}
		m := out.Messages[0]
		resp := sqstest.Invoke(t, url, lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{{MessageId: aws.ToString(m.MessageId),
			ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body), EventSourceARN: arn, Attributes: m.Attributes}}})
		if len(resp.BatchItemFailures) == 0 {
			if _, err := client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(noticeURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		return resp, true
	}
	resp, ok := deliver(5 * time.Second)
	if !ok || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("first delivery: %+v (received %v), want the notice reported failed: no snapshot shows its instance", resp, ok)
	}
	failedAt := time.Now()
	putSnapshot(time.Now().UTC(), 2, true) // the agent's next snapshot shows the node
	// Re-driven, it is back within interruption.RedriveInterval; left to the queue, not before the
	// visibility timeout. Waiting up to half of that tells the two apart on a loaded machine too.
	var again bool
	for time.Since(failedAt) < visibility/2 && !again {
		resp, again = deliver(20 * time.Second)
	}
	back := time.Since(failedAt)
	t.Logf("the waiting notice came back %s after its failed delivery (re-drive interval %s, queue visibility timeout %s)",
		back.Round(100*time.Millisecond), interruption.RedriveInterval, visibility)
	if !again || back >= visibility/2 {
		t.Fatalf("the notice came back after %s (received %v), want well before the %s visibility timeout (re-driven within %s)",
			back, again, visibility, interruption.RedriveInterval)
	}
	_ = resp // the notice waits on for a snapshot that shows the taint: the node is drained meanwhile
	// The commands the invocations sent, until the taint and the drain are among them. fauxqs hands
	// out one message of a FIFO group per receive, so this takes a round trip per command; the
	// bound (20 s) only ends a failing test.
	var kinds []string
	tainted := func() bool {
		got := strings.Join(kinds, ",")
		return strings.Contains(got, "TaintNode "+nodeName) && strings.Contains(got, "DrainNode "+nodeName)
	}
	for deadline := time.Now().Add(20 * time.Second); !tainted() && time.Now().Before(deadline); {
		out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(commandsURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			env, err := events.Decode([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatal(err)
			}
			c, err := events.Codec{Blobs: store}.Command(ctx, env)
			if err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, fmt.Sprintf("%s %s", c.Kind, c.NodeName))
			if aws.ToString(m.MessageAttributes[sqs.AttrSubject].StringValue) == "" {
				t.Errorf("command without subject attribute")
			}
			if _, err := client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(commandsURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !tainted() {
		t.Fatalf("commands %s, want the node tainted and drained", strings.Join(kinds, ","))
	}
}

// spotNoticeAt is spotNotice issued at t.
func spotNoticeAt(id string, t time.Time) []byte {
	return []byte(strings.Replace(string(spotNotice(id)), noticeTime.Format(time.RFC3339), t.Format(time.RFC3339), 1))
}
