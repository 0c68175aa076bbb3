package localdev

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dovetail-dev/dovetail/functions/provision"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

var listAll = metav1.ListOptions{}

// isWorkloadPod reports whether a pod counts toward "every pod bound": not a DaemonSet's
// (those follow nodes) and not finished.
func isWorkloadPod(p *corev1.Pod) bool {
	return !scheduling.IsDaemonSetPod(p) && !scheduling.IsTerminal(p) && p.DeletionTimestamp == nil
}

// Progress prints timestamped lines as the run goes: pods pending → NodeClaims launching →
// nodes registering → pods bound.
type Progress struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
	// bound batches bindings per node so one line reports them.
	bound map[string][]string
	flush *time.Timer
	// steps are the NodeClaim lifecycle steps already printed (a step is decided again on every
	// snapshot until the agent has applied it).
	steps map[string]bool
	// waiting are the pods already reported as waiting for a NodeClass to resolve: each is
	// reported once, not on every revision until the class's status is written.
	waiting map[string]bool
}

// NewProgress starts the clock at now.
func NewProgress(out io.Writer) *Progress {
	return &Progress{out: out, start: time.Now(), bound: map[string][]string{}, steps: map[string]bool{}, waiting: map[string]bool{}}
}

// Printf prints one line with the elapsed time.
func (p *Progress) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printf(format, args...)
}

func (p *Progress) printf(format string, args ...any) {
	fmt.Fprintf(p.out, "[%6.2fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// Decision prints what one provision invocation decided and why.
func (p *Progress) Decision(d provision.Decision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(d.Launched) == 0 && len(d.Unschedulable) == 0 && len(d.Failures) == 0 && len(d.Orphans) == 0 {
		return
	}
	for _, l := range d.Launched {
		price := fmt.Sprintf("%.4f USD/h", l.Instance.PricePerHour)
		if l.Instance.CapacityType == apisv1.CapacityTypeSpot {
			price += " (spot estimate)"
		}
		p.printf("provision (revision %d): launched NodeClaim %s: %s %s in %s at %s for %d pods (%s)",
			d.Revision, l.NodeClaim.Name, l.Instance.InstanceType, l.Instance.CapacityType, l.Instance.Zone, price,
			len(l.Pods), summarizePods(l.Pods))
	}
	for _, f := range d.Failures {
		p.printf("provision (revision %d): %s", d.Revision, f)
	}
	p.reportWaiting(d)
	for _, u := range d.Unschedulable {
		if !u.Waiting() {
			p.printf("provision (revision %d): pod %s/%s cannot be placed: %s", d.Revision, u.Pod.Namespace, u.Pod.Name, u.Reason)
		}
	}
	for _, o := range d.Orphans {
		p.printf("provision (revision %d): terminated orphan instance %s", d.Revision, o)
	}
}

// reportWaiting prints, once per pod and grouped by the NodeClasses they wait for, the pods
// that wait for a NodeClass's status (the lifecycle function resolves it moments after start):
// a normal phase of a first run, not a failure.
func (p *Progress) reportWaiting(d provision.Decision) {
	byClasses := map[string][]string{}
	for _, u := range d.Unschedulable {
		if u.Pod == nil || !u.Waiting() {
			continue
		}
		key := u.Pod.Namespace + "/" + u.Pod.Name
		if p.waiting[key] {
			continue
		}
		p.waiting[key] = true
		classes := strings.Join(u.AwaitingNodeClasses, ", ")
		byClasses[classes] = append(byClasses[classes], key)
	}
	classes := make([]string, 0, len(byClasses))
	for c := range byClasses {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		pods := byClasses[c]
		noun := "pods wait"
		if len(pods) == 1 {
			noun = "pod waits"
		}
		p.printf("provision (revision %d): %d %s for %s to resolve (subnets, images, instance profile) before launching: %s",
			d.Revision, len(pods), noun, c, summarizePods(pods))
	}
}

// Bound records a binding; bindings are printed per node a moment later.
func (p *Progress) Bound(pod, node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bound[node] = append(p.bound[node], pod)
	if p.flush == nil {
		p.flush = time.AfterFunc(150*time.Millisecond, p.flushBound)
	}
}

// Flush prints the bindings still waiting for their per-node line, so they come before
// whatever is printed next (the "all bound" line and the summary).
func (p *Progress) Flush() { p.flushBound() }

func (p *Progress) flushBound() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flush != nil {
		p.flush.Stop()
	}
	nodes := make([]string, 0, len(p.bound))
	for n := range p.bound {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		p.printf("scheduler stand-in: bound %d pods to %s (%s)", len(p.bound[n]), n, summarizePods(p.bound[n]))
	}
	p.bound = map[string][]string{}
	p.flush = nil
}

func summarizePods(pods []string) string {
	sorted := append([]string(nil), pods...)
	sort.Strings(sorted)
	if len(sorted) > 4 {
		return strings.Join(sorted[:4], ", ") + fmt.Sprintf(", and %d more", len(sorted)-4)
	}
	return strings.Join(sorted, ", ")
}

// registrar is the fake cloud's way into the cluster: a booted instance registers its Node, as a
// kubelet would.
type registrar struct {
	kube     kubernetes.Interface
	progress *Progress
}

func (r *registrar) RegisterNode(ctx context.Context, n *corev1.Node) error {
	_, err := r.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		r.progress.Printf("node %s registered: %s %s in %s (allocatable cpu %s, memory %s, pods %s)", n.Name,
			n.Labels[corev1.LabelInstanceTypeStable], n.Labels[apisv1.LabelCapacityType], n.Labels[corev1.LabelTopologyZone],
			qty(n.Status.Allocatable, corev1.ResourceCPU), qty(n.Status.Allocatable, corev1.ResourceMemory), qty(n.Status.Allocatable, corev1.ResourcePods))
	}
	return err
}

func (r *registrar) DeregisterNode(ctx context.Context, name string) error {
	err := r.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func qty(l corev1.ResourceList, n corev1.ResourceName) string {
	q := l[n]
	return q.String()
}
