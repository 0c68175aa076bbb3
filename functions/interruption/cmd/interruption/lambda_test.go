package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/runtime"
)

// visibilityRecorder stands in for SQS where time is simulated (real SQS and fauxqs keep wall
// time): it records each ChangeMessageVisibility and resolves queue URLs. The wire-level path
// (the bootstrap under the Runtime Interface Emulator against fauxqs) is TestLambdaRedrivesWaitingNoticeWithinSeconds.
type visibilityRecorder struct {
	mu      sync.Mutex
	changes []int32
}

func (v *visibilityRecorder) SendMessage(context.Context, *awssqs.SendMessageInput, ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error) {
	return &awssqs.SendMessageOutput{}, nil
}

func (v *visibilityRecorder) SendMessageBatch(context.Context, *awssqs.SendMessageBatchInput, ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
	return &awssqs.SendMessageBatchOutput{}, nil
}

func (v *visibilityRecorder) ReceiveMessage(context.Context, *awssqs.ReceiveMessageInput, ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	return &awssqs.ReceiveMessageOutput{}, nil
}

func (v *visibilityRecorder) DeleteMessage(context.Context, *awssqs.DeleteMessageInput, ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error) {
	return &awssqs.DeleteMessageOutput{}, nil
}

func (v *visibilityRecorder) ChangeMessageVisibility(_ context.Context, in *awssqs.ChangeMessageVisibilityInput, _ ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.changes = append(v.changes, in.VisibilityTimeout)
	return &awssqs.ChangeMessageVisibilityOutput{}, nil
}

func (v *visibilityRecorder) GetQueueUrl(_ context.Context, in *awssqs.GetQueueUrlInput, _ ...func(*awssqs.Options)) (*awssqs.GetQueueUrlOutput, error) {
	return &awssqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/" + aws.ToString(in.QueueOwnerAWSAccountId) + "/" + aws.ToString(in.QueueName))}, nil
}

// The 2-minute spot timeline on Lambda, in simulated time: the interruption handler behind the
// Lambda adapter (runtime.LambdaHandler), reading the cluster's snapshot from the claim-check
// store where the agent writes it (nothing kept between invocations), the notice queue's
// visibility timeout 120 s. Two pods on a spot node; a replacement boots in 100 s, too late to
// wait for. Each invocation that must wait reports the record failed and re-drives it within
// interruption.RedriveInterval (ChangeMessageVisibility), and the simulated clock moves by that
// much before Lambda's next delivery. The drain starts at the deadline rule's start (notice +
// 120 s − 15 s margin − 30 s grace = +75 s), before deadline − margin (+105 s); left to the
// visibility timeout the notice would have come back at +120 s, at the reclaim.
func TestLambdaSpotTimelineDrainsBeforeDeadlineMinusMargin(t *testing.T) {
	ctx := context.Background()
	w := scenarios.NewWorld(scenarios.Start, 100*time.Second, nil)
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "c5.large"}}},
		}}}}}
	w.AddPools([]apisv1.NodePool{pool}, nil)
	yes := true
	for i := range 2 {
		w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: &yes}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}}})
	}
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(ctx, 100*time.Second); err != nil { // the node boots and registers
		t.Fatal(err)
	}
	node := w.Snapshot().Nodes[0]
	it, err := w.Cloud.Interrupt(node.Spec.ProviderID, fake.KindSpotInterruption)
	if err != nil {
		t.Fatal(err)
	}
	deadline := it.Time.Add(2 * time.Minute)

	// The agent's side: the latest snapshot under its well-known key after every change.
	store := &events.MemoryBlobStore{}
	storeLatest := func() {
		enc, err := events.EncodeSnapshot(w.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := events.PutLatestSnapshot(ctx, store, scenarios.Cluster, enc); err != nil {
			t.Fatal(err)
		}
	}
	var drainedAt time.Time
	h := &interruption.Handler{Cluster: scenarios.Cluster, Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Cloud, Publisher: w,
		Snapshots: interruption.BlobSnapshot{Cluster: scenarios.Cluster, Blobs: store}, Now: w.Clock.Now,
		MaxAttempts: interruption.MaxDeliveries, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnDecision: func(d interruption.Decision) {
			if d.Drained && drainedAt.IsZero() {
				drainedAt = w.Clock.Now()
			}
		}}
	sqsAPI := &visibilityRecorder{}
	lambda := runtime.LambdaHandler(Dispatch(scenarios.Cluster, nil, h.Handle), runtime.LambdaOptions{SQS: sqsAPI, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	notice := string(scenarios.SpotNoticeJSON(it, "notice-1"))
	var invocations []time.Duration // simulated time of each delivery, from the notice
	for receive := 1; ; receive++ {
		if receive > interruption.MaxDeliveries {
			t.Fatalf("not done after %d deliveries", receive-1)
		}
		storeLatest()
		invocations = append(invocations, w.Clock.Now().Sub(it.Time))
		resp, err := lambda(ctx, lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{{MessageId: "m-1", ReceiptHandle: fmt.Sprintf("rh-%d", receive), Body: notice,
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:dovetail-prod-notices",
			Attributes:     map[string]string{"ApproximateReceiveCount": fmt.Sprint(receive)}}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.BatchItemFailures) == 0 {
			break // done: Lambda deletes the record
		}
		sqsAPI.mu.Lock()
		redrive := sqsAPI.changes[len(sqsAPI.changes)-1]
		n := len(sqsAPI.changes)
		sqsAPI.mu.Unlock()
		if n != receive || redrive < 1 || time.Duration(redrive)*time.Second > interruption.RedriveInterval {
			t.Fatalf("delivery %d: %d visibility changes, the last %d s; want one per failed delivery of 1..%s", receive, n, redrive, interruption.RedriveInterval)
		}
		// Lambda's next delivery comes when the record is visible again; the cluster moves on.
		if err := w.Step(ctx, time.Duration(redrive)*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("deliveries at notice + %v; drain at notice + %s, deadline − margin at + %s",
		invocations, drainedAt.Sub(it.Time), deadline.Add(-disruption.DefaultDrainMargin).Sub(it.Time))
	if drainedAt.IsZero() || drainedAt.After(deadline.Add(-disruption.DefaultDrainMargin)) {
		t.Fatalf("drain at %v, want by deadline − margin %v", drainedAt, deadline.Add(-disruption.DefaultDrainMargin))
	}
	if start := it.Time.Add(75 * time.Second); drainedAt.Before(start) {
		t.Fatalf("drain at notice + %s, before the rule's start (+75 s) though the replacement was not ready", drainedAt.Sub(it.Time))
	}
	if st := w.Cloud.Stats(); st.Launches != 2 {
		t.Fatalf("%d launches over %d deliveries, want 2 (the node and one replacement)", st.Launches, len(invocations))
	}
}
