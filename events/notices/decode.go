package notices

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/dovetail-dev/dovetail/shared/boundedjson"
)

// MaxNoticeBytes bounds one notice message: 1 MiB, the largest event Event Grid delivers and the
// largest SQS message (an EventBridge event is at most 256 KB). Real notices are a few KB.
const MaxNoticeBytes = 1 << 20

// maxNoticeDepth bounds the nesting of a notice: the deepest real one (an AWS Health event's
// affected entities' tags) nests 5 levels.
const maxNoticeDepth = 32

// noticeLimits bound the JSON before any decoder builds from it: depth, and what a decode into
// generic values would allocate (RawMessage copies, 32 bytes per input byte at most).
var noticeLimits = boundedjson.Limits{MaxDepth: maxNoticeDepth, MaxBytes: 32 * MaxNoticeBytes}

// Decode reads any notice format the interruption function accepts and returns its notices:
//   - a JSON array: an Event Grid push batch (DecodeEventGrid);
//   - an object with "Messages": an SQS ReceiveMessage response whose bodies are EventBridge
//     events (each decoded with DecodeEventBridge; errors name "Messages[i].Body.<field>");
//   - an object with "detail-type": one EventBridge event;
//   - an object with "DocumentIncarnation": an IMDS Scheduled Events document (it may hold no
//     events, which gives no notices and no error);
//   - an object with "specversion" or "eventType": one Event Grid event.
//
// Anything else is an error wrapping events.ErrMalformed.
func Decode(data []byte) ([]Notice, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, malformed("notice", "empty message")
	}
	if len(trimmed) > MaxNoticeBytes {
		return nil, malformed("notice", "%d bytes, more than the %d a notice may have", len(trimmed), MaxNoticeBytes)
	}
	if _, err := boundedjson.Check(trimmed, reflect.TypeFor[any](), noticeLimits); err != nil {
		return nil, malformed("notice", "%v", err)
	}
	if trimmed[0] == '[' {
		return DecodeEventGrid(trimmed)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &keys); err != nil {
		return nil, malformed("notice", "not a JSON object or array: %v", err)
	}
	has := func(k string) bool { _, ok := keys[k]; return ok }
	switch {
	case has("Messages"):
		msgs, err := DecodeSQSResponse(trimmed)
		if err != nil {
			return nil, err
		}
		out := make([]Notice, 0, len(msgs))
		for i, m := range msgs {
			n, err := DecodeEventBridge([]byte(m.Body))
			if err != nil {
				return nil, fmt.Errorf("Messages[%d].Body: %w", i, err)
			}
			out = append(out, n)
		}
		return out, nil
	case has("detail-type"):
		n, err := DecodeEventBridge(trimmed)
		if err != nil {
			return nil, err
		}
		return []Notice{n}, nil
	case has("DocumentIncarnation"):
		doc, err := DecodeScheduledEvents(trimmed)
		if err != nil {
			return nil, err
		}
		return doc.Notices, nil
	case has("specversion"), has("eventType"):
		return DecodeEventGrid(trimmed)
	}
	return nil, malformed("notice", "not a known notice format (EventBridge event, SQS ReceiveMessage response, Scheduled Events document, Event Grid event)")
}
