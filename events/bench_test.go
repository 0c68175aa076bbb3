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

// BenchmarkSnapshotMemo prices what a function pays for a snapshot of 10,000 pending pods on 230
// nodes (make scale's N = 10,000) when another function of its process decoded it already: a
// full decode (what every function paid before SnapshotMemo), the memo's copy, and the peek that
// tells a handler the latest snapshot is not newer than its own (ReadLatestSnapshotAfter).
func BenchmarkSnapshotMemo(b *testing.B) {
	enc, err := EncodeSnapshot(testSnapshot(230, 0, 10000))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeSnapshot(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memo-copy", func(b *testing.B) {
		m := NewSnapshotMemo(1)
		if _, err := m.Decode(enc); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Decode(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("peek-revision", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := PeekRevision(enc); !ok {
				b.Fatal("no revision")
			}
		}
	})
}
