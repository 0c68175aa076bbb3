package nats

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Stream layout: one stream per cluster, "dovetail-<cluster>", holding the cluster's five
// subjects (queue.EventsSubject, CommandsSubject, NoticesSubject, DeadLetterSubject, AuditSubject). One stream keeps a
// cluster's traffic, limits and deletion in one place; durable consumers filter by subject.
// Retention is by limits (age), not work-queue, so several functions can each keep their own
// durable consumer on the events subject and dead letters stay readable until they age out.

// Defaults of StreamConfig.
const (
	DefaultMaxAge = 24 * time.Hour
	// DefaultDuplicateWindow is JetStream's own default (2 minutes, nats-server
	// StreamConfig.Duplicates); a re-publish with the same Nats-Msg-Id inside it is dropped.
	DefaultDuplicateWindow = 2 * time.Minute
)

// StreamConfig configures a cluster's stream.
type StreamConfig struct {
	// Cluster is an RFC 1123 label; it names the stream and the subjects.
	Cluster string
	// MaxAge drops messages older than this; default DefaultMaxAge.
	MaxAge time.Duration
	// DuplicateWindow is how long message ids are remembered; default DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// Memory keeps the stream in memory instead of files (tests).
	Memory bool
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// checkName accepts RFC 1123 labels, which are valid as NATS subject tokens and stream and
// consumer names alike (no '.', '*', '>' or spaces).
func checkName(field, s string) error {
	if len(s) > 63 || !nameRE.MatchString(s) {
		return fmt.Errorf("%s %q: must be an RFC 1123 label (lowercase alphanumerics and '-', at most 63)", field, s)
	}
	return nil
}

// StreamName is the stream of a cluster: "dovetail-<cluster>".
func StreamName(cluster string) string { return "dovetail-" + cluster }

// EnsureStream creates the cluster's stream, or checks the one there has cfg's subjects,
// retention, max age, duplicate window and storage (an error names the field that differs; the
// stream is never updated).
func EnsureStream(ctx context.Context, nc *natsgo.Conn, cfg StreamConfig) (jetstream.Stream, error) {
	if err := checkName("stream config cluster", cfg.Cluster); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	sc := jetstream.StreamConfig{
		Name: StreamName(cfg.Cluster),
		Subjects: []string{
			queue.EventsSubject(cfg.Cluster),
			queue.CommandsSubject(cfg.Cluster),
			queue.NoticesSubject(cfg.Cluster),
			queue.DeadLetterSubject(cfg.Cluster),
			queue.AuditSubject(cfg.Cluster),
		},
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     orDefault(cfg.MaxAge, DefaultMaxAge),
		Duplicates: orDefault(cfg.DuplicateWindow, DefaultDuplicateWindow),
		Storage:    jetstream.FileStorage,
	}
	if cfg.Memory {
		sc.Storage = jetstream.MemoryStorage
	}
	// Create, never update: no role may reconfigure the stream (natsauth.For grants
	// STREAM.CREATE and STREAM.INFO only), since an update to its limits or subjects drops what
	// it holds. A stream that exists is checked against sc instead.
	s, err := js.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, sc)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // created by another client meanwhile
			s, err = js.Stream(ctx, sc.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", sc.Name, err)
	}
	if err := sameStreamConfig(s.CachedInfo().Config, sc); err != nil {
		return nil, fmt.Errorf("stream %s: %w", sc.Name, err)
	}
	return s, nil
}

// sameStreamConfig returns nil when the existing stream's config has what EnsureStream sets,
// else an error naming the first field that differs and how to change it (with the server's
// administrator credentials: no Dovetail role may).
func sameStreamConfig(have, want jetstream.StreamConfig) error {
	diff := func(field string, h, w any) error {
		return fmt.Errorf("config.%s is %v, want %v: no Dovetail role may update the stream; change it with the server's administrator credentials (nats stream edit %s)",
			field, h, w, want.Name)
	}
	switch {
	case !slices.Equal(have.Subjects, want.Subjects):
		return diff("subjects", have.Subjects, want.Subjects)
	case have.Retention != want.Retention:
		return diff("retention", have.Retention, want.Retention)
	case have.MaxAge != want.MaxAge:
		return diff("max_age", have.MaxAge, want.MaxAge)
	case have.Duplicates != want.Duplicates:
		return diff("duplicate_window", have.Duplicates, want.Duplicates)
	case have.Storage != want.Storage:
		return diff("storage", have.Storage, want.Storage)
	}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Publisher publishes on JetStream with Nats-Msg-Id set to the message id, so JetStream drops a
// re-publish inside the stream's duplicate window. It implements queue.Publisher.
type Publisher struct {
	js jetstream.JetStream
}

var _ queue.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher on nc.
func NewPublisher(nc *natsgo.Conn) (*Publisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &Publisher{js: js}, nil
}

// Publish stores data on subject once JetStream acknowledges it. A duplicate (same id inside the
// window) is success: the message is already stored. id is required.
func (p *Publisher) Publish(ctx context.Context, subject, id string, data []byte) error {
	_, err := p.PublishAck(ctx, subject, id, data)
	return err
}

// PublishAck is Publish returning JetStream's ack (stream, sequence, and Duplicate when the id
// was seen inside the duplicate window).
func (p *Publisher) PublishAck(ctx context.Context, subject, id string, data []byte) (*jetstream.PubAck, error) {
	if id == "" {
		return nil, errors.New("publish: id: required (it is the deduplication id)")
	}
	ack, err := p.js.Publish(ctx, subject, data, jetstream.WithMsgID(id))
	if err != nil {
		return nil, fmt.Errorf("publish %s id %s: %w", subject, id, err)
	}
	return ack, nil
}
