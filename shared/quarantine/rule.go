package quarantine

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Container state reasons the kubelet reports (k8s.io/kubernetes pkg/kubelet/images and
// kuberuntime: "CrashLoopBackOff" while a restart waits out its back-off; the runtime's
// "OOMKilled" when the kernel's OOM killer ended the container).
const (
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	ReasonOOMKilled        = "OOMKilled"
)

// Controller names the workload controller a pod belongs to.
type Controller struct {
	// Kind is Deployment, ReplicaSet, StatefulSet or Job.
	Kind      string
	Namespace string
	Name      string
}

// String is "Deployment default/web".
func (c Controller) String() string { return c.Kind + " " + c.Namespace + "/" + c.Name }

// ControllerOf returns the controller a pod counts under, and false for a pod of no workload
// controller (a bare pod, a DaemonSet's, a static pod, a custom controller's). A ReplicaSet
// that the Deployment controller made is its Deployment: the Deployment controller names it
// "<deployment>-<pod-template-hash>" and labels its pods with the hash (k8s.io/kubernetes
// pkg/controller/deployment/sync.go getNewReplicaSet; appsv1.DefaultDeploymentUniqueLabelKey),
// so the agent need not watch ReplicaSets and pods of every revision count together.
func ControllerOf(p *corev1.Pod) (Controller, bool) {
	for _, ref := range p.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		c := Controller{Kind: ref.Kind, Namespace: p.Namespace, Name: ref.Name}
		switch ref.Kind {
		case "ReplicaSet":
			if h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
				c.Kind, c.Name = "Deployment", strings.TrimSuffix(ref.Name, "-"+h)
			}
			return c, true
		case "StatefulSet", "Job":
			return c, true
		}
		return Controller{}, false
	}
	return Controller{}, false
}

// Evidence is what a controller's bound pods show at the snapshot's time.
type Evidence struct {
	// Running counts the controller's bound pods that are not terminal or being deleted.
	Running int
	// Ready counts those whose Ready condition is True.
	Ready int
	// CrashLooping, OOMKilled and NotReady count the sick pods by their first evidence: a
	// container restarted at least Settings.Restarts times, its last exit within the window,
	// OOMKilled or otherwise; or the pod not Ready for at least the window.
	CrashLooping, OOMKilled, NotReady int
	// OnTrial counts the pods that are not sick and not proven: not Ready, or Ready for less
	// than the window (a container without a readiness probe is Ready for the seconds it runs
	// between crashes, so a fresh Ready proves nothing).
	OnTrial int
	// Example describes the first sick pod by name: "pod default/web-1 container app:
	// CrashLoopBackOff, 5 restarts, last exit 1 (Error)".
	Example string
}

// Sick is the number of sick pods.
func (e Evidence) Sick() int { return e.CrashLooping + e.OOMKilled + e.NotReady }

// Verdict is the rule's answer for one controller with pending pods.
type Verdict struct {
	Controller Controller
	// NodePool is the pool whose settings applied: the one whose nodes run most of the
	// controller's sick pods (ties: the first by name); "" for nodes of no NodePool (Defaults).
	NodePool    string
	Settings    Settings
	Evidence    Evidence
	Quarantined bool
	// Admitted are the controller's pending pods the solver may place (every one when not
	// quarantined; exempt pods always); Held the rest, which stay pending. Both sorted by
	// creation time, then namespace/name.
	Admitted, Held []*corev1.Pod
	// Problems are malformed workload annotations (the pods are then not exempt).
	Problems []string
}

// Message is the evidence as one sentence for an Event and a log: the controller, what its pods
// show, the allowance and how to opt out.
func (v *Verdict) Message() string {
	e, s := v.Evidence, v.Settings
	pool := "defaults: no NodePool"
	if v.NodePool != "" {
		pool = "NodePool " + v.NodePool
	}
	msg := fmt.Sprintf("%s is quarantined: %d of its %d running pods are sick (%d crash-looping, %d OOMKilled, %d not Ready for %s or more; %d+ restarts within %s count); e.g. %s. "+
		"%d pods on trial of an allowance of %d (%s, %s), so %d pending replicas wait for its pods to recover; "+
		"opt out with %s: %s on the pod template",
		v.Controller, e.Sick(), e.Running, e.CrashLooping, e.OOMKilled, e.NotReady, s.Window, s.Restarts, s.Window, e.Example,
		e.OnTrial, s.Allowance, pool, AnnotationAllowance, len(v.Held), AnnotationQuarantine, ValueDisabled)
	if len(v.Problems) > 0 {
		msg += "; " + strings.Join(v.Problems, "; ")
	}
	return msg
}

// Result is the rule applied to one snapshot.
type Result struct {
	// Pending are the snapshot's pending pods the solver may place, in the snapshot's order.
	Pending []corev1.Pod
	// Verdicts are the controllers the rule quarantined, by Controller.String().
	Verdicts []Verdict
	// Held is the number of pending pods held.
	Held int
	// SettingsErrors are the NodePools' malformed annotations (ParseSettings), by pool name;
	// their defaults applied.
	SettingsErrors []string
	// Settings are the parsed settings of every NodePool of the snapshot, by name.
	Settings map[string]Settings
}

// Evaluate applies the rule to a snapshot at its own time (snap.Time): for each controller with
// pending pods, its bound pods' evidence under its NodePool's settings; a controller is
// quarantined when at least one of its running pods is sick and at least half of them are
// (one sick pod of fifty on a bad node does not hold a healthy workload's scale-up), its pool has
// not disabled the rule, and then only max(0, allowance − pods on trial: bound, not sick, not
// Ready for the window yet) of its pending pods
// (oldest first) go to the solver. Pods of no controller, exempt pods and controllers with no
// sick pod pass through.
func Evaluate(snap *events.Snapshot) Result {
	now := snap.Time.Time
	res := Result{Settings: map[string]Settings{}}
	for i := range snap.NodePools {
		np := &snap.NodePools[i]
		s, err := ParseSettings(np)
		if err != nil {
			res.SettingsErrors = append(res.SettingsErrors, err.Error())
		}
		res.Settings[np.Name] = s
	}
	sort.Strings(res.SettingsErrors)
	poolOf := map[string]string{}
	for i := range snap.Nodes {
		poolOf[snap.Nodes[i].Name] = snap.Nodes[i].Labels[apisv1.LabelNodePool]
	}
	pending := map[Controller][]*corev1.Pod{}
	for i := range snap.PendingPods {
		if c, ok := ControllerOf(&snap.PendingPods[i]); ok {
			pending[c] = append(pending[c], &snap.PendingPods[i])
		}
	}
	if len(pending) == 0 {
		res.Pending = snap.PendingPods
		return res
	}
	bound := map[Controller][]*corev1.Pod{}
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if c, ok := ControllerOf(p); ok && pending[c] != nil && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			bound[c] = append(bound[c], p)
		}
	}
	held := map[*corev1.Pod]bool{}
	for _, c := range sortedControllers(pending) {
		v := judge(c, bound[c], pending[c], poolOf, res.Settings, now)
		if !v.Quarantined {
			continue
		}
		for _, p := range v.Held {
			held[p] = true
		}
		res.Held += len(v.Held)
		res.Verdicts = append(res.Verdicts, v)
	}
	for i := range snap.PendingPods {
		if !held[&snap.PendingPods[i]] {
			res.Pending = append(res.Pending, snap.PendingPods[i])
		}
	}
	return res
}

// judge is the rule for one controller: settings, evidence, then the allowance.
func judge(c Controller, running, pending []*corev1.Pod, poolOf map[string]string, pools map[string]Settings, now time.Time) Verdict {
	v := Verdict{Controller: c}
	v.NodePool = sickestPool(running, poolOf, pools, now)
	v.Settings = Defaults()
	if s, ok := pools[v.NodePool]; ok {
		v.Settings = s
	}
	v.Evidence = evidence(running, v.Settings, now)
	sick := v.Evidence.Sick()
	v.Quarantined = !v.Settings.Disabled && sick > 0 && 2*sick >= v.Evidence.Running
	sortPods(pending)
	if !v.Quarantined {
		v.Admitted = pending
		return v
	}
	allow := max(0, v.Settings.Allowance-v.Evidence.OnTrial)
	for _, p := range pending {
		exempt, err := exemptPod(p.Annotations)
		if err != nil {
			v.Problems = appendOnce(v.Problems, fmt.Sprintf("pod %s/%s: %v", p.Namespace, p.Name, err))
		}
		switch {
		case exempt:
			v.Admitted = append(v.Admitted, p)
		case allow > 0:
			allow--
			v.Admitted = append(v.Admitted, p)
		default:
			v.Held = append(v.Held, p)
		}
	}
	// Every pending pod exempt: nothing is held, so nothing is quarantined.
	v.Quarantined = len(v.Held) > 0
	return v
}

// sickestPool is the NodePool whose nodes run most of the sick pods (judged under the pool's
// own settings, or the defaults for nodes of no pool), ties broken by name; "" when the sick
// pods run on nodes of no NodePool or none is sick.
func sickestPool(running []*corev1.Pod, poolOf map[string]string, pools map[string]Settings, now time.Time) string {
	count := map[string]int{}
	for _, p := range running {
		pool := poolOf[p.Spec.NodeName]
		s, ok := pools[pool]
		if !ok {
			s = Defaults()
		}
		if why, _ := sickness(p, s, now); why != "" {
			count[pool]++
		}
	}
	best, n := "", 0
	names := make([]string, 0, len(count))
	for pool := range count {
		names = append(names, pool)
	}
	sort.Strings(names)
	for _, pool := range names {
		if count[pool] > n {
			best, n = pool, count[pool]
		}
	}
	return best
}

// evidence counts the controller's bound pods: Ready, sick (by kind), on trial.
func evidence(running []*corev1.Pod, s Settings, now time.Time) Evidence {
	var e Evidence
	sortPods(running)
	for _, p := range running {
		e.Running++
		why, detail := sickness(p, s, now)
		switch why {
		case ReasonOOMKilled:
			e.OOMKilled++
		case ReasonCrashLoopBackOff:
			e.CrashLooping++
		case "NotReady":
			e.NotReady++
		}
		switch {
		case why != "":
			if e.Example == "" {
				e.Example = "pod " + p.Namespace + "/" + p.Name + " " + detail
			}
		case podReady(p):
			e.Ready++
			if !provenReady(p, s.Window, now) {
				e.OnTrial++
			}
		default:
			e.OnTrial++
		}
	}
	return e
}

// sickness classifies one bound pod: ReasonOOMKilled or ReasonCrashLoopBackOff when one of its
// containers (init containers too) restarted at least s.Restarts times and last exited within
// s.Window of now (OOMKilled when that exit was the OOM killer's), else "NotReady" when its Ready
// condition has been False for at least s.Window, else "" (healthy or on trial). detail says what
// was seen, for the Event.
func sickness(p *corev1.Pod, s Settings, now time.Time) (why, detail string) {
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		last := cs.LastTerminationState.Terminated
		if cs.RestartCount < s.Restarts || last == nil || now.Sub(last.FinishedAt.Time) > s.Window {
			continue
		}
		state := "running"
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			state = w.Reason
		}
		detail = fmt.Sprintf("container %s: %s, %d restarts, last exit %d (%s) at %s", cs.Name, state, cs.RestartCount,
			last.ExitCode, last.Reason, last.FinishedAt.UTC().Format(time.RFC3339))
		if last.Reason == ReasonOOMKilled {
			return ReasonOOMKilled, detail
		}
		return ReasonCrashLoopBackOff, detail
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() && now.Sub(c.LastTransitionTime.Time) >= s.Window {
			return "NotReady", fmt.Sprintf("not Ready since %s (%s)", c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason)
		}
	}
	return "", ""
}

// provenReady reports whether the pod has been Ready for at least window (a Ready condition
// without a transition time counts as proven: nothing says it changed).
func provenReady(p *corev1.Pod, window time.Duration, now time.Time) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && (c.LastTransitionTime.IsZero() || now.Sub(c.LastTransitionTime.Time) >= window)
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sortPods orders pods by creation time, then namespace/name: the order a ReplicaSet creates
// them in, so the oldest pending replicas are the ones on trial.
func sortPods(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		ti, tj := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name
	})
}

func sortedControllers(m map[Controller][]*corev1.Pod) []Controller {
	out := make([]Controller, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
