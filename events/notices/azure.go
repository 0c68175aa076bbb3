package notices

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/dovetail-dev/dovetail/events"
)

// Scheduled Events event types (Azure docs, "Azure Metadata Service: Scheduled Events for Linux
// VMs", api-version 2020-07-01).
const (
	ScheduledEventFreeze    = "Freeze"
	ScheduledEventReboot    = "Reboot"
	ScheduledEventRedeploy  = "Redeploy"
	ScheduledEventPreempt   = "Preempt"
	ScheduledEventTerminate = "Terminate"
)

// Event Grid event types of the Azure Resource Notifications HealthResources system topic (Azure
// docs, "Azure Resource Notifications - Health Resources events in Azure Event Grid").
const (
	EventGridAvailabilityStatusChanged = "Microsoft.ResourceNotifications.HealthResources.AvailabilityStatusChanged"
	EventGridResourceAnnotated         = "Microsoft.ResourceNotifications.HealthResources.ResourceAnnotated"
)

// Resource Health VM annotations Dovetail acts on (Azure docs, "Resource Health virtual machine
// Health annotations").
const (
	AnnotationVMPreempted              = "VirtualMachinePreempted"
	AnnotationVMDeallocationInitiated  = "VirtualMachineDeallocationInitiated"
	StateDeallocating                  = "deallocating"
	targetTypeVM                       = "Microsoft.Compute/virtualMachines"
	targetTypeVMSSVM                   = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
	scheduledEventsNotBeforeTimeLayout = time.RFC1123
)

// ScheduledEventsCloudEventType is the CloudEvents type under which Dovetail's Scheduled Events
// publisher (agent/scheduledevents) sends a node's IMDS document to an Event Grid topic: the
// document whole as data (datacontenttype application/json), since Event Grid topics take
// CloudEvents or Event Grid events only. The interruption function decodes its data as a
// Scheduled Events document (DecodeEventGrid).
const ScheduledEventsCloudEventType = "dev.dovetail.azure.scheduledevents.v1"

// WrapScheduledEvents wraps a Scheduled Events document as the node's publisher sends it
// (agent/scheduledevents): a structured-mode CloudEvent 1.0 of type
// ScheduledEventsCloudEventType with the message id, source
// "dovetail/<cluster>/scheduled-events", the resource ID of the VM that read the document (reader)
// as subject, at as time, and the document as JSON data. A document that is not JSON is carried
// as application/octet-stream, so the interruption function dead-letters it with its reason
// instead of it being lost at the publisher.
func WrapScheduledEvents(cluster, reader, id string, doc []byte, at time.Time) ([]byte, error) {
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetID(id)
	e.SetSource(events.SourcePrefix + "/" + cluster + "/scheduled-events")
	e.SetType(ScheduledEventsCloudEventType)
	e.SetTime(at.UTC())
	e.SetSubject(reader)
	ct := "application/json"
	if !json.Valid(doc) {
		ct = "application/octet-stream"
	}
	if err := e.SetData(ct, doc); err != nil {
		return nil, fmt.Errorf("building the CloudEvent: %w", err)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("building the CloudEvent: %w", err)
	}
	return json.Marshal(e)
}

// ScheduledEvents is a decoded IMDS Scheduled Events document.
type ScheduledEvents struct {
	// Incarnation is DocumentIncarnation: it grows whenever the document changes, so a consumer
	// that remembers it can tell a new document from one it already acted on.
	Incarnation int
	Notices     []Notice
}

type scheduledEventsDoc struct {
	DocumentIncarnation *int             `json:"DocumentIncarnation"`
	Events              []scheduledEvent `json:"Events"`
}

type scheduledEvent struct {
	EventID           string   `json:"EventId"`
	EventStatus       string   `json:"EventStatus"`
	EventType         string   `json:"EventType"`
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	NotBefore         string   `json:"NotBefore"`
	Description       string   `json:"Description"`
	EventSource       string   `json:"EventSource"`
	DurationInSeconds *int     `json:"DurationInSeconds"`
}

// DecodeScheduledEvents decodes an IMDS Scheduled Events document (GET
// /metadata/scheduledevents?api-version=2020-07-01). Each event becomes one Notice: Preempt →
// KindPreemption, Terminate → KindTermination, Reboot/Redeploy/Freeze → KindScheduledChange;
// Deadline is NotBefore (empty once the event has Started); InstanceIDs are the VM names in
// Resources; State is EventStatus; Action is EventType. An empty Events list is valid (no
// notices). Errors name the field ("Events[0].NotBefore") and wrap events.ErrMalformed.
func DecodeScheduledEvents(data []byte) (ScheduledEvents, error) {
	var doc scheduledEventsDoc
	if err := strictUnmarshal(data, &doc); err != nil {
		return ScheduledEvents{}, malformed("DocumentIncarnation", "not a Scheduled Events document: %v", err)
	}
	if doc.DocumentIncarnation == nil {
		return ScheduledEvents{}, malformed("DocumentIncarnation", "required")
	}
	out := ScheduledEvents{Incarnation: *doc.DocumentIncarnation}
	for i, e := range doc.Events {
		p := fmt.Sprintf("Events[%d]", i)
		n := Notice{Cloud: CloudAzure, ID: e.EventID, Type: e.EventType, Action: e.EventType, State: e.EventStatus, Description: e.Description}
		switch e.EventType {
		case ScheduledEventPreempt:
			n.Kind = KindPreemption
		case ScheduledEventTerminate:
			n.Kind = KindTermination
		case ScheduledEventReboot, ScheduledEventRedeploy, ScheduledEventFreeze:
			n.Kind = KindScheduledChange
		case "":
			return ScheduledEvents{}, malformed(p+".EventType", "required")
		default:
			return ScheduledEvents{}, malformed(p+".EventType", "%q is not Preempt, Terminate, Reboot, Redeploy or Freeze", e.EventType)
		}
		switch {
		case e.EventID == "":
			return ScheduledEvents{}, malformed(p+".EventId", "required")
		case e.ResourceType != "VirtualMachine":
			return ScheduledEvents{}, malformed(p+".ResourceType", "%q is not VirtualMachine", e.ResourceType)
		case len(e.Resources) == 0:
			return ScheduledEvents{}, malformed(p+".Resources", "required: at least one VM name")
		case e.EventStatus != "Scheduled" && e.EventStatus != "Started":
			return ScheduledEvents{}, malformed(p+".EventStatus", "%q is not Scheduled or Started", e.EventStatus)
		}
		for j, r := range e.Resources {
			if strings.TrimSpace(r) == "" {
				return ScheduledEvents{}, malformed(fmt.Sprintf("%s.Resources[%d]", p, j), "empty VM name")
			}
		}
		n.InstanceIDs = append([]string(nil), e.Resources...)
		if e.NotBefore != "" {
			t, err := time.Parse(scheduledEventsNotBeforeTimeLayout, e.NotBefore)
			if err != nil {
				return ScheduledEvents{}, malformed(p+".NotBefore", "%q is not an RFC 1123 time (Mon, 02 Jan 2006 15:04:05 GMT)", e.NotBefore)
			}
			n.Deadline = t.UTC()
		} else if e.EventStatus == "Scheduled" {
			return ScheduledEvents{}, malformed(p+".NotBefore", "required while the event is Scheduled")
		}
		out.Notices = append(out.Notices, n)
	}
	return out, nil
}

// eventGridEvent holds both schemas' fields: CloudEvents 1.0 (id, source, type, specversion,
// time) and the Event Grid schema (id, topic, eventType, eventTime, dataVersion, metadataVersion).
type eventGridEvent struct {
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Topic           string          `json:"topic"`
	Subject         string          `json:"subject"`
	Type            string          `json:"type"`
	EventType       string          `json:"eventType"`
	SpecVersion     string          `json:"specversion"`
	Time            string          `json:"time"`
	EventTime       string          `json:"eventTime"`
	DataVersion     string          `json:"dataVersion"`
	MetadataVersion string          `json:"metadataVersion"`
	Data            json.RawMessage `json:"data"`
}

type healthResourcesData struct {
	ResourceInfo struct {
		ID         string `json:"id"`
		Type       string `json:"type"`
		Properties struct {
			TargetResourceID          string `json:"targetResourceId"`
			TargetResourceType        string `json:"targetResourceType"`
			OccurredTime              string `json:"occurredTime"`
			AvailabilityState         string `json:"availabilityState"`
			PreviousAvailabilityState string `json:"previousAvailabilityState"`
			AnnotationName            string `json:"annotationName"`
			Reason                    string `json:"reason"`
			Summary                   string `json:"summary"`
			Context                   string `json:"context"`
			Category                  string `json:"category"`
		} `json:"properties"`
	} `json:"resourceInfo"`
	APIVersion string `json:"apiVersion"`
}

// DecodeEventGrid decodes Event Grid HealthResources events, and the Scheduled Events documents
// Dovetail's publisher wraps (ScheduledEventsCloudEventType, its subject the resource ID of the VM
// that read the document: the VM names the document lists become resource IDs in that VM's
// subscription and resource group, see AzureVMID.Resolve), as pushed to a webhook or Azure
// Function: a JSON array of events (Event Grid push delivery) or one event, each in CloudEvents
// 1.0 schema or Event Grid schema. AvailabilityStatusChanged → KindAvailabilityChange (State is
// the new availabilityState); ResourceAnnotated with VirtualMachinePreempted → KindPreemption,
// with VirtualMachineDeallocationInitiated → KindStateChange (State "deallocating"). Other
// annotations, event types and resource types are refused with the field that says so (filter
// them out in the Event Grid subscription). ResourceIDs carry targetResourceId; Time is
// occurredTime. Errors wrap events.ErrMalformed; in a batch they name the index ("[2].data…").
func DecodeEventGrid(data []byte) ([]Notice, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return nil, malformed("[]", "not a JSON array of events: %v", err)
		}
		if len(raws) == 0 {
			return nil, malformed("[]", "empty batch")
		}
		out := make([]Notice, 0, len(raws))
		for i, r := range raws {
			ns, err := decodeEventGridEvents(r, fmt.Sprintf("[%d].", i))
			if err != nil {
				return nil, err
			}
			out = append(out, ns...)
		}
		return out, nil
	}
	return decodeEventGridEvents(trimmed, "")
}

// decodeEventGridEvents decodes one event: a CloudEvent of ScheduledEventsCloudEventType gives
// the notices of the document it carries (none for a document without events), any other event
// one notice (decodeEventGridEvent).
func decodeEventGridEvents(raw []byte, p string) ([]Notice, error) {
	var head struct {
		SpecVersion     string          `json:"specversion"`
		ID              string          `json:"id"`
		Source          string          `json:"source"`
		Type            string          `json:"type"`
		Subject         string          `json:"subject"`
		DataContentType string          `json:"datacontenttype"`
		Data            json.RawMessage `json:"data"`
		DataBase64      *string         `json:"data_base64"`
	}
	if json.Unmarshal(raw, &head) != nil || head.SpecVersion == "" || head.Type != ScheduledEventsCloudEventType {
		n, err := decodeEventGridEvent(raw, p)
		if err != nil {
			return nil, err
		}
		return []Notice{n}, nil
	}
	switch {
	case head.SpecVersion != "1.0":
		return nil, malformed(p+"specversion", "%q is not CloudEvents 1.0", head.SpecVersion)
	case head.ID == "":
		return nil, malformed(p+"id", "required")
	case head.Source == "":
		return nil, malformed(p+"source", "required")
	case head.DataContentType != "" && !jsonMediaType(head.DataContentType):
		return nil, malformed(p+"datacontenttype", "%q: a Scheduled Events document is application/json", head.DataContentType)
	case len(head.Data) > 0 && head.DataBase64 != nil:
		return nil, malformed(p+"data_base64", "a CloudEvent carries data or data_base64, not both")
	case len(head.Data) == 0 && head.DataBase64 == nil:
		return nil, malformed(p+"data", "required (the Scheduled Events document)")
	case head.Subject == "":
		return nil, malformed(p+"subject", "required: the resource ID of the VM that read the document")
	}
	scope, ok := ParseAzureVMID(head.Subject)
	if !ok {
		return nil, malformed(p+"subject", "%q is not a VM resource ID (/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Compute/virtualMachines/<name>, or a scale set's .../virtualMachineScaleSets/<set>/virtualMachines/<n>)", head.Subject)
	}
	// CloudEvents' JSON format may carry the document as data_base64 (publishers that send
	// bytes as bytes, the Event Grid SDK among them): it is the same document.
	data, field := []byte(head.Data), "data"
	if head.DataBase64 != nil {
		b, err := base64.StdEncoding.DecodeString(*head.DataBase64)
		if err != nil {
			return nil, malformed(p+"data_base64", "not base64: %v", err)
		}
		data, field = b, "data_base64"
	}
	doc, err := DecodeScheduledEvents(data)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", p, field, err)
	}
	for i := range doc.Notices {
		doc.Notices[i].ResourceIDs = scope.Resolve(doc.Notices[i].InstanceIDs)
	}
	return doc.Notices, nil
}

// jsonMediaType reports whether a datacontenttype is JSON: application/json or */*+json, any
// case, with or without parameters (RFC 2045 media types are case-insensitive).
func jsonMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func decodeEventGridEvent(raw []byte, p string) (Notice, error) {
	var ev eventGridEvent
	if err := strictUnmarshal(raw, &ev); err != nil {
		return Notice{}, malformed(p+"event", "not an Event Grid event: %v", err)
	}
	typ, timeField, timeText := ev.EventType, "eventTime", ev.EventTime
	if ev.SpecVersion != "" {
		if ev.SpecVersion != "1.0" {
			return Notice{}, malformed(p+"specversion", "%q is not CloudEvents 1.0", ev.SpecVersion)
		}
		typ, timeField, timeText = ev.Type, "time", ev.Time
		if ev.Source == "" {
			return Notice{}, malformed(p+"source", "required")
		}
	} else if ev.Topic == "" && ev.EventType == "" {
		return Notice{}, malformed(p+"eventType", "required (or specversion for a CloudEvent)")
	} else if ev.EventType == ScheduledEventsCloudEventType {
		// Dovetail's scheduled-events agent publishes CloudEvents only; read as a HealthResources
		// event this would fail on a field the document never has.
		return Notice{}, malformed(p+"eventType", "%q is a Scheduled Events document, which travels as a CloudEvent (specversion 1.0), not in the Event Grid schema", ev.EventType)
	}
	switch {
	case ev.ID == "":
		return Notice{}, malformed(p+"id", "required")
	case typ == "":
		return Notice{}, malformed(p+typeField(ev), "required")
	case len(ev.Data) == 0:
		return Notice{}, malformed(p+"data", "required")
	}
	issued, err := time.Parse(time.RFC3339Nano, timeText)
	if err != nil {
		return Notice{}, malformed(p+timeField, "%q is not an RFC 3339 time", timeText)
	}
	var d healthResourcesData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return Notice{}, malformed(p+"data", "%v", err)
	}
	props := d.ResourceInfo.Properties
	pp := p + "data.resourceInfo.properties."
	switch {
	case props.TargetResourceID == "":
		return Notice{}, malformed(pp+"targetResourceId", "required")
	case !strings.EqualFold(props.TargetResourceType, targetTypeVM) && !strings.EqualFold(props.TargetResourceType, targetTypeVMSSVM):
		return Notice{}, malformed(pp+"targetResourceType", "%q is not %s or %s", props.TargetResourceType, targetTypeVM, targetTypeVMSSVM)
	}
	n := Notice{Cloud: CloudAzure, ID: ev.ID, Type: typ, Time: issued.UTC(), ResourceIDs: []string{props.TargetResourceID}}
	if name := AzureVMName(props.TargetResourceID); name != "" {
		n.InstanceIDs = []string{name}
	}
	if props.OccurredTime != "" {
		t, err := time.Parse(time.RFC3339Nano, props.OccurredTime)
		if err != nil {
			return Notice{}, malformed(pp+"occurredTime", "%q is not an RFC 3339 time", props.OccurredTime)
		}
		n.Time = t.UTC()
	}
	switch typ {
	case EventGridAvailabilityStatusChanged:
		if props.AvailabilityState == "" {
			return Notice{}, malformed(pp+"availabilityState", "required")
		}
		n.Kind, n.State = KindAvailabilityChange, props.AvailabilityState
		n.Description = props.PreviousAvailabilityState + " -> " + props.AvailabilityState
	case EventGridResourceAnnotated:
		n.Description = props.Summary
		n.Action = props.AnnotationName
		switch props.AnnotationName {
		case AnnotationVMPreempted:
			n.Kind = KindPreemption
			// The annotation reports an eviction that has happened: the deadline is now.
			n.Deadline = n.Time
		case AnnotationVMDeallocationInitiated:
			n.Kind, n.State = KindStateChange, StateDeallocating
		case "":
			return Notice{}, malformed(pp+"annotationName", "required")
		default:
			return Notice{}, malformed(pp+"annotationName", "%q is not an annotation Dovetail acts on (%s, %s)",
				props.AnnotationName, AnnotationVMPreempted, AnnotationVMDeallocationInitiated)
		}
	default:
		return Notice{}, malformed(p+typeField(ev), "%q is not %s or %s", typ, EventGridAvailabilityStatusChanged, EventGridResourceAnnotated)
	}
	return n, nil
}

func typeField(ev eventGridEvent) string {
	if ev.SpecVersion != "" {
		return "type"
	}
	return "eventType"
}
