// Package queue moves events and commands between the agent and the functions. Transports (NATS
// JetStream here; SQS and Event Grid later) deliver at least once: a handler's message is
// acknowledged only after the handler returns nil, redelivered when it fails, and moved to the
// dead-letter subject with its reason when it keeps failing or is malformed.
package queue

import (
	"context"
	"errors"
	"time"
)

// Message is one delivered message.
type Message struct {
	// ID is the publisher's message id (CloudEvents id); transports use it to drop duplicates
	// within their deduplication window.
	ID      string
	Subject string
	Data    []byte
	// Attempt is 1 on first delivery and grows with each redelivery.
	Attempt int
	// Published is when the queue accepted the message (JetStream's stored timestamp, SQS's
	// SentTimestamp); zero when the transport does not say. The runtime records the message's
	// age from it (dovetail_queue_message_age_seconds).
	Published time.Time
}

// Handler processes one message. Returning nil acknowledges it; returning an error asks for
// redelivery; returning an error wrapping ErrPoison sends it to the dead-letter subject at once.
type Handler func(ctx context.Context, msg Message) error

// ErrPoison marks a message that can never succeed (malformed, wrong version). Wrap it with the
// reason: fmt.Errorf("%w: field snapshot.revision: missing", queue.ErrPoison).
var ErrPoison = errors.New("poison message")

// RetryAfter marks err (retryable, not poison) with when its message should come back: every
// transport redelivers it after d (JetStream NakWithDelay, SQS ChangeMessageVisibility, on Lambda
// too) instead of after its backoff or visibility timeout. A handler waiting on something that
// will happen within seconds (a notice waiting for its drain start) uses it; d is rounded up to
// whole seconds where the transport counts in seconds.
func RetryAfter(err error, d time.Duration) error { return &retryAfter{err: err, after: d} }

type retryAfter struct {
	err   error
	after time.Duration
}

func (r *retryAfter) Error() string { return r.err.Error() }
func (r *retryAfter) Unwrap() error { return r.err }

// RetryDelay returns the delay a RetryAfter error in err's chain asks for.
func RetryDelay(err error) (time.Duration, bool) {
	var r *retryAfter
	if errors.As(err, &r) {
		return max(r.after, 0), true
	}
	return 0, false
}

// Publisher publishes one message on a subject.
type Publisher interface {
	Publish(ctx context.Context, subject string, id string, data []byte) error
}

// Consumer delivers messages of a durable subscription to a handler until ctx ends.
type Consumer interface {
	Consume(ctx context.Context, handler Handler) error
}

// Subjects of one cluster. The cluster name is part of every subject so one queue serves many.
func EventsSubject(cluster string) string     { return "dovetail." + cluster + ".events" }
func CommandsSubject(cluster string) string   { return "dovetail." + cluster + ".commands" }
func DeadLetterSubject(cluster string) string { return "dovetail." + cluster + ".dlq" }

// NoticesSubject carries a cluster's cloud notices (EC2 spot interruption, rebalance, state
// change and AWS Health events through EventBridge → SQS on AWS; Azure Scheduled Events and Event
// Grid; a plain subject locally). The interruption function consumes it.
func NoticesSubject(cluster string) string { return "dovetail." + cluster + ".notices" }

// AuditSubject carries a cluster's decision audit records (telemetry.Audit as JSON, one per
// message) in local dev and the NATS runtime, beside the functions' log streams; `dovetail audit
// --nats` reads them.
func AuditSubject(cluster string) string { return "dovetail." + cluster + ".audit" }
