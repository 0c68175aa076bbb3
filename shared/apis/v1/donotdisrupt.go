package v1

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ParseDoNotDisrupt parses a karpenter.sh/do-not-disrupt value: "true" protects for good
// (forever is true), a Go duration ("30m", "2h") protects for that long. Anything else, a
// zero or negative duration included, is an error naming the value and the reason; Karpenter
// v1.14 treats such a value as if the annotation were absent (pkg/utils/pod
// IsDoNotDisruptActive: time.ParseDuration, positive only), and so do the callers here.
func ParseDoNotDisrupt(value string) (d time.Duration, forever bool, err error) {
	if value == "true" {
		return 0, true, nil
	}
	d, err = time.ParseDuration(value)
	if err != nil {
		return 0, false, fmt.Errorf("annotation %s: %q is neither \"true\" nor a duration: %w", AnnotationDoNotDisrupt, value, err)
	}
	if d <= 0 {
		return 0, false, fmt.Errorf("annotation %s: duration %q must be positive", AnnotationDoNotDisrupt, value)
	}
	return d, false, nil
}

// DoNotDisruptActive reports whether the karpenter.sh/do-not-disrupt annotation among
// annotations protects its object at now. A duration counts from since: "2h" protects until
// since+2h (exclusive). A nil since means the start is not known yet, and the protection holds
// (Karpenter's fail-safe for a pod without status.startTime). No annotation or an invalid value
// protects nothing.
func DoNotDisruptActive(annotations map[string]string, since *metav1.Time, now time.Time) bool {
	v, ok := annotations[AnnotationDoNotDisrupt]
	if !ok {
		return false
	}
	d, forever, err := ParseDoNotDisrupt(v)
	switch {
	case err != nil:
		return false
	case forever || since == nil:
		return true
	}
	return now.Sub(since.Time) < d
}

// PodDoNotDisrupt is DoNotDisruptActive for a pod: a duration counts from the pod's
// status.startTime, as Karpenter v1.14 counts it (pkg/utils/pod IsDoNotDisruptActive: pod age
// is now minus startTime). A terminal pod is never protected (Karpenter's IsDisruptable).
func PodDoNotDisrupt(p *corev1.Pod, now time.Time) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return DoNotDisruptActive(p.Annotations, p.Status.StartTime, now)
}

// ObjectDoNotDisrupt is DoNotDisruptActive for a Node or NodeClaim: a duration counts from the
// object's creationTimestamp. Karpenter v1.14 honours only "true" on nodes and NodeClaims
// (pkg/controllers/state StateNode: annotation == "true"); Dovetail reads a duration there the
// way Karpenter reads it on pods, from when the object began, so "2h" on a node keeps it for
// its first two hours. An object without a creationTimestamp (not yet created) is protected.
func ObjectDoNotDisrupt(m *metav1.ObjectMeta, now time.Time) bool {
	var since *metav1.Time
	if !m.CreationTimestamp.IsZero() {
		since = &m.CreationTimestamp
	}
	return DoNotDisruptActive(m.Annotations, since, now)
}
