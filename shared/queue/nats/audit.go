package nats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// AuditPublishTimeout bounds one audit record's publish: a log call must not wait on a queue
// for long (the log stream keeps the record anyway).
const AuditPublishTimeout = 2 * time.Second

// PublishAudit returns the Publish of a telemetry.AuditHandler: each record as JSON on
// queue.AuditSubject(cluster), its message id the SHA-256 of that JSON, so a decision redelivered
// within the stream's duplicate window is stored once. A failed publish is given to onErr (nil:
// dropped), which must not log through the AuditHandler.
func PublishAudit(p *Publisher, cluster string, onErr func(error)) func(context.Context, telemetry.Audit) {
	subject := queue.AuditSubject(cluster)
	return func(ctx context.Context, a telemetry.Audit) {
		data, err := json.Marshal(a)
		if err == nil {
			sum := sha256.Sum256(data)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AuditPublishTimeout)
			err = p.Publish(ctx, subject, "audit-"+hex.EncodeToString(sum[:16]), data)
			cancel()
		}
		if err != nil && onErr != nil {
			onErr(fmt.Errorf("publishing audit record of %s %s: %w", a.Function, a.Decision, err))
		}
	}
}

// ReadAudit reads the cluster's audit records from its stream, oldest first (what the stream's
// MaxAge keeps), and calls each for every one. Without follow it returns once it has read every
// record stored when it started; with follow it waits for new ones until ctx ends. Errors: the
// cluster has no stream, or a message on the subject is not an audit record (naming its stream
// sequence).
func ReadAudit(ctx context.Context, nc *natsgo.Conn, cluster string, follow bool, each func(telemetry.Audit) error) error {
	if err := checkName("cluster", cluster); err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.OrderedConsumer(ctx, StreamName(cluster), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{queue.AuditSubject(cluster)}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("cluster %q has no stream %s on this server (is local dev running with --cluster %s?)", cluster, StreamName(cluster), cluster)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", queue.AuditSubject(cluster), err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	if !follow && info.NumPending == 0 {
		return nil
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil // asked to stop
			}
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		var a telemetry.Audit
		if err := json.Unmarshal(msg.Data(), &a); err != nil {
			return fmt.Errorf("%s sequence %d: not an audit record: %w", queue.AuditSubject(cluster), md.Sequence.Stream, err)
		}
		if err := each(a); err != nil {
			return err
		}
		if !follow && md.NumPending == 0 {
			return nil
		}
	}
}
