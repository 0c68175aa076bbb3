package telemetry

// The snapshot codec's cost (issue 28): what the agent pays to encode each snapshot it publishes
// and how large it is on the wire, and what each function pays to decode it. Labeled by the
// event's CloudEvents type (events.TypeSnapshot, events.TypePodsPending: a pods-pending batch
// carries a whole snapshot too), as dovetail_agent_events_published_total is.
var (
	// SnapshotSize is the encoded payload (zstd-compressed JSON, events.EncodeSnapshot /
	// EncodePodsPending) in bytes, before claim-check: the same bytes whether the event carries
	// them inline or the blob store holds them.
	SnapshotSize = &Metric{Name: "dovetail_agent_snapshot_size_bytes", Kind: Histogram, Unit: UnitBytes,
		Help:    "Size in bytes of each snapshot payload the agent encoded (compressed, before claim-check). Labeled by the event's CloudEvents type.",
		Labels:  []string{LabelKind},
		Buckets: SizeBuckets()}
	// SnapshotEncode is the agent's events.EncodeSnapshot / EncodePodsPending call: validation,
	// JSON and zstd, in seconds.
	SnapshotEncode = &Metric{Name: "dovetail_agent_snapshot_encode_duration_seconds", Kind: Histogram, Unit: UnitSeconds,
		Help:    "Time in seconds the agent took to encode each snapshot payload (validate, JSON, zstd). Labeled by the event's CloudEvents type.",
		Labels:  []string{LabelKind},
		Buckets: CodecBuckets()}
	// SnapshotDecode is a function's events.DecodeSnapshot / DecodePodsPending call (zstd, JSON,
	// validation), in seconds; fetching a claim-checked payload from the blob store is not in it.
	SnapshotDecode = &Metric{Name: "dovetail_snapshot_decode_duration_seconds", Kind: Histogram, Unit: UnitSeconds,
		Help:    "Time in seconds a function took to decode each snapshot payload (zstd, JSON, validate), blob fetch excluded. Labeled by function and the event's CloudEvents type.",
		Labels:  []string{LabelFunction, LabelKind},
		Buckets: CodecBuckets()}
)

// SizeBuckets are the upper bounds (bytes) of payload size histograms: powers of two from 1 KiB
// to 128 MiB. A compressed snapshot is some tens of KiB at a thousand pods and grows about
// linearly with the cluster (docs/scale.md), so a doubling per bucket reads any size to within
// a factor of two.
func SizeBuckets() []float64 {
	out := make([]float64, 0, 18)
	for b := float64(1 << 10); b <= 1<<27; b *= 2 {
		out = append(out, b)
	}
	return out
}

// CodecBuckets are the upper bounds (seconds) of encode and decode durations: from half a
// millisecond, below DurationBuckets' first 5 ms, which a small cluster's snapshot never
// reaches, to 10 s, in 1-2.5-5 steps.
func CodecBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// Registered with the rest (All) here, in the codec's own file.
func init() { All = append(All, SnapshotSize, SnapshotEncode, SnapshotDecode) }
