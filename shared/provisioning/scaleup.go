package provisioning

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/guardrails"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// The solver's limit keys for a NodePool's scale-up rate policies (guardrails.
// AnnotationScaleUpPolicies), counted like spec.limits: each new NodeClaim takes one
// ResourceScaleUpNodes and its dearest offering's price (micro-USD per hour) of
// ResourceScaleUpPricePerHour; what the policies leave (guardrails.Room) is the remainder. Never
// part of a node's capacity outside the limit accounting.
const (
	ResourceScaleUpNodes        corev1.ResourceName = "dovetail.dev/scale-up-nodes"
	ResourceScaleUpPricePerHour corev1.ResourceName = "dovetail.dev/scale-up-price-per-hour"
)

// scaleUp is what a pool's rate policies limit: nodes and/or price. The zero value limits nothing.
type scaleUp struct {
	nodes, price bool
}

var oneScaleUpNode = scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourceScaleUpNodes: 1}}

// withScaleUpRules adds the NodePool's rate policies to its limits l (nil: none yet) when the
// decision applies them (Input.ScaleUpGuardrails): the room they leave at Input.Time, counting the
// NodePool's NodeClaims by creation time and catalog price (the dearest offering matching their
// type, zone and capacity type labels, as the price cap counts them). Error: the annotation is
// invalid (guardrails.ScaleUpRulesOf).
func withScaleUpRules(in *Input, np *apisv1.NodePool, l *limits) (*limits, scaleUp, error) {
	if !in.ScaleUpGuardrails {
		return l, scaleUp{}, nil
	}
	rules, err := guardrails.ScaleUpRulesOf(np)
	if err != nil || rules == nil {
		return l, scaleUp{}, err
	}
	room := rules.Room(in.Time, AddedClaims(in, np.Name))
	if l == nil {
		l = &limits{}
	}
	rem := scheduling.Resources{Scalar: map[corev1.ResourceName]int64{}}
	if room.HasNodes {
		rem.Scalar[ResourceScaleUpNodes] = room.Nodes
		l.keys = append(l.keys, ResourceScaleUpNodes)
	}
	if room.HasPrice {
		// Rounded down, so rounding never lets a launch past the policy.
		rem.Scalar[ResourceScaleUpPricePerHour] = int64(room.PricePerHour * 1e6)
		l.keys = append(l.keys, ResourceScaleUpPricePerHour)
	}
	l.remaining = l.remaining.Add(rem)
	l.scaleUpWhy = room.Why
	sort.Slice(l.keys, func(i, j int) bool { return l.keys[i] < l.keys[j] })
	return l, scaleUp{nodes: room.HasNodes, price: room.HasPrice}, nil
}

// AddedClaims lists the NodePool's NodeClaims as the rate policies and the anomaly hold count
// them: creation time and price (USD per hour, the dearest catalog offering matching the
// NodeClaim's instance type, zone and capacity type labels; 0 for a type the catalog does not
// know), in Input order.
func AddedClaims(in *Input, pool string) []guardrails.Added {
	var out []guardrails.Added
	for _, nc := range in.NodeClaims {
		if nc.Labels[apisv1.LabelNodePool] != pool {
			continue
		}
		out = append(out, guardrails.Added{Created: nc.CreationTimestamp.Time,
			PricePerHour: in.Catalog.DearestPrice(nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[apisv1.LabelCapacityType])})
	}
	return out
}

// describeScaleUp renders what is left of a rate-policy key, for a pod's reason.
func (l *limits) describeScaleUp(k corev1.ResourceName, rem scheduling.Resources) string {
	if k == ResourceScaleUpNodes {
		return fmt.Sprintf("scale-up nodes=%d (%s)", rem.Scalar[k], l.scaleUpWhy)
	}
	return fmt.Sprintf("scale-up price=%.4f USD/h (%s)", float64(rem.Scalar[k])/1e6, l.scaleUpWhy)
}
