package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/dovetail-dev/dovetail/shared/boundedjson"
)

// MaxDecodedPayloadBytes bounds the decompressed size of one payload (512 MiB), so a small
// corrupt or hostile frame cannot exhaust memory. A snapshot of 1,000 nodes × 30 pods is
// tens of MiB of JSON; this leaves an order of magnitude of headroom.
const MaxDecodedPayloadBytes = 512 << 20

// MaxWindowBytes bounds the zstd window a frame may ask for (64 MiB): Dovetail's encoder uses
// 8 MiB windows, and a larger declared window is refused before it is allocated.
const MaxWindowBytes = 64 << 20

// The zstd encoder is safe for concurrent EncodeAll calls (klauspost/compress zstd docs), so one
// serves the whole process. Decoders stream (a frame's declared content size never sizes a
// buffer: DecodeAll would allocate it up front) and are pooled.
var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	zdecs   = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(MaxDecodedPayloadBytes), zstd.WithDecoderMaxWindow(MaxWindowBytes))
		if err != nil {
			panic(err) // only invalid options fail, a build defect
		}
		return d
	}}
)

// decompress streams a zstd frame through a pooled decoder, growing the output only as bytes
// are decoded and refusing more than maxDecoded(len(data)): MaxExpansion times the input (at
// least MinDecodedBudget), at most MaxDecodedPayloadBytes.
func decompress(data []byte) ([]byte, error) {
	d := zdecs.Get().(*zstd.Decoder)
	defer zdecs.Put(d)
	if err := d.Reset(bytes.NewReader(data)); err != nil {
		return nil, err
	}
	limit := maxDecoded(len(data))
	var out bytes.Buffer
	// Start from the declared content size (Dovetail's encoder declares it: one allocation of
	// the right size), but never more than the limit: a header alone cannot make the decoder
	// allocate more than the input may expand to.
	var h zstd.Header
	if h.Decode(data) == nil && h.HasFCS {
		out.Grow(int(min(h.FrameContentSize, uint64(limit))))
	}
	n, err := io.Copy(&out, io.LimitReader(d, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("decompresses to more than %d bytes (%d times its %d bytes; real payloads expand at most 22 times)",
			limit, MaxExpansion, len(data))
	}
	return out.Bytes(), nil
}

// encodePayload is JSON then zstd.
func encodePayload(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding payload as JSON: %w", err)
	}
	return compress(raw), nil
}

// compress is the zstd half of encodePayload.
func compress(raw []byte) []byte { return zenc.EncodeAll(raw, make([]byte, 0, len(raw)/4)) }

// decodePayload is zstd then JSON; what names the payload in errors ("snapshot").
func decodePayload(what string, data []byte, v any) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: %s: empty payload", ErrMalformed, what)
	}
	raw, err := decompress(data)
	if err != nil {
		return fmt.Errorf("%w: %s: not a zstd frame (datacontenttype %s): %v", ErrMalformed, what, ContentTypeJSONZstd, err)
	}
	// Count before allocating: the objects a payload describes are bounded by its size and by
	// the per-message object counts (bounds.go).
	if err := boundedjson.Unmarshal(raw, v, Limits(len(data))); err != nil {
		if errors.Is(err, boundedjson.ErrLimit) {
			return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
		}
		return fmt.Errorf("%w: %s: invalid JSON: %v", ErrMalformed, what, err)
	}
	return nil
}

// versionError explains a schema version this build cannot read.
func versionError(field string, got, want int) error {
	if got == 0 {
		return fmt.Errorf("%w: %s: required (this build reads version %d)", ErrMalformed, field, want)
	}
	return fmt.Errorf("%w: %w: %s: version %d is not supported, this build reads version %d",
		ErrMalformed, ErrUnsupportedVersion, field, got, want)
}

// EncodeSnapshot validates s and returns it as zstd-compressed JSON (the ContentTypeJSONZstd
// payload of a TypeSnapshot event). A zero SchemaVersion is written as SnapshotSchemaVersion;
// any other version than the current one is refused. s is not modified.
func EncodeSnapshot(s *Snapshot) ([]byte, error) {
	if s == nil {
		return nil, errors.New("snapshot: required")
	}
	c := *s // shallow copy: only SchemaVersion may change
	if c.SchemaVersion == 0 {
		c.SchemaVersion = SnapshotSchemaVersion
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return encodePayload(&c)
}

// DecodeSnapshot reverses EncodeSnapshot. It refuses other schema versions and invalid
// snapshots; errors name the field path and wrap ErrMalformed.
func DecodeSnapshot(data []byte) (*Snapshot, error) {
	s := &Snapshot{}
	if err := decodePayload("snapshot", data, s); err != nil {
		return nil, err
	}
	if s.SchemaVersion != SnapshotSchemaVersion {
		return nil, versionError("snapshot.schemaVersion", s.SchemaVersion, SnapshotSchemaVersion)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return s, nil
}

// peekBytes bounds what PeekRevision decompresses: the fields before the revision are a schema
// version and a cluster name of at most 63 characters.
const peekBytes = 4 << 10

// PeekRevision reads the revision of an EncodeSnapshot payload from the head of its JSON,
// decompressing at most peekBytes, without decoding or checking the rest: ok is false when the
// head does not give it (not a zstd frame, not a JSON object, another field order), and then only
// a full decode can tell. EncodeSnapshot writes schemaVersion, cluster and revision first (the
// order of Snapshot's fields, which encoding/json keeps).
func PeekRevision(data []byte) (rev int64, ok bool) {
	d := zdecs.Get().(*zstd.Decoder)
	defer zdecs.Put(d)
	if d.Reset(bytes.NewReader(data)) != nil {
		return 0, false
	}
	dec := json.NewDecoder(io.LimitReader(d, peekBytes))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return 0, false
		}
		if k == "revision" {
			if err := dec.Decode(&rev); err != nil {
				return 0, false
			}
			return rev, true
		}
		if v, err := dec.Token(); err != nil {
			return 0, false
		} else if _, composite := v.(json.Delim); composite {
			return 0, false // past the scalars that lead: the revision is not at the head
		}
	}
	return 0, false
}

// EncodePodsPending validates p (its snapshot included) and returns it as zstd-compressed JSON.
// A zero snapshot SchemaVersion is written as SnapshotSchemaVersion; p is not modified.
func EncodePodsPending(p *PodsPending) ([]byte, error) {
	if p == nil {
		return nil, errors.New("podsPending: required")
	}
	c := *p
	if c.Snapshot != nil && c.Snapshot.SchemaVersion == 0 {
		s := *c.Snapshot
		s.SchemaVersion = SnapshotSchemaVersion
		c.Snapshot = &s
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return encodePayload(&c)
}

// EncodeSnapshotWithPods returns what EncodeSnapshot(s) and EncodePodsPending(&PodsPending{pods,
// s}) return, byte for byte, validating and marshalling s once: the agent stores a pods-pending
// batch's snapshot as the cluster's latest and publishes the batch, and at 10,000 pending pods
// each marshal of the snapshot is tens of MB of JSON (docs/scale.md, "Eighth pass"). Errors are
// EncodePodsPending's. s is not modified.
func EncodeSnapshotWithPods(s *Snapshot, pods []string) (snapshot, podsPending []byte, err error) {
	if s == nil {
		return nil, nil, errors.New("podsPending.snapshot: required")
	}
	c := *s
	if c.SchemaVersion == 0 {
		c.SchemaVersion = SnapshotSchemaVersion
	}
	if err := (&PodsPending{Pods: pods, Snapshot: &c}).Validate(); err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding payload as JSON: %w", err)
	}
	// PodsPending with its snapshot already JSON: encoding/json writes a RawMessage as it is
	// (compacted, which json.Marshal's output already is), so the bytes are EncodePodsPending's.
	wrapped, err := json.Marshal(struct {
		Pods     []string        `json:"pods"`
		Snapshot json.RawMessage `json:"snapshot"`
	}{pods, raw})
	if err != nil {
		return nil, nil, fmt.Errorf("encoding payload as JSON: %w", err)
	}
	return compress(raw), compress(wrapped), nil
}

// DecodePodsPending reverses EncodePodsPending, refusing invalid payloads and foreign snapshot
// versions; errors name the field path and wrap ErrMalformed.
func DecodePodsPending(data []byte) (*PodsPending, error) {
	p := &PodsPending{}
	if err := decodePayload("podsPending", data, p); err != nil {
		return nil, err
	}
	if p.Snapshot != nil && p.Snapshot.SchemaVersion != SnapshotSchemaVersion {
		return nil, versionError("podsPending.snapshot.schemaVersion", p.Snapshot.SchemaVersion, SnapshotSchemaVersion)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return p, nil
}

// EncodeCommand validates c and returns it as zstd-compressed JSON.
func EncodeCommand(c *Command) ([]byte, error) {
	if c == nil {
		return nil, errors.New("command: required")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return encodePayload(c)
}

// DecodeCommand reverses EncodeCommand; errors name the field path and wrap ErrMalformed.
func DecodeCommand(data []byte) (*Command, error) {
	c := &Command{}
	if err := decodePayload("command", data, c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return c, nil
}

// encodeFor encodes payload for event type typ: a typed payload must match the type; []byte
// is taken as already encoded.
func encodeFor(typ string, payload any) ([]byte, error) {
	switch p := payload.(type) {
	case []byte:
		if len(p) == 0 {
			return nil, errors.New("payload: required")
		}
		return p, nil
	case *Snapshot:
		if typ != TypeSnapshot {
			return nil, fmt.Errorf("payload: *Snapshot does not match type %q", typ)
		}
		return EncodeSnapshot(p)
	case *PodsPending:
		if typ != TypePodsPending {
			return nil, fmt.Errorf("payload: *PodsPending does not match type %q", typ)
		}
		return EncodePodsPending(p)
	case *Command:
		if typ != TypeCommand {
			return nil, fmt.Errorf("payload: *Command does not match type %q", typ)
		}
		return EncodeCommand(p)
	default:
		return nil, fmt.Errorf("payload: unsupported Go type %T (want *Snapshot, *PodsPending, *Command or []byte)", payload)
	}
}
