package lifecycle

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// The NodePool condition Karpenter v1.14 keeps from its NodeClaims' registrations
// (pkg/apis/v1 ConditionTypeNodeRegistrationHealthy; written by pkg/controllers/nodeclaim/lifecycle
// registration.go and liveness.go, reset by pkg/controllers/nodepool/registrationhealth), with
// its False reason and message and the Unknown ones of operatorpkg's SetUnknown.
const (
	ConditionNodeRegistrationHealthy = "NodeRegistrationHealthy"
	ReasonRegistrationFailed         = "RegistrationFailed"
	MessageRegistrationFailed        = "Failed to register node"
	MessageAwaitingReconciliation    = "object is awaiting reconciliation"
)

// RegistrationHistory and RegistrationUnhealthyFailures are Karpenter's NodePool health tracker
// (pkg/state/nodepoolhealth): the last 4 launch outcomes of a NodePool, unhealthy once failures
// are at least half of 4 (BufferSize 4, ThresholdFalse 0.5: 2 failures).
const (
	RegistrationHistory           = 4
	RegistrationUnhealthyFailures = 2
)

// historyMark introduces the outcomes in the condition's message. Karpenter keeps them in
// memory; a stateless function keeps them on the condition itself, each with its NodeClaim's
// name so the same registration seen on two snapshots counts once.
const historyMark = "recent launches (oldest first): "

// outcome is one launch's registration: its NodeClaim and whether its Node registered.
type outcome struct {
	claim string
	ok    bool
}

// registrationHealth is the NodePool's NodeRegistrationHealthy after this snapshot's outcomes
// (the pool's NodeClaims that registered now, and those reaped now for the registration TTL, in
// NodeClaim name order), following Karpenter:
//   - Unknown, history emptied, when the condition is missing, the NodePool's generation is not
//     the condition's observedGeneration, or the NodeClass's generation is not the pool's
//     status.nodeClassObservedGeneration (a changed NodePool or NodeClass gets a fresh start);
//   - a registration turns it True when the history with it is healthy (fewer than 2 failures
//     of the last 4);
//   - a registration failure turns it False (RegistrationFailed, "Failed to register node") when
//     the history with it is unhealthy (2 or more failures of the last 4);
//   - otherwise it keeps its status.
//
// A history the message does not carry (a condition another writer left) is restored as
// Karpenter's tracker restores it from the condition: True one success, False two failures,
// Unknown none.
func registrationHealth(np *apisv1.NodePool, classGeneration int64, outcomes []outcome) metav1.Condition {
	old := findCondition(np.Status.Conditions, ConditionNodeRegistrationHealthy)
	status, reason, msg := metav1.ConditionUnknown, ReasonAwaitingReconciliation, MessageAwaitingReconciliation
	var hist []outcome
	if old != nil && old.ObservedGeneration == np.Generation && np.Status.NodeClassObservedGeneration == classGeneration {
		status, reason, msg = old.Status, old.Reason, old.Message
		hist = parseHistory(old)
	}
	for _, o := range outcomes {
		if seen(hist, o.claim) {
			continue
		}
		hist = append(hist, o)
		if len(hist) > RegistrationHistory {
			hist = hist[len(hist)-RegistrationHistory:]
		}
		failures := 0
		for _, h := range hist {
			if !h.ok {
				failures++
			}
		}
		switch {
		case o.ok && failures < RegistrationUnhealthyFailures:
			status, reason, msg = metav1.ConditionTrue, ConditionNodeRegistrationHealthy, ""
		case !o.ok && failures >= RegistrationUnhealthyFailures && status != metav1.ConditionFalse:
			status, reason, msg = metav1.ConditionFalse, ReasonRegistrationFailed, MessageRegistrationFailed
		}
	}
	// The message keeps its lead (Karpenter's wording) and carries the history after it.
	if i := strings.Index(msg, historyMark); i >= 0 {
		msg = strings.TrimSuffix(msg[:i], "; ")
	}
	if len(hist) > 0 {
		parts := make([]string, len(hist))
		for i, h := range hist {
			parts[i] = h.claim + "=failed"
			if h.ok {
				parts[i] = h.claim + "=registered"
			}
		}
		if msg != "" {
			msg += "; "
		}
		msg += historyMark + strings.Join(parts, ", ")
	}
	return metav1.Condition{Type: ConditionNodeRegistrationHealthy, Status: status, Reason: reason, Message: msg, ObservedGeneration: np.Generation}
}

// parseHistory reads the outcomes a condition's message carries, or restores them from its
// status when it carries none that parse.
func parseHistory(c *metav1.Condition) []outcome {
	if i := strings.Index(c.Message, historyMark); i >= 0 {
		var out []outcome
		for _, part := range strings.Split(c.Message[i+len(historyMark):], ", ") {
			name, result, ok := strings.Cut(part, "=")
			if !ok || name == "" || (result != "registered" && result != "failed") {
				out = nil
				break
			}
			out = append(out, outcome{claim: name, ok: result == "registered"})
		}
		if len(out) > 0 && len(out) <= RegistrationHistory {
			return out
		}
	}
	switch c.Status {
	case metav1.ConditionTrue:
		return []outcome{{claim: "(restored)", ok: true}}
	case metav1.ConditionFalse:
		return []outcome{{claim: "(restored)"}, {claim: "(restored)"}}
	}
	return nil
}

func seen(hist []outcome, claim string) bool {
	for _, h := range hist {
		if h.claim == claim {
			return true
		}
	}
	return false
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// recordRegistration notes a NodeClaim's registration outcome for its NodePool's
// NodeRegistrationHealthy (nodePools reads them after every NodeClaim is decided).
func (d *decider) recordRegistration(nc *apisv1.NodeClaim, ok bool) {
	pool := nc.Labels[apisv1.LabelNodePool]
	if pool == "" {
		return
	}
	if d.registrations == nil {
		d.registrations = map[string][]outcome{}
	}
	d.registrations[pool] = append(d.registrations[pool], outcome{claim: nc.Name, ok: ok})
}
