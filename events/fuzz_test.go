package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// FuzzDecode: any input decodes or is refused as ErrMalformed; nothing panics. The seeds are the
// inputs that once crashed or slipped through (run with the tests; go test -fuzz FuzzDecode ./events
// explores further).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"specversion":"1.0","data_base64":5}`, // panicked inside the CloudEvents SDK
		`{"specversion":"1.0"}`,
		`{"specversion":"1.0","id":"a","type":"dev.dovetail.snapshot","source":"dovetail/c/agent","data_base64":"AAAA"}`,
		`[]`, `null`, `{"specversion":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Decode(data); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Decode(%q): %v does not wrap ErrMalformed", data, err)
		}
	})
}

// payloadSeeds are valid payloads of each type and the inputs that once crashed or cost memory.
func payloadSeeds(f *testing.F) [][]byte {
	f.Helper()
	snap := testSnapshot(2, 2, 1)
	s, err := EncodeSnapshot(snap)
	if err != nil {
		f.Fatal(err)
	}
	pp, err := EncodePodsPending(&PodsPending{Pods: []string{snap.PendingPods[0].Namespace + "/" + snap.PendingPods[0].Name}, Snapshot: snap})
	if err != nil {
		f.Fatal(err)
	}
	c, err := EncodeCommand(&Command{ID: "c1", Kind: CommandDrainNode, Cluster: "prod", NodeName: "n1"})
	if err != nil {
		f.Fatal(err)
	}
	bomb := zenc.EncodeAll([]byte(`{"schemaVersion":1,"pods":[{}`+strings.Repeat(`,{}`, 200_000)+`]}`), nil)
	header512MiB := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0x01, 0, 0}
	raw := zenc.EncodeAll([]byte(`{"schemaVersion":1,"cluster":"prod","time":"2026-03-01T12:00:00Z","pods":[{"spec":{"containers":[{"resources":{"requests":{"cpu":"1e30"}}}]}}]}`), nil)
	return [][]byte{s, pp, c, bomb, header512MiB, raw, {}, []byte("not zstd")}
}

// FuzzDecodePayload: any payload decodes as a snapshot, a pods-pending batch or a command, or is
// refused as ErrMalformed with an error of bounded size; nothing panics.
func FuzzDecodePayload(f *testing.F) {
	for _, s := range payloadSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for what, decode := range map[string]func([]byte) error{
			"snapshot":    func(b []byte) error { _, err := DecodeSnapshot(b); return err },
			"podsPending": func(b []byte) error { _, err := DecodePodsPending(b); return err },
			"command":     func(b []byte) error { _, err := DecodeCommand(b); return err },
		} {
			err := decode(data)
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s(%x): %v does not wrap ErrMalformed", what, data, err)
			}
			if err != nil && len(err.Error()) > 16<<10 {
				t.Fatalf("%s(%x): an error of %d bytes", what, data, len(err.Error()))
			}
		}
	})
}

// FuzzClaimCheck: a claim-checked event whose blob, dataref and digest are arbitrary opens, or is
// refused as ErrMalformed (a blob missing, too large or not matching its digest) or as a store
// error; nothing panics, and a blob that does not match its digest is never decoded.
func FuzzClaimCheck(f *testing.F) {
	for _, s := range payloadSeeds(f) {
		f.Add(s, "c/blob.json.zst", "")
	}
	f.Add([]byte("x"), "../../etc/passwd", "sha256:00")
	f.Add([]byte("x"), "mem://c/other", "sha256:")
	f.Fuzz(func(t *testing.T, blob []byte, key, digest string) {
		store := &MemoryBlobStore{}
		ref := "mem://" + key
		if _, err := store.Put(context.Background(), "c/blob.json.zst", blob); err != nil {
			t.Fatal(err)
		}
		if digest == "" {
			sum := sha256.Sum256(blob)
			digest = "sha256:" + hex.EncodeToString(sum[:])
		}
		env := Envelope{ID: "e", Type: TypeSnapshot, DataRef: ref, DataDigest: digest}
		_, err := Codec{Blobs: store}.Snapshot(context.Background(), env)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Snapshot(%q, %q): %v does not wrap ErrMalformed", ref, digest, err)
		}
	})
}
