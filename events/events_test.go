package events

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

var eventTime = time.Date(2026, 3, 1, 12, 0, 1, 500_000_000, time.UTC)

func TestEventRoundTripSnapshot(t *testing.T) {
	s := testSnapshot(3, 2, 2)
	data, err := NewEvent("prod", "agent", TypeSnapshot, "snap-42", s, WithSubject("revision-42"), WithTime(eventTime))
	if err != nil {
		t.Fatal(err)
	}
	// The wire shape follows the CloudEvents v1.0 JSON format: non-JSON data goes in data_base64.
	var wire map[string]any
	if err := json.Unmarshal(data, &wire); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"specversion": "1.0", "id": "snap-42", "source": "dovetail/prod/agent", "type": TypeSnapshot,
		"subject": "revision-42", "datacontenttype": "application/json+zstd", "dovetailschema": float64(1),
		"time": "2026-03-01T12:00:01.5Z",
	}
	for k, v := range want {
		if wire[k] != v {
			t.Errorf("wire %s = %v, want %v", k, wire[k], v)
		}
	}
	if _, ok := wire["data"]; ok {
		t.Error("wire has data; compressed payload must be in data_base64")
	}
	if _, ok := wire["data_base64"].(string); !ok {
		t.Fatalf("wire data_base64 missing: %v", wire)
	}

	env, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if env.Cluster != "prod" || env.Component != "agent" || env.SchemaVersion != 1 || env.Subject != "revision-42" || !env.Time.Equal(eventTime) {
		t.Errorf("envelope = %+v", env)
	}
	got, err := Codec{}.Snapshot(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, s) {
		t.Errorf("snapshot changed in round trip")
	}
}

func TestEventRoundTripCommandAndPodsPending(t *testing.T) {
	cmd := &Command{ID: CommandID("prod", "42", "create"), Kind: CommandCreateNodeClaim, Cluster: "prod", SnapshotRevision: 42,
		NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x1"}, Status: apisv1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0123"}}}
	data, err := NewEvent("prod", "provision", TypeCommand, cmd.ID, cmd)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Codec{}.Command(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, cmd) {
		t.Errorf("command = %+v, want %+v", got, cmd)
	}

	s := testSnapshot(1, 1, 2)
	s.SchemaVersion = 0 // the encoder stamps the current version
	pp := &PodsPending{Pods: []string{s.PendingPods[0].Namespace + "/" + s.PendingPods[0].Name}, Snapshot: s}
	data, err = NewEvent("prod", "agent", TypePodsPending, "batch-1", pp)
	if err != nil {
		t.Fatal(err)
	}
	if s.SchemaVersion != 0 {
		t.Error("encoder modified its input")
	}
	env, err = Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	gotPP, err := Codec{}.PodsPending(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if gotPP.Snapshot.SchemaVersion != SnapshotSchemaVersion || len(gotPP.Snapshot.PendingPods) != 2 || gotPP.Pods[0] != pp.Pods[0] {
		t.Errorf("podsPending = %+v", gotPP)
	}
	// A typed payload must match the event type.
	if _, err := NewEvent("prod", "agent", TypeSnapshot, "x", cmd); err == nil || !strings.Contains(err.Error(), "does not match type") {
		t.Errorf("mismatched payload err = %v", err)
	}
}

func TestNewEventArgs(t *testing.T) {
	s := testSnapshot(1, 1, 0)
	cases := []struct{ cluster, component, typ, id, want string }{
		{"Prod", "agent", TypeSnapshot, "a", `cluster "Prod": must be an RFC 1123 label`},
		{"prod", "a/b", TypeSnapshot, "a", `component "a/b"`},
		{"prod", "agent", "dev.dovetail.other.v1", "a", `type "dev.dovetail.other.v1": unknown event type`},
		{"prod", "agent", TypeSnapshot, "", "id: required"},
	}
	for _, c := range cases {
		_, err := NewEvent(c.cluster, c.component, c.typ, c.id, s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewEvent(%q,%q,%q,%q) err = %v, want %q", c.cluster, c.component, c.typ, c.id, err, c.want)
		}
	}
	bad := testSnapshot(1, 1, 0)
	bad.Cluster = ""
	if _, err := NewEvent("prod", "agent", TypeSnapshot, "a", bad); err == nil || !strings.Contains(err.Error(), "snapshot.cluster: required") {
		t.Errorf("invalid snapshot err = %v", err)
	}
}

// validWire is a hand-written valid event; each Decode case breaks one field.
func validWire() map[string]any {
	data, _ := EncodeCommand(&Command{ID: "c1", Kind: CommandDrainNode, Cluster: "prod", NodeName: "n1"})
	return map[string]any{
		"specversion": "1.0", "id": "c1", "source": "dovetail/prod/provision", "type": TypeCommand,
		"time": "2026-03-01T12:00:00Z", "datacontenttype": ContentTypeJSONZstd, "dovetailschema": 1,
		"data_base64": base64.StdEncoding.EncodeToString(data),
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(m map[string]any)
		want    string
		version bool
	}{
		{"valid", func(map[string]any) {}, "", false},
		{"no specversion", func(m map[string]any) { delete(m, "specversion") }, "specversion: required", false},
		{"old specversion", func(m map[string]any) { m["specversion"] = "0.3" }, `specversion: "0.3" is not supported`, false},
		{"no id", func(m map[string]any) { delete(m, "id") }, "id: required", false},
		{"no type", func(m map[string]any) { delete(m, "type") }, "type: required", false},
		{"unknown type", func(m map[string]any) { m["type"] = "dev.dovetail.nodes.v9" }, `type: "dev.dovetail.nodes.v9" is not a known`, false},
		{"foreign source", func(m map[string]any) { m["source"] = "karpenter/prod/x" }, "source: \"karpenter/prod/x\" is not of the form", false},
		{"short source", func(m map[string]any) { m["source"] = "dovetail/prod" }, "source:", false},
		{"no time", func(m map[string]any) { delete(m, "time") }, "time: required", false},
		{"json content", func(m map[string]any) { m["datacontenttype"] = "application/json" }, `datacontenttype: "application/json" is not supported`, false},
		{"no content type", func(m map[string]any) { delete(m, "datacontenttype") }, "datacontenttype", false},
		{"no schema", func(m map[string]any) { delete(m, "dovetailschema") }, "dovetailschema: required", false},
		{"future schema", func(m map[string]any) { m["dovetailschema"] = 2 }, "dovetailschema: version 2 of dev.dovetail.command.v1 is not supported, this build reads version 1", true},
		{"no data", func(m map[string]any) { delete(m, "data_base64") }, "data: required", false},
		{"dataref without digest", func(m map[string]any) { delete(m, "data_base64"); m["dataref"] = "mem://x" }, "dovetaildigest: required with dataref", false},
		{"revision", func(m map[string]any) { m["dovetailrevision"] = "1796622851144145018" }, "", false},
		{"revision as a number", func(m map[string]any) { m["dovetailrevision"] = 17 }, "dovetailrevision: must be a JSON string", false},
		{"revision not decimal", func(m map[string]any) { m["dovetailrevision"] = "0x11" }, `dovetailrevision: "0x11" is not a positive decimal integer`, false},
		{"revision zero", func(m map[string]any) { m["dovetailrevision"] = "0" }, `dovetailrevision: "0" is not a positive decimal integer`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := validWire()
			c.mutate(m)
			raw, _ := json.Marshal(m)
			_, err := Decode(raw)
			if c.want == "" {
				if err != nil {
					t.Fatalf("valid event refused: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrMalformed containing %q", err, c.want)
			}
			if errors.Is(err, ErrUnsupportedVersion) != c.version {
				t.Errorf("errors.Is(ErrUnsupportedVersion) = %v, want %v", !c.version, c.version)
			}
		})
	}
	if _, err := Decode([]byte("not json")); !errors.Is(err, ErrMalformed) {
		t.Errorf("non-JSON err = %v", err)
	}
}

// The revision of a snapshot event travels as the dovetailrevision extension, a decimal string
// (a CloudEvents Integer is 32 bits; revisions are about 1.8e18), and comes back as
// Envelope.Revision; an event built without it has revision 0.
func TestRevisionExtensionRoundTrips(t *testing.T) {
	const rev = int64(1796622851144145018)
	snap := &Snapshot{SchemaVersion: SnapshotSchemaVersion, Cluster: "prod", Revision: rev, Time: metav1.NewTime(time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC))}
	for _, c := range []struct {
		opts []Option
		want int64
	}{{[]Option{WithRevision(rev)}, rev}, {nil, 0}} {
		raw, err := NewEvent("prod", "agent", TypeSnapshot, "snapshot-1", snap, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		env, err := Decode(raw)
		if err != nil || env.Revision != c.want {
			t.Errorf("decoded revision %d, %v; want %d", env.Revision, err, c.want)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if got, ok := m[ExtensionRevision]; (c.want != 0) != ok || (ok && got != "1796622851144145018") {
			t.Errorf("wire %s = %#v, want the decimal string only when set", ExtensionRevision, got)
		}
	}
}

func TestDecodeSnapshotVersionsAndCorruption(t *testing.T) {
	raw, _ := json.Marshal(map[string]any{"schemaVersion": 2, "cluster": "prod", "time": "2026-03-01T12:00:00Z"})
	_, err := DecodeSnapshot(zenc.EncodeAll(raw, nil))
	if !errors.Is(err, ErrUnsupportedVersion) || !errors.Is(err, ErrMalformed) ||
		!strings.Contains(err.Error(), "snapshot.schemaVersion: version 2 is not supported, this build reads version 1") {
		t.Errorf("version 2 err = %v", err)
	}
	raw, _ = json.Marshal(map[string]any{"cluster": "prod"})
	if _, err := DecodeSnapshot(zenc.EncodeAll(raw, nil)); err == nil || !strings.Contains(err.Error(), "snapshot.schemaVersion: required") {
		t.Errorf("missing version err = %v", err)
	}
	if _, err := DecodeSnapshot([]byte("{\"schemaVersion\":1}")); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "not a zstd frame") {
		t.Errorf("uncompressed err = %v", err)
	}
	if _, err := DecodeSnapshot(nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("empty err = %v", err)
	}
	if _, err := EncodeSnapshot(&Snapshot{SchemaVersion: 3, Cluster: "prod", Time: snapshotTime}); err == nil || !strings.Contains(err.Error(), "snapshot.schemaVersion: must be 1, got 3") {
		t.Errorf("encode version 3 err = %v", err)
	}
}

func TestClaimCheck(t *testing.T) {
	ctx := context.Background()
	s := testSnapshot(20, 10, 5)
	payload, err := EncodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	// RFC 4648 §4: base64 writes 4 characters per 3 input bytes, the last group padded.
	b64 := 4 * ((len(payload) + 2) / 3)

	// At exactly the limit the payload stays inline.
	store := &MemoryBlobStore{}
	data, err := Codec{Blobs: store, MaxInlineBytes: b64}.NewEvent(ctx, "prod", "agent", TypeSnapshot, "s1", s)
	if err != nil {
		t.Fatal(err)
	}
	if env, _ := Decode(data); env.DataRef != "" || store.Len() != 0 {
		t.Fatalf("payload at the limit was claim-checked: %+v", env.DataRef)
	}

	// One byte under, it goes to the store and the event carries a dataref.
	codec := Codec{Blobs: store, MaxInlineBytes: b64 - 1}
	data, err = codec.NewEvent(ctx, "prod", "agent", TypeSnapshot, "s1", s)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	_ = json.Unmarshal(data, &wire)
	if _, ok := wire["data_base64"]; ok {
		t.Error("claim-checked event still carries data_base64")
	}
	if !strings.HasPrefix(wire["dataref"].(string), "mem://prod/") {
		t.Errorf("dataref = %v", wire["dataref"])
	}
	env, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := codec.Snapshot(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, s) {
		t.Error("claim-checked snapshot changed in round trip")
	}
	// A redelivered decision stores the same content-addressed blob, not a second one.
	if _, err := codec.NewEvent(ctx, "prod", "agent", TypeSnapshot, "s1", s); err != nil || store.Len() != 1 {
		t.Errorf("blobs after re-encode = %d, err %v", store.Len(), err)
	}

	// A blob that does not match the digest is refused as malformed.
	key := strings.TrimPrefix(env.DataRef, "mem://")
	_, _ = store.Put(ctx, key, append(payload[:len(payload):len(payload)], 0))
	if _, err := codec.Payload(ctx, env); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "dovetaildigest") {
		t.Errorf("tampered blob err = %v", err)
	}
	// A missing blob too.
	if _, err := (Codec{Blobs: &MemoryBlobStore{}}).Payload(ctx, env); !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrBlobNotFound) {
		t.Errorf("missing blob err = %v", err)
	}
	// Without a store an oversize payload is refused, naming size and limit.
	_, err = Codec{MaxInlineBytes: 1000}.NewEvent(ctx, "prod", "agent", TypeSnapshot, "s1", s)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "limit 1000") {
		t.Errorf("no store err = %v", err)
	}
}

func TestFileBlobStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs := FileBlobStore{Dir: dir}
	uri, err := fs.Put(ctx, "prod/abc.json.zst", []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "file://" + filepath.ToSlash(filepath.Join(dir, "prod", "abc.json.zst")); uri != want {
		t.Errorf("uri = %q, want %q", uri, want)
	}
	if b, err := fs.Get(ctx, uri); err != nil || string(b) != "payload" {
		t.Errorf("Get = %q, %v", b, err)
	}
	if _, err := fs.Put(ctx, "../escape", nil); err == nil {
		t.Error("key with .. accepted")
	}
	if _, err := fs.Put(ctx, "/abs", nil); err == nil {
		t.Error("absolute key accepted")
	}
	outside := filepath.Join(t.TempDir(), "secret")
	_ = os.WriteFile(outside, []byte("x"), 0o600)
	if _, err := fs.Get(ctx, "file://"+filepath.ToSlash(outside)); !errors.Is(err, ErrBlobNotFound) {
		t.Errorf("outside dir err = %v", err)
	}
	if _, err := fs.Get(ctx, uri+".missing"); !errors.Is(err, ErrBlobNotFound) {
		t.Errorf("missing err = %v", err)
	}
	// Through the codec, with the file store standing in for S3 / Blob Storage in local dev.
	codec := Codec{Blobs: fs, MaxInlineBytes: 64}
	s := testSnapshot(2, 2, 1)
	data, err := codec.NewEvent(ctx, "prod", "agent", TypeSnapshot, "s1", s)
	if err != nil {
		t.Fatal(err)
	}
	env, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := codec.Snapshot(ctx, env); err != nil || got.Revision != 42 {
		t.Errorf("snapshot via file store = %v, %v", got, err)
	}
}

func TestValidateFieldPaths(t *testing.T) {
	nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x1"}}
	base := Command{ID: "c", Cluster: "prod"}
	with := func(f func(c *Command)) *Command { c := base; f(&c); return &c }
	cases := []struct {
		cmd  *Command
		want []string
	}{
		{with(func(c *Command) { c.Kind = CommandCreateNodeClaim }), []string{"command.nodeClaim: required for kind CreateNodeClaim"}},
		{with(func(c *Command) { c.Kind = CommandCreateNodeClaim; c.NodeClaim = nc }), []string{"command.nodeClaim.status.providerID: required for kind CreateNodeClaim"}},
		{with(func(c *Command) { c.Kind = CommandDrainNode }), []string{"command.nodeName: required for kind DrainNode"}},
		{with(func(c *Command) {
			c.Kind = CommandTaintNode
			c.NodeName = "n"
			c.Taint = &corev1.Taint{Effect: "Sometimes"}
		}),
			[]string{"command.taint.key: required", `command.taint.effect: "Sometimes" is not one of NoSchedule, PreferNoSchedule, NoExecute`}},
		{with(func(c *Command) {
			c.Kind = CommandMarkUnavailable
			c.Unavailable = []UnavailableOfferingMark{{OfferingKey: OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "preemptible"}}}
		}), []string{`command.unavailable[0].capacityType: "preemptible" is not one of on-demand, spot, reserved`}},
		{&Command{Kind: "Reboot", SnapshotRevision: -1}, []string{"command.id: required", "command.cluster: required",
			"command.snapshotRevision: must be >= 0, got -1", `command.kind: "Reboot" is not a known command kind`}},
		{with(func(c *Command) { c.Kind = CommandDeleteNode; c.NodeName = "n" }), nil},
	}
	for _, c := range cases {
		err := c.cmd.Validate()
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: unexpected %v", c.cmd.Kind, err)
			}
			continue
		}
		var lines []string
		if err != nil {
			lines = strings.Split(err.Error(), "\n")
		}
		if strings.Join(lines, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: errors = %q, want %q", c.cmd.Kind, lines, c.want)
		}
	}

	s := testSnapshot(2, 1, 1)
	s.Nodes[1].Name = s.Nodes[0].Name
	s.PendingPods[0].Spec.NodeName = "n1"
	s.Pods[0].Namespace = ""
	err := s.Validate()
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err %v is not a FieldError", err)
	}
	for _, want := range []string{
		`snapshot.pendingPods[0].spec.nodeName: a pending pod must not be bound, got "n1"`,
		`snapshot.nodes[1].metadata.name: duplicate node "ip-10-0-0-0.ec2.internal"`,
		"snapshot.pods[0].metadata.namespace: required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("snapshot errors %q lack %q", err, want)
		}
	}

	pp := &PodsPending{Pods: []string{"nobody", "default/ghost"}, Snapshot: testSnapshot(1, 1, 1)}
	err = pp.Validate()
	for _, want := range []string{`podsPending.pods[0]: "nobody" is not of the form namespace/name`, `podsPending.pods[1]: "default/ghost" is not among snapshot.pendingPods`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("podsPending errors %v lack %q", err, want)
		}
	}
	if err := (&PodsPending{Pods: []string{"a/b"}}).Validate(); err == nil || err.Error() != "podsPending.snapshot: required" {
		t.Errorf("nil snapshot err = %v", err)
	}
}

func TestCommandID(t *testing.T) {
	// Expected values computed independently with Python's hashlib over the same
	// length-prefixed encoding (8-byte big-endian length, then the bytes of each part).
	if got := CommandID("prod", "42", "CreateNodeClaim", "default-abc12"); got != "84b0ce61ded9fa9b0f48402c123c337f" {
		t.Errorf("CommandID = %s", got)
	}
	// No parts hashes nothing: SHA-256 of the empty string (FIPS 180-4 test vector) starts e3b0c442...
	if got := CommandID(); got != "e3b0c44298fc1c149afbf4c8996fb924" {
		t.Errorf("CommandID() = %s", got)
	}
	if CommandID("ab", "c") == CommandID("a", "bc") {
		t.Error("part boundaries are ambiguous")
	}
}

// Envelopes whose attributes have the wrong JSON type are malformed, naming the attribute: the
// 37-byte envelope whose data_base64 is a number made the CloudEvents SDK panic, which the
// consumers then treated as a transient failure.
func TestDecodeRefusesWrongAttributeTypes(t *testing.T) {
	for in, field := range map[string]string{
		`{"specversion":"1.0","data_base64":5}`:                    "data_base64",
		`{"specversion":"1.0","id":7,"type":"x"}`:                  "id",
		`{"specversion":"1.0","id":"a","source":{"x":1}}`:          "source",
		`{"specversion":"1.0","id":"a","time":[1]}`:                "time",
		`{"specversion":"1.0","id":"a","dataref":true}`:            ExtensionDataRef,
		`{"specversion":"1.0","id":"a","datacontenttype":1.5e300}`: "datacontenttype",
	} {
		_, err := Decode([]byte(in))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), field+": must be a JSON string") {
			t.Errorf("%s: %v, want malformed naming %s", in, err, field)
		}
	}
}

// A snapshot with a million bad pods yields a bounded error: MaxFieldErrors field errors and a
// count of the rest, each reason cut to MaxReasonBytes (a 22 MB error string was built and logged
// by every consumer).
func TestValidationErrorsAreBounded(t *testing.T) {
	var errs fieldErrs
	long := strings.Repeat("x", 5<<20)
	for i := 0; i < 100000; i++ {
		errs.add(fmt.Sprintf("snapshot.pendingPods[%d].metadata.name", i), "%q is not a name", long)
	}
	err := errs.err()
	msg := err.Error()
	if len(msg) > MaxFieldErrors*(MaxReasonBytes+64)+64 {
		t.Errorf("error of %d bytes", len(msg))
	}
	if !strings.Contains(msg, "and 99980 more field errors") || strings.Count(msg, "snapshot.pendingPods[") != MaxFieldErrors {
		t.Errorf("error %.200q..., want %d field errors and the count of the rest", msg, MaxFieldErrors)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "snapshot.pendingPods[0].metadata.name" {
		t.Errorf("first field error %+v", fe)
	}
}
