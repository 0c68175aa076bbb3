package kube

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
)

// BenchmarkTrimmedPayload prices trimPod on a real payload: a make scale run writes its largest
// pods-pending payload to its directory (largest-podspending.json.zst); name it in
// DOVETAIL_PODSPENDING_PAYLOAD. The benchmark trims every pod of the payload's snapshot as the
// pod informer now does, and decodes, encodes and copies both (docs/scale.md, "Eighth pass").
// Skipped without the variable: no real payload is kept in the repository.
func BenchmarkTrimmedPayload(b *testing.B) {
	path := os.Getenv("DOVETAIL_PODSPENDING_PAYLOAD")
	if path == "" {
		b.Skip("DOVETAIL_PODSPENDING_PAYLOAD names no payload")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	full, err := events.DecodePodsPending(data)
	if err != nil {
		b.Fatal(err)
	}
	trimmed := full.DeepCopy()
	for _, pods := range [][]corev1.Pod{trimmed.Snapshot.Pods, trimmed.Snapshot.PendingPods} {
		for i := range pods {
			if _, err := trimPod(&pods[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	trimmedData, err := events.EncodePodsPending(trimmed)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		p    *events.PodsPending
	}{{"full", data, full}, {"trimmed", trimmedData, trimmed}} {
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := events.DecodePodsPending(c.data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.data)), "zstd-bytes")
		})
		b.Run(c.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := events.EncodePodsPending(c.p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/copy", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.p.DeepCopy()
			}
		})
	}
}
