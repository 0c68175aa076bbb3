package disruption

import (
	"time"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// ExpiresAt returns when nc expires: its creation time plus spec.expireAfter (copied from the
// NodePool template at launch, as in Karpenter v1). ok is false when expireAfter is unset or
// "Never", or the NodeClaim has no creation time.
func ExpiresAt(nc *apisv1.NodeClaim) (at time.Time, ok bool) {
	d := nc.Spec.ExpireAfter.Duration
	if d == nil || nc.CreationTimestamp.IsZero() {
		return time.Time{}, false
	}
	return nc.CreationTimestamp.Add(*d), true
}

// Expired reports whether nc has expired at now (now >= creation + expireAfter).
func Expired(nc *apisv1.NodeClaim, now time.Time) bool {
	at, ok := ExpiresAt(nc)
	return ok && !now.Before(at)
}
