package provisioning

import (
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// ephemeralTaints are set by the kubelet, the cloud controller or Dovetail while a node boots
// and are removed once it is ready; pods are placed as if they were gone (Karpenter does the same).
var ephemeralTaints = map[string]bool{
	corev1.TaintNodeNotReady:                         true,
	corev1.TaintNodeUnreachable:                      true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	apisv1.TaintKeyUnregistered:                      true,
	apisv1.TaintKeyPlanned:                           true,
}

// buildBins turns schedulable existing nodes and in-flight NodeClaims into bins with their free
// capacity: allocatable − requests of bound pods − DaemonSet pods that will still arrive.
// Nodes come first (name order), then in-flight NodeClaims (name order).
func buildBins(in *Input, daemons []daemon) []*bin {
	podsByNode := map[string][]*corev1.Pod{}
	for _, p := range in.BoundPods {
		if p.Spec.NodeName != "" && !scheduling.IsTerminal(p) {
			podsByNode[p.Spec.NodeName] = append(podsByNode[p.Spec.NodeName], p)
		}
	}
	claimsByNode := map[string]*apisv1.NodeClaim{}
	byProviderID := map[string]bool{}
	nodeNames := map[string]bool{}
	for _, n := range in.Nodes {
		nodeNames[n.Name] = true
		if n.Spec.ProviderID != "" {
			byProviderID[n.Spec.ProviderID] = true
		}
	}
	claimByProvider := map[string]*apisv1.NodeClaim{}
	for _, nc := range in.NodeClaims {
		if nc.Status.NodeName != "" {
			claimsByNode[nc.Status.NodeName] = nc
		}
		if nc.Status.ProviderID != "" {
			claimByProvider[nc.Status.ProviderID] = nc
		}
	}
	var bins []*bin
	if in.Bins != nil {
		in.Bins.begin(in)
		in.Bins.run++
		defer in.Bins.sweepBins()
	}
	for _, n := range sortedNodes(in.Nodes) {
		if n.Spec.Unschedulable || n.DeletionTimestamp != nil || hasTaint(n.Spec.Taints, apisv1.TaintKeyDisrupted) {
			continue
		}
		var startup []corev1.Taint
		labels := n.Labels
		nc := claimsByNode[n.Name]
		if nc == nil && n.Spec.ProviderID != "" {
			nc = claimByProvider[n.Spec.ProviderID]
		}
		if in.Bins != nil {
			if b := in.Bins.get(n, nc, podsByNode[n.Name]); b != nil {
				bins = append(bins, b)
				continue
			}
		}
		if nc != nil {
			startup = nc.Spec.StartupTaints
			// A node whose registration is not done yet lacks the NodeClaim's labels; it will
			// have them before any pod can land (karpenter.sh/unregistered keeps pods off).
			if hasTaint(n.Spec.Taints, apisv1.TaintKeyUnregistered) {
				labels = mergeLabels(n.Labels, nc.Labels)
			}
		}
		b := &bin{name: n.Name, labels: labels, taints: effectiveTaints(n.Spec.Taints, startup)}
		free := scheduling.FromList(n.Status.Allocatable)
		var present map[string]bool // the DaemonSets with a pod here, made on the first one
		if _, ok := n.Status.Allocatable[ResourceAttachableVolumes]; !ok {
			free = free.Add(scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourceAttachableVolumes: attachLimit(nodeTypeLabels(in, n.Labels))}})
		}
		// The residents' requests are summed first and taken from free once: free carries a
		// scalar (attachable volumes), so each Sub copied its map, once per bound pod and
		// compile, most of a large cluster's compile. The sum is the same in any order.
		var used scheduling.Resources
		for _, p := range podsByNode[n.Name] {
			used = used.Add(in.Requests.Requests(p))
			if v := attachedVolumes(p); v > 0 {
				used = used.Add(scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourceAttachableVolumes: v}})
			}
			b.ports = append(b.ports, scheduling.PodHostPorts(p)...)
			b.addResident(p)
			for _, o := range p.OwnerReferences {
				if o.Kind == "DaemonSet" {
					if present == nil {
						present = map[string]bool{}
					}
					present[p.Namespace+"/"+o.Name] = true
				}
			}
		}
		free = free.Sub(used)
		dl := daemonLabels(n.Labels)
		for i := range daemons {
			if !present[daemons[i].name] && daemons[i].runsOn(dl, b.taints, nil) {
				free = free.Sub(daemons[i].requests)
				b.ports = append(b.ports, daemons[i].ports...)
			}
		}
		b.free = free
		if in.Bins != nil {
			in.Bins.put(n, nc, podsByNode[n.Name], b)
		}
		bins = append(bins, b)
	}
	for _, nc := range sortedClaims(in.NodeClaims) {
		if nc.DeletionTimestamp != nil || nodeNames[nc.Status.NodeName] || (nc.Status.ProviderID != "" && byProviderID[nc.Status.ProviderID]) {
			continue
		}
		alloc := nc.Status.Allocatable
		if len(alloc) == 0 {
			if it := in.Catalog.Get(nc.Labels[corev1.LabelInstanceTypeStable]); it != nil {
				alloc = it.Allocatable()
			}
		}
		if len(alloc) == 0 {
			continue // nothing known about its size yet
		}
		b := &bin{name: nc.Name, inFlight: true, labels: nc.Labels, taints: nc.Spec.Taints}
		free := scheduling.FromList(alloc)
		if _, ok := alloc[ResourceAttachableVolumes]; !ok {
			free = free.Add(scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourceAttachableVolumes: attachLimit(nodeTypeLabels(in, nc.Labels))}})
		}
		// Pods bound to the NodeClaim's own name are capacity booked on it before its node
		// exists (a ProvisioningRequest's, shared/provreq Book): its room is theirs.
		for _, p := range podsByNode[nc.Name] {
			free = free.Sub(in.Requests.Requests(p))
			b.addResident(p)
		}
		// An in-flight NodeClaim's node will carry the lifecycle labels once it joins.
		dl := withLifecycleLabels(nc.Labels)
		for i := range daemons {
			if daemons[i].runsOn(dl, nc.Spec.Taints, nil) {
				free = free.Sub(daemons[i].requests)
				b.ports = append(b.ports, daemons[i].ports...)
			}
		}
		b.free = free
		bins = append(bins, b)
	}
	return bins
}

// usedByPool sums the capacity of each NodePool's nodes and in-flight NodeClaims (for limits),
// with one "nodes" each. Every Node labelled karpenter.sh/nodepool counts, with or without a
// NodeClaim object, as Karpenter's cluster state counts it; a Node that states no capacity (a
// manifest may give only allocatable) counts its instance type's catalog capacity, else its
// allocatable.
func usedByPool(in *Input) map[string]scheduling.Resources {
	used := map[string]scheduling.Resources{}
	counted := map[string]bool{}
	if in.Bins != nil {
		in.Bins.begin(in)
		defer in.Bins.sweepUses()
	}
	for _, n := range in.Nodes {
		pool := n.Labels[apisv1.LabelNodePool]
		if pool == "" {
			continue
		}
		used[pool] = used[pool].Add(in.Bins.nodeUse(in, n))
		counted[n.Name] = true
		if n.Spec.ProviderID != "" {
			counted[n.Spec.ProviderID] = true
		}
	}
	for _, nc := range in.NodeClaims {
		pool := nc.Labels[apisv1.LabelNodePool]
		if pool == "" || counted[nc.Status.NodeName] || (nc.Status.ProviderID != "" && counted[nc.Status.ProviderID]) {
			continue
		}
		capacity := nc.Status.Capacity
		if len(capacity) == 0 {
			if it := in.Catalog.Get(nc.Labels[corev1.LabelInstanceTypeStable]); it != nil {
				capacity = it.Capacity
			}
		}
		used[pool] = used[pool].Add(scheduling.FromList(capacity)).Add(oneNode).Add(priceUsed(in, nc.Labels))
	}
	return used
}

// nodeUse is what a Node counts against its NodePool's limits: its capacity (its instance
// type's in the catalog when it states none, else its allocatable), one node and its price.
func nodeUse(in *Input, n *corev1.Node) scheduling.Resources {
	capacity := n.Status.Capacity
	if len(capacity) == 0 {
		if it := in.Catalog.Get(n.Labels[corev1.LabelInstanceTypeStable]); it != nil {
			capacity = it.Capacity
		} else {
			capacity = n.Status.Allocatable
		}
	}
	return scheduling.FromList(capacity).Add(oneNode).Add(priceUsed(in, n.Labels))
}

// priceUsed is what a node or in-flight NodeClaim counts against a price guardrail
// (ResourcePricePerHour): its offering's price by its instance type, zone and capacity type
// labels; the dearest matching offering when a label is missing; nothing for a type the catalog
// does not know.
func priceUsed(in *Input, labels map[string]string) scheduling.Resources {
	price := in.Catalog.DearestPrice(labels[corev1.LabelInstanceTypeStable], labels[corev1.LabelTopologyZone], labels[apisv1.LabelCapacityType])
	return scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourcePricePerHour: microUSD(price)}}
}

func effectiveTaints(taints, startup []corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		if ephemeralTaints[t.Key] || containsTaint(startup, t) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func containsTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

func hasTaint(ts []corev1.Taint, key string) bool {
	for _, t := range ts {
		if t.Key == key {
			return true
		}
	}
	return false
}

func sortedNodes(ns []*corev1.Node) []*corev1.Node {
	out := append([]*corev1.Node(nil), ns...)
	sortBy(out, func(n *corev1.Node) string { return n.Name })
	return out
}

func sortedClaims(cs []*apisv1.NodeClaim) []*apisv1.NodeClaim {
	out := append([]*apisv1.NodeClaim(nil), cs...)
	sortBy(out, func(n *apisv1.NodeClaim) string { return n.Name })
	return out
}

// nodeTypeLabels returns the catalog labels of the node's instance type, or the node's labels.
// A Windows node keeps its kubelet's kubernetes.io/os and node.kubernetes.io/windows-build: the
// catalog's types are Linux ones (catalog.InstanceType.ForAMIFamily).
func nodeTypeLabels(in *Input, labels map[string]string) map[string]string {
	it := in.Catalog.Get(labels[corev1.LabelInstanceTypeStable])
	if it == nil {
		return labels
	}
	if labels[corev1.LabelOSStable] != string(corev1.Windows) {
		return it.Labels
	}
	out := make(map[string]string, len(it.Labels)+1)
	for k, v := range it.Labels {
		out[k] = v
	}
	out[corev1.LabelOSStable] = labels[corev1.LabelOSStable]
	if b, ok := labels[corev1.LabelWindowsBuild]; ok {
		out[corev1.LabelWindowsBuild] = b
	}
	return out
}

// attachedVolumes counts a pod's persistent (PVC and generic ephemeral) volumes.
func attachedVolumes(p *corev1.Pod) int64 {
	var n int64
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || (v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil) {
			n++
		}
	}
	return n
}

// bin is an existing node or in-flight NodeClaim with free capacity.
type bin struct {
	name     string
	inFlight bool
	labels   map[string]string
	taints   []corev1.Taint
	free     scheduling.Resources
	pods     []*corev1.Pod // placed by this plan
	// residents are the pods running on the node (seeded into the topology counts).
	residents []*corev1.Pod
	ports     []scheduling.HostPort
}

// domainOf is the bin's value for a topology key ("" when the node lacks the label).
func (b *bin) domainOf(key string) string { return b.labels[key] }

func (b *bin) addResident(p *corev1.Pod) { b.residents = append(b.residents, p) }
