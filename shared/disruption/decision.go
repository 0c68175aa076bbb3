package disruption

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// Consolidation methods.
const (
	MethodDelete  = "delete"  // the candidates' pods fit on the other nodes
	MethodReplace = "replace" // some pods need new, cheaper NodeClaims
)

// Strategies that can produce a decision.
const (
	StrategyEmptiness  = "emptiness"
	StrategySingleNode = "single-node"
	StrategyPrefix     = "multi-node-prefix" // Karpenter's rule
	StrategySearch     = "multi-node-search" // Dovetail's greedy search
)

// Decision is one consolidation: which nodes go, what replaces them, and what it saves.
type Decision struct {
	// ID derives from the candidates' NodeClaims (name and UID) and the reason, so the same
	// decision made twice gets the same ID.
	ID       string
	Reason   string // apisv1.DisruptionReasonEmpty or DisruptionReasonUnderutilized
	Method   string // MethodDelete or MethodReplace
	Strategy string
	// Revision and Time are the snapshot's the decision was made (or last validated) on.
	Revision int64
	Time     time.Time

	Candidates []CandidateRef
	// Replacements are the NodeClaims to launch before anything is drained. Their offerings are
	// capped so that whichever offering the fleet picks, the decision never raises $/h.
	Replacements []*provisioning.NodeClaimPlan
	// Placements say where every evicted pod goes (sorted by pod).
	Placements []Placement

	// PriceBefore sums the candidates' offering prices; PriceAfter the replacements' cheapest
	// offerings; MaxPriceAfter their most expensive allowed offerings (all USD per hour).
	PriceBefore, PriceAfter, MaxPriceAfter float64
	// Savings is PriceBefore − PriceAfter (USD per hour); always > 0.
	Savings float64
	// Why explains the decision in one line.
	Why string
	// Budgets are the reservations its taints carry, by NodePool (events.BudgetReservation):
	// the agent grants them in order, so no two decisions overspend a budget.
	Budgets map[string]*events.BudgetReservation
}

// CandidateRef is one node a decision disrupts.
type CandidateRef struct {
	Node, NodeClaim, NodeClaimUID, NodePool, ProviderID string
	InstanceType, Zone, CapacityType                    string
	Price                                               float64 // USD per hour
	Pods                                                []string
}

// Placement is where one evicted pod goes: an existing node (or in-flight NodeClaim) by name,
// or replacement Replacement (index into Decision.Replacements, -1 otherwise).
type Placement struct {
	Pod         string
	Node        string
	Replacement int
}

// TaintValuePrefix starts the value of the karpenter.sh/disrupted taint consolidation puts on
// its candidates: "consolidation.<id>.<replacements>".
const TaintValuePrefix = "consolidation."

// Annotations consolidation puts on the replacement NodeClaims it launches.
const (
	// AnnotationDecision is the decision ID the NodeClaim replaces nodes for.
	AnnotationDecision = "dovetail.dev/disruption-decision"
	// AnnotationReplaces lists the replaced nodes, comma-separated.
	AnnotationReplaces = "dovetail.dev/replaces"
)

// TaintValue is the karpenter.sh/disrupted taint value for the decision's candidates: it names
// the decision and how many replacements must be initialized before the drain (a valid label
// value, at most 63 characters).
func (d *Decision) TaintValue() string {
	return fmt.Sprintf("%s%s.%d", TaintValuePrefix, d.ID, len(d.Replacements))
}

// ParseTaintValue splits a consolidation taint value into the decision ID and the number of
// replacements; ok is false for any other value.
func ParseTaintValue(v string) (id string, replacements int, ok bool) {
	if !strings.HasPrefix(v, TaintValuePrefix) {
		return "", 0, false
	}
	parts := strings.Split(strings.TrimPrefix(v, TaintValuePrefix), ".")
	if len(parts) != 2 || parts[0] == "" {
		return "", 0, false
	}
	if _, err := fmt.Sscanf(parts[1], "%d", &replacements); err != nil || replacements < 0 {
		return "", 0, false
	}
	return parts[0], replacements, true
}

// NodeNames lists the candidates' node names.
func (d *Decision) NodeNames() []string {
	out := make([]string, len(d.Candidates))
	for i, c := range d.Candidates {
		out[i] = c.Node
	}
	return out
}

// String summarises the decision for logs.
func (d *Decision) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (%s, %s) of %s", d.Method, strings.Join(d.NodeNames(), ","), d.Reason, d.Strategy, priceList(d.Candidates))
	if len(d.Replacements) > 0 {
		b.WriteString(" with ")
		for i, r := range d.Replacements {
			if i > 0 {
				b.WriteString(", ")
			}
			o := r.Cheapest()
			fmt.Fprintf(&b, "%s/%s %.4f $/h (%d pods, %d types)", o.InstanceType.Name, o.CapacityType, o.PricePerHour, len(r.Pods), len(r.InstanceTypeOptions()))
		}
	}
	fmt.Fprintf(&b, ": %.4f -> %.4f $/h, saves %.4f $/h", d.PriceBefore, d.PriceAfter, d.Savings)
	return b.String()
}

func priceList(cs []CandidateRef) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s/%s %.4f $/h", c.InstanceType, c.CapacityType, c.Price)
	}
	return strings.Join(parts, ", ")
}

func decisionID(reason string, cs []CandidateRef) string {
	keys := make([]string, len(cs))
	for i, c := range cs {
		keys[i] = c.NodeClaim + "/" + c.NodeClaimUID
	}
	sort.Strings(keys)
	h := sha256.New()
	h.Write([]byte(reason))
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func sortStrings(xs []string) { sort.Strings(xs) }
