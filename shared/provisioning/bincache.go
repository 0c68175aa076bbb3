package provisioning

import (
	"maps"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// BinCache keeps the bin buildBins made for each existing node, across the solver runs of one
// caller over a cluster that changes little between them: the preview evacuates every drifted
// node of a round with a solver run over the whole cluster (hundreds of runs over 5,000 nodes
// and 95,000 pods at 100,000 objects), a few dozen pods moved between two runs. A node's bin
// is reused only when everything buildBins read to make it is still what it was (checked on
// every run, see binStamp), so a plan is the one a run without the cache makes.
//
// The checks compare storage identity, not content, for what the callers replace rather than
// change in place: a node's labels and allocatable maps, a NodeClaim's labels, and a pod's
// containers, volumes and owner references; pods are the same objects (pointers) in the same
// order. Taints and the other node fields are compared by value. The zero BinCache is not
// usable (NewBinCache); nil means no cache. Not safe for concurrent use.
type BinCache struct {
	ctx   binContext
	nodes map[string]*cachedBin
	uses  map[string]*cachedUse // usedByPool's per-node terms
	// run numbers the solver runs; an entry not used by the latest run that could use it is
	// dropped after that run (sweep), so the cache never holds on to nodes and pods the caller
	// has let go (the preview's pod slice, reallocated as pods are bound, would otherwise be
	// kept once per generation).
	run int
	// Hits and Misses count the existing nodes' bins reused and made (for benchmarks).
	Hits, Misses int
}

// NewBinCache returns an empty cache.
func NewBinCache() *BinCache {
	return &BinCache{nodes: map[string]*cachedBin{}, uses: map[string]*cachedUse{}}
}

// binContext is what every bin depends on besides its node and pods: the catalog (attach
// limits), the request memo, and the DaemonSets and LimitRanges (their pods still to arrive).
type binContext struct {
	catalog     *catalog.Catalog
	memo        *scheduling.RequestMemo
	daemonSets  []*appsv1.DaemonSet
	limitRanges []*corev1.LimitRange
}

func (c binContext) equal(o binContext) bool {
	return c.catalog == o.catalog && c.memo == o.memo && slices.Equal(c.daemonSets, o.daemonSets) &&
		slices.Equal(c.limitRanges, o.limitRanges)
}

// binStamp is what buildBins reads of a node, its NodeClaim and its resident pods.
type binStamp struct {
	node          *corev1.Node
	unschedulable bool
	deleting      bool
	taints        []corev1.Taint // a copy
	labels        uintptr        // the labels map's identity
	nLabels       int
	alloc         uintptr // status.allocatable's identity
	nAlloc        int
	providerID    string
	claim         *apisv1.NodeClaim
	startup       []corev1.Taint // a copy of the claim's startup taints
	claimLabels   uintptr
	nClaimLabels  int
	pods          []podStamp
}

// podStamp identifies a resident pod and the storage of the spec fields buildBins reads.
type podStamp struct {
	pod        *corev1.Pod
	namespace  string
	containers *corev1.Container
	inits      *corev1.Container
	nContainers, nInits,
	nVolumes, nOwners int
	volumes  *corev1.Volume
	owners   uintptr
	overhead uintptr
}

type cachedBin struct {
	stamp binStamp
	bin   bin // as built, before any placement
	run   int // the last run that used or made it
}

func mapID[M ~map[K]V, K comparable, V any](m M) uintptr {
	return uintptr(reflect.ValueOf(m).UnsafePointer())
}

func sliceID[T any](s []T) uintptr { return uintptr(reflect.ValueOf(s).Pointer()) }

func first[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// stampOf records what a bin of n, with NodeClaim nc and resident pods, is made from.
func stampOf(n *corev1.Node, nc *apisv1.NodeClaim, pods []*corev1.Pod) binStamp {
	s := binStamp{node: n, unschedulable: n.Spec.Unschedulable, deleting: n.DeletionTimestamp != nil,
		taints: slices.Clone(n.Spec.Taints), labels: mapID(n.Labels), nLabels: len(n.Labels),
		alloc: mapID(n.Status.Allocatable), nAlloc: len(n.Status.Allocatable), providerID: n.Spec.ProviderID, claim: nc,
		pods: make([]podStamp, len(pods))}
	if nc != nil {
		s.startup = slices.Clone(nc.Spec.StartupTaints)
		s.claimLabels, s.nClaimLabels = mapID(nc.Labels), len(nc.Labels)
	}
	for i, p := range pods {
		s.pods[i] = podStamp{pod: p, namespace: p.Namespace, containers: first(p.Spec.Containers), inits: first(p.Spec.InitContainers),
			nContainers: len(p.Spec.Containers), nInits: len(p.Spec.InitContainers), nVolumes: len(p.Spec.Volumes),
			volumes: first(p.Spec.Volumes), owners: sliceID(p.OwnerReferences), nOwners: len(p.OwnerReferences),
			overhead: mapID(p.Spec.Overhead)}
	}
	return s
}

// matches reports whether the node, claim and pods are still those s was made from.
func (s *binStamp) matches(n *corev1.Node, nc *apisv1.NodeClaim, pods []*corev1.Pod) bool {
	if s.node != n || s.unschedulable != n.Spec.Unschedulable || s.deleting != (n.DeletionTimestamp != nil) ||
		!slices.Equal(s.taints, n.Spec.Taints) || s.labels != mapID(n.Labels) || s.nLabels != len(n.Labels) ||
		s.alloc != mapID(n.Status.Allocatable) || s.nAlloc != len(n.Status.Allocatable) || s.providerID != n.Spec.ProviderID ||
		s.claim != nc || len(s.pods) != len(pods) {
		return false
	}
	if nc != nil && (!slices.Equal(s.startup, nc.Spec.StartupTaints) || s.claimLabels != mapID(nc.Labels) || s.nClaimLabels != len(nc.Labels)) {
		return false
	}
	for i, p := range pods {
		ps := &s.pods[i]
		if ps.pod != p || ps.namespace != p.Namespace || ps.containers != first(p.Spec.Containers) || ps.inits != first(p.Spec.InitContainers) ||
			ps.nContainers != len(p.Spec.Containers) || ps.nInits != len(p.Spec.InitContainers) || ps.nVolumes != len(p.Spec.Volumes) ||
			ps.volumes != first(p.Spec.Volumes) || ps.owners != sliceID(p.OwnerReferences) || ps.nOwners != len(p.OwnerReferences) ||
			ps.overhead != mapID(p.Spec.Overhead) {
			return false
		}
	}
	return true
}

// useStamp is what nodeUse reads of a node (the catalog is the context's).
type useStamp struct {
	node             *corev1.Node
	labels, capacity uintptr
	alloc            uintptr
	nLabels, nCap    int
	nAlloc           int
}

func useStampOf(n *corev1.Node) useStamp {
	return useStamp{node: n, labels: mapID(n.Labels), capacity: mapID(n.Status.Capacity), alloc: mapID(n.Status.Allocatable),
		nLabels: len(n.Labels), nCap: len(n.Status.Capacity), nAlloc: len(n.Status.Allocatable)}
}

type cachedUse struct {
	stamp useStamp
	use   scheduling.Resources
	run   int
}

// nodeUse is nodeUse(in, n), from the cache when n's stamp still matches; a nil c computes.
func (c *BinCache) nodeUse(in *Input, n *corev1.Node) scheduling.Resources {
	if c == nil {
		return nodeUse(in, n)
	}
	s := useStampOf(n)
	if e := c.uses[n.Name]; e != nil && e.stamp == s {
		e.run = c.run
		return e.use
	}
	u := nodeUse(in, n)
	c.uses[n.Name] = &cachedUse{stamp: s, use: u, run: c.run}
	return u
}

// begin drops every bin when the context changed since the last run.
func (c *BinCache) begin(in *Input) {
	ctx := binContext{catalog: in.Catalog, memo: in.Requests, daemonSets: in.DaemonSets, limitRanges: in.LimitRanges}
	if !c.ctx.equal(ctx) {
		clear(c.nodes)
		clear(c.uses)
		c.ctx = binContext{catalog: in.Catalog, memo: in.Requests, daemonSets: slices.Clone(in.DaemonSets),
			limitRanges: slices.Clone(in.LimitRanges)}
	}
}

// get returns a copy of the node's cached bin when its stamp still matches (nil otherwise).
func (c *BinCache) get(n *corev1.Node, nc *apisv1.NodeClaim, pods []*corev1.Pod) *bin {
	e := c.nodes[n.Name]
	if e == nil || !e.stamp.matches(n, nc, pods) {
		c.Misses++
		return nil
	}
	c.Hits++
	e.run = c.run
	return e.bin.clone()
}

// put caches b, just built for n (before any placement).
func (c *BinCache) put(n *corev1.Node, nc *apisv1.NodeClaim, pods []*corev1.Pod, b *bin) {
	c.nodes[n.Name] = &cachedBin{stamp: stampOf(n, nc, pods), bin: *b.clone(), run: c.run}
}

// sweepBins drops the bins the current run neither used nor made (nodes gone, left out of
// the run, or no longer bins).
func (c *BinCache) sweepBins() {
	maps.DeleteFunc(c.nodes, func(_ string, e *cachedBin) bool { return e.run != c.run })
}

// sweepUses is sweepBins for usedByPool's terms.
func (c *BinCache) sweepUses() {
	maps.DeleteFunc(c.uses, func(_ string, e *cachedUse) bool { return e.run != c.run })
}

// clone copies b so that placements on the copy (free taken, pods and ports appended) leave b
// as it is; the slices are capped so an append copies them. Resources are never changed in
// place, so free is shared.
func (b *bin) clone() *bin {
	c := *b
	c.pods = nil
	c.ports = slices.Clip(b.ports)
	c.residents = slices.Clip(b.residents)
	return &c
}
