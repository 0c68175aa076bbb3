package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
)

// ErrMalformed is wrapped by every error about an event or payload that can never be processed
// (missing field, unknown type, wrong version, corrupt compression). Consumers send such messages
// to the dead-letter queue instead of retrying them (DESIGN invariant 6).
var ErrMalformed = errors.New("malformed event")

// ErrUnsupportedVersion is wrapped (together with ErrMalformed) when a payload's schema version is
// not one this build understands.
var ErrUnsupportedVersion = errors.New("unsupported schema version")

// Wire constants of the envelope.
const (
	// SpecVersion is the only CloudEvents version accepted (CloudEvents spec v1.0, "specversion").
	SpecVersion = cloudevents.CloudEventsVersionV1
	// ContentTypeJSONZstd is the datacontenttype of every Dovetail payload: JSON compressed with
	// zstd (RFC 8878). CloudEvents' JSON format carries such non-JSON data in "data_base64".
	ContentTypeJSONZstd = "application/json+zstd"
	// ExtensionSchema carries the payload's schema version (an integer) so a decoder can refuse
	// versions it does not know before decompressing anything.
	ExtensionSchema = "dovetailschema"
	// ExtensionDataRef is the CloudEvents "dataref" extension (cloudevents/spec,
	// extensions/dataref.md): the URI where a claim-checked payload is stored instead of "data".
	ExtensionDataRef = "dataref"
	// ExtensionDigest is "sha256:<hex>" of a claim-checked payload, checked after fetching it.
	ExtensionDigest = "dovetaildigest"
	// ExtensionRevision carries the revision of the snapshot a snapshot or pods-pending event
	// holds, as a decimal string (revisions are int64; a CloudEvents Integer is only 32 bits), so
	// a function can tell an event superseded by a snapshot it already decided on without
	// fetching or decompressing the payload. Optional: events without it are decoded as before.
	ExtensionRevision = "dovetailrevision"
	// SourcePrefix starts every source: "dovetail/<cluster>/<component>".
	SourcePrefix = "dovetail"
)

// Payload schema versions of the event types other than the snapshot.
const (
	PodsPendingSchemaVersion = 1
	CommandSchemaVersion     = 1
)

// schemaVersions maps each known event type to the payload schema version this build reads.
var schemaVersions = map[string]int{
	TypeSnapshot:    SnapshotSchemaVersion,
	TypePodsPending: PodsPendingSchemaVersion,
	TypeCommand:     CommandSchemaVersion,
}

// SchemaVersionFor returns the payload schema version of a known event type.
func SchemaVersionFor(typ string) (int, bool) {
	v, ok := schemaVersions[typ]
	return v, ok
}

// nameRE is an RFC 1123 label: it is valid in a Kubernetes name, a CloudEvents source segment
// and a NATS subject token alike.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidName reports whether s can be a cluster or component name: an RFC 1123 label
// (lowercase alphanumerics and '-', at most 63 characters).
func ValidName(s string) bool { return len(s) <= 63 && nameRE.MatchString(s) }

// Envelope is a decoded Dovetail CloudEvent.
type Envelope struct {
	ID   string
	Type string
	// Source is "dovetail/<cluster>/<component>"; Cluster and Component are its parts.
	Source    string
	Cluster   string
	Component string
	Subject   string
	Time      time.Time
	// DataContentType is ContentTypeJSONZstd for every known type.
	DataContentType string
	// SchemaVersion is the "dovetailschema" extension.
	SchemaVersion int
	// Revision is the "dovetailrevision" extension: the revision of the snapshot the payload
	// holds, 0 when the event does not carry it.
	Revision int64
	// Data is the payload as carried (for ContentTypeJSONZstd: the compressed bytes, already
	// base64-decoded). Empty when the payload was claim-checked (DataRef set).
	Data []byte
	// DataRef is the BlobStore URI of a claim-checked payload and DataDigest its "sha256:<hex>".
	DataRef    string
	DataDigest string
}

// Option adjusts an event built by NewEvent.
type Option func(*eventOptions)

type eventOptions struct {
	subject  string
	time     time.Time
	revision int64
}

// WithSubject sets the CloudEvents "subject" (e.g. a NodeClaim or node name).
func WithSubject(s string) Option { return func(o *eventOptions) { o.subject = s } }

// WithRevision sets the "dovetailrevision" extension: the revision of the snapshot the event's
// payload holds (a snapshot, or a pods-pending batch's snapshot). 0 leaves it out.
func WithRevision(rev int64) Option { return func(o *eventOptions) { o.revision = rev } }

// WithTime sets the CloudEvents "time"; the default is the encoder's clock.
func WithTime(t time.Time) Option { return func(o *eventOptions) { o.time = t } }

// NewEvent returns a structured-mode JSON CloudEvent (CloudEvents JSON format v1.0).
//
// cluster and component must be RFC 1123 labels; typ one of the Type constants; id non-empty
// (it is also the queue's deduplication id). payload is a *Snapshot, *PodsPending or *Command
// matching typ (validated, then encoded with the zstd codec) or []byte already encoded by
// EncodeSnapshot / EncodePodsPending / EncodeCommand. Payloads larger than
// DefaultMaxInlineBytes are refused with ErrTooLarge; use Codec with a BlobStore to claim-check
// them instead.
func NewEvent(cluster, component, typ, id string, payload any, opts ...Option) ([]byte, error) {
	return Codec{}.NewEvent(context.Background(), cluster, component, typ, id, payload, opts...)
}

// buildEvent writes the envelope around already-encoded data, or around a dataref when ref != "".
func buildEvent(cluster, component, typ, id string, data []byte, ref, digest string, now time.Time, o eventOptions) ([]byte, error) {
	e := cloudevents.New(SpecVersion)
	e.SetID(id)
	e.SetSource(SourcePrefix + "/" + cluster + "/" + component)
	e.SetType(typ)
	t := o.time
	if t.IsZero() {
		t = now
	}
	e.SetTime(t.UTC())
	if o.subject != "" {
		e.SetSubject(o.subject)
	}
	e.SetExtension(ExtensionSchema, int32(schemaVersions[typ]))
	if o.revision > 0 {
		e.SetExtension(ExtensionRevision, strconv.FormatInt(o.revision, 10))
	}
	if ref != "" {
		e.SetDataContentType(ContentTypeJSONZstd)
		e.SetExtension(ExtensionDataRef, ref)
		e.SetExtension(ExtensionDigest, digest)
	} else if err := e.SetData(ContentTypeJSONZstd, data); err != nil {
		return nil, err
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("building event %q: %w", id, err)
	}
	return json.Marshal(e)
}

func checkEnvelopeArgs(cluster, component, typ, id string) error {
	switch {
	case !ValidName(cluster):
		return fmt.Errorf("cluster %q: must be an RFC 1123 label (lowercase alphanumerics and '-', at most 63)", cluster)
	case !ValidName(component):
		return fmt.Errorf("component %q: must be an RFC 1123 label (lowercase alphanumerics and '-', at most 63)", component)
	case id == "":
		return errors.New("id: required")
	}
	if _, ok := schemaVersions[typ]; !ok {
		return fmt.Errorf("type %q: unknown event type", typ)
	}
	return nil
}

// malformed builds an error naming the envelope field and the reason, wrapping ErrMalformed.
func malformed(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, field, fmt.Sprintf(format, args...))
}

// Decode parses a structured-mode JSON CloudEvent and checks it is a Dovetail event this build
// understands: specversion "1.0", non-empty id, a known type, source "dovetail/<cluster>/<component>",
// datacontenttype application/json+zstd, "dovetailschema" equal to the type's schema version,
// a time, and either data or a dataref with its digest. Every error names the field and the
// reason and wraps ErrMalformed (and ErrUnsupportedVersion for a version mismatch).
func Decode(data []byte) (env Envelope, err error) {
	// The CloudEvents SDK panics on some shapes it does not expect (data_base64 that is not a
	// string); a panic on input is a malformed event, dead-lettered with its reason, never a crash
	// or a retry.
	defer func() {
		if r := recover(); r != nil {
			env, err = Envelope{}, malformed("event", "the CloudEvents decoder refused it: %v", r)
		}
	}()
	// Read specversion on its own first: the SDK's error for a missing or foreign version
	// does not name the field.
	var head struct {
		SpecVersion *string `json:"specversion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Envelope{}, malformed("event", "not a JSON object: %v", err)
	}
	// Every context attribute Dovetail reads, and data_base64, is a JSON string: check the shapes
	// before the SDK sees them, so the error names the field.
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(data, &attrs); err != nil {
		return Envelope{}, malformed("event", "not a JSON object: %v", err)
	}
	for _, k := range []string{"id", "type", "source", "subject", "time", "datacontenttype", "dataschema", "data_base64",
		ExtensionDataRef, ExtensionDigest, ExtensionRevision} {
		if v, ok := attrs[k]; ok && (len(v) == 0 || (v[0] != '"' && string(v) != "null")) {
			return Envelope{}, malformed(k, "must be a JSON string, got %s", truncate(string(v), 64))
		}
	}
	if head.SpecVersion == nil {
		return Envelope{}, malformed("specversion", "required")
	}
	if *head.SpecVersion != SpecVersion {
		return Envelope{}, malformed("specversion", "%q is not supported, want %q", *head.SpecVersion, SpecVersion)
	}
	var e cloudevents.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return Envelope{}, malformed("event", "%v", err)
	}
	env = Envelope{
		ID:              e.ID(),
		Type:            e.Type(),
		Source:          e.Source(),
		Subject:         e.Subject(),
		Time:            e.Time(),
		DataContentType: e.DataContentType(),
		Data:            e.Data(),
	}
	if env.ID == "" {
		return env, malformed("id", "required")
	}
	want, ok := schemaVersions[env.Type]
	if env.Type == "" {
		return env, malformed("type", "required")
	} else if !ok {
		return env, malformed("type", "%q is not a known Dovetail event type", env.Type)
	}
	parts := strings.Split(env.Source, "/")
	if len(parts) != 3 || parts[0] != SourcePrefix || !ValidName(parts[1]) || !ValidName(parts[2]) {
		return env, malformed("source", "%q is not of the form dovetail/<cluster>/<component> with RFC 1123 label parts", env.Source)
	}
	env.Cluster, env.Component = parts[1], parts[2]
	if env.Time.IsZero() {
		return env, malformed("time", "required")
	}
	if env.DataContentType != ContentTypeJSONZstd {
		return env, malformed("datacontenttype", "%q is not supported for %s, want %q", env.DataContentType, env.Type, ContentTypeJSONZstd)
	}
	ext := e.Extensions()
	rawSchema, ok := ext[ExtensionSchema]
	if !ok {
		return env, malformed(ExtensionSchema, "required")
	}
	v, err := types.ToInteger(rawSchema)
	if err != nil {
		return env, malformed(ExtensionSchema, "not an integer: %v", err)
	}
	env.SchemaVersion = int(v)
	if env.SchemaVersion != want {
		return env, fmt.Errorf("%w: %w: %s: version %d of %s is not supported, this build reads version %d",
			ErrMalformed, ErrUnsupportedVersion, ExtensionSchema, env.SchemaVersion, env.Type, want)
	}
	if raw, ok := ext[ExtensionRevision]; ok {
		s, _ := types.ToString(raw)
		rev, err := strconv.ParseInt(s, 10, 64)
		if err != nil || rev <= 0 {
			return env, malformed(ExtensionRevision, "%q is not a positive decimal integer", truncate(s, 32))
		}
		env.Revision = rev
	}
	if raw, ok := ext[ExtensionDataRef]; ok {
		env.DataRef, _ = types.ToString(raw)
		if env.DataRef == "" {
			return env, malformed(ExtensionDataRef, "must be a non-empty URI string")
		}
		if raw, ok := ext[ExtensionDigest]; ok {
			env.DataDigest, _ = types.ToString(raw)
		}
		if !strings.HasPrefix(env.DataDigest, "sha256:") {
			return env, malformed(ExtensionDigest, "required with dataref as \"sha256:<hex>\"")
		}
		if len(env.Data) > 0 {
			return env, malformed("data", "must be absent when dataref is set")
		}
	} else if len(env.Data) == 0 {
		return env, malformed("data", "required (or a dataref to a claim-checked payload)")
	}
	return env, nil
}

// truncate shortens s to at most n bytes for an error message, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
