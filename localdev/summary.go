package localdev

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// BaselineInstanceType and AzureBaselineInstanceType are the static node group the summary
// compares against (provisioning.StaticBaseline).
const (
	BaselineInstanceType      = provisioning.BaselineInstanceType
	AzureBaselineInstanceType = provisioning.AzureBaselineInstanceType
)

// Summary is what a local run produced.
type Summary struct {
	Nodes []NodeSummary
	// PodsBound and PodsTotal count workload pods (DaemonSet pods excluded).
	PodsBound, PodsTotal int
	// PricePerHour is the USD per hour of the nodes Dovetail launched; OnDemandPerHour what the
	// same instance types cost on demand. EstimatedSpot says some prices are modelled spot prices.
	PricePerHour, OnDemandPerHour float64
	EstimatedSpot                 bool
	// CPUAllocation and MemoryAllocation are requests / allocatable over Dovetail's nodes.
	CPUAllocation, MemoryAllocation float64
	// BaselineType is the static group's instance type (BaselineInstanceType, or
	// AzureBaselineInstanceType on an Azure catalog).
	BaselineType string
	// Baseline is the same workload on a static node group of BaselineType.
	BaselineNodes        int
	BaselinePricePerHour float64
	BaselineUnplaced     int
}

// NodeSummary is one node Dovetail launched.
type NodeSummary struct {
	Name, NodePool, InstanceType, CapacityType, Zone string
	PricePerHour                                     float64
	Estimate                                         bool
	Pods                                             int // all pods, DaemonSet pods included
	WorkloadPods                                     int // pods that are not a DaemonSet's
}

// Summarize reads the cluster and the cloud after a run.
func Summarize(ctx context.Context, c *Cluster, provider cloud.Provider, cluster string, cat *catalog.Catalog, set *manifests.Set) (*Summary, error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	insts, err := provider.List(ctx, cluster)
	if err != nil {
		return nil, err
	}
	byProvider := map[string]cloud.Instance{}
	for _, i := range insts {
		byProvider[i.ProviderID] = i
	}
	podsOn := map[string]int{}
	workloadOn := map[string]int{}
	requested := map[string]scheduling.Resources{}
	s := &Summary{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if scheduling.IsTerminal(p) {
			continue
		}
		if !scheduling.IsDaemonSetPod(p) {
			s.PodsTotal++
			if p.Spec.NodeName != "" {
				s.PodsBound++
				workloadOn[p.Spec.NodeName]++
			}
		}
		if p.Spec.NodeName != "" {
			podsOn[p.Spec.NodeName]++
			requested[p.Spec.NodeName] = requested[p.Spec.NodeName].Add(scheduling.PodRequests(p))
		}
	}
	var req, alloc scheduling.Resources
	for i := range nodes.Items {
		n := &nodes.Items[i]
		pool := n.Labels[apisv1.LabelNodePool]
		if pool == "" {
			continue
		}
		inst, ok := byProvider[n.Spec.ProviderID]
		if !ok {
			continue
		}
		ns := NodeSummary{Name: n.Name, NodePool: pool, InstanceType: inst.InstanceType, CapacityType: inst.CapacityType,
			Zone: inst.Zone, PricePerHour: inst.PricePerHour, Pods: podsOn[n.Name], WorkloadPods: workloadOn[n.Name]}
		if it := cat.Get(inst.InstanceType); it != nil {
			for _, o := range it.Offerings {
				if o.Zone == inst.Zone && o.CapacityType == inst.CapacityType {
					ns.Estimate = o.IsEstimate()
				}
				if o.Zone == inst.Zone && o.CapacityType == apisv1.CapacityTypeOnDemand {
					s.OnDemandPerHour += o.PricePerHour
				}
			}
		}
		s.EstimatedSpot = s.EstimatedSpot || ns.Estimate
		s.PricePerHour += ns.PricePerHour
		s.Nodes = append(s.Nodes, ns)
		req = req.Add(requested[n.Name])
		alloc = alloc.Add(scheduling.FromList(n.Status.Allocatable))
	}
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Name < s.Nodes[j].Name })
	if alloc.MilliCPU > 0 {
		s.CPUAllocation = float64(req.MilliCPU) / float64(alloc.MilliCPU)
	}
	if alloc.Memory > 0 {
		s.MemoryAllocation = float64(req.Memory) / float64(alloc.Memory)
	}
	if err := s.baseline(set, cat); err != nil {
		return nil, err
	}
	return s, nil
}

// baseline packs the scenario's pending pods onto a static group of BaselineInstanceType
// on-demand nodes, with the same existing nodes and DaemonSets, using the same packer: the
// cost a Cluster-Autoscaler node group of that one shape would pay.
func (s *Summary) baseline(set *manifests.Set, cat *catalog.Catalog) error {
	in := provisioning.Input{Catalog: cat, Nodes: set.Nodes, DaemonSets: set.DaemonSets, NodePools: set.NodePools}
	var pending []*corev1.Pod
	for _, p := range set.ExpandPods() {
		if p.Spec.NodeName == "" {
			pending = append(pending, p)
		} else {
			in.BoundPods = append(in.BoundPods, p)
		}
	}
	b, err := provisioning.StaticBaseline(in, pending, cat)
	if err != nil {
		return err
	}
	s.BaselineType, s.BaselineNodes, s.BaselinePricePerHour, s.BaselineUnplaced = b.InstanceType, b.Nodes, b.PricePerHour, b.Unplaceable
	return nil
}

// Print writes the summary.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintln(w, "\n=== Summary ===")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNODEPOOL\tINSTANCE TYPE\tCAPACITY\tZONE\t$/H\tPODS")
	for _, n := range s.Nodes {
		price := fmt.Sprintf("%.4f", n.PricePerHour)
		if n.Estimate {
			price += " (est.)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", n.Name, n.NodePool, n.InstanceType, n.CapacityType, n.Zone, price, n.Pods)
	}
	tw.Flush()
	est := ""
	if s.EstimatedSpot {
		est = " (spot prices are estimates from the embedded spot-price model)"
	}
	fmt.Fprintf(w, "Pods placed: %d/%d workload pods bound\n", s.PodsBound, s.PodsTotal)
	fmt.Fprintf(w, "Dovetail nodes: %d, total %.4f USD/h%s; the same types on demand: %.4f USD/h\n", len(s.Nodes), s.PricePerHour, est, s.OnDemandPerHour)
	fmt.Fprintf(w, "Allocation (requests / allocatable on Dovetail nodes): CPU %.0f%%, memory %.0f%%\n", 100*s.CPUAllocation, 100*s.MemoryAllocation)
	fmt.Fprintf(w, "Baseline: a Cluster-Autoscaler static node group of %s on-demand needs %d nodes, %.4f USD/h",
		s.BaselineType, s.BaselineNodes, s.BaselinePricePerHour)
	if s.BaselineUnplaced > 0 {
		fmt.Fprintf(w, " (and still leaves %d pods unplaced)", s.BaselineUnplaced)
	}
	fmt.Fprintln(w)
	if s.BaselinePricePerHour > 0 {
		save := s.BaselinePricePerHour - s.PricePerHour
		fmt.Fprintf(w, "Saving: %.4f USD/h (%.0f%%) against the baseline; on-demand only: %.4f USD/h (%.0f%%)\n",
			save, 100*save/s.BaselinePricePerHour, s.BaselinePricePerHour-s.OnDemandPerHour,
			100*(s.BaselinePricePerHour-s.OnDemandPerHour)/s.BaselinePricePerHour)
	}
}
