package preview

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Node-group labels of the managed node groups and scale sets Cluster Autoscaler scales, and
// the capacity-type labels they carry (EKS: "Managed node groups", eks.amazonaws.com/capacityType
// ON_DEMAND, SPOT or CAPACITY_BLOCK; eksctl: alpha.eksctl.io/nodegroup-name; AKS: agent pools,
// kubernetes.azure.com/scalesetpriority spot on Spot pools).
const (
	LabelEKSNodeGroup    = "eks.amazonaws.com/nodegroup"
	LabelEKSCapacityType = "eks.amazonaws.com/capacityType"
	LabelEksctlNodeGroup = "alpha.eksctl.io/nodegroup-name"
	LabelAKSAgentPool    = apisv1.AKSLabelDomain + "/agentpool"
)

// Owner kinds of a node (NodeCost.OwnerKind).
const (
	OwnerNodePool  = "NodePool"  // karpenter.sh/nodepool: Dovetail's (or Karpenter's)
	OwnerNodeGroup = "NodeGroup" // a managed node group, eksctl node group or AKS agent pool
	OwnerNone      = ""          // a node no label assigns (a self-managed ASG, a static node)
)

// NodeOffering returns the offering a node runs on: its instance type and zone labels (else its
// NodeClaim's), and its capacity type from karpenter.sh/capacity-type (else the NodeClaim's),
// eks.amazonaws.com/capacityType (SPOT is spot, CAPACITY_BLOCK reserved, anything else
// on-demand) or kubernetes.azure.com/scalesetpriority (spot); a node none of them names is
// on-demand.
func NodeOffering(n *corev1.Node, nc *apisv1.NodeClaim) events.OfferingKey {
	get := func(k string) string {
		if v := n.Labels[k]; v != "" {
			return v
		}
		if nc != nil {
			return nc.Labels[k]
		}
		return ""
	}
	key := events.OfferingKey{InstanceType: get(corev1.LabelInstanceTypeStable), Zone: get(corev1.LabelTopologyZone),
		CapacityType: get(apisv1.LabelCapacityType)}
	if key.CapacityType != "" {
		return key
	}
	switch {
	case n.Labels[LabelEKSCapacityType] == "SPOT":
		key.CapacityType = apisv1.CapacityTypeSpot
	case n.Labels[LabelEKSCapacityType] == "CAPACITY_BLOCK":
		key.CapacityType = apisv1.CapacityTypeReserved
	case n.Labels[apisv1.AKSLabelScaleSetPriority] == apisv1.ScaleSetPrioritySpot:
		key.CapacityType = apisv1.CapacityTypeSpot
	default:
		key.CapacityType = apisv1.CapacityTypeOnDemand
	}
	return key
}

// NodeOwner returns who scales the node: its NodePool (karpenter.sh/nodepool), else its node
// group (EKS managed node group, eksctl node group, AKS agent pool), else OwnerNone.
func NodeOwner(n *corev1.Node) (kind, name string) {
	if p := n.Labels[apisv1.LabelNodePool]; p != "" {
		return OwnerNodePool, p
	}
	for _, k := range []string{LabelEKSNodeGroup, LabelEksctlNodeGroup, LabelAKSAgentPool, apisv1.AKSLabelLegacyAgentPool} {
		if g := n.Labels[k]; g != "" {
			return OwnerNodeGroup, g
		}
	}
	return OwnerNone, ""
}

// OfferingPrice is the catalog's price of an offering (USD per hour) and its source. An
// offering the catalog does not list in that zone is priced at the type's cheapest offering of
// the same capacity type in another zone (a zone the embedded data lacks), the source then
// ending in "-other-zone"; ok is false when the type or the capacity type is unknown.
func OfferingPrice(cat *catalog.Catalog, key events.OfferingKey) (price float64, source string, ok bool) {
	it := cat.Get(key.InstanceType)
	if it == nil {
		return 0, "", false
	}
	var other *catalog.Offering
	for i := range it.Offerings {
		o := &it.Offerings[i]
		if o.CapacityType != key.CapacityType {
			continue
		}
		if o.Zone == key.Zone {
			return o.PricePerHour, string(o.PriceSource), true
		}
		if other == nil || o.PricePerHour < other.PricePerHour {
			other = o
		}
	}
	if other == nil {
		return 0, "", false
	}
	return other.PricePerHour, string(other.PriceSource) + "-other-zone", true
}

// Cost is what a set of nodes costs: the sum of the priced nodes (USD per hour), whether any of
// it is an estimate (a modelled spot price), each node, and the nodes no price was found for.
type Cost struct {
	PricePerHour float64    `json:"pricePerHour"`
	Estimated    bool       `json:"estimated"`
	Nodes        []NodeCost `json:"nodes"`
	// Groups sums the nodes by owner (NodePool, node group, or none).
	Groups []GroupCost `json:"groups"`
}

// NodeCost is one node's offering and price.
type NodeCost struct {
	Name         string `json:"name"`
	OwnerKind    string `json:"ownerKind"`
	Owner        string `json:"owner"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// PricePerHour is USD per hour; Priced is false when the catalog has no price for the
	// offering (the node is left out of the sums and listed).
	PricePerHour float64 `json:"pricePerHour"`
	PriceSource  string  `json:"priceSource"`
	Priced       bool    `json:"priced"`
	// Pods counts the pods that run on the node and are not DaemonSet or mirror pods.
	Pods int `json:"pods"`
}

// GroupCost sums one owner's nodes.
type GroupCost struct {
	OwnerKind    string  `json:"ownerKind"`
	Owner        string  `json:"owner"`
	Nodes        int     `json:"nodes"`
	PricePerHour float64 `json:"pricePerHour"`
	Estimated    bool    `json:"estimated"`
}

// SnapshotCost prices every node of the snapshot from the catalog.
func SnapshotCost(snap *events.Snapshot, cat *catalog.Catalog) Cost {
	claims := map[string]*apisv1.NodeClaim{}
	for i := range snap.NodeClaims {
		if nc := &snap.NodeClaims[i]; nc.Status.NodeName != "" {
			claims[nc.Status.NodeName] = nc
		}
	}
	pods := map[string]int{}
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if !scheduling.IsDaemonSetPod(p) && p.Annotations[corev1.MirrorPodAnnotationKey] == "" && !scheduling.IsTerminal(p) {
			pods[p.Spec.NodeName]++
		}
	}
	var c Cost
	groups := map[string]*GroupCost{}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		key := NodeOffering(n, claims[n.Name])
		nc := NodeCost{Name: n.Name, InstanceType: key.InstanceType, Zone: key.Zone, CapacityType: key.CapacityType, Pods: pods[n.Name]}
		nc.OwnerKind, nc.Owner = NodeOwner(n)
		nc.PricePerHour, nc.PriceSource, nc.Priced = OfferingPrice(cat, key)
		c.Nodes = append(c.Nodes, nc)
		g := groups[nc.OwnerKind+"/"+nc.Owner]
		if g == nil {
			g = &GroupCost{OwnerKind: nc.OwnerKind, Owner: nc.Owner}
			groups[nc.OwnerKind+"/"+nc.Owner] = g
		}
		g.Nodes++
		if nc.Priced {
			est := strings.HasPrefix(nc.PriceSource, string(catalog.PriceSourceSpotModel))
			c.PricePerHour += nc.PricePerHour
			g.PricePerHour += nc.PricePerHour
			c.Estimated = c.Estimated || est
			g.Estimated = g.Estimated || est
		}
	}
	sort.Slice(c.Nodes, func(i, j int) bool { return c.Nodes[i].Name < c.Nodes[j].Name })
	for _, g := range groups {
		c.Groups = append(c.Groups, *g)
	}
	sort.Slice(c.Groups, func(i, j int) bool {
		a, b := c.Groups[i], c.Groups[j]
		if a.OwnerKind != b.OwnerKind {
			return a.OwnerKind > b.OwnerKind // NodePool, NodeGroup, then nodes of no group
		}
		return a.Owner < b.Owner
	})
	return c
}
