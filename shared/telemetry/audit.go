package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dovetail-dev/dovetail/shared/commitments/utilisation"
)

// AuditMessage is the log message of every decision audit record: the function's log stream
// (slog JSON: CloudWatch Logs, Azure Monitor, a pod's logs) carries one line per decision with
// the record under the "audit" key, which `dovetail audit` reads back.
const AuditMessage = "decision audit"

// Audit actions.
const (
	ActionLaunch  = "launch"  // NodeClaims launched for pending pods
	ActionDelete  = "delete"  // nodes removed without replacement
	ActionReplace = "replace" // nodes removed after replacements were launched
	ActionDrain   = "drain"   // nodes tainted and drained (interruption, drift)
)

// Audit is one decision, whole: what was done, why (the rule and the inputs that triggered it)
// and what it costs. Prices are USD per hour.
type Audit struct {
	Action   string `json:"action"`
	Function string `json:"function"`
	// Time is when the decision was made: the time of the snapshot it was made on (the deciding
	// function's clock checked it; invariant 7). Zero in records written before it was added.
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster"`
	// Decision identifies the decision (its ID, or the snapshot revision it was made on).
	Decision string `json:"decision"`
	Revision int64  `json:"revision"`
	// Rule is the rule that decided ("provisioning: pending pods need capacity",
	// "consolidation/single-node", "drift: AMI", "expiry", "interruption: SpotInterruption").
	Rule string `json:"rule"`
	// Why is the rule's reasoning in one line; Inputs what it read (pods, nodes, the notice).
	Why    string   `json:"why,omitempty"`
	Inputs []string `json:"inputs,omitempty"`
	// Nodes are the nodes removed or drained; NodeClaims the NodeClaims launched.
	Nodes      []string `json:"nodes,omitempty"`
	NodeClaims []string `json:"nodeClaims,omitempty"`
	// PriceBefore and PriceAfter are what the affected capacity costs before and after: for a
	// launch, the NodePools' NodeClaims before and with the launched ones.
	PriceBefore float64 `json:"pricePerHourBefore"`
	PriceAfter  float64 `json:"pricePerHourAfter"`
	// For launches: the plan's lower bound (no plan could place these pods for less) and what a
	// static node group of one instance type would pay for the same pods.
	LowerBound     float64         `json:"lowerBoundPerHour,omitempty"`
	StaticBaseline *StaticBaseline `json:"staticBaseline,omitempty"`
	// NodePools is the decision's effect on each NodePool it changed, priced as the plan priced
	// it: what the cost ledger (shared/ledger, `dovetail cost`) accumulates. Empty for records
	// that change no price (drains) and for functions that do not price their decisions yet.
	NodePools []PoolCost `json:"nodePools,omitempty"`
	// Commitments is each Savings Plan's and reservation's utilisation by the cluster's nodes and
	// the plan together, as the deciding plan counted it (empty without commitments): the cost
	// ledger reports the latest (`dovetail cost`).
	Commitments []CommitmentUse `json:"commitments,omitempty"`
}

// CommitmentUse is one commitment's utilisation as a decision saw it: shared/commitments.Use,
// whose type lives in the import-free shared/commitments/utilisation so the audit record
// depends on no pricing package.
type CommitmentUse = utilisation.Use

// PoolCost is one NodePool's capacity before and after a decision, in USD per hour at the
// effective prices the plan used: the catalog's offering price after NodeOverlays today; a
// price source that knows commitments (Savings Plans, reserved instances) puts the committed
// rate here and names it in PriceSource, so the ledger adds up what the plan believed it paid.
type PoolCost struct {
	NodePool string `json:"nodePool"`
	// PriceBefore and PriceAfter sum the offering prices of the NodePool's nodes and in-flight
	// NodeClaims before and after the decision (USD per hour).
	PriceBefore float64 `json:"pricePerHourBefore"`
	PriceAfter  float64 `json:"pricePerHourAfter"`
	// PriceSource names where the prices came from: "catalog" (on-demand and spot list prices,
	// overlaid) or a commitment-aware source's name.
	PriceSource string `json:"priceSource,omitempty"`
	// Consolidation is true when the decision was a voluntary consolidation: its saving
	// (PriceBefore − PriceAfter) is what "no consolidation" would have kept paying.
	Consolidation bool `json:"consolidation,omitempty"`
	// LowerBound is the plan's lower bound for the pods it placed in this NodePool, when the
	// decision computed one (USD per hour; 0: none).
	LowerBound float64 `json:"lowerBoundPerHour,omitempty"`
	// StaticBaseline is what a static node group of one instance type would pay for the pods the
	// NodePool holds after the decision (USD per hour; 0: not computed).
	StaticBaseline float64 `json:"staticBaselinePerHour,omitempty"`
	// Allocatable and Requested are the NodePool's allocatable CPU and memory and what its pods
	// request of them after the decision (millicores, MiB): its waste is what is not requested.
	AllocatableMilliCPU int64 `json:"allocatableMillicores"`
	RequestedMilliCPU   int64 `json:"requestedMillicores"`
	AllocatableMiB      int64 `json:"allocatableMiB"`
	RequestedMiB        int64 `json:"requestedMiB"`
}

// PriceSourceCatalog is PoolCost.PriceSource for the catalog's (overlaid) list prices.
const PriceSourceCatalog = "catalog"

// StaticBaseline is a Cluster-Autoscaler-style static node group of one instance type, on demand,
// holding the same pods.
type StaticBaseline struct {
	InstanceType string  `json:"instanceType"`
	Nodes        int     `json:"nodes"`
	PricePerHour float64 `json:"pricePerHour"`
	// Unplaceable counts pods that type cannot hold (a GPU pod on a CPU-only group).
	Unplaceable int `json:"unplaceable,omitempty"`
}

// LogAudit writes a as one structured log record (level INFO, message AuditMessage).
func LogAudit(log *slog.Logger, a Audit) {
	if log == nil {
		log = slog.Default()
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, AuditMessage, slog.Any("audit", a))
}

// ReadAudit reads the audit records of a log stream (ReadAuditStream's formats). Error: the
// first line it cannot read (AuditSkip names it).
func ReadAudit(r io.Reader, each func(Audit) error) error {
	return ReadAuditStream(r, AuditReadOptions{}, each)
}

// ParseAuditLine decodes one log line; ok is false for a line that is not an audit record.
func ParseAuditLine(line []byte) (Audit, bool, error) {
	var rec struct {
		Msg   string          `json:"msg"`
		Audit json.RawMessage `json:"audit"`
	}
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &rec) != nil || rec.Msg != AuditMessage {
		return Audit{}, false, nil
	}
	var a Audit
	if err := json.Unmarshal(rec.Audit, &a); err != nil {
		return Audit{}, false, fmt.Errorf("audit record: %w", err)
	}
	return a, true, nil
}

// AuditHandler is a slog.Handler that passes every record on to Next and also hands each
// decision audit record (message AuditMessage, key "audit") to Publish: where a queue carries
// the records beside the log stream (local dev and the NATS runtime publish them on
// queue.AuditSubject). Publish is best effort and must not log through this handler; the log
// stream stays the record of every decision.
type AuditHandler struct {
	Next    slog.Handler
	Publish func(ctx context.Context, a Audit)
}

// Enabled implements slog.Handler.
func (h AuditHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.Next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h AuditHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == AuditMessage && h.Publish != nil {
		r.Attrs(func(at slog.Attr) bool {
			if a, ok := at.Value.Any().(Audit); ok && at.Key == "audit" {
				h.Publish(ctx, a)
				return false
			}
			return true
		})
	}
	return h.Next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h AuditHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return AuditHandler{Next: h.Next.WithAttrs(attrs), Publish: h.Publish}
}

// WithGroup implements slog.Handler.
func (h AuditHandler) WithGroup(name string) slog.Handler {
	return AuditHandler{Next: h.Next.WithGroup(name), Publish: h.Publish}
}
