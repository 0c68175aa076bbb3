package sqs

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Attributes of a dead-lettered message, beside the original ones.
const (
	// AttrDLQReason says why the message was dead-lettered (the handler's error, at most
	// MaxReasonBytes).
	AttrDLQReason = "dovetail-dlq-reason"
	// AttrDLQSource is the queue (URL or ARN) the message came from.
	AttrDLQSource = "dovetail-dlq-source"
	// AttrDLQMessageID is the SQS MessageId the message had on its source queue.
	AttrDLQMessageID = "dovetail-dlq-message-id"
	// AttrDLQReceiveCount is how often the source queue had delivered it.
	AttrDLQReceiveCount = "dovetail-dlq-receive-count"
)

// MaxReasonBytes caps AttrDLQReason, so a long error chain cannot push the message over the limit.
const MaxReasonBytes = 1024

// DefaultDLQGroup is the message group of a dead letter whose original had none (standard
// source queue, FIFO dead-letter queue).
const DefaultDLQGroup = "dovetail-dlq"

// DeadLetter is one message to move to a dead-letter queue.
type DeadLetter struct {
	// MessageID is the SQS MessageId on the source queue; it derives the dead letter's
	// deduplication id, so moving the same message twice stores it once.
	MessageID string
	Body      string
	// GroupID is the source message's MessageGroupId ("" on standard queues).
	GroupID string
	// Attributes are the source message's message attributes; they are copied.
	Attributes   map[string]types.MessageAttributeValue
	Reason       string
	Source       string
	ReceiveCount int
}

// SendDeadLetter sends d to the queue at dlqURL with the AttrDLQ* attributes. It does not delete
// the original: the caller does that (or reports it done) only after this returns nil, so a
// message is never in neither queue.
func SendDeadLetter(ctx context.Context, client API, dlqURL string, d DeadLetter) error {
	attrs := make(map[string]types.MessageAttributeValue, len(d.Attributes)+4)
	for k, v := range d.Attributes {
		if !strings.HasPrefix(k, "dovetail-dlq-") {
			attrs[k] = v
		}
	}
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	attrs[AttrDLQReason] = str(reasonValue(d.Reason))
	if d.Source != "" {
		attrs[AttrDLQSource] = str(d.Source)
	}
	if d.MessageID != "" {
		attrs[AttrDLQMessageID] = str(d.MessageID)
	}
	attrs[AttrDLQReceiveCount] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(d.ReceiveCount))}
	in := &awssqs.SendMessageInput{QueueUrl: aws.String(dlqURL), MessageBody: aws.String(d.Body), MessageAttributes: attrs}
	if IsFIFO(dlqURL) {
		group := d.GroupID
		if group == "" {
			group = DefaultDLQGroup
		}
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(DeduplicationID("dlq-" + d.MessageID))
	}
	if _, err := client.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("sending message %s to dead-letter queue %s: %w", d.MessageID, dlqURL, err)
	}
	return nil
}

// reasonValue makes a reason a non-empty attribute value of at most MaxReasonBytes (a cut
// rune at the end is dropped, so the value stays valid UTF-8 as SQS requires).
func reasonValue(s string) string {
	if s == "" {
		return "unspecified"
	}
	if len(s) <= MaxReasonBytes {
		return s
	}
	return strings.ToValidUTF8(s[:MaxReasonBytes], "")
}
