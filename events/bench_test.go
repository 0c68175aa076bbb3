package events

import (
	"encoding/json"
	"testing"
)

// BenchmarkSnapshotCodec encodes and decodes a snapshot of 1,000 nodes × 30 pods (plus 100
// pending pods) and reports the JSON and compressed sizes and their ratio.
func BenchmarkSnapshotCodec(b *testing.B) {
	s := testSnapshot(1000, 30, 100)
	raw, err := json.Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := EncodeSnapshot(s)
	if err != nil {
		b.Fatal(err)
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(len(raw)), "json-bytes")
		b.ReportMetric(float64(len(enc)), "zstd-bytes")
		b.ReportMetric(float64(len(raw))/float64(len(enc)), "compression-ratio")
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := EncodeSnapshot(s); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := DecodeSnapshot(enc); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}

// BenchmarkSnapshotValidate checks every value of a snapshot of 1,000 nodes × 30 pods (plus 100
// pending pods) by the API server's rules, as a function does before deciding on it
// (Snapshot.Validate): the cost of the trust boundary on each decoded snapshot.
func BenchmarkSnapshotValidate(b *testing.B) {
	s := testSnapshot(1000, 30, 100)
	if err := s.Validate(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
