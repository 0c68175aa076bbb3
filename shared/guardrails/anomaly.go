package guardrails

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// AnnotationAnomalyHold turns on the anomaly hold of a NodePool, as YAML or JSON ("{}" takes
// every default):
//
//	dovetail.dev/anomaly-hold: |
//	  multiple: 3          # hold a plan raising the price above 3× the trailing average
//	  window: 1h           # the trailing average's window
//	  minPricePerHour: 2   # never hold a plan that leaves the NodePool at or below 2 USD/h
//	  timeout: 30m         # release a hold by itself after 30 minutes (default: never)
//
// A plan that would raise the NodePool's price (its nodes and in-flight NodeClaims, USD per
// hour) above multiple × its trailing average waits: the NodePool's ScaleUpHeld condition and
// a Warning Event say what is held and how to approve it (AnnotationApproveScaleUp).
const AnnotationAnomalyHold = "dovetail.dev/anomaly-hold"

// AnnotationApproveScaleUp releases a hold: its value is the hold's ID (HoldID), which the
// ScaleUpHeld condition and the Event name. An approval naming another hold releases nothing, so
// an old approval left on the NodePool never waves a new anomaly through.
const AnnotationApproveScaleUp = "dovetail.dev/approve-scale-up"

// ConditionScaleUpHeld is the NodePool condition of the anomaly hold: True (ReasonSpendAnomaly)
// while a plan waits, False once released (ReasonApproved, ReasonTimedOut) or no longer
// anomalous (ReasonWithinTrailingAverage). Absent on a NodePool that was never held.
const ConditionScaleUpHeld = "ScaleUpHeld"

// ScaleUpHeld reasons.
const (
	ReasonSpendAnomaly          = "SpendAnomaly"
	ReasonApproved              = "Approved"
	ReasonTimedOut              = "TimedOut"
	ReasonWithinTrailingAverage = "WithinTrailingAverage"
)

// Event reasons recorded on the NodePool when a hold starts and when it is released.
const (
	EventScaleUpHeld     = "ScaleUpHeld"
	EventScaleUpReleased = "ScaleUpReleased"
)

// Anomaly-hold defaults: a plan tripling the NodePool's price against its last hour is held.
const (
	DefaultMultiple = 3.0
	DefaultWindow   = time.Hour
)

// Bounds of the settings: a multiple of 1 or less would hold every scale-up; a window under a
// minute averages nothing; seven days is longer than any NodeClaim's age matters to a hold.
const (
	minWindow  = time.Minute
	maxWindow  = 7 * 24 * time.Hour
	minTimeout = time.Minute
)

// AnomalyHold is the parsed AnnotationAnomalyHold.
type AnomalyHold struct {
	// Multiple of the trailing average the NodePool's price may reach without a hold (> 1).
	Multiple float64 `json:"multiple,omitempty"`
	// Window of the trailing average (1m..168h).
	Window metav1.Duration `json:"window,omitempty"`
	// MinPricePerHour: a plan leaving the NodePool at or below this price (USD per hour) is never
	// held, so a small or new NodePool (trailing average near 0) can start.
	MinPricePerHour float64 `json:"minPricePerHour,omitempty"`
	// Timeout releases a hold by itself this long after it began; nil: only approval does.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// AnomalyHoldOf parses the NodePool's AnnotationAnomalyHold with its defaults; nil without the
// annotation. Errors name the annotation and the field.
func AnomalyHoldOf(np *apisv1.NodePool) (*AnomalyHold, error) {
	v, ok := np.Annotations[AnnotationAnomalyHold]
	if !ok {
		return nil, nil
	}
	a := &AnomalyHold{}
	if err := yaml.UnmarshalStrict([]byte(v), a); err != nil {
		return nil, fmt.Errorf("metadata.annotations[%s]: %w", AnnotationAnomalyHold, err)
	}
	if a.Multiple == 0 {
		a.Multiple = DefaultMultiple
	}
	if a.Window.Duration == 0 {
		a.Window.Duration = DefaultWindow
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("metadata.annotations[%s]: %s: %s", AnnotationAnomalyHold, field, fmt.Sprintf(format, args...))
	}
	switch {
	case a.Multiple <= 1 || math.IsNaN(a.Multiple) || math.IsInf(a.Multiple, 0):
		return nil, bad("multiple", "%v is not a number greater than 1", a.Multiple)
	case a.Window.Duration < minWindow || a.Window.Duration > maxWindow:
		return nil, bad("window", "%s is not within %s..%s", a.Window.Duration, minWindow, maxWindow)
	case a.MinPricePerHour < 0 || math.IsNaN(a.MinPricePerHour) || math.IsInf(a.MinPricePerHour, 0):
		return nil, bad("minPricePerHour", "%v is not a non-negative number of USD per hour", a.MinPricePerHour)
	case a.Timeout != nil && a.Timeout.Duration < minTimeout:
		return nil, bad("timeout", "%s is shorter than %s", a.Timeout.Duration, minTimeout)
	}
	return a, nil
}

// TrailingAverage is the NodePool's average price over the window before now, in USD per hour,
// from the NodeClaims it has now: each counts its price for the part of the window it has
// existed (price × min(age, window) / window). The functions keep no state, so the average is
// read from the cluster's NodeClaims rather than remembered; NodeClaims deleted within the window
// are no longer seen, which can only lower the average (a hold errs towards asking). A claim
// without a creation time counts for the whole window.
func TrailingAverage(now time.Time, window time.Duration, claims []Added) float64 {
	sum := 0.0
	for _, c := range claims {
		frac := 1.0
		if !c.Created.IsZero() && window > 0 {
			frac = min(max(float64(now.Sub(c.Created))/float64(window), 0), 1)
		}
		sum += c.PricePerHour * frac
	}
	return sum
}

// Spend is one NodePool's price as a plan sees it, USD per hour: Before (its nodes and in-flight
// NodeClaims), After (Before plus the plan's new NodeClaims, Nodes of them) and Trailing (the
// trailing average).
type Spend struct {
	Before, After, Trailing float64
	Nodes                   int
}

// Verdict is the anomaly hold's decision for one NodePool's plan.
type Verdict struct {
	// Held: the plan's new NodeClaims for the NodePool wait.
	Held bool
	// HoldID names the hold (Held, or the hold just released).
	HoldID string
	// Condition is the ScaleUpHeld condition to write; nil leaves the NodePool's as it is.
	Condition *metav1.Condition
	// Started: the hold began with this plan; Released: a hold ended with it (an Event each).
	Started, Released bool
}

// HoldID names a hold by the time it began (second precision, as a condition's
// lastTransitionTime keeps it), so every decision during one hold names it alike.
func HoldID(since time.Time) string { return "hold-" + strconv.FormatInt(since.Unix(), 10) }

// Decide applies the hold to one NodePool's plan at now (the decision's time). The NodePool's
// ScaleUpHeld condition is the hold's state, kept in the cluster:
//
//   - a hold on (True): released when AnnotationApproveScaleUp names it, or when the timeout has
//     passed since it began; released too once the plan is no longer anomalous; else held.
//   - released by approval or timeout (False, Approved or TimedOut) within the last window: the
//     release stands (the trailing average has not caught up with the approved nodes yet).
//   - otherwise a plan is anomalous when it raises the price, to above MinPricePerHour and above
//     Multiple × Trailing: a new hold begins.
func (a *AnomalyHold) Decide(np *apisv1.NodePool, s Spend, now time.Time) Verdict {
	now = now.Truncate(time.Second)
	anomalous := s.Nodes > 0 && s.After > s.Before && s.After > a.MinPricePerHour && s.After > a.Multiple*s.Trailing
	cur := meta.FindStatusCondition(np.Status.Conditions, ConditionScaleUpHeld)
	if cur != nil && cur.Status == metav1.ConditionTrue {
		since := cur.LastTransitionTime.Time
		id := HoldID(since)
		switch {
		case strings.TrimSpace(np.Annotations[AnnotationApproveScaleUp]) == id:
			return a.released(id, ReasonApproved, fmt.Sprintf("%s approved by %s: %s", id, AnnotationApproveScaleUp, a.describe(s)), now)
		case a.Timeout != nil && !now.Before(since.Add(a.Timeout.Duration)):
			return a.released(id, ReasonTimedOut, fmt.Sprintf("%s timed out after %s: %s", id, a.Timeout.Duration, a.describe(s)), now)
		case !anomalous:
			return a.released(id, ReasonWithinTrailingAverage, fmt.Sprintf("%s ended: no plan raises the price above %v× the trailing average", id, a.Multiple), now)
		}
		return Verdict{Held: true, HoldID: id, Condition: a.held(np.Name, id, s, since)}
	}
	if cur != nil && (cur.Reason == ReasonApproved || cur.Reason == ReasonTimedOut) && now.Sub(cur.LastTransitionTime.Time) < a.Window.Duration {
		return Verdict{}
	}
	if !anomalous {
		return Verdict{}
	}
	id := HoldID(now)
	return Verdict{Held: true, HoldID: id, Condition: a.held(np.Name, id, s, now), Started: true}
}

func (a *AnomalyHold) held(pool, id string, s Spend, since time.Time) *metav1.Condition {
	msg := fmt.Sprintf("%s: holding %s; approve with: kubectl annotate nodepool %s %s=%s --overwrite",
		id, a.describe(s), pool, AnnotationApproveScaleUp, id)
	if a.Timeout != nil {
		msg += fmt.Sprintf("; released by itself at %s", since.Add(a.Timeout.Duration).UTC().Format(time.RFC3339))
	}
	return &metav1.Condition{Type: ConditionScaleUpHeld, Status: metav1.ConditionTrue, Reason: ReasonSpendAnomaly,
		Message: msg, LastTransitionTime: metav1.NewTime(since)}
}

func (a *AnomalyHold) released(id, reason, msg string, now time.Time) Verdict {
	return Verdict{HoldID: id, Released: true, Condition: &metav1.Condition{Type: ConditionScaleUpHeld,
		Status: metav1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now)}}
}

// describe says what the plan adds and why it is anomalous, with the figures.
func (a *AnomalyHold) describe(s Spend) string {
	return fmt.Sprintf("%d new nodes raising the NodePool's price from %.4f to %.4f USD/h, above %v× its trailing %s average of %.4f USD/h",
		s.Nodes, s.Before, s.After, a.Multiple, a.Window.Duration, s.Trailing)
}
