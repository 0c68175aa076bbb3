package events

import (
	"errors"
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
