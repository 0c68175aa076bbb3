package events

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A tiny zstd frame whose header declares 512 MiB of content (and holds none) must not make the
// decoder allocate what the header says: memory follows the bytes actually decoded.
func TestZstdHeaderDoesNotSizeTheBuffer(t *testing.T) {
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, // magic
		0xe0,                                           // single segment, 8-byte frame content size
		0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, // 512 MiB
		0x01, 0x00, 0x00} // last block, raw, empty
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var s Snapshot
	err := decodePayload("snapshot", frame, &s)
	runtime.ReadMemStats(&after)
	if err == nil || !errors.Is(err, ErrMalformed) {
		t.Errorf("err %v, want malformed", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("decoding a %d-byte frame allocated %d MiB", len(frame), grew>>20)
	}
}

// A claim-check reference to a blob larger than MaxBlobBytes is malformed (poison) and is
// refused before it is read whole.
func TestHugeClaimCheckBlobRefused(t *testing.T) {
	dir := t.TempDir()
	store := FileBlobStore{Dir: dir}
	path := filepath.Join(dir, "c", "huge.json.zst")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxBlobBytes + 1); err != nil { // sparse: no disk, no memory
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Codec{Blobs: store}.Payload(context.Background(), Envelope{ID: "e", DataRef: store.URI("c/huge.json.zst"), DataDigest: "sha256:00"})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrBlobTooLarge) {
		t.Errorf("err %v, want malformed (too large)", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("refusing it allocated %d MiB", grew>>20)
	}
}
