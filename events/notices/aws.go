package notices

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// EventBridge detail-types and sources Dovetail acts on (EC2 User Guide: "Spot Instance
// interruption notices", "EC2 instance rebalance recommendations", "Monitor instance state
// changes", "Monitor interruptible Capacity Reservations"; AWS Health User Guide, "Monitoring AWS
// Health events with Amazon EventBridge").
const (
	DetailTypeSpotInterruption        = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalance               = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange             = "EC2 Instance State-change Notification"
	DetailTypeCapacityReservationWarn = "EC2 Capacity Reservation Instance Interruption Warning"
	DetailTypeHealth                  = "AWS Health Event"
	SourceEC2                         = "aws.ec2"
	SourceHealth                      = "aws.health"
)

// EC2 instance states an EC2 Instance State-change Notification carries (EC2 User Guide,
// "Monitor instance state changes").
var ec2States = map[string]bool{
	"pending": true, "running": true, "stopping": true, "stopped": true, "shutting-down": true, "terminated": true,
}

// Actions an interruption warning names: what EC2 does at the deadline.
var interruptionActions = map[string]bool{"terminate": true, "stop": true, "hibernate": true}

// instanceIDRE is an EC2 instance id: "i-" and 8 or 17 lowercase hex digits (EC2 resource ids).
var instanceIDRE = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

// zoneRE is an availability zone name such as us-east-1b: a region name plus one letter.
var zoneRE = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]+[a-z]$`)

// healthTimeLayout is how AWS Health writes startTime/endTime in EventBridge events:
// "Mon, 16 Mar 2026 15:10:09 GMT" (RFC 1123).
const healthTimeLayout = time.RFC1123

// eventBridgeEvent is the EventBridge envelope ("Amazon EventBridge events" reference): the
// detail is kept raw until the detail-type says what it is.
type eventBridgeEvent struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// ec2Detail is the detail of the EC2 events: spot and capacity-reservation interruption
// warnings, rebalance recommendations and state changes.
type ec2Detail struct {
	InstanceID      *string `json:"instance-id"`
	InstanceAction  *string `json:"instance-action"`
	State           *string `json:"state"`
	TerminationTime *string `json:"instance-termination-time"`
}

// healthDetail is the detail of an AWS Health event.
type healthDetail struct {
	EventArn          string `json:"eventArn"`
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	StartTime         string `json:"startTime"`
	EndTime           string `json:"endTime"`
	EventDescription  []struct {
		Language          string `json:"language"`
		LatestDescription string `json:"latestDescription"`
	} `json:"eventDescription"`
	AffectedEntities []struct {
		EntityValue string            `json:"entityValue"`
		Tags        map[string]string `json:"tags"`
	} `json:"affectedEntities"`
}

// DecodeEventBridge decodes one EventBridge event (an SQS message body from an EventBridge → SQS
// target is exactly the event JSON). Accepted: the EC2 spot interruption warning (actions
// terminate, stop, hibernate; resource ARNs with an account or, as aws-node-termination-handler
// writes them, with the zone in place of the region), rebalance recommendation, state-change
// notification (the six EC2 states), capacity-reservation interruption warning, and AWS Health
// events of service EC2 and category scheduledChange. Anything else, or a missing or malformed
// field, is an error wrapping events.ErrMalformed that names the field ("detail.instance-id").
func DecodeEventBridge(data []byte) (Notice, error) {
	var ev eventBridgeEvent
	if err := strictUnmarshal(data, &ev); err != nil {
		return Notice{}, malformed("event", "not an EventBridge event: %v", err)
	}
	switch {
	case ev.Version != "0":
		return Notice{}, malformed("version", "%q is not the EventBridge envelope version \"0\"", ev.Version)
	case ev.ID == "":
		return Notice{}, malformed("id", "required")
	case ev.DetailType == "":
		return Notice{}, malformed("detail-type", "required")
	case ev.Source == "":
		return Notice{}, malformed("source", "required")
	case len(ev.Detail) == 0 || bytes.Equal(ev.Detail, []byte("null")):
		return Notice{}, malformed("detail", "required")
	}
	t, err := time.Parse(time.RFC3339, ev.Time)
	if err != nil {
		return Notice{}, malformed("time", "%q is not an RFC 3339 time", ev.Time)
	}
	n := Notice{Cloud: CloudAWS, ID: ev.ID, Type: ev.DetailType, Time: t, Region: ev.Region}
	switch {
	case ev.Source == SourceEC2 && ev.DetailType == DetailTypeSpotInterruption:
		n.Kind = KindSpotInterruption
		return decodeEC2(ev, n, true, false)
	case ev.Source == SourceEC2 && ev.DetailType == DetailTypeCapacityReservationWarn:
		n.Kind = KindCapacityReservationInterruption
		return decodeEC2(ev, n, true, false)
	case ev.Source == SourceEC2 && ev.DetailType == DetailTypeRebalance:
		n.Kind = KindRebalance
		return decodeEC2(ev, n, false, false)
	case ev.Source == SourceEC2 && ev.DetailType == DetailTypeStateChange:
		n.Kind = KindStateChange
		return decodeEC2(ev, n, false, true)
	case ev.Source == SourceHealth && ev.DetailType == DetailTypeHealth:
		n.Kind = KindScheduledChange
		return decodeHealth(ev, n)
	}
	return Notice{}, malformed("detail-type", "%q from source %q is not a notice Dovetail handles (want one of %q, %q, %q, %q from %s or %q from %s)",
		ev.DetailType, ev.Source, DetailTypeSpotInterruption, DetailTypeRebalance, DetailTypeStateChange,
		DetailTypeCapacityReservationWarn, SourceEC2, DetailTypeHealth, SourceHealth)
}

func decodeEC2(ev eventBridgeEvent, n Notice, interruption, stateChange bool) (Notice, error) {
	var d ec2Detail
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		return Notice{}, malformed("detail", "%v", err)
	}
	if d.InstanceID == nil || *d.InstanceID == "" {
		return Notice{}, malformed("detail.instance-id", "required")
	}
	if !instanceIDRE.MatchString(*d.InstanceID) {
		return Notice{}, malformed("detail.instance-id", "%q is not an EC2 instance id (i- and 8 or 17 hex digits)", *d.InstanceID)
	}
	n.InstanceIDs = []string{*d.InstanceID}
	for i, r := range ev.Resources {
		zone, id, err := parseInstanceARN(r)
		if err != nil {
			return Notice{}, malformed(fmt.Sprintf("resources[%d]", i), "%v", err)
		}
		if id != *d.InstanceID {
			return Notice{}, malformed(fmt.Sprintf("resources[%d]", i), "names instance %q, detail.instance-id is %q", id, *d.InstanceID)
		}
		if zone != "" {
			n.Zone = zone
		}
	}
	if interruption {
		if d.InstanceAction == nil || *d.InstanceAction == "" {
			return Notice{}, malformed("detail.instance-action", "required")
		}
		if !interruptionActions[*d.InstanceAction] {
			return Notice{}, malformed("detail.instance-action", "%q is not terminate, stop or hibernate", *d.InstanceAction)
		}
		n.Action = *d.InstanceAction
		n.Deadline = n.Time.Add(SpotInterruptionWarning)
		if d.TerminationTime != nil && *d.TerminationTime != "" {
			tt, err := time.Parse(time.RFC3339, *d.TerminationTime)
			if err != nil {
				return Notice{}, malformed("detail.instance-termination-time", "%q is not an RFC 3339 time", *d.TerminationTime)
			}
			n.Deadline = tt
		}
	}
	if stateChange {
		if d.State == nil || *d.State == "" {
			return Notice{}, malformed("detail.state", "required")
		}
		if !ec2States[*d.State] {
			return Notice{}, malformed("detail.state", "%q is not an EC2 instance state (pending, running, stopping, stopped, shutting-down, terminated)", *d.State)
		}
		n.State = *d.State
	}
	return n, nil
}

// parseInstanceARN reads an EC2 instance ARN: "arn:aws:ec2:<region>:<account>:instance/<id>",
// or the account-less form aws-node-termination-handler emits with the zone in the region slot
// ("arn:aws:ec2:us-east-1b:instance/<id>"). It returns the zone when the ARN names one.
func parseInstanceARN(arn string) (zone, id string, err error) {
	parts := strings.Split(arn, ":")
	if len(parts) < 5 || parts[0] != "arn" || parts[2] != "ec2" {
		return "", "", fmt.Errorf("%q is not an EC2 ARN (arn:<partition>:ec2:<region>:<account>:instance/<id>)", arn)
	}
	res, ok := strings.CutPrefix(parts[len(parts)-1], "instance/")
	if !ok || !instanceIDRE.MatchString(res) {
		return "", "", fmt.Errorf("%q does not end in instance/<instance id>", arn)
	}
	if zoneRE.MatchString(parts[3]) {
		zone = parts[3]
	}
	return zone, res, nil
}

func decodeHealth(ev eventBridgeEvent, n Notice) (Notice, error) {
	var d healthDetail
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		return Notice{}, malformed("detail", "%v", err)
	}
	switch {
	case d.Service != "EC2":
		return Notice{}, malformed("detail.service", "%q is not EC2: only EC2 health events concern nodes", d.Service)
	case d.EventTypeCategory != "scheduledChange":
		return Notice{}, malformed("detail.eventTypeCategory", "%q is not scheduledChange: only scheduled changes are acted on", d.EventTypeCategory)
	case d.EventTypeCode == "":
		return Notice{}, malformed("detail.eventTypeCode", "required")
	case d.StartTime == "":
		return Notice{}, malformed("detail.startTime", "required")
	}
	start, err := time.Parse(healthTimeLayout, d.StartTime)
	if err != nil {
		return Notice{}, malformed("detail.startTime", "%q is not an RFC 1123 time (Mon, 02 Jan 2006 15:04:05 GMT)", d.StartTime)
	}
	if d.EndTime != "" {
		if _, err := time.Parse(healthTimeLayout, d.EndTime); err != nil {
			return Notice{}, malformed("detail.endTime", "%q is not an RFC 1123 time", d.EndTime)
		}
	}
	n.Type = d.EventTypeCode
	n.Deadline = start.UTC()
	for _, desc := range d.EventDescription {
		if desc.Language == "en_US" || n.Description == "" {
			n.Description = desc.LatestDescription
		}
	}
	for i, e := range d.AffectedEntities {
		if !instanceIDRE.MatchString(e.EntityValue) {
			return Notice{}, malformed(fmt.Sprintf("detail.affectedEntities[%d].entityValue", i), "%q is not an EC2 instance id", e.EntityValue)
		}
		n.InstanceIDs = append(n.InstanceIDs, e.EntityValue)
	}
	if len(n.InstanceIDs) == 0 {
		// Older Health events list the instances only in resources.
		for i, r := range ev.Resources {
			if !instanceIDRE.MatchString(r) {
				return Notice{}, malformed(fmt.Sprintf("resources[%d]", i), "%q is not an EC2 instance id", r)
			}
			n.InstanceIDs = append(n.InstanceIDs, r)
		}
	}
	if len(n.InstanceIDs) == 0 {
		return Notice{}, malformed("detail.affectedEntities", "required: at least one affected instance")
	}
	return n, nil
}

// SQSMessage is one message of an SQS ReceiveMessage response.
type SQSMessage struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes,omitempty"`
}

// DecodeSQSResponse reads an SQS ReceiveMessage response in the AWS JSON 1.0 protocol
// ({"Messages":[{"MessageId","ReceiptHandle","MD5OfBody","Body",...}]}) and returns its messages.
// Errors name the field ("Messages[0].Body") and wrap events.ErrMalformed.
func DecodeSQSResponse(data []byte) ([]SQSMessage, error) {
	var resp struct {
		Messages []SQSMessage `json:"Messages"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, malformed("Messages", "not an SQS ReceiveMessage response: %v", err)
	}
	for i, m := range resp.Messages {
		if m.MessageID == "" {
			return nil, malformed(fmt.Sprintf("Messages[%d].MessageId", i), "required")
		}
		if m.Body == "" {
			return nil, malformed(fmt.Sprintf("Messages[%d].Body", i), "required")
		}
	}
	return resp.Messages, nil
}

// strictUnmarshal decodes one JSON object and refuses trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}
