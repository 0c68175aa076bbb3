package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
)

// An event goes to the route and to every fan-out queue (one per function on AWS), in order in
// each, batched per queue: 3 entries × 3 queues = 3 SendMessageBatch calls of 3 entries.
func TestFanOutSendsEveryEventToEachQueue(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	a, _ := newQueues(t, f, nil)
	b, _ := newQueues(t, f, nil)
	c, _ := newQueues(t, f, nil)
	api := &countingAPI{API: f.SQS()}
	subject := queue.EventsSubject(cluster)
	// b repeated: sent to once.
	pub := &sqs.Publisher{Client: api, Routes: map[string]string{subject: a}, FanOut: map[string][]string{subject: {b, c, b}}}
	var entries []sqs.Entry
	for i := range 3 {
		entries = append(entries, sqs.Entry{Subject: subject, ID: fmt.Sprintf("snapshot-%d", i), Data: []byte(fmt.Sprintf("event %d", i))})
	}
	if err := pub.PublishBatch(ctx, entries); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(api.sizes) != "[3 3 3]" {
		t.Errorf("batch sizes = %v, want [3 3 3]", api.sizes)
	}
	for _, url := range []string{a, b, c} {
		got := receiveAll(t, f.SQS(), url, 3, arrivalBound)
		var ids []string
		for _, m := range got {
			ids = append(ids, aws.ToString(m.MessageAttributes[sqs.AttrID].StringValue))
			if m.Attributes["MessageGroupId"] != cluster || aws.ToString(m.MessageAttributes[sqs.AttrSubject].StringValue) != subject {
				t.Errorf("%s: group %q subject %v", url, m.Attributes["MessageGroupId"], m.MessageAttributes[sqs.AttrSubject].StringValue)
			}
		}
		if fmt.Sprint(ids) != "[snapshot-0 snapshot-1 snapshot-2]" {
			t.Errorf("%s holds %v, want the three events in order", url, ids)
		}
	}
	// A re-publish inside the FIFO deduplication interval (5 minutes) stores nothing anywhere.
	if err := pub.Publish(ctx, subject, "snapshot-1", []byte("event 1")); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{a, b, c} {
		if got := receiveAll(t, f.SQS(), url, 1, 1500*time.Millisecond); len(got) != 0 {
			t.Errorf("%s: duplicate stored: %d messages", url, len(got))
		}
	}
	// A subject routed by FanOut alone works; a subject with no queue is refused.
	only := &sqs.Publisher{Client: f.SQS(), FanOut: map[string][]string{subject: {a}}}
	if err := only.Publish(ctx, subject, "snapshot-9", []byte("x")); err != nil {
		t.Errorf("FanOut-only route: %v", err)
	}
	if err := only.Publish(ctx, queue.CommandsSubject(cluster), "c-1", []byte("x")); err == nil || !strings.Contains(err.Error(), "no queue URL routed") {
		t.Errorf("unrouted subject: %v", err)
	}
}

// One fan-out queue refusing an entry fails only that queue's copy, and the error names it.
func TestFanOutPartialFailureNamesTheQueue(t *testing.T) {
	f := fauxqs(t)
	ctx := context.Background()
	a, _ := newQueues(t, f, nil)
	// 1,024 bytes is SQS's minimum MaximumMessageSize (SQS API reference, SetQueueAttributes).
	small, _ := newQueues(t, f, map[string]string{"MaximumMessageSize": "1024"})
	subject := queue.EventsSubject(cluster)
	pub := &sqs.Publisher{Client: f.SQS(), Routes: map[string]string{subject: a}, FanOut: map[string][]string{subject: {small}}}
	err := pub.Publish(ctx, subject, "big", []byte(strings.Repeat("b", 2000)))
	var be *sqs.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].QueueURL != small || !strings.Contains(be.Error(), small) {
		t.Fatalf("error = %v, want one failure on %s", err, small)
	}
	if got := receiveAll(t, f.SQS(), a, 1, arrivalBound); len(got) != 1 {
		t.Errorf("the route's queue holds %d messages, want 1", len(got))
	}
}
