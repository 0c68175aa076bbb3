package cloud

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// DriftReason names what drifted, as the cloud's Karpenter provider writes it
// (sigs.k8s.io/karpenter pkg/cloudprovider DriftReason: "NodeClassDrift", "ImageDrift"...).
// The empty reason means not drifted.
type DriftReason string

// Drift is why a NodeClaim drifted (Kind "" when it has not): the reason, the field that no
// longer matches (for people: "AKSNodeClass status.images"), and the values compared.
type Drift struct {
	Kind DriftReason
	// Field names the field that no longer matches, in the words of the object that holds it.
	Field  string
	Detail string
}

// NodeClassRules is one cloud's NodeClass behaviour that the neutral packages ask for, as
// Karpenter core asks its CloudProvider (IsDrifted; the annotations Create writes on the
// NodeClaim it returns). Every method is pure: what it needs travels in the snapshot (the
// NodeClaim, its Node, the NodeClass with its resolved status) or was fixed when the rules were
// built (the provider's configuration), so the drift function, `dovetail plan --disruption` and
// local dev decide alike. A NodeClass of a kind the rules do not serve is not theirs: no drift,
// nothing recorded.
type NodeClassRules interface {
	// RecordLaunch writes on the launched NodeClaim nc (status.imageID, the NodeClass hash and
	// its version, the networking it launched with) what IsDrifted later compares; inst is the
	// instance the cloud returned. A NodeClass whose status is not resolved leaves a field
	// unrecorded, and IsDrifted then has nothing to compare for it.
	RecordLaunch(nc *apisv1.NodeClaim, class apisv1.NodeClass, inst *Instance)
	// IsDrifted reports whether nc (and node, its registered Node, nil before registration)
	// drifted from its NodeClass. Drift needs two known values that differ: a field the
	// NodeClaim did not record, or the NodeClass has not resolved, is not compared.
	IsDrifted(nc *apisv1.NodeClaim, node *corev1.Node, class apisv1.NodeClass) Drift
	// ReservationExpiring returns when the capacity reservation nc runs in started expiring, and
	// true when that is at or before now: such a NodeClaim is deleted (forcefully) before the
	// cloud reclaims the capacity. A cloud without expiring reservations returns false.
	ReservationExpiring(nc *apisv1.NodeClaim, class apisv1.NodeClass, now time.Time) (time.Time, bool)
}

// RulesOf returns the provider's NodeClass rules, or nil when it has none (then only the
// NodePool's drift is checked and nothing is recorded at launch).
func RulesOf(p Provider) NodeClassRules {
	r, _ := As[NodeClassRules](p)
	return r
}

// As finds in p, or in the providers p decorates (each decorator's Unwrap() Provider, as
// errors.As follows Unwrap), the first that implements the optional interface T. A decorator
// (metrics, tracing) that hid its provider's optional interfaces would silently turn off what they
// give: the launch records drift compares, reservation counts, leftover collection.
func As[T any](p Provider) (T, bool) {
	for p != nil {
		if t, ok := p.(T); ok {
			return t, true
		}
		u, ok := p.(interface{ Unwrap() Provider })
		if !ok {
			break
		}
		p = u.Unwrap()
	}
	var zero T
	return zero, false
}
