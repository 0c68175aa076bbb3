// Package scenariotest runs the scenario suite of testdata/scenarios (format in that folder's
// README.md): each scenario is a set of Kubernetes manifests, solved along the path `dovetail
// plan` takes (shared/planner: manifests → Input → provisioning.Solve), and a list of checkable
// expectations worked out by hand. Check reports every failed expectation, so one run shows all
// that is wrong with a plan.
package scenariotest

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/planner"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// Scenario is one scenario file.
type Scenario struct {
	// Description says what the scenario exercises (required).
	Description string `json:"description"`
	// Comment explains how the expectations were worked out.
	Comment string `json:"comment,omitempty"`
	// Manifests is a multi-document YAML string of the manifests `dovetail plan` reads.
	Manifests string `json:"manifests,omitempty"`
	// ManifestFiles are files or directories of manifests, relative to the scenario file; read
	// after Manifests.
	ManifestFiles []string `json:"manifestFiles,omitempty"`
	Expect        Expect   `json:"expect"`

	// Name is the file name without .yaml; Path the file's path.
	Name string `json:"-"`
	Path string `json:"-"`
}

// Expect lists the assertions; every one given is checked. Pod names are "namespace/name" or
// "name" (namespace default) and may be path.Match globs ("default/web-*"); a pattern that
// matches no pod is itself a failure.
type Expect struct {
	Comment string `json:"comment,omitempty"`
	// Launches is the exact number of NodeClaims; LaunchesAtMost and LaunchesAtLeast bounds.
	Launches        *int `json:"launches,omitempty"`
	LaunchesAtMost  *int `json:"launchesAtMost,omitempty"`
	LaunchesAtLeast *int `json:"launchesAtLeast,omitempty"`
	// MinInstanceTypeOptions: every NodeClaim offers at least this many distinct instance types.
	MinInstanceTypeOptions *int `json:"minInstanceTypeOptions,omitempty"`
	// AllowedInstanceTypes: every offering of every NodeClaim has a type matching one of these
	// globs. ForbiddenInstanceTypes: no offering's type matches any.
	AllowedInstanceTypes   []string `json:"allowedInstanceTypes,omitempty"`
	ForbiddenInstanceTypes []string `json:"forbiddenInstanceTypes,omitempty"`
	// Labels are node selector requirements (In, NotIn, Exists, DoesNotExist, Gt, Lt) that the
	// node of every offering of every NodeClaim satisfies: its labels are the NodeClaim's labels,
	// the instance type's labels, and the offering's zone and capacity type.
	Labels []corev1.NodeSelectorRequirement `json:"labels,omitempty"`
	// PodsPerZone counts matching pods (placed by the plan and already running) per topology
	// domain.
	PodsPerZone []DomainCount `json:"podsPerZone,omitempty"`
	// PodsTogether: each group's pods share one node. PodsApart: each group's pods are on
	// pairwise different nodes. Running pods may be named (they are on their node).
	PodsTogether [][]string `json:"podsTogether,omitempty"`
	PodsApart    [][]string `json:"podsApart,omitempty"`
	// Unschedulable lists exactly the pods the plan leaves unschedulable, each with a substring
	// of its reason (case-insensitive). Omitted: every pending pod must be placed.
	Unschedulable []UnschedulableExpect `json:"unschedulable,omitempty"`
	// Scheduled pods must be placed (on a new NodeClaim or an existing node).
	Scheduled []string `json:"scheduled,omitempty"`
	// OnExistingNodes maps pod patterns to the existing node (or in-flight NodeClaim) that takes them.
	OnExistingNodes map[string]string `json:"onExistingNodes,omitempty"`
	// MaxPricePerHour bounds the plan's price (sum of each NodeClaim's cheapest offering, USD/h).
	MaxPricePerHour *float64 `json:"maxPricePerHour,omitempty"`
	// CapacityTypes counts NodeClaims by the capacity type of their first offering (what the
	// fleet gets first); exact: a capacity type not listed has none.
	CapacityTypes map[string]int `json:"capacityTypes,omitempty"`
	// Reservations counts NodeClaims by the capacity reservation of their first offering; exact:
	// a reservation not listed has none.
	Reservations map[string]int `json:"reservations,omitempty"`
}

// DomainCount is one pods-per-domain assertion.
type DomainCount struct {
	Comment string `json:"comment,omitempty"`
	// Selector picks the pods (nil: every pod); Namespace, if set, limits them to one namespace;
	// Pods, if set, limits them to these name patterns.
	Selector  *metav1.LabelSelector `json:"selector,omitempty"`
	Pods      []string              `json:"pods,omitempty"`
	Namespace string                `json:"namespace,omitempty"`
	// TopologyKey is the node label that names the domain (default topology.kubernetes.io/zone).
	// Every counted pod's node must have one value for it (a NodeClaim whose offerings span
	// several zones does not pin its pods' zone, and fails this check).
	TopologyKey string `json:"topologyKey,omitempty"`
	// Zones are exact counts per domain; domains not listed must have no matching pod.
	Zones map[string]int `json:"zones,omitempty"`
	// MaxSkew bounds max − min of the counts over Domains (default: the domains holding a pod).
	MaxSkew *int     `json:"maxSkew,omitempty"`
	Domains []string `json:"domains,omitempty"`
	// Total, if set, is the number of matching pods that must be counted.
	Total *int `json:"total,omitempty"`
}

// UnschedulableExpect is one pod pattern whose pods must be unschedulable, with part of the
// reason. With Count, exactly Count of the matched pods are unschedulable (the others placed):
// for replicas of which any may be the one left over.
type UnschedulableExpect struct {
	Pod            string `json:"pod"`
	ReasonContains string `json:"reasonContains,omitempty"`
	Count          *int   `json:"count,omitempty"`
}

// Load reads a scenario file strictly (unknown fields are errors) and checks it has a
// description and manifests.
func Load(file string) (*Scenario, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s Scenario
	if err := yaml.UnmarshalStrict(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	s.Path = file
	s.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if s.Description == "" {
		return nil, fmt.Errorf("%s: description: required", file)
	}
	if s.Manifests == "" && len(s.ManifestFiles) == 0 {
		return nil, fmt.Errorf("%s: manifests or manifestFiles: required", file)
	}
	for i, r := range s.Expect.Labels {
		if _, err := matchRequirement(r, nil); err != nil {
			return nil, fmt.Errorf("%s: expect.labels[%d]: %w", file, i, err)
		}
	}
	return &s, nil
}

// Set reads the scenario's manifests: the manifestFiles alone are read with manifests.Load (so
// errors name the file); with embedded manifests too, all are read as one stream.
func (s *Scenario) Set() (*manifests.Set, error) {
	paths := make([]string, len(s.ManifestFiles))
	for i, f := range s.ManifestFiles {
		paths[i] = filepath.Join(filepath.Dir(s.Path), f)
	}
	if s.Manifests == "" {
		return manifests.Load(paths...)
	}
	all := s.Manifests
	for _, p := range paths {
		b, err := readAll(p)
		if err != nil {
			return nil, err
		}
		all += "\n---\n" + b
	}
	return manifests.LoadReader(s.Path+" manifests", strings.NewReader(all))
}

// readAll concatenates a file, or every manifest file under a directory, as YAML documents.
func readAll(p string) (string, error) {
	var out []string
	err := filepath.WalkDir(p, func(name string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ext := strings.ToLower(filepath.Ext(name))
		if name != p && ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(name)
		out = append(out, string(b))
		return err
	})
	return strings.Join(out, "\n---\n"), err
}

// Run solves the scenario (planner.Plan over the catalog, with the cloud provider's node
// settings rule) and checks its expectations.
func (s *Scenario) Run(cat *catalog.Catalog, settings provisioning.NodeSettingsFunc) (*provisioning.Plan, []string, error) {
	set, err := s.Set()
	if err != nil {
		return nil, nil, err
	}
	plan, in, err := planner.Plan(set, cat, settings)
	if err != nil {
		return nil, nil, err
	}
	return plan, Check(s.Expect, in, plan), nil
}

// location is where a pod ends up: an existing node (or in-flight NodeClaim) or a new NodeClaim.
type location struct {
	node  string                      // existing node or in-flight NodeClaim name
	claim int                         // index into plan.NodeClaims, -1 when node is set
	nc    *provisioning.NodeClaimPlan // nil for existing nodes
	label func(key string) []string   // the node's possible values for a label key
	pod   *corev1.Pod
}

func (l location) String() string {
	if l.nc != nil {
		return fmt.Sprintf("new NodeClaim #%d", l.claim)
	}
	return "node " + l.node
}

// Check returns one message per failed expectation (nil when all hold). Besides the listed
// expectations it always checks the plan's invariants: every pending pod is placed once or is
// unschedulable, and every NodeClaim's pods (requests computed here independently: containers,
// init containers, sidecars, pod overhead) plus its DaemonSet overhead fit every offering.
func Check(e Expect, in provisioning.Input, plan *provisioning.Plan) []string {
	c := &checker{in: in, plan: plan, where: map[string]location{}}
	c.index()
	c.invariants()
	if e.Launches != nil && len(plan.NodeClaims) != *e.Launches {
		c.failf("launches: got %d NodeClaims, want %d%s", len(plan.NodeClaims), *e.Launches, c.summary())
	}
	if e.LaunchesAtMost != nil && len(plan.NodeClaims) > *e.LaunchesAtMost {
		c.failf("launchesAtMost: got %d NodeClaims, want at most %d%s", len(plan.NodeClaims), *e.LaunchesAtMost, c.summary())
	}
	if e.LaunchesAtLeast != nil && len(plan.NodeClaims) < *e.LaunchesAtLeast {
		c.failf("launchesAtLeast: got %d NodeClaims, want at least %d%s", len(plan.NodeClaims), *e.LaunchesAtLeast, c.summary())
	}
	if e.MinInstanceTypeOptions != nil {
		for i, nc := range plan.NodeClaims {
			if n := len(nc.InstanceTypeOptions()); n < *e.MinInstanceTypeOptions {
				c.failf("minInstanceTypeOptions: NodeClaim #%d offers %d instance types %v, want at least %d", i, n, nc.InstanceTypeOptions(), *e.MinInstanceTypeOptions)
			}
		}
	}
	c.instanceTypes(e.AllowedInstanceTypes, e.ForbiddenInstanceTypes)
	c.labels(e.Labels)
	for i, d := range e.PodsPerZone {
		c.domains(i, d)
	}
	for i, g := range e.PodsTogether {
		c.together(i, g)
	}
	for i, g := range e.PodsApart {
		c.apart(i, g)
	}
	c.unschedulable(e.Unschedulable)
	for _, p := range e.Scheduled {
		for _, k := range c.match("scheduled", p, true) {
			if _, ok := c.where[k]; !ok {
				c.failf("scheduled: pod %s is not placed%s", k, c.reasonOf(k))
			}
		}
	}
	for _, p := range sortedKeys(e.OnExistingNodes) {
		want := e.OnExistingNodes[p]
		for _, k := range c.match("onExistingNodes", p, true) {
			l, ok := c.where[k]
			switch {
			case !ok:
				c.failf("onExistingNodes: pod %s is not placed, want it on %s%s", k, want, c.reasonOf(k))
			case l.nc != nil || l.node != want:
				c.failf("onExistingNodes: pod %s is on %s, want node %s", k, l, want)
			}
		}
	}
	if e.CapacityTypes != nil {
		c.firstOfferings("capacityTypes", e.CapacityTypes, func(o provisioning.Offering) string { return o.CapacityType })
	}
	if e.Reservations != nil {
		c.firstOfferings("reservations", e.Reservations, func(o provisioning.Offering) string { return o.ReservationID })
	}
	// Always: no plan costs less than its own lower bound (else the bound is wrong).
	if got := plan.TotalPricePerHour(); got < plan.LowerBoundPerHour*(1-1e-9) {
		c.failf("lower bound: plan costs %.6f USD/h, below its lower bound %.6f", got, plan.LowerBoundPerHour)
	}
	if e.MaxPricePerHour != nil {
		if got := plan.TotalPricePerHour(); got > *e.MaxPricePerHour+1e-9 {
			c.failf("maxPricePerHour: plan costs %.6f USD/h, want at most %.6f%s", got, *e.MaxPricePerHour, c.summary())
		}
	}
	return c.fails
}

type checker struct {
	in      provisioning.Input
	plan    *provisioning.Plan
	where   map[string]location // placed (pending → plan) and running pods by key
	pending []string            // keys of pending pods, in input order
	running map[string]bool
	pods    map[string]*corev1.Pod
	fails   []string
}

func (c *checker) failf(format string, args ...any) {
	c.fails = append(c.fails, fmt.Sprintf(format, args...))
}

func key(p *corev1.Pod) string {
	ns := p.Namespace
	if ns == "" {
		ns = manifests.DefaultNamespace
	}
	return ns + "/" + p.Name
}

func (c *checker) index() {
	c.pods = map[string]*corev1.Pod{}
	c.running = map[string]bool{}
	for _, p := range c.in.Pods {
		c.pending = append(c.pending, key(p))
		c.pods[key(p)] = p
	}
	nodes := map[string]*corev1.Node{}
	for _, n := range c.in.Nodes {
		nodes[n.Name] = n
	}
	claims := map[string]*apisv1.NodeClaim{}
	for _, nc := range c.in.NodeClaims {
		claims[nc.Name] = nc
	}
	existing := func(name string, p *corev1.Pod) location {
		var lbls map[string]string
		if n := nodes[name]; n != nil {
			lbls = n.Labels
		} else if nc := claims[name]; nc != nil {
			lbls = nc.Labels
		}
		return location{node: name, claim: -1, pod: p, label: func(k string) []string {
			if k == corev1.LabelHostname {
				if v, ok := lbls[k]; ok {
					return []string{v}
				}
				return []string{name}
			}
			if v, ok := lbls[k]; ok {
				return []string{v}
			}
			return nil
		}}
	}
	for _, p := range c.in.BoundPods {
		c.running[key(p)] = true
		c.pods[key(p)] = p
		c.where[key(p)] = existing(p.Spec.NodeName, p)
	}
	for _, en := range c.plan.ExistingNodes {
		for _, p := range en.Pods {
			c.place(key(p), existing(en.Name, p))
		}
	}
	for i, nc := range c.plan.NodeClaims {
		nc := nc
		loc := location{claim: i, nc: nc, label: func(k string) []string {
			seen := map[string]bool{}
			var out []string
			for _, o := range nc.Offerings {
				for _, v := range offeringLabel(nc, o, k) {
					if !seen[v] {
						seen[v] = true
						out = append(out, v)
					}
				}
			}
			sort.Strings(out)
			return out
		}}
		for _, p := range nc.Pods {
			loc.pod = p
			c.place(key(p), loc)
		}
	}
}

func (c *checker) place(k string, l location) {
	if prev, dup := c.where[k]; dup {
		c.failf("invariant: pod %s is placed twice (%s and %s)", k, prev, l)
		return
	}
	c.where[k] = l
}

// offeringLabel is the value of label k on a node launched for the NodeClaim with offering o
// (nil when the node would not carry the label).
func offeringLabel(nc *provisioning.NodeClaimPlan, o provisioning.Offering, k string) []string {
	switch k {
	case corev1.LabelTopologyZone:
		return []string{o.Zone}
	case apisv1.LabelCapacityType:
		return []string{o.CapacityType}
	case corev1.LabelTopologyRegion:
		return []string{catalog.AWSRegion}
	}
	if v, ok := nc.Labels[k]; ok {
		return []string{v}
	}
	if v, ok := o.InstanceType.Labels[k]; ok {
		return []string{v}
	}
	return nil
}

func (c *checker) summary() string {
	var parts []string
	for i, nc := range c.plan.NodeClaims {
		if len(nc.Offerings) == 0 {
			parts = append(parts, fmt.Sprintf("#%d: no offerings, %d pods", i, len(nc.Pods)))
			continue
		}
		o := nc.Cheapest()
		parts = append(parts, fmt.Sprintf("#%d: %s %s %s %.6f$/h, %d pods", i, o.InstanceType.Name, o.CapacityType, o.Zone, o.PricePerHour, len(nc.Pods)))
	}
	for _, u := range c.plan.Unschedulable {
		parts = append(parts, fmt.Sprintf("unschedulable %s: %s", key(u.Pod), u.Reason))
	}
	if len(parts) == 0 {
		return " (plan is empty)"
	}
	return " (plan: " + strings.Join(parts, "; ") + ")"
}

func (c *checker) reasonOf(k string) string {
	for _, u := range c.plan.Unschedulable {
		if key(u.Pod) == k {
			return " (unschedulable: " + u.Reason + ")"
		}
	}
	return ""
}

// match expands a pod pattern over the pending pods (and running ones when withRunning).
func (c *checker) match(what, pattern string, withRunning bool) []string {
	if !strings.Contains(pattern, "/") {
		pattern = manifests.DefaultNamespace + "/" + pattern
	}
	var out []string
	for _, k := range sortedKeys(c.pods) {
		if !withRunning && c.running[k] {
			continue
		}
		if ok, err := path.Match(pattern, k); err != nil {
			c.failf("%s: bad pattern %q: %v", what, pattern, err)
			return nil
		} else if ok {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		c.failf("%s: pattern %q matches no pod", what, pattern)
	}
	return out
}

func (c *checker) invariants() {
	c.reservations()
	unsched := map[string]bool{}
	for _, u := range c.plan.Unschedulable {
		k := key(u.Pod)
		if unsched[k] {
			c.failf("invariant: pod %s is unschedulable twice", k)
		}
		unsched[k] = true
		if _, placed := c.where[k]; placed && !c.running[k] {
			c.failf("invariant: pod %s is both placed and unschedulable", k)
		}
	}
	for _, k := range c.pending {
		if _, placed := c.where[k]; !placed && !unsched[k] {
			c.failf("invariant: pending pod %s is neither placed nor unschedulable", k)
		}
	}
	for i, nc := range c.plan.NodeClaims {
		if len(nc.Offerings) == 0 {
			c.failf("invariant: NodeClaim #%d has no offerings", i)
			continue
		}
		var cpu, mem int64
		for _, p := range nc.Pods {
			pc, pm := podRequests(p)
			cpu += pc
			mem += pm
		}
		bad := map[string]bool{}
		for _, o := range nc.Offerings {
			if bad[o.InstanceType.Name] {
				continue
			}
			alloc := o.InstanceType.Allocatable()
			acpu, amem, apods := alloc.Cpu().MilliValue(), alloc.Memory().Value(), alloc.Pods().Value()
			if len(c.in.NodeClasses) > 0 && hasKubelet(c.in.NodeClasses) {
				continue // kubelet overrides change allocatable; the solver's own figure is not re-derived here
			}
			dc, dm, dp := o.DaemonOverhead.MilliCPU, o.DaemonOverhead.Memory, o.DaemonOverhead.Pods
			if cpu+dc > acpu || mem+dm > amem || int64(len(nc.Pods))+dp > apods {
				bad[o.InstanceType.Name] = true
				c.failf("invariant: NodeClaim #%d offers %s, but its %d pods need %dm cpu, %dMi memory (+ DaemonSets %dm, %dMi, %d pods) against allocatable %dm, %dMi, %d pods",
					i, o.InstanceType.Name, len(nc.Pods), cpu, mem>>20, dc, dm>>20, dp, acpu, amem>>20, apods)
			}
		}
	}
}

// firstOfferings compares the NodeClaims counted by a property of their first offering ("" is
// not counted) with want, exactly.
func (c *checker) firstOfferings(what string, want map[string]int, of func(provisioning.Offering) string) {
	got := map[string]int{}
	for _, nc := range c.plan.NodeClaims {
		if len(nc.Offerings) > 0 && of(nc.Offerings[0]) != "" {
			got[of(nc.Offerings[0])]++
		}
	}
	for _, k := range sortedKeys(union(got, want)) {
		if got[k] != want[k] {
			c.failf("%s: %d NodeClaims first offer %s, want %d%s", what, got[k], k, want[k], c.summary())
		}
	}
}

// reservations checks the reserved-capacity rules on every plan: a NodeClaim that may launch
// into a reservation offers only that one (one instance, one reservation), and no reservation
// takes more NodeClaims than it has free instances, nor, when its total is known, more than the
// total less the NodeClaims and Nodes of the input already in it (Karpenter's reservation
// manager, counted here from the input alone).
func (c *checker) reservations() {
	booked := map[string]int{}
	for i, nc := range c.plan.NodeClaims {
		ids := map[string]bool{}
		for _, o := range nc.Offerings {
			if o.ReservationID != "" {
				ids[o.ReservationID] = true
			}
		}
		if len(ids) > 0 && (len(ids) > 1 || len(nc.Offerings) > 1) {
			c.failf("invariant: NodeClaim #%d mixes a reservation with other offerings: %d offerings, reservations %v", i, len(nc.Offerings), sortedKeys(ids))
		}
		for id := range ids {
			booked[id]++
		}
	}
	ours := map[string]int{}
	for _, nc := range c.in.NodeClaims {
		ours[nc.Labels[apisv1.LabelCapacityReservationID]]++
	}
	for _, n := range c.in.Nodes {
		ours[n.Labels[apisv1.LabelCapacityReservationID]]++
	}
	for _, id := range sortedKeys(booked) {
		cnt := c.in.ReservationCounts[id]
		if booked[id] > cnt.Available || (cnt.Total > 0 && booked[id]+ours[id] > cnt.Total) {
			c.failf("invariant: reservation %s is booked by %d NodeClaims, with %d available, %d total and %d already in it", id, booked[id], cnt.Available, cnt.Total, ours[id])
		}
	}
}

func hasKubelet(ncs []apisv1.NodeClass) bool {
	for _, nc := range ncs {
		if nc.EC2 != nil && nc.EC2.Spec.Kubelet != nil {
			return true
		}
	}
	return false
}

// podRequests is the pod's effective cpu (millicores) and memory (bytes) request, as the
// Kubernetes docs define it ("Resource Management for Pods and Containers", "Init Containers:
// Resource sharing within containers", "Sidecar Containers", "Pod Overhead"): the larger of the
// app containers plus every sidecar (init container with restartPolicy Always) and, for each
// init container in order, its request plus the sidecars started before it (a sidecar: the
// sidecars up to and including it); plus the pod overhead. A container's missing request
// defaults to its limit (API server defaulting). Written independently of shared/scheduling so
// the check does not share a bug with the solver.
func podRequests(p *corev1.Pod) (int64, int64) {
	req := func(c *corev1.Container, name corev1.ResourceName) int64 {
		q, ok := c.Resources.Requests[name]
		if !ok {
			q, ok = c.Resources.Limits[name]
		}
		if !ok {
			return 0
		}
		if name == corev1.ResourceCPU {
			return q.MilliValue()
		}
		return q.Value()
	}
	one := func(name corev1.ResourceName) int64 {
		var apps, side, initMax int64
		for i := range p.Spec.Containers {
			apps += req(&p.Spec.Containers[i], name)
		}
		for i := range p.Spec.InitContainers {
			ic := &p.Spec.InitContainers[i]
			r := req(ic, name)
			if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				side += r
				initMax = max(initMax, side)
				continue
			}
			initMax = max(initMax, r+side)
		}
		total := max(apps+side, initMax)
		if q, ok := p.Spec.Overhead[name]; ok {
			if name == corev1.ResourceCPU {
				total += q.MilliValue()
			} else {
				total += q.Value()
			}
		}
		return total
	}
	return one(corev1.ResourceCPU), one(corev1.ResourceMemory)
}

func (c *checker) instanceTypes(allowed, forbidden []string) {
	if len(allowed) == 0 && len(forbidden) == 0 {
		return
	}
	for i, nc := range c.plan.NodeClaims {
		var notAllowed, isForbidden []string
		for _, name := range nc.InstanceTypeOptions() {
			if len(allowed) > 0 && !globAny(allowed, name) {
				notAllowed = append(notAllowed, name)
			}
			if globAny(forbidden, name) {
				isForbidden = append(isForbidden, name)
			}
		}
		if len(notAllowed) > 0 {
			c.failf("allowedInstanceTypes: NodeClaim #%d offers %s, not in %v", i, short(notAllowed), allowed)
		}
		if len(isForbidden) > 0 {
			c.failf("forbiddenInstanceTypes: NodeClaim #%d offers %s", i, short(isForbidden))
		}
	}
}

func globAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

func short(xs []string) string {
	if len(xs) > 8 {
		return fmt.Sprintf("%v and %d more", xs[:8], len(xs)-8)
	}
	return fmt.Sprint(xs)
}

func (c *checker) labels(reqs []corev1.NodeSelectorRequirement) {
	for i, nc := range c.plan.NodeClaims {
		for _, r := range reqs {
			var bad []string
			for _, o := range nc.Offerings {
				vals := offeringLabel(nc, o, r.Key)
				var lbls map[string]string
				if len(vals) > 0 {
					lbls = map[string]string{r.Key: vals[0]}
				}
				if ok, _ := matchRequirement(r, lbls); !ok {
					bad = append(bad, fmt.Sprintf("%s/%s/%s (%s=%q)", o.InstanceType.Name, o.Zone, o.CapacityType, r.Key, strings.Join(vals, ",")))
				}
			}
			if len(bad) > 0 {
				c.failf("labels: NodeClaim #%d has offerings that break %s %s %v: %s", i, r.Key, r.Operator, r.Values, short(bad))
			}
		}
	}
}

// matchRequirement applies one node selector requirement to a label set (Kubernetes API
// reference, NodeSelectorRequirement: Gt and Lt compare one integer value).
func matchRequirement(r corev1.NodeSelectorRequirement, lbls map[string]string) (bool, error) {
	v, has := lbls[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			return false, fmt.Errorf("%s %s: values: required", r.Key, r.Operator)
		}
		in := false
		for _, x := range r.Values {
			in = in || (has && x == v)
		}
		return in == (r.Operator == corev1.NodeSelectorOpIn), nil
	case corev1.NodeSelectorOpExists:
		return has, nil
	case corev1.NodeSelectorOpDoesNotExist:
		return !has, nil
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			return false, fmt.Errorf("%s %s: want exactly one integer value", r.Key, r.Operator)
		}
		want, err := strconv.ParseInt(r.Values[0], 10, 64)
		if err != nil {
			return false, fmt.Errorf("%s %s: %q is not an integer", r.Key, r.Operator, r.Values[0])
		}
		got, err := strconv.ParseInt(v, 10, 64)
		if !has || err != nil {
			return false, nil
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return got > want, nil
		}
		return got < want, nil
	}
	return false, fmt.Errorf("%s: operator %q is not In, NotIn, Exists, DoesNotExist, Gt or Lt", r.Key, r.Operator)
}

func (c *checker) domains(i int, d DomainCount) {
	what := fmt.Sprintf("podsPerZone[%d]", i)
	topo := d.TopologyKey
	if topo == "" {
		topo = corev1.LabelTopologyZone
	}
	sel := labels.Everything()
	if d.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(d.Selector)
		if err != nil {
			c.failf("%s: selector: %v", what, err)
			return
		}
		sel = s
	}
	var named map[string]bool
	if len(d.Pods) > 0 {
		named = map[string]bool{}
		for _, pat := range d.Pods {
			for _, k := range c.match(what, pat, true) {
				named[k] = true
			}
		}
	}
	counts := map[string]int{}
	total := 0
	for _, k := range sortedKeys(c.pods) {
		p := c.pods[k]
		if (d.Namespace != "" && p.Namespace != d.Namespace) || !sel.Matches(labels.Set(p.Labels)) || (named != nil && !named[k]) {
			continue
		}
		l, ok := c.where[k]
		if !ok {
			continue // unschedulable pods are in no domain (checked elsewhere)
		}
		vals := l.label(topo)
		switch len(vals) {
		case 1:
			counts[vals[0]]++
			total++
		case 0:
			c.failf("%s: pod %s on %s has no %s label", what, k, l, topo)
		default:
			c.failf("%s: pod %s on %s is not pinned to one %s: it may land in %v", what, k, l, topo, vals)
		}
	}
	if d.Total != nil && total != *d.Total {
		c.failf("%s: counted %d matching pods, want %d (counts %v)", what, total, *d.Total, counts)
	}
	if d.Zones != nil {
		for _, z := range sortedKeys(union(counts, d.Zones)) {
			if counts[z] != d.Zones[z] {
				c.failf("%s: %s %s has %d matching pods, want %d (counts %v)", what, topo, z, counts[z], d.Zones[z], counts)
			}
		}
	}
	if d.MaxSkew != nil {
		doms := d.Domains
		if len(doms) == 0 {
			doms = sortedKeys(counts)
		}
		if len(doms) == 0 {
			return
		}
		lo, hi := counts[doms[0]], counts[doms[0]]
		for _, z := range doms {
			lo, hi = min(lo, counts[z]), max(hi, counts[z])
		}
		if hi-lo > *d.MaxSkew {
			c.failf("%s: skew over %v is %d (counts %v), want at most %d", what, doms, hi-lo, counts, *d.MaxSkew)
		}
		for _, z := range sortedKeys(counts) {
			if !contains(doms, z) {
				c.failf("%s: %d matching pods in %s %s, outside the domains %v", what, counts[z], topo, z, doms)
			}
		}
	}
}

func union(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k := range a {
		out[k] = 0
	}
	for k := range b {
		out[k] = 0
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// nodeID names the node a placed pod is on, for together/apart.
func nodeID(l location) string {
	if l.nc != nil {
		return "#" + strconv.Itoa(l.claim)
	}
	return l.node
}

func (c *checker) group(what string, patterns []string) ([]string, map[string]location) {
	var keys []string
	locs := map[string]location{}
	for _, p := range patterns {
		for _, k := range c.match(what, p, true) {
			if _, dup := locs[k]; dup {
				continue
			}
			l, ok := c.where[k]
			if !ok {
				c.failf("%s: pod %s is not placed%s", what, k, c.reasonOf(k))
				continue
			}
			keys = append(keys, k)
			locs[k] = l
		}
	}
	return keys, locs
}

func (c *checker) together(i int, patterns []string) {
	what := fmt.Sprintf("podsTogether[%d]", i)
	keys, locs := c.group(what, patterns)
	for _, k := range keys[min(1, len(keys)):] {
		if nodeID(locs[k]) != nodeID(locs[keys[0]]) {
			c.failf("%s: pod %s is on %s but %s is on %s", what, k, locs[k], keys[0], locs[keys[0]])
		}
	}
}

func (c *checker) apart(i int, patterns []string) {
	what := fmt.Sprintf("podsApart[%d]", i)
	keys, locs := c.group(what, patterns)
	first := map[string]string{}
	for _, k := range keys {
		id := nodeID(locs[k])
		if other, dup := first[id]; dup {
			c.failf("%s: pods %s and %s share %s", what, other, k, locs[k])
			continue
		}
		first[id] = k
	}
}

func (c *checker) unschedulable(want []UnschedulableExpect) {
	reasons := map[string]string{}
	for _, x := range c.plan.Unschedulable {
		reasons[key(x.Pod)] = x.Reason
	}
	expected := map[string]bool{}
	for _, u := range want {
		n := 0
		keys := c.match("unschedulable", u.Pod, false)
		for _, k := range keys {
			expected[k] = true
			reason, found := reasons[k]
			switch {
			case !found && u.Count == nil:
				where := "nowhere"
				if l, ok := c.where[k]; ok {
					where = l.String()
				}
				c.failf("unschedulable: pod %s was placed (%s), want it unschedulable (%q)", k, where, u.ReasonContains)
			case !found:
			case !strings.Contains(strings.ToLower(reason), strings.ToLower(u.ReasonContains)):
				n++
				c.failf("unschedulable: pod %s's reason %q does not contain %q", k, reason, u.ReasonContains)
			default:
				n++
			}
		}
		if u.Count != nil && n != *u.Count && len(keys) > 0 {
			c.failf("unschedulable: %d of the pods %q are unschedulable, want %d%s", n, u.Pod, *u.Count, c.summary())
		}
	}
	for _, x := range c.plan.Unschedulable {
		if !expected[key(x.Pod)] {
			c.failf("unschedulable: pod %s is unexpectedly unschedulable: %s", key(x.Pod), x.Reason)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
