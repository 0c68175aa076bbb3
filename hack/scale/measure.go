package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// nodeClaimGVR is Karpenter's NodeClaim (karpenter.sh/v1), which both sides create.
var nodeClaimGVR = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// Recorder keeps, from informers, when the harness first saw each event: a pod created, bound;
// a NodeClaim created and the node it names; a Node Ready, deleted. Watch times, not
// creationTimestamps: those have one-second resolution.
type Recorder struct {
	mu         sync.Mutex
	podSeen    map[string]time.Time
	podBound   map[string]time.Time
	podNode    map[string]string
	podDeleted map[string]bool
	// podUID is the UID of the pod a name stands for now: a StatefulSet pod evicted in the
	// scale-down comes back under its name with a new UID, and counts as a new pod.
	podUID     map[string]types.UID
	claimSeen  map[string]time.Time // by NodeClaim name
	claimNode  map[string]string    // NodeClaim name → status.nodeName
	nodeReady  map[string]time.Time
	nodeGone   map[string]time.Time
	nodeAdded  map[string]time.Time
	lastChange time.Time // the last Node or NodeClaim add or delete
	// The node timeline (issue 28: why pods bind long after their node is Ready): when each
	// Node was first seen without the karpenter.sh/unregistered taint, without any NoSchedule or
	// NoExecute taint at all, and labelled karpenter.sh/initialized=true; when each pod was
	// first seen with status.nominatedNodeName.
	nodeRegistered map[string]time.Time
	nodeOpen       map[string]time.Time
	nodeInit       map[string]time.Time
	podNominated   map[string]time.Time
}

func newRecorder() *Recorder {
	return &Recorder{podSeen: map[string]time.Time{}, podBound: map[string]time.Time{}, podNode: map[string]string{},
		podDeleted: map[string]bool{}, podUID: map[string]types.UID{}, claimSeen: map[string]time.Time{}, claimNode: map[string]string{},
		nodeReady: map[string]time.Time{}, nodeGone: map[string]time.Time{}, nodeAdded: map[string]time.Time{},
		nodeRegistered: map[string]time.Time{}, nodeOpen: map[string]time.Time{}, nodeInit: map[string]time.Time{}, podNominated: map[string]time.Time{}}
}

// Start runs the informers until ctx ends and returns once their caches are synced.
func (r *Recorder) Start(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface) error {
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(Namespace))
	podInf := f.Core().V1().Pods().Informer()
	podFn := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		r.pod(p, time.Now())
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: podFn,
		UpdateFunc: func(_, n any) { podFn(n) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				r.mu.Lock()
				if r.podUID[p.Name] == p.UID {
					r.podDeleted[p.Name] = true
				}
				r.mu.Unlock()
			}
		}}); err != nil {
		return err
	}
	nf := informers.NewSharedInformerFactory(kc, 0)
	nodeInf := nf.Core().V1().Nodes().Informer()
	nodeFn := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			r.node(n, time.Now())
		}
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: nodeFn, UpdateFunc: func(_, n any) { nodeFn(n) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				now := time.Now()
				r.mu.Lock()
				r.nodeGone[n.Name], r.lastChange = now, now
				r.mu.Unlock()
			}
		}}); err != nil {
		return err
	}
	df := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	claimInf := df.ForResource(nodeClaimGVR).Informer()
	claimFn := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		now := time.Now()
		node, _, _ := unstructured.NestedString(u.Object, "status", "nodeName")
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, seen := r.claimSeen[u.GetName()]; !seen {
			r.claimSeen[u.GetName()], r.lastChange = now, now
		}
		if node != "" {
			r.claimNode[u.GetName()] = node
		}
	}
	if _, err := claimInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: claimFn, UpdateFunc: func(_, n any) { claimFn(n) },
		DeleteFunc: func(any) {
			r.mu.Lock()
			r.lastChange = time.Now()
			r.mu.Unlock()
		}}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	df.Start(ctx.Done())
	for _, inf := range []cache.SharedIndexInformer{podInf, nodeInf, claimInf} {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("informer caches did not sync: %w", ctx.Err())
		}
	}
	return nil
}

func (r *Recorder) pod(p *corev1.Pod, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, ok := r.podUID[p.Name]; ok && uid != p.UID {
		// The same name, a new pod (a StatefulSet's replacement): start its record afresh.
		delete(r.podSeen, p.Name)
		delete(r.podBound, p.Name)
		delete(r.podNode, p.Name)
		delete(r.podNominated, p.Name)
		delete(r.podDeleted, p.Name)
	}
	r.podUID[p.Name] = p.UID
	if _, ok := r.podSeen[p.Name]; !ok {
		r.podSeen[p.Name] = now
	}
	if p.Status.NominatedNodeName != "" {
		if _, ok := r.podNominated[p.Name]; !ok {
			r.podNominated[p.Name] = now
		}
	}
	if p.Spec.NodeName != "" {
		if _, ok := r.podBound[p.Name]; !ok {
			r.podBound[p.Name] = now
			r.podNode[p.Name] = p.Spec.NodeName
		}
	}
	if p.DeletionTimestamp != nil {
		r.podDeleted[p.Name] = true
	}
}

func (r *Recorder) node(n *corev1.Node, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.nodeAdded[n.Name]; !ok {
		r.nodeAdded[n.Name], r.lastChange = now, now
	}
	firstAt(r.nodeInit, n.Name, now, n.Labels["karpenter.sh/initialized"] == "true")
	unregistered, blocking := false, false
	for _, t := range n.Spec.Taints {
		unregistered = unregistered || t.Key == "karpenter.sh/unregistered"
		blocking = blocking || t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	firstAt(r.nodeRegistered, n.Name, now, !unregistered)
	firstAt(r.nodeOpen, n.Name, now, !blocking)
	if _, ok := r.nodeReady[n.Name]; ok {
		return
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			r.nodeReady[n.Name] = now
		}
	}
}

// firstAt records now under key in m when cond holds and nothing is recorded yet.
func firstAt(m map[string]time.Time, key string, now time.Time, cond bool) {
	if _, ok := m[key]; !ok && cond {
		m[key] = now
	}
}

// Progress is how many live pods the recorder has seen and how many of them are bound.
func (r *Recorder) Progress() (seen, bound int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range r.podSeen {
		if r.podDeleted[name] {
			continue
		}
		seen++
		if _, ok := r.podBound[name]; ok {
			bound++
		}
	}
	return seen, bound
}

// LastChange is when a Node or NodeClaim was last added or deleted.
func (r *Recorder) LastChange() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastChange
}

// NodeChanges counts Nodes added and deleted after t.
func (r *Recorder) NodeChanges(t time.Time) (added, deleted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.nodeAdded {
		if a.After(t) {
			added++
		}
	}
	for _, d := range r.nodeGone {
		if d.After(t) {
			deleted++
		}
	}
	return added, deleted
}

// Latencies are, per bound pod seen at or after since, creation → its node's NodeClaim
// created, → its node Ready, → bound. A pod created after its node's NodeClaim or Ready
// (it landed on capacity already there) counts 0 for that step; a node without a NodeClaim
// (not launched by the provisioner) has no claim or ready step for its pods. lastBound is the
// latest bind among them.
func (r *Recorder) Latencies(since time.Time) (toClaim, toReady, toBound []time.Duration, lastBound time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	claimOfNode := map[string]string{}
	for c, n := range r.claimNode {
		claimOfNode[n] = c
	}
	for name, seen := range r.podSeen {
		bound, ok := r.podBound[name]
		if !ok || seen.Before(since) {
			continue
		}
		toBound = append(toBound, bound.Sub(seen))
		if bound.After(lastBound) {
			lastBound = bound
		}
		node := r.podNode[name]
		if c, ok := claimOfNode[node]; ok {
			toClaim = append(toClaim, max(r.claimSeen[c].Sub(seen), 0))
		}
		if ready, ok := r.nodeReady[node]; ok {
			toReady = append(toReady, max(ready.Sub(seen), 0))
		}
	}
	return toClaim, toReady, toBound, lastBound
}

// APIRequests scrapes the API server's /metrics and sums apiserver_request_total by
// "VERB resource" (subresource appended as resource/subresource).
func APIRequests(ctx context.Context, kc kubernetes.Interface) (map[string]float64, error) {
	raw, err := kc.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's /metrics: %w", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	out := map[string]float64{}
	fam := fams["apiserver_request_total"]
	if fam == nil {
		return nil, fmt.Errorf("the API server's /metrics has no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		res := labels["resource"]
		if labels["subresource"] != "" {
			res += "/" + labels["subresource"]
		}
		if res == "" {
			continue // non-resource URLs (/healthz, /metrics)
		}
		out[labels["verb"]+" "+res] += m.GetCounter().GetValue()
	}
	return out, nil
}

// DiffRequests is DiffCounts of two APIRequests scrapes, and the sums of reads (GET, LIST,
// WATCH) and writes (every other verb).
func DiffRequests(before, after map[string]float64) (delta map[string]float64, reads, writes float64) {
	delta = DiffCounts(before, after)
	for k, d := range delta {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "GET", "LIST", "WATCH", "WATCHLIST":
			reads += d
		default:
			writes += d
		}
	}
	return delta, reads, writes
}

// DiffCounts is after − before per key of two scrapes of counters (keys absent before count
// from 0), dropping zeros.
func DiffCounts(before, after map[string]float64) map[string]float64 {
	delta := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			delta[k] = d
		}
	}
	return delta
}

// PeakRSS is VmHWM of process pid (bytes): the kernel's peak resident set size
// (proc(5), /proc/pid/status).
func PeakRSS(pid int) (uint64, error) {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmHWM(f)
}

func parseVmHWM(f io.Reader) (uint64, error) {
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("VmHWM: %q is not \"<n> kB\"", strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmHWM: %w", err)
		}
		return kb * 1024, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmHWM line")
}

// registerWait bounds how long countNodes waits for joined Nodes to be registered.
const registerWait = time.Minute

// countNodes lists the Nodes and prices each from its labels (instance type, zone, capacity
// type) with price. A Node still tainted karpenter.sh/unregistered has only its kubelet's labels
// (no capacity type yet: registration syncs its NodeClaim's), so it waits, up to registerWait,
// for every joined Node to be registered: a launch still in progress when the last pod was
// bound (its pods bound elsewhere) is counted at its price, not refused.
func countNodes(ctx context.Context, kc kubernetes.Interface, price func(n *corev1.Node) (float64, error)) (nodes int, perHour float64, err error) {
	var list *corev1.NodeList
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, registerWait, true, func(ctx context.Context) (bool, error) {
		l, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		list = l
		for i := range l.Items {
			for _, t := range l.Items[i].Spec.Taints {
				if t.Key == "karpenter.sh/unregistered" && l.Items[i].DeletionTimestamp == nil {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if list == nil || (err != nil && (ctx.Err() != nil || !wait.Interrupted(err))) {
		return 0, 0, fmt.Errorf("listing the nodes to price them: %w", err)
	}
	for i := range list.Items {
		n := &list.Items[i]
		if n.DeletionTimestamp != nil {
			continue
		}
		p, err := price(n)
		if err != nil {
			return 0, 0, err
		}
		nodes++
		perHour += p
	}
	return nodes, perHour, nil
}

// Stage is one step of the node timeline, its distribution over nodes or pods.
type Stage struct {
	Name string
	Dist Dist
}

// NodeTimeline is one Node's steps, each since the Node was first seen (negative or missing
// steps are left out: -1).
type NodeTimeline struct {
	Node                                 string
	Claim                                time.Duration // its NodeClaim's creation, since the first workload's creation (-1: none)
	Added                                time.Duration // since the first workload's creation
	Ready, Registered, Open, Initialized time.Duration
	FirstBound, LastBound                time.Duration
	Pods                                 int
}

// Timeline is, for every Node added after since, when it became Ready, lost the
// karpenter.sh/unregistered taint, lost its last NoSchedule/NoExecute taint, was labelled
// initialized, and got its first and last pod bound; and the stage distributions over those
// nodes (node steps) and over the pods bound to them that were seen before their node was
// Ready (pod steps: node Ready → bound, nominated → bound).
func (r *Recorder) Timeline(since time.Time) ([]NodeTimeline, []Stage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first, last, count := map[string]time.Time{}, map[string]time.Time{}, map[string]int{}
	var readyToBound, nominatedToBound []time.Duration
	for name, bound := range r.podBound {
		node := r.podNode[name]
		if f, ok := first[node]; !ok || bound.Before(f) {
			first[node] = bound
		}
		if bound.After(last[node]) {
			last[node] = bound
		}
		count[node]++
		ready, ok := r.nodeReady[node]
		if seen := r.podSeen[name]; ok && seen.Before(ready) && !seen.Before(since) {
			readyToBound = append(readyToBound, bound.Sub(ready))
			if nom, ok := r.podNominated[name]; ok {
				nominatedToBound = append(nominatedToBound, bound.Sub(nom))
			}
		}
	}
	step := func(m map[string]time.Time, node string, from time.Time) time.Duration {
		t, ok := m[node]
		if !ok {
			return -1
		}
		return t.Sub(from)
	}
	claimOfNode := map[string]string{}
	for c, n := range r.claimNode {
		claimOfNode[n] = c
	}
	var rows []NodeTimeline
	var toReady, readyToReg, readyToOpen, readyToInit, readyToFirst []time.Duration
	for node, added := range r.nodeAdded {
		if added.Before(since) {
			continue
		}
		row := NodeTimeline{Node: node, Claim: -1, Added: added.Sub(since), Ready: step(r.nodeReady, node, added),
			Registered: step(r.nodeRegistered, node, added), Open: step(r.nodeOpen, node, added),
			Initialized: step(r.nodeInit, node, added), FirstBound: step(first, node, added), LastBound: step(last, node, added), Pods: count[node]}
		if c, ok := claimOfNode[node]; ok {
			row.Claim = r.claimSeen[c].Sub(since)
		}
		rows = append(rows, row)
		if row.Ready < 0 {
			continue
		}
		toReady = append(toReady, row.Ready)
		for _, s := range []struct {
			at  time.Duration
			out *[]time.Duration
		}{{row.Registered, &readyToReg}, {row.Open, &readyToOpen}, {row.Initialized, &readyToInit}, {row.FirstBound, &readyToFirst}} {
			if s.at >= 0 {
				*s.out = append(*s.out, s.at-row.Ready)
			}
		}
	}
	slices.SortFunc(rows, func(a, b NodeTimeline) int { return cmp.Compare(a.Added, b.Added) })
	return rows, []Stage{
		{"node created → Ready", DistOf(toReady)},
		{"node Ready → unregistered taint gone", DistOf(readyToReg)},
		{"node Ready → no NoSchedule/NoExecute taint", DistOf(readyToOpen)},
		{"node Ready → initialized label", DistOf(readyToInit)},
		{"node Ready → its first pod bound", DistOf(readyToFirst)},
		{"pod: its node Ready → bound", DistOf(readyToBound)},
		{"pod: nominated → bound", DistOf(nominatedToBound)},
	}
}

// String is the row as "node claim +c, node +added: ready r, registered g, open o, initialized i, bound
// first–last (pods)", seconds since the node was added.
func (t NodeTimeline) String() string {
	s := func(d time.Duration) string {
		if d < 0 {
			return "—"
		}
		return secs(d)
	}
	return fmt.Sprintf("%s claim +%s, node +%s: ready %s, registered %s, open %s, initialized %s, bound %s–%s (%d pods)", t.Node, s(t.Claim), secs(t.Added),
		s(t.Ready), s(t.Registered), s(t.Open), s(t.Initialized), s(t.FirstBound), s(t.LastBound), t.Pods)
}
