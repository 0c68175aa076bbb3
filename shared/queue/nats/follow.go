package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Follow feeds every message of one subject of the cluster's stream to handler, starting with
// the last message already stored on it, until ctx ends. It is for a process that keeps a view
// of the stream (the interruption function's latest snapshot), not for work: each call gets its
// own ephemeral ordered consumer (JetStream's ordered consumer, deliver policy
// last_per_subject), so every process sees every message, and nothing is acknowledged,
// redelivered or dead-lettered. A handler error is logged and the message skipped: the durable
// consumers of the same subject (the functions that act on it) dead-letter malformed messages.
//
// It returns nil when ctx ends, or an error when the consumer cannot be created or goes away.
func Follow(ctx context.Context, nc *natsgo.Conn, cluster, subject string, handler queue.Handler, log *slog.Logger) error {
	if err := checkName("follow cluster", cluster); err != nil {
		return err
	}
	if handler == nil {
		return errors.New("follow: handler: required")
	}
	if log == nil {
		log = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.OrderedConsumer(ctx, StreamName(cluster), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		return fmt.Errorf("follow %s on stream %s: %w", subject, StreamName(cluster), err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("follow %s: %w", subject, err)
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			it.Stop()
		case <-stopped:
			it.Stop()
		}
	}()
	log = log.With("follow", subject)
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("follow %s: %w", subject, err)
		}
		msg := queue.Message{ID: m.Headers().Get(jetstream.MsgIDHeader), Subject: m.Subject(), Data: m.Data(), Attempt: 1}
		if err := handler(ctx, msg); err != nil {
			md, _ := m.Metadata()
			seq := ""
			if md != nil {
				seq = strconv.FormatUint(md.Sequence.Stream, 10)
			}
			log.Warn("followed message not used", "id", msg.ID, "streamSequence", seq, "err", err)
		}
	}
}
