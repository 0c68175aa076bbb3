package telemetry

// QuarantineHeldPods is the quarantine of sick workloads (shared/quarantine) as a metric: the
// pending pods the provision function's last decision held back from new capacity, by the
// NodePool whose settings applied ("" for workloads whose sick pods run on nodes of no NodePool).
// A gauge: each decision records every NodePool of its snapshot (0 when nothing is held) and "",
// so a pool that recovered reads 0 rather than its last hold.
var QuarantineHeldPods = &Metric{Name: "dovetail_quarantine_held_pods", Kind: Gauge, Unit: UnitCount,
	Help:   "Pending pods of quarantined (crash-looping, OOM-killed or not Ready) workloads the last provisioning decision held back from new capacity. Labeled by the nodepool whose quarantine settings applied.",
	Labels: []string{LabelNodePool}}

// Registered with the rest (All) here, in the quarantine's own file.
func init() { All = append(All, QuarantineHeldPods) }
