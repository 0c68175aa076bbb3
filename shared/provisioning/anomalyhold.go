package provisioning

import (
	"fmt"
	"sort"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/guardrails"
)

// PoolHold is the anomaly hold's verdict on one NodePool's part of a plan.
type PoolHold struct {
	NodePool *apisv1.NodePool
	Verdict  guardrails.Verdict
	// Held counts the new NodeClaims the plan kept back.
	Held int
}

// HoldAnomalies applies each NodePool's anomaly hold (guardrails.AnnotationAnomalyHold) to the
// plan, in place: a held NodePool's new NodeClaims leave the plan and their pods become
// unschedulable with the hold's message and a RefusalScaleUpHeld refusal naming the NodePool,
// so they wait (and get FailedScheduling saying why). A NodePool whose annotation is invalid
// launches nothing new, its pods' reason naming the annotation and field. The NodePool's price
// counts its NodeClaims at their catalog price (AddedClaims) and each new NodeClaim at its
// cheapest offering's, as the plan prices it (USD per hour). It returns the verdicts of the
// NodePools with a hold, sorted by name. The provision function and `dovetail explain pod` both
// run it on the plan of an input with ScaleUpGuardrails set.
func HoldAnomalies(in *Input, plan *Plan) []PoolHold {
	byPool := map[string][]*NodeClaimPlan{}
	for _, nc := range plan.NodeClaims {
		byPool[nc.NodePool.Name] = append(byPool[nc.NodePool.Name], nc)
	}
	var out []PoolHold
	held := map[string]string{} // NodePool → the reason its pods wait
	for _, np := range in.NodePools {
		a, err := guardrails.AnomalyHoldOf(np)
		if err != nil {
			held[np.Name] = fmt.Sprintf("nodepool %q: %v", np.Name, err)
			continue
		}
		if a == nil {
			continue
		}
		claims := AddedClaims(in, np.Name)
		s := guardrails.Spend{Trailing: guardrails.TrailingAverage(in.Time, a.Window.Duration, claims), Nodes: len(byPool[np.Name])}
		for _, c := range claims {
			s.Before += c.PricePerHour
		}
		s.After = s.Before
		for _, nc := range byPool[np.Name] {
			s.After += nc.Cheapest().PricePerHour
		}
		h := PoolHold{NodePool: np, Verdict: a.Decide(np, s, in.Time)}
		if h.Verdict.Held {
			held[np.Name] = fmt.Sprintf("nodepool %q: scale-up held: %s", np.Name, h.Verdict.Condition.Message)
			h.Held = len(byPool[np.Name])
		}
		out = append(out, h)
	}
	if len(held) > 0 {
		kept := plan.NodeClaims[:0:0]
		for _, nc := range plan.NodeClaims {
			why, ok := held[nc.NodePool.Name]
			if !ok {
				kept = append(kept, nc)
				continue
			}
			for _, p := range nc.Pods {
				plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: p, Reason: why,
					Refusals: []Refusal{{NodePool: nc.NodePool.Name, Kind: RefusalScaleUpHeld, Message: why}}})
			}
		}
		plan.NodeClaims = kept
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodePool.Name < out[j].NodePool.Name })
	return out
}
