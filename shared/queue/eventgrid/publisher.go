// Package eventgrid is Dovetail's Azure Event Grid transport (azure-sdk-for-go messaging/eventgrid),
// CloudEvents 1.0 schema in both directions:
//
//   - events (agent → functions): published with the azeventgrid publisher to a custom topic whose
//     event subscriptions push them to each function's Event Grid trigger (Azure Functions custom
//     handler, shared/runtime), with Event Grid's retries and a storage dead-letter destination;
//   - commands (functions → agent): sent with the aznamespaces sender to a namespace topic, and
//     pulled by the agent from a queue subscription with Consumer (receive, acknowledge, release,
//     reject, a lock per event).
//
// Why split: the functions are push-triggered (Functions scales on Event Grid deliveries; the
// trigger for a custom topic is the documented one, while push from namespace topics to webhooks
// is in preview), and the agent is a pod with no public endpoint, for which pull is the only
// delivery that needs no ingress, and whose lock per event, explicit release with a delay and
// reject to the dead-letter destination give the same at-least-once contract as SQS and
// JetStream. Neither kind of topic orders events (Azure Event Grid documentation, "Delivery and
// retry": "Event Grid doesn't guarantee order"); see Consumer for what guards instead.
package eventgrid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/messaging"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azeventgrid"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/aznamespaces"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// MaxEventBytes is the largest event Event Grid accepts, custom and namespace topics alike: 1 MB
// (1,048,576 bytes; Azure Event Grid documentation, "Event Grid quotas and limits"). Dovetail's
// events stay under events.DefaultMaxInlineBytes and claim-check the rest.
const MaxEventBytes = 1 << 20

// TopicAPI is the part of *azeventgrid.Client (a custom topic) the Publisher calls.
type TopicAPI interface {
	PublishCloudEvents(ctx context.Context, events []messaging.CloudEvent, o *azeventgrid.PublishCloudEventsOptions) (azeventgrid.PublishCloudEventsResponse, error)
}

// SenderAPI is the part of *aznamespaces.SenderClient (a namespace topic) the Publisher calls.
type SenderAPI interface {
	SendEvents(ctx context.Context, events []*messaging.CloudEvent, o *aznamespaces.SendEventsOptions) (aznamespaces.SendEventsResponse, error)
}

var (
	_ TopicAPI  = (*azeventgrid.Client)(nil)
	_ SenderAPI = (*aznamespaces.SenderClient)(nil)
)

// Publisher publishes Dovetail's CloudEvents to Event Grid. It implements queue.Publisher. A
// subject is routed to a custom topic (Topics) or a namespace topic (Namespaces); one without a
// route is refused.
type Publisher struct {
	Topics     map[string]TopicAPI
	Namespaces map[string]SenderAPI
}

var _ queue.Publisher = (*Publisher)(nil)

// Publish sends one event. data is a structured-mode CloudEvent (what events.Codec builds) whose
// id must be id; Event Grid stores it as it is, and the subscriber gets the same attributes back
// (Dovetail's extensions included). Errors: no route, data that is not such an event or is above
// MaxEventBytes (nothing sent), or the service's *azcore.ResponseError after the SDK's retries.
func (p *Publisher) Publish(ctx context.Context, subject, id string, data []byte) error {
	ce, err := ParseCloudEvent(data)
	if err != nil {
		return fmt.Errorf("event grid publish %s: %w", subject, err)
	}
	if ce.ID != id {
		return fmt.Errorf("event grid publish %s: event id %q is not the message id %q", subject, ce.ID, id)
	}
	if len(data) > MaxEventBytes {
		return fmt.Errorf("event grid publish %s: event %q is %d bytes, limit %d (claim-check large payloads)", subject, id, len(data), MaxEventBytes)
	}
	if t, ok := p.Topics[subject]; ok {
		if _, err := t.PublishCloudEvents(ctx, []messaging.CloudEvent{ce}, nil); err != nil {
			return fmt.Errorf("event grid publish %s id %s: %w", subject, id, err)
		}
		return nil
	}
	if s, ok := p.Namespaces[subject]; ok {
		if _, err := s.SendEvents(ctx, []*messaging.CloudEvent{&ce}, nil); err != nil {
			return fmt.Errorf("event grid namespace send %s id %s: %w", subject, id, err)
		}
		return nil
	}
	return fmt.Errorf("event grid publish: subject %q: no topic routed for it", subject)
}

// ParseCloudEvent reads a structured-mode JSON CloudEvent into the SDK's type (id, source, type
// and specversion required; data_base64 kept as bytes, extensions kept).
func ParseCloudEvent(data []byte) (messaging.CloudEvent, error) {
	var ce messaging.CloudEvent
	if err := json.Unmarshal(data, &ce); err != nil {
		return ce, fmt.Errorf("not a structured CloudEvent: %w", err)
	}
	if ce.SpecVersion != "1.0" {
		return ce, fmt.Errorf("specversion %q: Event Grid takes CloudEvents 1.0", ce.SpecVersion)
	}
	keepJSONData(&ce)
	return ce, nil
}

// keepJSONData keeps JSON data JSON. The SDK reads "data" as raw bytes and writes bytes back as
// data_base64, so an event whose data is a JSON value (datacontenttype application/json or
// */*+json) would reach the subscriber base64-encoded; as a json.RawMessage it is written as
// "data" again. Dovetail's own events (application/json+zstd) are binary and stay data_base64.
func keepJSONData(ce *messaging.CloudEvent) {
	b, ok := ce.Data.([]byte)
	if !ok || ce.DataContentType == nil || !json.Valid(b) {
		return
	}
	mt, _, err := mime.ParseMediaType(*ce.DataContentType)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		ce.Data = json.RawMessage(b)
	}
}

// EventBytes renders a CloudEvent as delivered back to structured-mode JSON, the queue.Message
// data Dovetail's handlers decode.
func EventBytes(ce messaging.CloudEvent) ([]byte, error) {
	if ce.ID == "" {
		return nil, errors.New("cloud event without id")
	}
	keepJSONData(&ce)
	return json.Marshal(ce)
}
