// Package quarantine is the rule that keeps a sick workload from buying capacity: a controller
// (Deployment through its ReplicaSet, ReplicaSet, StatefulSet, Job) whose running pods crash-loop,
// are OOM-killed again and again or stay not Ready past a window gets new capacity for at most a
// small allowance of its pending replicas; the rest stay pending with the evidence. It is pure
// (no clock: the snapshot's time is "now"; no I/O; deterministic order), so the provision
// function (which pods go to the solver), the lifecycle function (the NodePool condition) and
// `dovetail plan` read one rule.
//
// Settings are annotations on the NodePool, so Karpenter's NodePool schema stays untouched
// (AnnotationQuarantine, AnnotationWindow, AnnotationRestarts, AnnotationAllowance), and a
// workload opts out with AnnotationQuarantine: disabled on its pod template.
package quarantine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Annotations. The names are Dovetail's own (the dovetail.dev/ prefix) and distinct from the
// scale-up guardrails' so both may sit on one NodePool.
const (
	// AnnotationQuarantine turns the rule off: "disabled" on a NodePool (its nodes' workloads
	// are never quarantined) or on a pod template (that workload is exempt); "enabled" is the
	// default, spelled out. Any other value is an error naming the annotation.
	AnnotationQuarantine = "dovetail.dev/quarantine"
	// AnnotationWindow (NodePool) is how long a pod may stay not Ready, and how recent its last
	// crash must be, to count as evidence: a Go duration ("10m", "1h30m"), at least MinWindow.
	AnnotationWindow = "dovetail.dev/quarantine-window"
	// AnnotationRestarts (NodePool) is how many restarts of one container make a crash loop or
	// repeated OOM kill evidence: an integer of at least 1.
	AnnotationRestarts = "dovetail.dev/quarantine-restarts"
	// AnnotationAllowance (NodePool) is how many of a quarantined controller's pods may be on
	// trial at once (given capacity while not yet proven healthy or sick): an integer of at
	// least 0; 0 holds every pending replica.
	AnnotationAllowance = "dovetail.dev/quarantine-allowance"
)

// Values of AnnotationQuarantine.
const (
	ValueDisabled = "disabled"
	ValueEnabled  = "enabled"
)

// Defaults. The window is Kubernetes' own crash-loop horizon: the kubelet's container restart
// back-off doubles from 10 s to its 5-minute cap and resets after 10 minutes of a container
// running fine (kubelet pkg/kubelet/kubelet.go backOffPeriod, MaxContainerBackOff; the
// Kubernetes "Pod Lifecycle" page, "Container restarts"), so a container that crashed within
// 10 minutes is still in its loop. Three restarts is the third back-off (10 s, 20 s, 40 s):
// past one unlucky start and one retry. One pod on trial lets a fixed image prove itself
// without letting a broken one buy a fleet.
const (
	DefaultWindow    = 10 * time.Minute
	DefaultRestarts  = 3
	DefaultAllowance = 1
	// MinWindow bounds AnnotationWindow from below: shorter than the kubelet's first back-offs
	// (10 s + 20 s + 40 s) a window would read a container's ordinary start as a loop.
	MinWindow = time.Minute
)

// Settings are one NodePool's quarantine settings.
type Settings struct {
	Disabled bool
	// Window is the not-Ready and last-crash horizon.
	Window time.Duration
	// Restarts is the restart count of one container that makes evidence.
	Restarts int32
	// Allowance is the number of a quarantined controller's pods that may be on trial at once.
	Allowance int
}

// Defaults are the settings of a NodePool without annotations, and of pods on nodes of no
// NodePool.
func Defaults() Settings {
	return Settings{Window: DefaultWindow, Restarts: DefaultRestarts, Allowance: DefaultAllowance}
}

// ParseSettings reads a NodePool's quarantine annotations over Defaults. Error: each malformed
// annotation, as "metadata.annotations[<key>]: <value> <reason>" joined by "; "; the returned
// settings then hold the defaults for the malformed ones (quarantine stays on: a typo must not
// open the gate it was meant to tune).
func ParseSettings(np *apisv1.NodePool) (Settings, error) {
	s := Defaults()
	if np == nil {
		return s, nil
	}
	var errs []string
	bad := func(key, v, why string) {
		errs = append(errs, fmt.Sprintf("metadata.annotations[%s]: %q %s", key, v, why))
	}
	a := np.Annotations
	if v, ok := a[AnnotationQuarantine]; ok {
		switch strings.TrimSpace(v) {
		case ValueDisabled:
			s.Disabled = true
		case ValueEnabled:
		default:
			bad(AnnotationQuarantine, v, "is not "+ValueEnabled+" or "+ValueDisabled)
		}
	}
	if v, ok := a[AnnotationWindow]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		switch {
		case err != nil:
			bad(AnnotationWindow, v, "is not a duration (e.g. 10m)")
		case d < MinWindow:
			bad(AnnotationWindow, v, "is shorter than "+MinWindow.String()+" (the kubelet's first restart back-offs take 70s)")
		default:
			s.Window = d
		}
	}
	if v, ok := a[AnnotationRestarts]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 {
			bad(AnnotationRestarts, v, "is not an integer of at least 1")
		} else {
			s.Restarts = int32(n)
		}
	}
	if v, ok := a[AnnotationAllowance]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 0 {
			bad(AnnotationAllowance, v, "is not an integer of at least 0 (pods)")
		} else {
			s.Allowance = int(n)
		}
	}
	if len(errs) > 0 {
		return s, fmt.Errorf("NodePool %s: %s", np.Name, strings.Join(errs, "; "))
	}
	return s, nil
}

// exemptPod reads a pod's AnnotationQuarantine (inherited from its controller's pod template).
// Error: a value other than enabled or disabled; the pod is then not exempt.
func exemptPod(annotations map[string]string) (bool, error) {
	v, ok := annotations[AnnotationQuarantine]
	if !ok {
		return false, nil
	}
	switch strings.TrimSpace(v) {
	case ValueDisabled:
		return true, nil
	case ValueEnabled:
		return false, nil
	}
	return false, fmt.Errorf("metadata.annotations[%s]: %q is not %s or %s", AnnotationQuarantine, v, ValueEnabled, ValueDisabled)
}
