// Package guardrails is Dovetail's scale-up governance of a NodePool, beyond the static caps
// (spec.limits and dovetail.dev/max-price-per-hour): rate policies that bound how many nodes and
// how much USD per hour a NodePool may add per window (AnnotationScaleUpPolicies), and the
// anomaly hold that keeps a plan raising the NodePool's price far above its trailing average
// until a person approves it or a timeout passes (AnnotationAnomalyHold). Both are set by
// annotation, so Karpenter's NodePool schema stays untouched.
//
// The package is pure: no clock (the caller passes the decision's time), no I/O. The solver
// enforces the rate policies as limits (shared/provisioning); the provision function applies the
// anomaly hold to its plan. Replacements (interruption, drift, repair, consolidation) are never
// held: only the provision function asks for either.
package guardrails

import (
	"fmt"
	"math"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// AnnotationScaleUpPolicies bounds a NodePool's scale-up per window, in the shape of a
// HorizontalPodAutoscaler's spec.behavior.scaleUp (autoscaling/v2 HPAScalingRules), as YAML or
// JSON:
//
//	dovetail.dev/scale-up-policies: |
//	  selectPolicy: Min
//	  policies:
//	  - {type: Nodes, value: 10, periodSeconds: 600}
//	  - {type: PricePerHour, value: 25, periodSeconds: 3600}
//
// A policy allows at most value new nodes (type Nodes) or value USD per hour of new nodes (type
// PricePerHour, each at its offering's catalog price) to be added in any periodSeconds. What was
// added is the NodePool's NodeClaims created within the period before the decision (in-flight
// and registered alike; replacements count too, they are never held).
const AnnotationScaleUpPolicies = "dovetail.dev/scale-up-policies"

// PolicyType is what a ScaleUpPolicy counts.
type PolicyType string

// Policy types: HPA counts Pods and Percent; a NodePool counts nodes and their price.
const (
	PolicyNodes        PolicyType = "Nodes"
	PolicyPricePerHour PolicyType = "PricePerHour"
)

// SelectPolicy says how several policies of one type combine, with HPA's names. Min is the
// default here (HPA's scaleUp default is Max): these are guardrails, and a person who writes two
// policies expects both to hold. Policies of different types are always both enforced, as a node
// count and a price cannot be compared.
type SelectPolicy string

// Select policies.
const (
	// SelectMin: every policy holds (the one leaving the least room decides).
	SelectMin SelectPolicy = "Min"
	// SelectMax: of each type, the policy leaving the most room decides (HPA's default).
	SelectMax SelectPolicy = "Max"
	// SelectDisabled: the NodePool adds no node at all (HPA's Disabled); replacements still launch.
	SelectDisabled SelectPolicy = "Disabled"
)

// MaxPeriodSeconds is the longest window a policy may name: one day. HPA caps periodSeconds at
// 1800 (autoscaling/v2 validation); a NodePool's spend is watched over hours, so the cap is higher.
const MaxPeriodSeconds = 86400

// maxPolicies bounds the list read from one annotation (input size bounds memory, DESIGN.md 6).
const maxPolicies = 16

// ScaleUpPolicy is one window: at most Value of Type added in any PeriodSeconds.
type ScaleUpPolicy struct {
	Type PolicyType `json:"type"`
	// Value is a node count (Nodes, a whole number) or USD per hour (PricePerHour).
	Value         float64 `json:"value"`
	PeriodSeconds int32   `json:"periodSeconds"`
}

// ScaleUpRules is the parsed AnnotationScaleUpPolicies.
type ScaleUpRules struct {
	SelectPolicy SelectPolicy    `json:"selectPolicy,omitempty"`
	Policies     []ScaleUpPolicy `json:"policies,omitempty"`
}

// ScaleUpRulesOf parses the NodePool's AnnotationScaleUpPolicies; nil without the annotation.
// Errors name the annotation and the field: unknown fields, a type other than Nodes or
// PricePerHour, a negative, fractional (Nodes) or non-finite value, periodSeconds outside
// 1..MaxPeriodSeconds, more than 16 policies, none without selectPolicy Disabled.
func ScaleUpRulesOf(np *apisv1.NodePool) (*ScaleUpRules, error) {
	v, ok := np.Annotations[AnnotationScaleUpPolicies]
	if !ok {
		return nil, nil
	}
	r := &ScaleUpRules{}
	if err := yaml.UnmarshalStrict([]byte(v), r); err != nil {
		return nil, fmt.Errorf("metadata.annotations[%s]: %w", AnnotationScaleUpPolicies, err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("metadata.annotations[%s]: %w", AnnotationScaleUpPolicies, err)
	}
	if r.SelectPolicy == "" {
		r.SelectPolicy = SelectMin
	}
	return r, nil
}

func (r *ScaleUpRules) validate() error {
	switch r.SelectPolicy {
	case "", SelectMin, SelectMax, SelectDisabled:
	default:
		return fmt.Errorf("selectPolicy: %q is not one of Min, Max, Disabled", r.SelectPolicy)
	}
	if len(r.Policies) == 0 && r.SelectPolicy != SelectDisabled {
		return fmt.Errorf("policies: at least one policy is required (or selectPolicy: Disabled)")
	}
	if len(r.Policies) > maxPolicies {
		return fmt.Errorf("policies: %d policies, at most %d", len(r.Policies), maxPolicies)
	}
	for i, p := range r.Policies {
		field := fmt.Sprintf("policies[%d]", i)
		switch p.Type {
		case PolicyNodes:
			if p.Value != math.Trunc(p.Value) {
				return fmt.Errorf("%s.value: %v is not a whole number of nodes", field, p.Value)
			}
		case PolicyPricePerHour:
		default:
			return fmt.Errorf("%s.type: %q is not one of Nodes, PricePerHour", field, p.Type)
		}
		if p.Value < 0 || math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			return fmt.Errorf("%s.value: %v is not a non-negative number", field, p.Value)
		}
		if p.PeriodSeconds < 1 || p.PeriodSeconds > MaxPeriodSeconds {
			return fmt.Errorf("%s.periodSeconds: %d is not within 1..%d", field, p.PeriodSeconds, MaxPeriodSeconds)
		}
	}
	return nil
}

// Added is one NodeClaim of the NodePool, as the windows count it: when it was created and its
// price in USD per hour.
type Added struct {
	Created      time.Time
	PricePerHour float64
}

// Room is what the rules leave for new NodeClaims at one moment: Nodes (a count) when HasNodes,
// PricePerHour (USD per hour) when HasPrice. A type no policy names is not limited.
type Room struct {
	Nodes        int64
	HasNodes     bool
	PricePerHour float64
	HasPrice     bool
	// Why names the policy that decided each limited type, for a pod's reason.
	Why string
}

// Room computes what the rules leave at now, given the NodePool's NodeClaims. A policy's window
// is (now − periodSeconds, now]: a NodeClaim counts when created after now − periodSeconds, as
// HPA counts its scale events (a record counts when its timestamp is after the cutoff). A
// NodeClaim without a creation time, or a zero now, counts in every window: an unknown age is
// never a reason to launch more. A policy leaves value − added, never less than nothing.
func (r *ScaleUpRules) Room(now time.Time, claims []Added) Room {
	var out Room
	if r.SelectPolicy == SelectDisabled {
		return Room{HasNodes: true, HasPrice: true, Why: AnnotationScaleUpPolicies + " selectPolicy Disabled"}
	}
	var whyNodes, whyPrice string
	for _, p := range r.Policies {
		cutoff := now.Add(-time.Duration(p.PeriodSeconds) * time.Second)
		nodes, price := 0, 0.0
		for _, c := range claims {
			if now.IsZero() || c.Created.IsZero() || c.Created.After(cutoff) {
				nodes++
				price += c.PricePerHour
			}
		}
		why := fmt.Sprintf("%s %s %v per %ds", AnnotationScaleUpPolicies, p.Type, p.Value, p.PeriodSeconds)
		switch p.Type {
		case PolicyNodes:
			left := max(int64(p.Value)-int64(nodes), 0)
			if !out.HasNodes || r.wins(float64(left), float64(out.Nodes)) {
				out.Nodes, out.HasNodes, whyNodes = left, true, why
			}
		case PolicyPricePerHour:
			left := max(p.Value-price, 0)
			if !out.HasPrice || r.wins(left, out.PricePerHour) {
				out.PricePerHour, out.HasPrice, whyPrice = left, true, why
			}
		}
	}
	var why []string
	for _, w := range []string{whyNodes, whyPrice} {
		if w != "" {
			why = append(why, w)
		}
	}
	out.Why = strings.Join(why, "; ")
	return out
}

// wins reports whether a policy leaving left replaces one leaving cur under the select policy:
// the smaller under Min, the larger under Max.
func (r *ScaleUpRules) wins(left, cur float64) bool {
	if r.SelectPolicy == SelectMax {
		return left > cur
	}
	return left < cur
}
