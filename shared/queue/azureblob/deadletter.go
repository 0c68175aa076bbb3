package azureblob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/dovetail-dev/dovetail/events"
)

// DefaultDeadLetterPrefix is where Dovetail's own dead letters live in the dead-letter container,
// beside the "<topic>/<subscription>/…" folders Event Grid's storage dead-letter destination
// writes.
const DefaultDeadLetterPrefix = "dovetail/"

// MaxReasonBytes caps a dead letter's reason, so a long error chain cannot bloat it.
const MaxReasonBytes = 1024

// DeadLetter is one poison event, written as JSON. Its field names follow the metadata Event Grid
// writes beside a dead-lettered event (deadLetterReason, deliveryAttempts; Azure Event Grid
// documentation, "Dead letter and retry policies"), so one reader serves both.
type DeadLetter struct {
	// Reason says why the event can never succeed (the handler's error, at most MaxReasonBytes).
	Reason string `json:"deadLetterReason"`
	// DeliveryAttempts is the delivery that failed (1 on first delivery).
	DeliveryAttempts int `json:"deliveryAttempts"`
	// Source names who dead-lettered it: "<function>" or "agent", and where it came from.
	Source string `json:"source"`
	// EventID is the CloudEvents id (or, for an invocation whose event could not be read, the
	// Functions invocation id).
	EventID string `json:"eventId"`
	// Time is when it was dead-lettered (RFC 3339, UTC).
	Time time.Time `json:"deadLetteredTime"`
	// Event is the event as delivered when it is JSON; EventText holds it otherwise.
	Event     json.RawMessage `json:"event,omitempty"`
	EventText string          `json:"eventText,omitempty"`
}

// DeadLetterWriter stores dead letters. The Event Grid consumer and the Azure Functions runtime
// write through it.
type DeadLetterWriter interface {
	WriteDeadLetter(ctx context.Context, d DeadLetter) error
}

// DeadLetters writes each dead letter as the blob "<Prefix><source>/<sha256 of event id>.json" of
// Container: named from the event, so dead-lettering a redelivered event twice stores one blob.
type DeadLetters struct {
	Container *container.Client
	// Prefix defaults to DefaultDeadLetterPrefix.
	Prefix string
}

var _ DeadLetterWriter = (*DeadLetters)(nil)

// WriteDeadLetter uploads d. Errors: a missing container or source, or the upload's.
func (w *DeadLetters) WriteDeadLetter(ctx context.Context, d DeadLetter) error {
	if w.Container == nil {
		return errors.New("dead letters container: required")
	}
	if events.CheckBlobKey(d.Source) != nil {
		return fmt.Errorf("dead letter source %q: must be a path of [A-Za-z0-9._-] segments", d.Source)
	}
	data, err := json.Marshal(Normalize(d))
	if err != nil {
		return fmt.Errorf("dead letter of event %q: %w", d.EventID, err)
	}
	name := w.Name(d)
	if err := putJSON(ctx, w.Container, name, data); err != nil {
		return fmt.Errorf("writing dead letter %s: %w", name, err)
	}
	return nil
}

// Name is the blob name of d.
func (w *DeadLetters) Name(d DeadLetter) string {
	prefix := w.Prefix
	if prefix == "" {
		prefix = DefaultDeadLetterPrefix
	}
	sum := sha256.Sum256([]byte(d.EventID))
	return prefix + d.Source + "/" + hex.EncodeToString(sum[:]) + ".json"
}

// Normalize cuts the reason at MaxReasonBytes (on a rune boundary), moves an event that is not
// valid JSON to EventText, and puts the time in UTC.
func Normalize(d DeadLetter) DeadLetter {
	if len(d.Reason) > MaxReasonBytes {
		cut := MaxReasonBytes
		for cut > 0 && !utf8.RuneStart(d.Reason[cut]) {
			cut--
		}
		d.Reason = d.Reason[:cut]
	}
	if len(d.Event) > 0 && !json.Valid(d.Event) {
		d.EventText, d.Event = string(d.Event), nil
	}
	d.Time = d.Time.UTC()
	return d
}
