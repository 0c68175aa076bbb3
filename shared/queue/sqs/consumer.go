package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Defaults of ConsumerConfig.
const (
	// DefaultWaitTime is SQS's longest long poll (20 s, SQS API reference ReceiveMessage
	// WaitTimeSeconds): fewest empty receives.
	DefaultWaitTime = 20 * time.Second
	// DefaultVisibilityTimeout is how long a received message stays hidden from other consumers;
	// the consumer extends it while the handler runs.
	DefaultVisibilityTimeout = 30 * time.Second
	// DefaultMaxReceives matches the redrive policy's maxReceiveCount in infra/aws (5).
	DefaultMaxReceives = 5
)

// DefaultBackoff is how long a failed message stays invisible after its 1st, 2nd, 3rd and later
// failures (set with ChangeMessageVisibility), like the NATS consumer's redelivery backoff.
var DefaultBackoff = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second}

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	Client API
	// QueueURL is the queue to read. Required.
	QueueURL string
	// DeadLetterURL receives poison messages with their reason. Empty: poison messages are left
	// to the queue's redrive policy (moved after maxReceiveCount receives, without a reason).
	DeadLetterURL string
	// WaitTime is the long-poll wait of each receive, in whole seconds, 0..20; default DefaultWaitTime.
	WaitTime time.Duration
	// MaxMessages per receive, 1..10; default 1 (one decision at a time per cluster).
	MaxMessages int
	// VisibilityTimeout is requested on every receive and renewed every third of it while the
	// handler runs; whole seconds; default DefaultVisibilityTimeout.
	VisibilityTimeout time.Duration
	// MaxReceives: a message whose handler fails on its MaxReceives-th receive is dead-lettered
	// with the last error as reason (when DeadLetterURL is set). Default DefaultMaxReceives; keep
	// it at most the redrive policy's maxReceiveCount, which catches messages whose workers died.
	MaxReceives int
	// Backoff[i] is the invisibility after failure i+1 (the last entry repeats); default DefaultBackoff.
	Backoff []time.Duration
	// Logger receives failures and dead-letter notices; default slog.Default().
	Logger *slog.Logger
}

// Consumer long-polls one queue and runs a handler on each message. It implements queue.Consumer.
//
// Outcomes per message: nil → DeleteMessage. An error → the message's visibility is set to the
// attempt's backoff (ChangeMessageVisibility), so SQS delivers it again (Message.Attempt is
// SQS's ApproximateReceiveCount). An error wrapping queue.ErrPoison, or a failure on receive
// MaxReceives → SendMessage to DeadLetterURL with AttrDLQReason, then DeleteMessage; if the send
// fails the message stays and comes back. A panic counts as an error. On a FIFO queue, once a
// message of a group fails (not poison), the batch's later messages of that group are released
// untouched, so the group's order holds.
type Consumer struct {
	cfg ConsumerConfig
	log *slog.Logger
}

var _ queue.Consumer = (*Consumer)(nil)

// NewConsumer checks cfg and fills its defaults.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Client == nil {
		return nil, errors.New("sqs consumer config client: required")
	}
	if cfg.QueueURL == "" {
		return nil, errors.New("sqs consumer config queueURL: required")
	}
	if cfg.WaitTime == 0 {
		cfg.WaitTime = DefaultWaitTime
	}
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = 1
	}
	if cfg.VisibilityTimeout == 0 {
		cfg.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if cfg.MaxReceives == 0 {
		cfg.MaxReceives = DefaultMaxReceives
	}
	if len(cfg.Backoff) == 0 {
		cfg.Backoff = DefaultBackoff
	}
	switch {
	case cfg.WaitTime < 0 || cfg.WaitTime > 20*time.Second:
		return nil, fmt.Errorf("sqs consumer config waitTime %s: must be within 0..20s", cfg.WaitTime)
	case cfg.MaxMessages < 1 || cfg.MaxMessages > 10:
		return nil, fmt.Errorf("sqs consumer config maxMessages %d: must be within 1..10", cfg.MaxMessages)
	case cfg.VisibilityTimeout < time.Second || cfg.VisibilityTimeout > 12*time.Hour:
		return nil, fmt.Errorf("sqs consumer config visibilityTimeout %s: must be within 1s..12h (SQS limit)", cfg.VisibilityTimeout)
	case cfg.MaxReceives < 1:
		return nil, fmt.Errorf("sqs consumer config maxReceives %d: must be >= 1", cfg.MaxReceives)
	}
	for i, d := range cfg.Backoff {
		if d < 0 || d > 12*time.Hour {
			return nil, fmt.Errorf("sqs consumer config backoff[%d] %s: must be within 0..12h", i, d)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Consumer{cfg: cfg, log: cfg.Logger.With("queue", cfg.QueueURL)}, nil
}

// settleTimeout bounds deletes, visibility changes and dead-letter sends, which must finish even
// while ctx is ending.
const settleTimeout = 5 * time.Second

// Consume receives and handles messages until ctx ends, then returns nil after the messages in
// hand are settled. It returns an error only when the queue does not exist.
func (c *Consumer) Consume(ctx context.Context, handler queue.Handler) error {
	if handler == nil {
		return errors.New("consume: handler: required")
	}
	for ctx.Err() == nil {
		out, err := c.cfg.Client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(c.cfg.QueueURL),
			MaxNumberOfMessages:         int32(c.cfg.MaxMessages),
			WaitTimeSeconds:             int32(c.cfg.WaitTime / time.Second),
			VisibilityTimeout:           int32(c.cfg.VisibilityTimeout / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var missing *types.QueueDoesNotExist
			if errors.As(err, &missing) {
				return fmt.Errorf("sqs consumer %s: %w", c.cfg.QueueURL, err)
			}
			// The SDK's retryer already retried; pause so a broken link is not spun on.
			c.log.Warn("receive failed", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		blocked := map[string]bool{}
		for _, m := range out.Messages {
			group := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
			if ctx.Err() != nil || (group != "" && blocked[group]) {
				c.release(ctx, m)
				continue
			}
			if !c.process(ctx, m, handler) && group != "" {
				blocked[group] = true
			}
		}
	}
	return nil
}

// process handles one message; it returns false when the message will come back (so later
// messages of its FIFO group must wait).
func (c *Consumer) process(ctx context.Context, m types.Message, handler queue.Handler) bool {
	msg := Message(m)
	log := c.log.With("messageId", aws.ToString(m.MessageId), "id", msg.ID, "attempt", msg.Attempt)
	err := c.run(ctx, m, msg, handler, log)
	// The settle deadline starts after the handler: a long handler must still get its delete
	// (or visibility change) through.
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	switch {
	case err == nil:
		if _, err := c.cfg.Client.DeleteMessage(settle, &awssqs.DeleteMessageInput{
			QueueUrl: aws.String(c.cfg.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			// It comes back after the visibility timeout; handlers are idempotent (DESIGN invariant 2).
			log.Warn("delete failed; the message will be redelivered", "err", err)
		}
		return true
	case errors.Is(err, queue.ErrPoison):
		return c.deadLetter(settle, log, m, msg, err.Error())
	case ctx.Err() != nil:
		log.Info("consumer stopping; message released for redelivery", "err", err)
		c.release(settle, m)
		return false
	case msg.Attempt >= c.cfg.MaxReceives:
		return c.deadLetter(settle, log, m, msg, fmt.Sprintf("failed %d of %d receives; last error: %v", msg.Attempt, c.cfg.MaxReceives, err))
	default:
		delay := c.backoff(msg.Attempt)
		if d, ok := queue.RetryDelay(err); ok {
			delay = (d + time.Second - 1).Truncate(time.Second) // whole seconds, rounded up
		}
		log.Warn("handler failed; redelivering", "err", err, "delay", delay)
		c.setVisibility(settle, log, m, delay)
		return false
	}
}

// run calls handler, turning a panic into an error, and keeps the message invisible while the
// handler works.
func (c *Consumer) run(ctx context.Context, m types.Message, msg queue.Message, handler queue.Handler, log *slog.Logger) (err error) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(c.cfg.VisibilityTimeout / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.setVisibility(ctx, log, m, c.cfg.VisibilityTimeout)
			}
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
			log.Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	return handler(ctx, msg)
}

func (c *Consumer) deadLetter(ctx context.Context, log *slog.Logger, m types.Message, msg queue.Message, reason string) bool {
	if c.cfg.DeadLetterURL == "" {
		log.Error("message cannot succeed; no dead-letter URL configured, leaving it to the redrive policy", "reason", reason)
		c.setVisibility(ctx, log, m, c.backoff(msg.Attempt))
		return true // it will not be processed again successfully; later messages need not wait
	}
	err := SendDeadLetter(ctx, c.cfg.Client, c.cfg.DeadLetterURL, DeadLetter{
		MessageID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body),
		GroupID:    m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)],
		Attributes: m.MessageAttributes, Reason: reason, Source: c.cfg.QueueURL, ReceiveCount: msg.Attempt,
	})
	if err != nil {
		log.Error("dead-letter send failed; message kept for redelivery", "reason", reason, "err", err)
		c.setVisibility(ctx, log, m, c.backoff(msg.Attempt))
		return false
	}
	log.Error("message dead-lettered", "reason", reason, "dlq", c.cfg.DeadLetterURL)
	if _, err := c.cfg.Client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{
		QueueUrl: aws.String(c.cfg.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		log.Warn("delete failed after dead-lettering; a redelivery is dead-lettered again (deduplicated on FIFO)", "err", err)
	}
	return true
}

// release makes a message visible again at once, for another receive.
func (c *Consumer) release(ctx context.Context, m types.Message) {
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	c.setVisibility(settle, c.log.With("messageId", aws.ToString(m.MessageId)), m, 0)
}

func (c *Consumer) setVisibility(ctx context.Context, log *slog.Logger, m types.Message, d time.Duration) {
	if _, err := c.cfg.Client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(c.cfg.QueueURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: int32(d / time.Second),
	}); err != nil && ctx.Err() == nil {
		log.Warn("change visibility failed; the message returns after its current visibility timeout", "err", err)
	}
}

// backoff is the invisibility after failed attempt n (1-based).
func (c *Consumer) backoff(attempt int) time.Duration {
	i := min(attempt-1, len(c.cfg.Backoff)-1)
	return c.cfg.Backoff[max(i, 0)]
}

// Message converts a received SQS message: ID from AttrID (else the FIFO deduplication id, else
// the SQS MessageId), Subject from AttrSubject, Attempt from ApproximateReceiveCount (1 if absent).
func Message(m types.Message) queue.Message {
	attr := func(name string) string {
		if v, ok := m.MessageAttributes[name]; ok {
			return aws.ToString(v.StringValue)
		}
		return ""
	}
	return queue.Message{
		ID: firstNonEmpty(attr(AttrID), m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)],
			aws.ToString(m.MessageId)),
		Subject:   attr(AttrSubject),
		Data:      []byte(aws.ToString(m.Body)),
		Attempt:   ReceiveCount(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]),
		Published: SentTime(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)]),
	}
}

// SentTime parses SentTimestamp (milliseconds since the epoch); missing or malformed is the
// zero time.
func SentTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// ReceiveCount parses ApproximateReceiveCount; missing or malformed counts as 1.
func ReceiveCount(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
