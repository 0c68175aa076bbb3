//go:build !lambda.norpc

// The NATS worker mode links the NATS client (nats.go) and the Prometheus client with protobuf
// (its /metrics server): left out of the Lambda build (-tags lambda.norpc, nats_lambda.go),
// whose bootstrap never runs as a worker; hack/package.sh builds the workers without the tag.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	natsgo "github.com/nats-io/nats.go"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

func runNATS(ctx context.Context, f Function, o Options, log *slog.Logger) error {
	nc, err := qnats.Dial(o.NATSURL, "dovetail-"+f.Name+"-"+o.Cluster, o.Cluster, natsauth.RoleFunction, o.NATSAuth)
	if err != nil {
		return err
	}
	defer nc.Close()
	return RunNATS(ctx, f, nc, o, log)
}

// RunNATS runs f as a NATS JetStream worker on an open connection until ctx ends.
func RunNATS(ctx context.Context, f Function, nc *natsgo.Conn, o Options, log *slog.Logger) error {
	if o.EnsureStream {
		if _, err := qnats.EnsureStream(ctx, nc, qnats.StreamConfig{Cluster: o.Cluster}); err != nil {
			return err
		}
	}
	pub, err := qnats.NewPublisher(nc)
	if err != nil {
		return err
	}
	// Decision audit records go to the audit subject as well as the log (dovetail audit --nats).
	base := log
	log = slog.New(telemetry.AuditHandler{Next: base.Handler(), Publish: qnats.PublishAudit(pub, o.Cluster,
		func(err error) { base.Warn("audit record not published", "err", err) })})
	rec := prom.NewRecorder()
	var consuming atomic.Bool
	srv := &prom.Server{Addr: o.HTTPAddr, Recorder: rec, Logger: log,
		Live: func() error {
			if nc.IsClosed() {
				return errors.New("NATS connection closed")
			}
			return nil
		},
		Ready: func() error {
			if !nc.IsConnected() {
				return fmt.Errorf("NATS connection %s", nc.Status())
			}
			if !consuming.Load() {
				return errors.New("consumer not started")
			}
			return nil
		}}
	if addr, err := srv.Start(ctx); err != nil {
		return err
	} else if addr != "" {
		log.Info("serving /metrics, /healthz and /readyz", "addr", addr)
	}
	t := Transport{Mode: ModeNATS, Cluster: o.Cluster, Function: f.Name, Publisher: pub, Logger: log, Metrics: rec,
		Follow: func(ctx context.Context, subject string, handler queue.Handler) error {
			return qnats.Follow(ctx, nc, o.Cluster, subject, handler, log)
		}}
	if o.BlobDir != "" {
		t.Blobs = events.FileBlobStore{Dir: o.BlobDir}
	}
	h, err := f.Build(ctx, t)
	if err != nil {
		return fmt.Errorf("building the %s handler: %w", f.Name, err)
	}
	subject := queue.EventsSubject(o.Cluster)
	if f.Subject != nil {
		subject = f.Subject(o.Cluster)
	}
	cons, err := qnats.NewConsumer(ctx, nc, qnats.ConsumerConfig{Cluster: o.Cluster, Durable: f.Name, Subject: subject, Logger: log,
		MaxDeliver: f.MaxDeliver, MaxAckPending: f.MaxAckPending, Metrics: rec, PoisonClass: PoisonClass})
	if err != nil {
		return err
	}
	log.Info("starting as a NATS worker", "cluster", o.Cluster, "subject", subject)
	consuming.Store(true)
	if err := cons.Consume(ctx, Instrument(f.Name, h, rec, nil)); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
