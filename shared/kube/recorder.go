package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/kevents"
)

// AnnotationEventCommand, on an Event the agent wrote, is the ID of the last command that
// counted it: a redelivered command finds itself there and counts nothing twice.
const AnnotationEventCommand = "dovetail.dev/command"

// DedupeWindow is how long a repeat of an Event with the same message is not counted again:
// Karpenter's recorder dedupes for 2 minutes, FailedScheduling for 5 (pkg/events/recorder.go,
// pkg/controllers/provisioning/scheduling/events.go), so a pod pending across many decisions
// is told once per window, not once per snapshot.
func DedupeWindow(reason string) time.Duration {
	if reason == kevents.FailedScheduling {
		return 5 * time.Minute
	}
	return 2 * time.Minute
}

// NominationQPS and NominationBurst bound the Nominated Events the agent writes: 5 per second
// with bursts of 10, Karpenter's PodNominationRateLimiter (sigs.k8s.io/karpenter,
// pkg/controllers/provisioning/scheduling/events.go), so a launch for thousands of pods does not
// write thousands of Events at once. Events over the limit are dropped, as Karpenter drops them;
// the nomination itself (the pod's place on the NodeClaim) does not depend on its Event.
const (
	NominationQPS   = 5
	NominationBurst = 10
)

// limiterClock gives the token bucket the Applier's clock (it never sleeps: only TryAccept is
// used).
type limiterClock struct{ clock.PassiveClock }

func (limiterClock) Sleep(d time.Duration) { time.Sleep(d) }

// recentEvents remembers the Events this agent wrote lately (name → command, message, time),
// so a repeat within its window costs no API call. Bounded: it starts over when full (a miss
// costs one Get).
type recentEvents struct {
	mu sync.Mutex
	m  map[string]recentEvent
}

type recentEvent struct {
	command, message string
	at               time.Time
}

const maxRecentEvents = 8192

func (r *recentEvents) seen(name, command, message string, now time.Time, window time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[name]
	return ok && (e.command == command || (e.message == message && now.Sub(e.at) < window))
}

func (r *recentEvents) note(name, command, message string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) >= maxRecentEvents {
		r.m = map[string]recentEvent{}
	}
	r.m[name] = recentEvent{command: command, message: message, at: at}
}

// EventName is the name of the one Event object of rec's object, reason and key: the object's
// name (truncated) and 16 hex characters of a SHA-256 over kind, namespace, name, UID, reason and
// key. The same Event asked for again, by any command, is the same object.
func EventName(rec events.EventRecord) string {
	o := rec.Object
	sum := sha256.Sum256([]byte(strings.Join([]string{o.Kind, o.Namespace, o.Name, string(o.UID), rec.Reason, rec.Key}, "\x00")))
	suffix := "." + hex.EncodeToString(sum[:8])
	base := o.Name
	if max := validation.DNS1123SubdomainMaxLength - len(suffix); len(base) > max {
		base = base[:max]
	}
	return base + suffix
}

// validateEvents checks the command's Events (events.EventRecord's rules), naming the field.
func validateEvents(cmd *events.Command) error {
	if len(cmd.Events) == 0 {
		return nil
	}
	probe := events.Command{ID: cmd.ID, Cluster: "c", Kind: events.CommandRecordEvents, Events: cmd.Events}
	if err := probe.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	return nil
}

// recordEvents records each of recs for command id, going on past a failure to the rest. Up
// to ApplierOptions.EventParallelism Events are written at once: a decision can carry one Event
// per pending pod (FailedScheduling, Nominated), and one POST after the other held every command
// behind it on the agent's one ordered command stream (issue 28: at 1,000 pods the nodes waited
// over a minute to be registered). Records of the same Event object (the same EventName) stay
// in one worker, in the command's order, so a repeat counts after its first. The failures are
// listed in the command's order.
func (a *Applier) recordEvents(ctx context.Context, id string, recs []events.EventRecord) error {
	var groups [][]int
	byName := map[string]int{}
	for i, r := range recs {
		key := r.Object.Namespace + "/" + EventName(r)
		g, ok := byName[key]
		if !ok {
			g = len(groups)
			byName[key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	errs := make([]error, len(recs))
	workqueue.ParallelizeUntil(ctx, max(a.opts.EventParallelism, 1), len(groups), func(g int) {
		for _, i := range groups[g] {
			errs[i] = a.recordEvent(ctx, id, recs[i])
		}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var failed []string
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("recording %d of %d events: %s", len(failed), len(recs), strings.Join(failed, "; "))
	}
	return nil
}

// recordEvent writes rec as the Event EventName names, in the object's namespace ("default" for
// a cluster-scoped object, where kubectl describe finds it). A new Event is created with count
// 1. An existing one, as client-go's recorder aggregates: left alone when this command already
// counted it (redelivery) or when it says the same within DedupeWindow; otherwise its count
// grows by one and its message and lastTimestamp are this one's.
func (a *Applier) recordEvent(ctx context.Context, id string, rec events.EventRecord) error {
	name, ns := EventName(rec), rec.Object.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	msg := rec.Message
	if len(msg) > events.MaxEventMessageBytes {
		msg = msg[:events.MaxEventMessageBytes-3] + "..."
	}
	now := a.opts.Clock.Now()
	window := DedupeWindow(rec.Reason)
	if a.recent.seen(ns+"/"+name, id, msg, now, window) {
		return nil
	}
	if rec.Reason == kevents.Nominated && !a.nominations.TryAccept() {
		return nil
	}
	ts := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{AnnotationEventCommand: id}},
		InvolvedObject: rec.Object, Reason: rec.Reason, Message: msg, Type: rec.Type,
		Source:         corev1.EventSource{Component: a.opts.Component},
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
		ReportingController: "dovetail.dev/agent", ReportingInstance: a.opts.Component,
	}
	api := a.kube.CoreV1().Events(ns)
	_, err := api.Create(ctx, ev, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error { return a.countEvent(ctx, ns, name, id, msg, now, window) })
	}
	if err != nil {
		return fmt.Errorf("record %s event on %s/%s: %w", rec.Reason, rec.Object.Kind, rec.Object.Name, err)
	}
	a.recent.note(ns+"/"+name, id, msg, now)
	return nil
}

// countEvent counts one more occurrence of an existing Event (see recordEvent).
func (a *Applier) countEvent(ctx context.Context, ns, name, id, msg string, now time.Time, window time.Duration) error {
	api := a.kube.CoreV1().Events(ns)
	got, err := api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // expired (the API server's event TTL) a moment ago: the next decision records it anew
	}
	if err != nil {
		return err
	}
	last := got.LastTimestamp.Time
	if got.Annotations[AnnotationEventCommand] == id || (got.Message == msg && now.Sub(last) < window) {
		return nil
	}
	body, err := json.Marshal(map[string]any{
		"metadata":      map[string]any{"resourceVersion": got.ResourceVersion, "annotations": map[string]string{AnnotationEventCommand: id}},
		"count":         got.Count + 1,
		"message":       msg,
		"lastTimestamp": metav1.NewTime(now),
	})
	if err != nil {
		return err
	}
	_, err = api.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: a.opts.Component})
	return err
}
