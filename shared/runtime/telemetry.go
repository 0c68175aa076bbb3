package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/boundedjson"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Instrument wraps a function's handler with the runtime's metrics: how long each message took
// (dovetail_handler_duration_seconds by function and result: ok, retry or poison) and how old it
// was when handling started (dovetail_queue_message_age_seconds, from msg.Published by now).
// Dead letters are counted where they are sent (the NATS consumer, the Lambda adapter), so a
// poison message counts once.
func Instrument(function string, h queue.Handler, rec telemetry.Recorder, now func() time.Time) queue.Handler {
	rec = telemetry.OrNop(rec)
	if now == nil {
		now = time.Now
	}
	return func(ctx context.Context, msg queue.Message) error {
		start := now()
		if !msg.Published.IsZero() {
			rec.Record(telemetry.QueueAge, max(0, start.Sub(msg.Published).Seconds()), function)
		}
		err := h(ctx, msg)
		rec.Record(telemetry.HandlerDuration, now().Sub(start).Seconds(), function, Result(err))
		return err
	}
}

// Result is a handler outcome's label: ok, poison or retry.
func Result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, queue.ErrPoison):
		return "poison"
	}
	return "retry"
}

// PoisonClass names the class of a poison error for the dead-letter metric's reason label (the
// full reason travels with the dead letter): a bounded set, so a label, unlike the message.
func PoisonClass(err error) string {
	switch {
	case errors.Is(err, boundedjson.ErrLimit), errors.Is(err, events.ErrBlobTooLarge), errors.Is(err, events.ErrTooLarge):
		return "over_limit"
	case errors.Is(err, boundedjson.ErrSyntax):
		return "not_json"
	case errors.Is(err, events.ErrUnsupportedVersion):
		return "unsupported_version"
	case errors.Is(err, events.ErrClockSkew):
		return "clock_skew"
	case errors.Is(err, events.ErrBlobNotFound):
		return "claim_check_missing"
	case errors.Is(err, events.ErrMalformed):
		return "malformed"
	}
	return "poison"
}
