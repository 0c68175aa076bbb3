package main

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// dovetailCatalog converts Karpenter's instance types into Dovetail's catalog, field by field,
// so both solvers see the same types (as shared/provisioning/bench_karpenter_test.go builds
// them by hand):
//
//   - Labels: every requirement of the type with operator In and exactly one value (instance
//     type, architecture, Karpenter's fake "size" and "integer" labels); kubernetes.io/os,
//     which the fake types allow as linux, windows or darwin, is linux (a Dovetail type carries
//     one value per label; the pods select no OS). Zone and capacity type are per offering.
//   - Capacity: the type's capacity (cpu, memory, pods).
//   - Overhead: kube-reserved, system-reserved and eviction threshold as Karpenter's, so
//     allocatable = capacity − overhead on both sides.
//   - Offerings: one per Karpenter offering, its zone, capacity type, price (USD per hour) and
//     availability.
func dovetailCatalog(its []*cloudprovider.InstanceType) (*catalog.Catalog, error) {
	types := make([]*catalog.InstanceType, 0, len(its))
	for _, it := range its {
		labels := map[string]string{corev1.LabelOSStable: string(corev1.Linux)}
		for key := range it.Requirements.Keys() {
			r := it.Requirements.Get(key)
			if key == corev1.LabelTopologyZone || key == karpv1.CapacityTypeLabelKey {
				continue
			}
			if r.Operator() == corev1.NodeSelectorOpIn && r.Len() == 1 {
				labels[key] = r.Any()
			}
		}
		var overhead catalog.Overhead
		if it.Overhead != nil {
			overhead = catalog.Overhead{
				KubeReserved:      it.Overhead.KubeReserved.DeepCopy(),
				SystemReserved:    it.Overhead.SystemReserved.DeepCopy(),
				EvictionThreshold: it.Overhead.EvictionThreshold.DeepCopy(),
			}
		}
		offerings := make([]catalog.Offering, 0, len(it.Offerings))
		for _, o := range it.Offerings {
			zone := o.Requirements.Get(corev1.LabelTopologyZone)
			capacityType := o.Requirements.Get(karpv1.CapacityTypeLabelKey)
			if zone.Len() != 1 || capacityType.Len() != 1 {
				return nil, fmt.Errorf("instance type %s: an offering without exactly one zone and capacity type", it.Name)
			}
			offerings = append(offerings, catalog.Offering{
				Zone:         zone.Any(),
				CapacityType: capacityType.Any(),
				PricePerHour: o.Price,
				PriceSource:  catalog.PriceSourceEmbedded,
				Available:    o.Available,
			})
		}
		catalog.SortOfferings(offerings)
		types = append(types, &catalog.InstanceType{
			Name:      it.Name,
			Labels:    labels,
			Capacity:  it.Capacity.DeepCopy(),
			Overhead:  overhead,
			Offerings: offerings,
		})
	}
	return catalog.New("", types), nil
}

// dovetailNodePool is Karpenter's NodePool as Dovetail reads it: the same name, no
// requirements, no limits (the benchmark's pool has neither; Karpenter's test template labels
// select nothing the pods ask for).
func dovetailNodePool(np *karpv1.NodePool) *apisv1.NodePool {
	return &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: np.Name}}
}

// runDovetail solves pods with Dovetail's provisioning.Solve and times the whole call (it
// builds its own state from the input, and computes the plan's lower bound).
func runDovetail(pods []*corev1.Pod, cat *catalog.Catalog, np *apisv1.NodePool, showErrors bool) (result, error) {
	in := provisioning.Input{Pods: pods, NodePools: []*apisv1.NodePool{np}, Catalog: cat}
	start := time.Now()
	plan, err := provisioning.Solve(in)
	solve := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("dovetail solve: %w", err)
	}
	if showErrors {
		errs := make(map[string]string, len(plan.Unschedulable))
		for _, u := range plan.Unschedulable {
			errs[u.Pod.Namespace+"/"+u.Pod.Name] = u.Reason
		}
		printPodErrors("dovetail", len(pods), errs)
	}
	return result{
		Solve:         solve,
		NodeClaims:    len(plan.NodeClaims),
		Unschedulable: len(plan.Unschedulable),
		PricePerHour:  plan.TotalPricePerHour(),
		BoundPerHour:  plan.LowerBoundPerHour,
	}, nil
}
