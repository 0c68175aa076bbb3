package sqs_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
)

func TestMessageSizeCountsAttributes(t *testing.T) {
	// SQS counts body bytes plus each attribute's name, data type and value bytes:
	// "hello" (5) + "dovetail-id" (11) + "String" (6) + "ev-1" (4) = 26.
	got := sqs.MessageSize("hello", map[string]types.MessageAttributeValue{
		sqs.AttrID: {DataType: aws.String("String"), StringValue: aws.String("ev-1")}})
	if got != 26 {
		t.Errorf("MessageSize = %d, want 26", got)
	}
}

func TestDeduplicationIDAndCluster(t *testing.T) {
	if got := sqs.DeduplicationID("pods-pending-7"); got != "pods-pending-7" {
		t.Errorf("valid id changed: %q", got)
	}
	// 129 characters is over SQS's 128-character limit; a space is not allowed at all.
	for _, id := range []string{strings.Repeat("a", 129), "has space"} {
		got := sqs.DeduplicationID(id)
		if !strings.HasPrefix(got, "sha256-") || len(got) != 7+64 || got != sqs.DeduplicationID(id) {
			t.Errorf("DeduplicationID(%q) = %q, want a stable sha256- form of 71 characters", id, got)
		}
	}
	if c, err := sqs.ClusterOf("dovetail.prod-east.events"); err != nil || c != "prod-east" {
		t.Errorf("ClusterOf = %q, %v", c, err)
	}
	for _, s := range []string{"dovetail..events", "other.c.events", "dovetail.c"} {
		if _, err := sqs.ClusterOf(s); err == nil {
			t.Errorf("ClusterOf(%q) accepted", s)
		}
	}
	if !sqs.IsFIFO("https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo") || sqs.IsFIFO("https://sqs.us-east-1.amazonaws.com/123456789012/q") {
		t.Error("IsFIFO")
	}
}
