package sqs_test

// These tests drive the real aws-sdk-go-v2 SQS and S3 clients against fauxqs, a local emulator
// speaking the real wire protocols (AWS JSON 1.0 for SQS, REST-XML for S3); see sqstest.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/s3blob"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs/sqstest"
)

var queueSeq atomic.Int64

func TestMain(m *testing.M) {
	code := m.Run()
	sqstest.StopShared()
	os.Exit(code)
}

func fauxqs(t *testing.T) *sqstest.Fauxqs { return sqstest.Shared(t) }

// newQueues creates a fresh FIFO queue and its FIFO DLQ (unique names per test).
func newQueues(t *testing.T, f *sqstest.Fauxqs, attrs map[string]string) (url, dlq string) {
	ctx := context.Background()
	n := queueSeq.Add(1)
	name := fmt.Sprintf("%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), n)
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	dlq = f.CreateFIFO(ctx, t, name+"-dlq", nil)
	return f.CreateFIFO(ctx, t, name, attrs), dlq
}

const cluster = "prod-east"

func publisher(client sqs.API, events, commands string) *sqs.Publisher {
	return &sqs.Publisher{Client: client, Routes: map[string]string{
		queue.EventsSubject(cluster): events, queue.CommandsSubject(cluster): commands}}
}

// arrivalBound is how long receiveAll waits for messages a test expects to be there. It only
// bounds a failure: receiveAll returns as soon as n arrive. fauxqs hands out one message per FIFO
// group per receive (SQS up to ten), so 30 messages of one group cost 60 round trips; on CI's
// loaded 2-core machine 5 s was once too short for them (28 arrived).
const arrivalBound = 20 * time.Second

// receiveAll drains up to n distinct messages with short polls (no handler; for assertions).
//
// A receive whose response the SDK retried (a reset connection on a loaded machine) leaves its
// messages in flight and, on a FIFO queue, their whole group locked until the visibility timeout
// ends (SQS developer guide, "FIFO queue message grouping"). With the queue's 30 s default that
// outlasted the wait once on CI (27 of 30 arrived), so receives here hide a message for 2 s only
// and a message seen twice counts once, by MessageId.
func receiveAll(t *testing.T, client *awssqs.Client, url string, n int, wait time.Duration) []types.Message {
	t.Helper()
	var out []types.Message
	seen := map[string]bool{}
	deadline := time.Now().Add(wait)
	for len(out) < n && time.Now().Before(deadline) {
		r, err := client.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 2,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			if !seen[aws.ToString(m.MessageId)] {
				seen[aws.ToString(m.MessageId)] = true
				out = append(out, m)
			}
			if _, err := client.DeleteMessage(context.Background(), &awssqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// queueDepth is visible + in-flight messages.
func queueDepth(t *testing.T, client *awssqs.Client, url string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	b, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return a + b
}

// consumeUntil runs a consumer until stop returns true for the handled messages, or 20 s pass.
func consumeUntil(t *testing.T, c *sqs.Consumer, h queue.Handler, stop func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, h) }()
	for !stop() {
		if ctx.Err() != nil {
			t.Fatal("consumer did not reach the expected state within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type recorder struct {
	mu   sync.Mutex
	msgs []queue.Message
	fn   func(queue.Message) error
}

func (r *recorder) handle(_ context.Context, m queue.Message) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	fn := r.fn
	r.mu.Unlock()
	if fn != nil {
		return fn(m)
	}
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) snapshot() []queue.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]queue.Message(nil), r.msgs...)
}

func TestPublishConsumeDeleteInOrder(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events, dlq := newQueues(t, f, nil)
	client := f.SQS()
	pub := publisher(client, events, "")
	var entries []sqs.Entry
	for i := range 3 {
		entries = append(entries, sqs.Entry{Subject: queue.EventsSubject(cluster), ID: "ev-" + strconv.Itoa(i), Data: []byte("payload " + strconv.Itoa(i))})
	}
	if err := pub.PublishBatch(ctx, entries); err != nil {
		t.Fatal(err)
	}
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Client: client, QueueURL: events, DeadLetterURL: dlq, WaitTime: time.Second, MaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	consumeUntil(t, c, rec.handle, func() bool { return rec.count() >= 3 })
	got := rec.snapshot()
	for i, m := range got {
		// FIFO: one group (the cluster), delivered in publish order, first attempt.
		want := queue.Message{ID: "ev-" + strconv.Itoa(i), Subject: queue.EventsSubject(cluster), Data: []byte("payload " + strconv.Itoa(i)), Attempt: 1}
		if m.ID != want.ID || m.Subject != want.Subject || string(m.Data) != string(want.Data) || m.Attempt != 1 {
			t.Errorf("message %d = %+v, want %+v", i, m, want)
		}
	}
	if len(got) != 3 {
		t.Fatalf("handled %d messages, want 3", len(got))
	}
	if d := queueDepth(t, client, events); d != 0 {
		t.Errorf("queue holds %d messages after successful handling, want 0 (deleted)", d)
	}
}

func TestFIFOAttributesAndDeduplication(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events, _ := newQueues(t, f, nil)
	client := f.SQS()
	pub := publisher(client, events, "")
	for range 2 { // a re-send of the same id within SQS's 5-minute deduplication interval is dropped
		if err := pub.Publish(ctx, queue.EventsSubject(cluster), "pods-pending-7", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(ctx, queue.EventsSubject(cluster), "pods-pending-8", []byte("y")); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, client, events, 2, arrivalBound)
	if len(got) != 2 {
		t.Fatalf("received %d messages, want 2", len(got))
	}
	if extra := receiveAll(t, client, events, 1, 1500*time.Millisecond); len(extra) != 0 {
		t.Fatalf("received %d more messages, want none (the duplicate id dropped)", len(extra))
	}
	m := got[0]
	if g := m.Attributes["MessageGroupId"]; g != cluster {
		t.Errorf("MessageGroupId = %q, want the cluster %q", g, cluster)
	}
	if d := m.Attributes["MessageDeduplicationId"]; d != "pods-pending-7" {
		t.Errorf("MessageDeduplicationId = %q, want the event id", d)
	}
}

// countingAPI counts SendMessageBatch calls and their entries; every call goes to the real client.
type countingAPI struct {
	sqs.API
	mu    sync.Mutex
	sizes []int
}

func (c *countingAPI) SendMessageBatch(ctx context.Context, in *awssqs.SendMessageBatchInput, opts ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(in.Entries))
	c.mu.Unlock()
	return c.API.SendMessageBatch(ctx, in, opts...)
}

func TestBatchingLimits(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events, _ := newQueues(t, f, nil)
	api := &countingAPI{API: f.SQS()}
	pub := publisher(api, events, "")

	// 25 small entries: at most 10 per call → 10 + 10 + 5.
	var entries []sqs.Entry
	for i := range 25 {
		entries = append(entries, sqs.Entry{Subject: queue.EventsSubject(cluster), ID: "n-" + strconv.Itoa(i), Data: []byte("z")})
	}
	if err := pub.PublishBatch(ctx, entries); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(api.sizes) != "[10 10 5]" {
		t.Errorf("batch sizes = %v, want [10 10 5]", api.sizes)
	}

	// 5 entries of 100 KiB: two fit in 256 KiB (2×102,400 + attributes < 262,144), three do not
	// (307,200 > 262,144) → 2 + 2 + 1.
	api.sizes = nil
	entries = nil
	for i := range 5 {
		entries = append(entries, sqs.Entry{Subject: queue.EventsSubject(cluster), ID: "big-" + strconv.Itoa(i), Data: []byte(strings.Repeat("a", 100<<10))})
	}
	if err := pub.PublishBatch(ctx, entries); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(api.sizes) != "[2 2 1]" {
		t.Errorf("batch sizes = %v, want [2 2 1]", api.sizes)
	}
	if got := receiveAll(t, f.SQS(), events, 30, arrivalBound); len(got) != 30 {
		t.Errorf("received %d messages, want 30", len(got))
	}

	// One entry over the limit is refused before anything is sent.
	err := pub.Publish(ctx, queue.EventsSubject(cluster), "huge", []byte(strings.Repeat("a", sqs.MaxMessageBytes)))
	if err == nil || !strings.Contains(err.Error(), "claim-check") {
		t.Errorf("oversize publish error = %v, want a refusal pointing at the claim check", err)
	}
}

func TestBatchPartialFailure(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	// The queue accepts at most 1,024 bytes per message (SQS's minimum MaximumMessageSize), so the
	// middle entry of 2,000 bytes is refused by SQS inside an otherwise successful batch.
	events, _ := newQueues(t, f, map[string]string{"MaximumMessageSize": "1024"})
	pub := publisher(f.SQS(), events, "")
	err := pub.PublishBatch(ctx, []sqs.Entry{
		{Subject: queue.EventsSubject(cluster), ID: "ok-1", Data: []byte("small")},
		{Subject: queue.EventsSubject(cluster), ID: "too-big", Data: []byte(strings.Repeat("b", 2000))},
		{Subject: queue.EventsSubject(cluster), ID: "ok-2", Data: []byte("small")},
	})
	var be *sqs.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("error = %v, want *BatchError", err)
	}
	if len(be.Failed) != 1 || be.Failed[0].ID != "too-big" || !be.Failed[0].SenderFault || be.Retryable() {
		t.Errorf("failed = %+v, want only too-big, sender's fault, not retryable", be.Failed)
	}
	got := receiveAll(t, f.SQS(), events, 2, arrivalBound)
	var ids []string
	for _, m := range got {
		ids = append(ids, aws.ToString(m.MessageAttributes[sqs.AttrID].StringValue))
	}
	if fmt.Sprint(ids) != "[ok-1 ok-2]" {
		t.Errorf("stored ids = %v, want [ok-1 ok-2]", ids)
	}
}

func TestFailedMessageRedeliveredAfterBackoff(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events, dlq := newQueues(t, f, nil)
	client := f.SQS()
	if err := publisher(client, events, "").Publish(ctx, queue.EventsSubject(cluster), "flaky", []byte("x")); err != nil {
		t.Fatal(err)
	}
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Client: client, QueueURL: events, DeadLetterURL: dlq, WaitTime: time.Second,
		Backoff: []time.Duration{time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	rec := &recorder{fn: func(m queue.Message) error {
		times = append(times, time.Now())
		if m.Attempt == 1 {
			return errors.New("transient: cloud API throttled")
		}
		return nil
	}}
	consumeUntil(t, c, rec.handle, func() bool { return rec.count() >= 2 && queueDepth(t, client, events) == 0 })
	got := rec.snapshot()
	if len(got) != 2 || got[0].Attempt != 1 || got[1].Attempt != 2 || got[1].ID != "flaky" {
		t.Fatalf("deliveries = %+v, want attempts 1 then 2 of flaky", got)
	}
	// ChangeMessageVisibility(1 s) after the failure: the redelivery comes no sooner than that.
	if gap := times[1].Sub(times[0]); gap < 900*time.Millisecond {
		t.Errorf("redelivered after %s, want >= the 1 s backoff", gap)
	}
	if n := len(receiveAll(t, client, dlq, 1, time.Second)); n != 0 {
		t.Errorf("dlq holds %d messages, want 0", n)
	}
}

// A handler that asks to be retried after a delay (queue.RetryAfter) gets that visibility, not
// the consumer's backoff: a 1 s retry comes back long before the configured 10 minutes.
func TestRetryAfterOverridesTheBackoff(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events, dlq := newQueues(t, f, nil)
	client := f.SQS()
	if err := publisher(client, events, "").Publish(ctx, queue.EventsSubject(cluster), "waiting", []byte("x")); err != nil {
		t.Fatal(err)
	}
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Client: client, QueueURL: events, DeadLetterURL: dlq, WaitTime: time.Second,
		Backoff: []time.Duration{10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{fn: func(m queue.Message) error {
		if m.Attempt == 1 {
			return queue.RetryAfter(errors.New("awaiting a replacement"), 300*time.Millisecond) // rounded up to 1 s
		}
		return nil
	}}
	consumeUntil(t, c, rec.handle, func() bool { return rec.count() >= 2 && queueDepth(t, client, events) == 0 })
	if got := rec.snapshot(); len(got) != 2 || got[1].Attempt != 2 {
		t.Fatalf("deliveries = %+v, want a second attempt (the 10 min backoff was not used)", got)
	}
}

func TestVisibilityTimeoutRedeliversUnsettledMessage(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events, _ := newQueues(t, f, map[string]string{"VisibilityTimeout": "1"})
	client := f.SQS()
	if err := publisher(client, events, "").Publish(ctx, queue.EventsSubject(cluster), "orphaned", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// A worker receives it and dies (never deletes): after the 1 s visibility timeout SQS delivers
	// it again, with ApproximateReceiveCount 2. The message is hidden after start, so it cannot be
	// visible again before start + 1 s however slow the steps below are.
	start := time.Now()
	first, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(events), WaitTimeSeconds: 1})
	if err != nil || len(first.Messages) != 1 {
		t.Fatalf("first receive: %v, %d messages", err, len(first.Messages))
	}
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Client: client, QueueURL: events, WaitTime: time.Second, VisibilityTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	consumeUntil(t, c, rec.handle, func() bool { return rec.count() >= 1 })
	if m := rec.snapshot()[0]; m.ID != "orphaned" || m.Attempt != 2 {
		t.Errorf("redelivery = %+v, want orphaned on attempt 2", m)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("redelivered after %s, before the visibility timeout", waited)
	}
}

func TestPoisonGoesToDLQWithReason(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events, dlq := newQueues(t, f, nil)
	client := f.SQS()
	pub := publisher(client, events, "")
	for _, id := range []string{"bad", "good"} {
		if err := pub.Publish(ctx, queue.EventsSubject(cluster), id, []byte(id+" body")); err != nil {
			t.Fatal(err)
		}
	}
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Client: client, QueueURL: events, DeadLetterURL: dlq, WaitTime: time.Second, MaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{fn: func(m queue.Message) error {
		if m.ID == "bad" {
			return fmt.Errorf("%w: field snapshot.revision: missing", queue.ErrPoison)
		}
		return nil
	}}
	consumeUntil(t, c, rec.handle, func() bool { return rec.count() >= 2 })
	if got := rec.snapshot(); len(got) != 2 || got[1].ID != "good" {
		t.Errorf("handled %+v, want bad then good (a poison message does not block its group)", got)
	}
	dead := receiveAll(t, client, dlq, 1, arrivalBound)
	if len(dead) != 1 {
		t.Fatalf("dlq holds %d messages, want 1", len(dead))
	}
	d := dead[0]
	attr := func(n string) string { return aws.ToString(d.MessageAttributes[n].StringValue) }
	if aws.ToString(d.Body) != "bad body" || attr(sqs.AttrID) != "bad" || attr(sqs.AttrDLQSource) != events || attr(sqs.AttrDLQReceiveCount) != "1" {
		t.Errorf("dead letter = body %q attrs %v", aws.ToString(d.Body), d.MessageAttributes)
	}
	if want := "poison message: field snapshot.revision: missing"; attr(sqs.AttrDLQReason) != want {
		t.Errorf("reason = %q, want %q", attr(sqs.AttrDLQReason), want)
	}
	if d.Attributes["MessageGroupId"] != cluster {
		t.Errorf("dead letter group = %q, want the original group %q", d.Attributes["MessageGroupId"], cluster)
	}
	if n := queueDepth(t, client, events); n != 0 {
		t.Errorf("source queue holds %d messages, want 0 (poison deleted after dead-lettering)", n)
	}
}

func TestExhaustedRetriesGoToDLQ(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events, dlq := newQueues(t, f, nil)
	client := f.SQS()
	if err := publisher(client, events, "").Publish(ctx, queue.EventsSubject(cluster), "always-fails", []byte("x")); err != nil {
		t.Fatal(err)
	}
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Client: client, QueueURL: events, DeadLetterURL: dlq, WaitTime: time.Second,
		MaxReceives: 3, Backoff: []time.Duration{0}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{fn: func(queue.Message) error { return errors.New("cloud unreachable") }}
	consumeUntil(t, c, rec.handle, func() bool { return rec.count() >= 3 && queueDepth(t, client, events) == 0 })
	dead := receiveAll(t, client, dlq, 1, arrivalBound)
	if len(dead) != 1 {
		t.Fatalf("dlq holds %d messages, want 1", len(dead))
	}
	if r := aws.ToString(dead[0].MessageAttributes[sqs.AttrDLQReason].StringValue); r != "failed 3 of 3 receives; last error: cloud unreachable" {
		t.Errorf("reason = %q", r)
	}
	if n := rec.count(); n != 3 {
		t.Errorf("handler ran %d times, want 3 (MaxReceives)", n)
	}
}

// bigSnapshot has pods with pseudo-random annotations (a fixed seed) that zstd cannot shrink
// much: ~600 KiB of hex compresses to about half, well over the 240 KiB inline limit.
func bigSnapshot() *events.Snapshot {
	r := rand.New(rand.NewPCG(1, 2))
	s := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: 42,
		Time: metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))}
	for i := range 600 {
		var b strings.Builder
		for range 64 {
			fmt.Fprintf(&b, "%016x", r.Uint64())
		}
		s.PendingPods = append(s.PendingPods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("web-%d", i), Namespace: "default", Annotations: map[string]string{"noise": b.String()}}})
	}
	return s
}

func TestClaimCheckThroughS3(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	events_, dlq := newQueues(t, f, map[string]string{"MaximumMessageSize": strconv.Itoa(sqs.MaxMessageBytes)})
	bucket := "dovetail-claim-check-test"
	s3c := f.S3()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	store := &s3blob.Store{Client: s3c, Bucket: bucket}
	codec := events.Codec{Blobs: store}
	snap := bigSnapshot()
	data, err := codec.NewEvent(ctx, cluster, "agent", events.TypeSnapshot, "snapshot-42", snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) >= sqs.MaxMessageBytes {
		t.Fatalf("claim-checked event is %d bytes, want under the SQS limit", len(data))
	}
	client := f.SQS()
	if err := publisher(client, events_, "").Publish(ctx, queue.EventsSubject(cluster), "snapshot-42", data); err != nil {
		t.Fatal(err)
	}
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Client: client, QueueURL: events_, DeadLetterURL: dlq, WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var got *events.Snapshot
	var ref string
	rec := &recorder{fn: func(m queue.Message) error {
		env, err := events.Decode(m.Data)
		if err != nil {
			return err
		}
		ref = env.DataRef
		got, err = codec.Snapshot(ctx, env)
		return err
	}}
	consumeUntil(t, c, rec.handle, func() bool { return rec.count() >= 1 })
	if !strings.HasPrefix(ref, "s3://"+bucket+"/"+s3blob.DefaultPrefix+cluster+"/") || !strings.HasSuffix(ref, ".json.zst") {
		t.Errorf("dataref = %q, want s3://%s/%s%s/<sha256>.json.zst", ref, bucket, s3blob.DefaultPrefix, cluster)
	}
	if got == nil || len(got.PendingPods) != 600 || got.PendingPods[599].Annotations["noise"] != snap.PendingPods[599].Annotations["noise"] {
		t.Fatalf("snapshot through the claim check lost data")
	}
	// The object really is in S3, over the inline limit.
	enc, err := events.EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimPrefix(ref, "s3://"+bucket+"/")
	head, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt64(head.ContentLength) != int64(len(enc)) || len(enc)*4/3 <= events.DefaultMaxInlineBytes {
		t.Errorf("object is %d bytes, encoded snapshot %d bytes (base64 ~%d, inline limit %d)",
			aws.ToInt64(head.ContentLength), len(enc), len(enc)*4/3, events.DefaultMaxInlineBytes)
	}
}

func TestS3StoreRefusals(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	bucket := "dovetail-refusals"
	s3c := f.S3()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	store := &s3blob.Store{Client: s3c, Bucket: bucket, Prefix: "cc/"}
	for _, uri := range []string{
		"s3://" + bucket + "/cc/" + cluster + "/missing.json.zst", // expired or never stored
		"s3://other-bucket/cc/x.json.zst",                         // another bucket
		"s3://" + bucket + "/elsewhere/x.json.zst",                // outside the prefix
		"file:///etc/passwd",
	} {
		if _, err := store.Get(ctx, uri); !errors.Is(err, events.ErrBlobNotFound) {
			t.Errorf("Get(%q) = %v, want ErrBlobNotFound", uri, err)
		}
	}
	if _, err := store.Put(ctx, "../escape", []byte("x")); err == nil {
		t.Error("Put with a .. key succeeded")
	}
	uri, err := store.Put(ctx, cluster+"/abc.json.zst", []byte("hello"))
	if err != nil || uri != "s3://"+bucket+"/cc/"+cluster+"/abc.json.zst" {
		t.Fatalf("Put = %q, %v", uri, err)
	}
	if b, err := store.Get(ctx, uri); err != nil || string(b) != "hello" {
		t.Errorf("Get = %q, %v", b, err)
	}
}

// The fallback path for messages no consumer settles (a worker died, or a Lambda without a
// DLQ URL reported a poison record): SQS's redrive policy moves a message to the DLQ once it
// has been received maxReceiveCount times (SQS Developer Guide, "Using dead-letter queues").
func TestRedrivePolicyMovesUnsettledMessage(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	client := f.SQS()
	n := queueSeq.Add(1)
	dlq := f.CreateFIFO(ctx, t, fmt.Sprintf("redrive-dlq-%d", n), nil)
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":2}`, f.QueueARN(ctx, t, dlq))
	src := f.CreateFIFO(ctx, t, fmt.Sprintf("redrive-%d", n), map[string]string{"RedrivePolicy": redrive})
	if err := publisher(client, src, "").Publish(ctx, queue.EventsSubject(cluster), "never-settled", []byte("x")); err != nil {
		t.Fatal(err)
	}
	receives := 0
	for range 4 { // each receive hands it back at once (visibility 0), unsettled
		out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(src), WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		receives += len(out.Messages)
		for _, m := range out.Messages {
			if _, err := client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(src),
				ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if receives != 2 {
		t.Errorf("received %d times, want 2 (maxReceiveCount), then redriven", receives)
	}
	dead := receiveAll(t, client, dlq, 1, arrivalBound)
	if len(dead) != 1 || aws.ToString(dead[0].MessageAttributes[sqs.AttrID].StringValue) != "never-settled" {
		t.Fatalf("dlq holds %d messages, want never-settled", len(dead))
	}
}
