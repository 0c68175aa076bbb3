package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Headers of a dead-lettered message, beside the original headers (JetStream's Nats-* headers
// excepted).
const (
	HeaderDLQReason        = "Dovetail-Dlq-Reason"
	HeaderDLQSubject       = "Dovetail-Dlq-Subject"
	HeaderDLQDeliveryCount = "Dovetail-Dlq-Delivery-Count"
	HeaderDLQConsumer      = "Dovetail-Dlq-Consumer"
	HeaderDLQStreamSeq     = "Dovetail-Dlq-Stream-Sequence"
	HeaderDLQMsgID         = "Dovetail-Dlq-Msg-Id"
)

// Defaults of ConsumerConfig.
const (
	DefaultAckWait    = 30 * time.Second
	DefaultMaxDeliver = 5
	// DefaultLookahead × Workers is the default MaxAckPending with Workers > 1: a consumer that
	// held only Workers messages would stall its workers whenever the messages at the head of
	// the stream share a key (the commands of one node come in runs of 2 to 5), so it holds
	// enough behind them to find other keys' messages.
	DefaultLookahead = 4
)

// DefaultBackoff is the redelivery delay after the 1st, 2nd, 3rd and later failures.
var DefaultBackoff = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second}

// ConsumerConfig configures one function's durable pull consumer.
type ConsumerConfig struct {
	// Cluster selects the stream (StreamName) and the dead-letter subject.
	Cluster string
	// Durable names the consumer, usually the function ("provision"); every worker with the same
	// name shares its progress and pending messages. An RFC 1123 label.
	Durable string
	// Subject is what the consumer reads: queue.EventsSubject, CommandsSubject or NoticesSubject
	// of Cluster.
	Subject string
	// AckWait is how long a delivered message may stay unacknowledged before JetStream redelivers
	// it (a worker died); default DefaultAckWait. Running handlers extend it with progress acks.
	AckWait time.Duration
	// MaxDeliver is how many deliveries a failing message gets before it is dead-lettered;
	// default DefaultMaxDeliver.
	MaxDeliver int
	// Backoff[i] is the redelivery delay after failure i+1 (the last entry repeats); default
	// DefaultBackoff.
	Backoff []time.Duration
	// MaxAckPending is how many messages may be in flight at once across all workers of the
	// durable. Default 1: one decision at a time per cluster, in order (DESIGN invariant 3);
	// with Workers > 1 the default is DefaultLookahead × Workers. -1 means no limit.
	MaxAckPending int
	// Workers is how many handlers one Consume call runs at once; default 1 (one message at a
	// time, in order). With more, Key orders the messages: see Consumer.
	Workers int
	// Key is a message's ordering key when Workers > 1: messages with the same key run one at a
	// time in stream order, messages with different keys run concurrently. It must be a pure
	// function of the message (it runs once per delivery, redeliveries included); nil gives every
	// message the key "", which is Workers = 1 with a larger fetch.
	Key func(queue.Message) string
	// Logger receives handler failures, panics (with stack) and dead-letter notices; default slog.Default().
	Logger *slog.Logger
	// Metrics counts dead letters (dovetail_dead_lettered_messages_total, function = Durable) by
	// reason class: PoisonClass of a poison error (default "poison"), "max_deliver" for a message
	// that failed every delivery, "ack_wait" for one whose deliveries all timed out. nil: none.
	Metrics     telemetry.Recorder
	PoisonClass func(error) string
}

// Consumer runs a handler over a durable pull consumer. It implements queue.Consumer.
//
// Outcomes per message: the handler returns nil → ack. It returns an error → NAK with the
// attempt's backoff delay, so JetStream redelivers it (Message.Attempt grows). The error wraps
// queue.ErrPoison, or this was attempt MaxDeliver → the message is published to the cluster's
// dead-letter subject with HeaderDLQ* headers and then terminated. A panic counts as an error.
// JetStream's own MaxDeliver is set one higher than ours: when a message's deliveries all timed out
// (its workers died), the extra delivery dead-letters it without running the handler again, so
// nothing is ever dropped silently.
//
// With Workers > 1 (keyed.go), one Consume call holds up to MaxAckPending messages and runs up
// to Workers handlers at once, one per key at a time: messages of one key run in the order the
// stream delivered them, and a message NAKed for redelivery holds the later messages of its key
// (not the others) until it comes back and is settled, so no message overtakes an earlier one
// of its key, retries included. Exceptions, each a redelivery the handlers already tolerate
// (DESIGN invariant 2): a message dead-lettered lets the ones behind it run (as with Workers =
// 1); a redelivery that does not come back to this Consume call within its delay plus AckWait
// (another process took it, or a failed ack had in fact landed) stops holding its key. The order
// holds within one Consume call: several calls on one durable share its messages without a
// common order per key.
type Consumer struct {
	cfg  ConsumerConfig
	js   jetstream.JetStream
	cons jetstream.Consumer
	log  *slog.Logger
}

var _ queue.Consumer = (*Consumer)(nil)

// NewConsumer creates or updates the durable consumer on the cluster's stream (which
// EnsureStream must have created) and returns a Consumer for it.
func NewConsumer(ctx context.Context, nc *natsgo.Conn, cfg ConsumerConfig) (*Consumer, error) {
	if err := checkName("consumer config cluster", cfg.Cluster); err != nil {
		return nil, err
	}
	if err := checkName("consumer config durable", cfg.Durable); err != nil {
		return nil, err
	}
	switch cfg.Subject {
	case queue.EventsSubject(cfg.Cluster), queue.CommandsSubject(cfg.Cluster), queue.NoticesSubject(cfg.Cluster):
	default:
		return nil, fmt.Errorf("consumer config subject %q: must be %s, %s or %s", cfg.Subject,
			queue.EventsSubject(cfg.Cluster), queue.CommandsSubject(cfg.Cluster), queue.NoticesSubject(cfg.Cluster))
	}
	cfg.AckWait = orDefault(cfg.AckWait, DefaultAckWait)
	cfg.MaxDeliver = orDefault(cfg.MaxDeliver, DefaultMaxDeliver)
	cfg.Workers = orDefault(cfg.Workers, 1)
	if cfg.Workers > 1 {
		cfg.MaxAckPending = orDefault(cfg.MaxAckPending, DefaultLookahead*cfg.Workers)
	}
	cfg.MaxAckPending = orDefault(cfg.MaxAckPending, 1)
	if len(cfg.Backoff) == 0 {
		cfg.Backoff = DefaultBackoff
	}
	switch {
	case cfg.AckWait < 0:
		return nil, fmt.Errorf("consumer config ackWait %s: must be positive", cfg.AckWait)
	case cfg.MaxDeliver < 1:
		return nil, fmt.Errorf("consumer config maxDeliver %d: must be >= 1", cfg.MaxDeliver)
	case cfg.MaxAckPending < -1:
		return nil, fmt.Errorf("consumer config maxAckPending %d: must be >= 1, or -1 for no limit", cfg.MaxAckPending)
	case cfg.Workers < 1:
		return nil, fmt.Errorf("consumer config workers %d: must be >= 1", cfg.Workers)
	case cfg.Workers > 1 && cfg.MaxAckPending != -1 && cfg.MaxAckPending < cfg.Workers:
		return nil, fmt.Errorf("consumer config maxAckPending %d: must be >= workers (%d), or the workers cannot all be busy", cfg.MaxAckPending, cfg.Workers)
	}
	for i, d := range cfg.Backoff {
		if d < 0 {
			return nil, fmt.Errorf("consumer config backoff[%d] %s: must not be negative", i, d)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, StreamName(cfg.Cluster), jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		FilterSubject: cfg.Subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver + 1, // see Consumer: the extra delivery dead-letters timed-out messages
		MaxAckPending: cfg.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("consumer %s: stream %s not found (call EnsureStream first): %w", cfg.Durable, StreamName(cfg.Cluster), err)
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s on stream %s: %w", cfg.Durable, StreamName(cfg.Cluster), err)
	}
	return &Consumer{cfg: cfg, js: js, cons: cons,
		log: cfg.Logger.With("consumer", cfg.Durable, "subject", cfg.Subject)}, nil
}

// Consume fetches messages and runs handler on each until ctx ends, then returns nil after the
// messages in hand are settled (or released for redelivery). With Workers = 1 it fetches and
// runs one message at a time; with more, see Consumer. It returns an error only when the
// consumer cannot go on (connection closed, consumer deleted). Several Consume calls, in one
// process or many, may share the durable; MaxAckPending bounds how many messages they hold at
// once.
func (c *Consumer) Consume(ctx context.Context, handler queue.Handler) error {
	if handler == nil {
		return errors.New("consume: handler: required")
	}
	if c.cfg.Workers > 1 {
		return c.consumeKeyed(ctx, handler)
	}
	for ctx.Err() == nil {
		batch, err := c.cons.Fetch(1, jetstream.FetchContext(ctx))
		if err != nil {
			if fatal(err) {
				return fmt.Errorf("consumer %s: %w", c.cfg.Durable, err)
			}
			c.pause(ctx)
			continue
		}
		for m := range batch.Messages() {
			c.process(ctx, m, handler, false)
		}
		if err := c.fetchEnded(ctx, batch.Error()); err != nil {
			return err
		}
	}
	return nil
}

// fetchEnded handles the error a pull request ended with: a fatal one (the connection closed,
// the consumer deleted) ends the consumer, a timeout or an empty pull is routine, anything else
// is logged and the next pull waits a pause.
func (c *Consumer) fetchEnded(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return nil
	}
	if fatal(err) {
		return fmt.Errorf("consumer %s: %w", c.cfg.Durable, err)
	}
	if !errors.Is(err, natsgo.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		c.log.Warn("fetch failed", "err", err)
		c.pause(ctx)
	}
	return nil
}

func fatal(err error) bool {
	return errors.Is(err, natsgo.ErrConnectionClosed) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// pause waits a moment after a failed fetch, so a broken link is not spun on.
func (c *Consumer) pause(ctx context.Context) {
	t := time.NewTimer(250 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// backoff is the redelivery delay after failed attempt n (1-based).
func (c *Consumer) backoff(attempt int) time.Duration {
	i := min(attempt-1, len(c.cfg.Backoff)-1)
	return c.cfg.Backoff[max(i, 0)]
}

// settleTimeout bounds acks and dead-letter publishes, which must finish even while ctx is ending.
const settleTimeout = 5 * time.Second

// outcome is what process did with a message: settled it (acked, dead-lettered or terminated),
// or NAKed it (or failed to ack it) so JetStream redelivers it after about delay.
type outcome struct {
	redeliver bool
	delay     time.Duration
}

// message is the queue.Message of a JetStream delivery.
func message(m jetstream.Msg, md *jetstream.MsgMetadata) queue.Message {
	return queue.Message{
		ID:        m.Headers().Get(jetstream.MsgIDHeader),
		Subject:   m.Subject(),
		Data:      m.Data(),
		Attempt:   int(md.NumDelivered),
		Published: md.Timestamp,
	}
}

// process runs handler on m and settles it. alive: the caller keeps m's ack deadline moving
// (keepAlive) for as long as it holds m; otherwise process does while the handler runs.
func (c *Consumer) process(ctx context.Context, m jetstream.Msg, handler queue.Handler, alive bool) outcome {
	md, err := m.Metadata()
	if err != nil {
		c.log.Error("message without JetStream metadata; terminating it", "err", err)
		_ = m.Term()
		return outcome{}
	}
	msg := message(m, md)
	log := c.log.With("id", msg.ID, "attempt", msg.Attempt, "streamSeq", md.Sequence.Stream)
	// The settle deadline starts when settling does: a handler that ran longer than
	// settleTimeout must still get its ack through, or the message comes back after AckWait and
	// holds up everything behind it.
	settleCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	}
	settle, cancel := settleCtx()
	defer func() { cancel() }()

	if msg.Attempt > c.cfg.MaxDeliver {
		return c.deadLetter(settle, log, m, md, "ack_wait", fmt.Sprintf(
			"delivered %d times without a result: every attempt outlived the ack wait of %s (handler hung or worker died)",
			msg.Attempt-1, c.cfg.AckWait))
	}

	if ctx.Err() != nil {
		// Fetched as the consumer stopped: release it untouched.
		_ = m.Nak()
		return outcome{redeliver: true}
	}
	if !alive {
		stop := c.keepAlive(m)
		err = c.run(ctx, msg, handler, log)
		stop()
	} else {
		err = c.run(ctx, msg, handler, log)
	}
	cancel()
	settle, cancel = settleCtx()
	switch {
	case err == nil:
		if err := m.DoubleAck(settle); err != nil {
			// The message will come back after AckWait; handlers are idempotent (DESIGN invariant 2).
			// Whether the ack landed is unknown, so a keyed consumer holds the message's key as
			// for a NAK: a redelivery comes within AckWait of the last progress ack.
			log.Warn("ack failed; the message will be redelivered", "err", err)
			return outcome{redeliver: true, delay: c.cfg.AckWait / 2}
		}
		return outcome{}
	case errors.Is(err, queue.ErrPoison):
		class := "poison"
		if c.cfg.PoisonClass != nil {
			class = c.cfg.PoisonClass(err)
		}
		return c.deadLetter(settle, log, m, md, class, err.Error())
	case ctx.Err() != nil:
		// Shutting down: hand the message to another worker now instead of after AckWait.
		log.Info("consumer stopping; message released for redelivery", "err", err)
		_ = m.Nak()
		return outcome{redeliver: true}
	case msg.Attempt >= c.cfg.MaxDeliver:
		return c.deadLetter(settle, log, m, md, "max_deliver", fmt.Sprintf("failed %d of %d deliveries; last error: %v", msg.Attempt, c.cfg.MaxDeliver, err))
	default:
		delay := c.backoff(msg.Attempt)
		if d, ok := queue.RetryDelay(err); ok {
			delay = d
		}
		log.Warn("handler failed; redelivering", "err", err, "delay", delay)
		if err := m.NakWithDelay(delay); err != nil {
			log.Warn("nak failed; the message will be redelivered after the ack wait", "err", err)
			delay = c.cfg.AckWait
		}
		return outcome{redeliver: true, delay: delay}
	}
}

// keepAlive sends m's progress acks every AckWait/3, so JetStream does not redeliver a message
// that is being handled (or held behind another of its key), until the returned stop is called.
func (c *Consumer) keepAlive(m jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(c.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// run calls handler, turning a panic into an error.
func (c *Consumer) run(ctx context.Context, msg queue.Message, handler queue.Handler, log *slog.Logger) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
			log.Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	return handler(ctx, msg)
}

// deadLetter publishes the message to the cluster's dead-letter subject with the reason, then
// terminates it. If the publish fails the message is NAKed instead, so it is never lost. class is
// the reason's class for the metric.
func (c *Consumer) deadLetter(ctx context.Context, log *slog.Logger, m jetstream.Msg, md *jetstream.MsgMetadata, class, reason string) outcome {
	dlq := &natsgo.Msg{
		Subject: queue.DeadLetterSubject(c.cfg.Cluster),
		Data:    m.Data(),
		Header:  natsgo.Header{},
	}
	// The publisher's own headers travel with the message; JetStream's (Nats-Msg-Id,
	// Nats-Expected-Last-Sequence, Nats-Rollup, ...) were instructions for the first publish and
	// would make this one fail, or do something else, so none is copied.
	for k, v := range m.Headers() {
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			dlq.Header[k] = v
		}
	}
	dlq.Header.Set(HeaderDLQReason, headerValue(reason))
	dlq.Header.Set(HeaderDLQSubject, m.Subject())
	dlq.Header.Set(HeaderDLQDeliveryCount, strconv.FormatUint(md.NumDelivered, 10))
	dlq.Header.Set(HeaderDLQConsumer, c.cfg.Durable)
	dlq.Header.Set(HeaderDLQStreamSeq, strconv.FormatUint(md.Sequence.Stream, 10))
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
		dlq.Header.Set(HeaderDLQMsgID, id)
	}
	// Deduplicate by origin, so a retried dead-lettering (term lost) stores one copy.
	dlq.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("dlq-%s-%d", c.cfg.Durable, md.Sequence.Stream))
	if _, err := c.js.PublishMsg(ctx, dlq); err != nil {
		log.Error("dead-letter publish failed; message kept for redelivery", "reason", reason, "err", err)
		delay := c.backoff(int(md.NumDelivered))
		_ = m.NakWithDelay(delay)
		return outcome{redeliver: true, delay: delay}
	}
	log.Error("message dead-lettered", "reason", reason, "dlq", dlq.Subject)
	telemetry.OrNop(c.cfg.Metrics).Record(telemetry.DeadLettered, 1, c.cfg.Durable, class)
	if err := m.TermWithReason(headerValue(reason)); err != nil {
		log.Warn("term failed after dead-lettering; a redelivery will be dead-lettered again (deduplicated)", "err", err)
	}
	return outcome{}
}

// headerValue makes s safe as one header line (no CR/LF) of reasonable length.
func headerValue(s string) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	if len(s) > 1024 {
		s = s[:1024]
	}
	return s
}
