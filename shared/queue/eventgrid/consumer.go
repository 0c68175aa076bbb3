package eventgrid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/aznamespaces"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob"
)

// ReceiverAPI is the part of *aznamespaces.ReceiverClient the Consumer calls.
type ReceiverAPI interface {
	ReceiveEvents(ctx context.Context, o *aznamespaces.ReceiveEventsOptions) (aznamespaces.ReceiveEventsResponse, error)
	AcknowledgeEvents(ctx context.Context, lockTokens []string, o *aznamespaces.AcknowledgeEventsOptions) (aznamespaces.AcknowledgeEventsResponse, error)
	ReleaseEvents(ctx context.Context, lockTokens []string, o *aznamespaces.ReleaseEventsOptions) (aznamespaces.ReleaseEventsResponse, error)
	RejectEvents(ctx context.Context, lockTokens []string, o *aznamespaces.RejectEventsOptions) (aznamespaces.RejectEventsResponse, error)
	RenewEventLocks(ctx context.Context, lockTokens []string, o *aznamespaces.RenewEventLocksOptions) (aznamespaces.RenewEventLocksResponse, error)
}

var _ ReceiverAPI = (*aznamespaces.ReceiverClient)(nil)

// Defaults of ConsumerConfig.
const (
	// DefaultMaxWait is how long one receive waits for an event (the service allows 10..120 s).
	DefaultMaxWait = 30 * time.Second
	// DefaultLockDuration is the subscription's receiveLockDurationInSeconds as infra/azure sets
	// it (60 s, the service's default; 60..300 allowed); the lock is renewed every third of it.
	DefaultLockDuration = 60 * time.Second
	// DefaultMaxDeliveries: a command whose handler fails on its 5th delivery is dead-lettered
	// with the last error as reason. infra/azure sets the subscription's maxDeliveryCount to 10,
	// so Event Grid's own dead-lettering stays the net for consumers that die.
	DefaultMaxDeliveries = 5
)

// DefaultReleaseDelays are the redelivery delays after the 1st, 2nd, … failure (the last
// repeats); release takes only 0, 10, 60, 600 or 3600 s (aznamespaces.ReleaseDelay).
var DefaultReleaseDelays = []aznamespaces.ReleaseDelay{aznamespaces.ReleaseDelayTenSeconds, aznamespaces.ReleaseDelayTenSeconds,
	aznamespaces.ReleaseDelayOneMinute}

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// Receiver is the namespace topic's queue subscription. Required.
	Receiver ReceiverAPI
	// Subject is the queue.Message.Subject handlers see (queue.CommandsSubject(cluster)).
	Subject string
	// Source names the consumer in dead letters ("agent").
	Source string
	// DeadLetters stores poison events with their reason; nil rejects them, so Event Grid moves
	// them to the subscription's dead-letter destination without the reason (it is logged).
	DeadLetters azureblob.DeadLetterWriter
	// MaxWait per receive (whole seconds, 10..120 s); default DefaultMaxWait.
	MaxWait time.Duration
	// LockDuration of the subscription; default DefaultLockDuration.
	LockDuration time.Duration
	// MaxDeliveries; default DefaultMaxDeliveries.
	MaxDeliveries int
	// ReleaseDelays; default DefaultReleaseDelays.
	ReleaseDelays []aznamespaces.ReleaseDelay
	Logger        *slog.Logger
}

// Consumer pulls one event at a time from a namespace topic subscription and runs a handler on
// it. It implements queue.Consumer.
//
// Outcomes: nil → acknowledge. An error → release with the attempt's delay, so Event Grid
// delivers it again (queue.Message.Attempt is the broker's deliveryCount). queue.ErrPoison, or a
// failure on delivery MaxDeliveries → the dead letter with the reason, then acknowledge; if
// that write fails (or no writer is set) → reject, which dead-letters it to the subscription's
// destination. A panic counts as an error. The lock is renewed while the handler runs; a lost
// lock means Event Grid redelivers, which idempotent handlers absorb.
//
// Order: Event Grid keeps none. One event in flight (maxEvents 1) keeps the agent applying one
// command at a time; commands carry their snapshot revision and the agent refuses stale ones, so
// a command overtaken by a newer decision is refused rather than applied late.
type Consumer struct {
	cfg ConsumerConfig
	log *slog.Logger
}

var _ queue.Consumer = (*Consumer)(nil)

// NewConsumer checks cfg and fills its defaults. Errors name the field.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Receiver == nil {
		return nil, errors.New("event grid consumer config receiver: required")
	}
	if cfg.Source == "" {
		return nil, errors.New("event grid consumer config source: required")
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.LockDuration == 0 {
		cfg.LockDuration = DefaultLockDuration
	}
	if cfg.MaxDeliveries == 0 {
		cfg.MaxDeliveries = DefaultMaxDeliveries
	}
	if len(cfg.ReleaseDelays) == 0 {
		cfg.ReleaseDelays = DefaultReleaseDelays
	}
	switch {
	case cfg.MaxWait < 10*time.Second || cfg.MaxWait > 120*time.Second:
		return nil, fmt.Errorf("event grid consumer config maxWait %s: must be within 10..120s (service limit)", cfg.MaxWait)
	case cfg.LockDuration < 3*time.Second:
		return nil, fmt.Errorf("event grid consumer config lockDuration %s: too short to renew", cfg.LockDuration)
	case cfg.MaxDeliveries < 1 || cfg.MaxDeliveries > 10:
		return nil, fmt.Errorf("event grid consumer config maxDeliveries %d: must be within 1..10 (the subscription's maxDeliveryCount range)", cfg.MaxDeliveries)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Consumer{cfg: cfg, log: cfg.Logger.With("subscription", cfg.Source)}, nil
}

// settleTimeout bounds acknowledge, release, reject and dead-letter writes, which must finish
// even while ctx is ending.
const settleTimeout = 10 * time.Second

// Consume receives and handles events until ctx ends, then returns nil once the event in hand is
// settled. It returns an error only when the topic or subscription does not exist (404).
func (c *Consumer) Consume(ctx context.Context, handler queue.Handler) error {
	if handler == nil {
		return errors.New("consume: handler: required")
	}
	for ctx.Err() == nil {
		resp, err := c.cfg.Receiver.ReceiveEvents(ctx, &aznamespaces.ReceiveEventsOptions{
			MaxEvents: to.Ptr[int32](1), MaxWaitTime: to.Ptr(int32(c.cfg.MaxWait / time.Second))})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var re *azcore.ResponseError
			if errors.As(err, &re) && re.StatusCode == 404 {
				return fmt.Errorf("event grid consumer %s: %w", c.cfg.Source, err)
			}
			// azcore's retry policy already retried; pause so a broken link is not spun on.
			c.log.Warn("receive failed", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		for _, d := range resp.Details {
			c.process(ctx, d, handler)
		}
	}
	return nil
}

func (c *Consumer) process(ctx context.Context, d aznamespaces.ReceiveDetails, handler queue.Handler) {
	token, attempt := "", 1
	if bp := d.BrokerProperties; bp != nil {
		token = deref(bp.LockToken)
		attempt = max(int(deref(bp.DeliveryCount)), 1)
	}
	log := c.log.With("id", d.Event.ID, "attempt", attempt)
	data, err := EventBytes(d.Event)
	msg := queue.Message{ID: d.Event.ID, Subject: c.cfg.Subject, Data: data, Attempt: attempt}
	if err == nil {
		err = c.run(ctx, token, msg, handler, log)
	} else {
		err = fmt.Errorf("%w: %v", queue.ErrPoison, err)
	}
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	switch {
	case err == nil:
		c.settle(settle, log, "acknowledge", token)
	case errors.Is(err, queue.ErrPoison):
		c.deadLetter(settle, log, token, msg, err.Error())
	case ctx.Err() != nil:
		log.Info("consumer stopping; event released for redelivery", "err", err)
		c.settle(settle, log, "release", token, aznamespaces.ReleaseDelayNoDelay)
	case attempt >= c.cfg.MaxDeliveries:
		c.deadLetter(settle, log, token, msg, fmt.Sprintf("failed %d of %d deliveries; last error: %v", attempt, c.cfg.MaxDeliveries, err))
	default:
		delay := c.cfg.ReleaseDelays[min(attempt-1, len(c.cfg.ReleaseDelays)-1)]
		log.Warn("handler failed; releasing for redelivery", "err", err, "delaySeconds", string(delay))
		c.settle(settle, log, "release", token, delay)
	}
}

// run calls handler, turning a panic into an error, and renews the event's lock while it works.
func (c *Consumer) run(ctx context.Context, token string, msg queue.Message, handler queue.Handler, log *slog.Logger) (err error) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(c.cfg.LockDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.settle(ctx, log, "renew", token)
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

func (c *Consumer) deadLetter(ctx context.Context, log *slog.Logger, token string, msg queue.Message, reason string) {
	if c.cfg.DeadLetters != nil {
		err := c.cfg.DeadLetters.WriteDeadLetter(ctx, azureblob.DeadLetter{Reason: reason, DeliveryAttempts: msg.Attempt,
			Source: c.cfg.Source, EventID: msg.ID, Time: time.Now(), Event: msg.Data})
		if err == nil {
			log.Error("event dead-lettered", "reason", reason)
			c.settle(ctx, log, "acknowledge", token)
			return
		}
		log.Error("dead-letter write failed; rejecting, so Event Grid dead-letters it without the reason", "reason", reason, "err", err)
	} else {
		log.Error("event cannot succeed; rejecting, so Event Grid dead-letters it", "reason", reason)
	}
	c.settle(ctx, log, "reject", token)
}

// settle acknowledges, releases, rejects or renews one lock token, logging what did not take (a
// lock that expired meanwhile: Event Grid redelivers the event).
func (c *Consumer) settle(ctx context.Context, log *slog.Logger, op, token string, delay ...aznamespaces.ReleaseDelay) {
	if token == "" {
		log.Warn("event has no lock token; it returns when its lock expires", "op", op)
		return
	}
	tokens := []string{token}
	var failed []aznamespaces.FailedLockToken
	var err error
	switch op {
	case "acknowledge":
		var r aznamespaces.AcknowledgeEventsResponse
		r, err = c.cfg.Receiver.AcknowledgeEvents(ctx, tokens, nil)
		failed = r.FailedLockTokens
	case "release":
		var r aznamespaces.ReleaseEventsResponse
		r, err = c.cfg.Receiver.ReleaseEvents(ctx, tokens, &aznamespaces.ReleaseEventsOptions{ReleaseDelayInSeconds: &delay[0]})
		failed = r.FailedLockTokens
	case "reject":
		var r aznamespaces.RejectEventsResponse
		r, err = c.cfg.Receiver.RejectEvents(ctx, tokens, nil)
		failed = r.FailedLockTokens
	case "renew":
		var r aznamespaces.RenewEventLocksResponse
		r, err = c.cfg.Receiver.RenewEventLocks(ctx, tokens, nil)
		failed = r.FailedLockTokens
	}
	if err == nil && len(failed) > 0 && failed[0].Error != nil {
		err = fmt.Errorf("%s: %s", deref(failed[0].Error.Code), deref(failed[0].Error.Message))
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("lock operation failed; the event returns when its lock expires", "op", op, "err", err)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
