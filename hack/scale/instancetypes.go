package main

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// kwokKubeReserved is what Karpenter's kwok provider subtracts from every instance type's
// resources to get its allocatable (sigs.k8s.io/karpenter v1.15.0 kwok/cloudprovider/helpers.go,
// newInstanceType: Overhead.KubeReserved 100m CPU and 10Mi memory; no system-reserved or eviction
// threshold). The generated file adds it back so both sides see the same allocatable.
var kwokKubeReserved = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")}

// KWOKInstanceTypes writes, from Dovetail's catalog, the instance-types file of Karpenter's
// kwok provider (its INSTANCE_TYPES_FILE_PATH; JSON of []kwok.InstanceTypeOptions). The
// direction is Dovetail → Karpenter: only the types whose labels satisfy the NodePool's
// requirements (capacity type and zone are offering keys and are checked per offering), no
// accelerators; per type, the resources are the allocatable Dovetail computes for a node of the
// NodeClass (settings) plus kwokKubeReserved, pods Dovetail's max pods; one offering per zone and
// capacity type the pool allows, at the catalog's price (USD per hour).
func KWOKInstanceTypes(cat *catalog.Catalog, pool *apisv1.NodePool, settings catalog.NodeSettings) ([]byte, error) {
	var labelReqs []corev1.NodeSelectorRequirement
	var capacityTypes, zones *scheduling.Requirement
	for _, r := range pool.Spec.Template.Spec.Requirements {
		switch r.Key {
		case karpv1.CapacityTypeLabelKey, corev1.LabelTopologyZone:
			req, err := scheduling.NewRequirement(r.Key, r.Operator, r.Values...)
			if err != nil {
				return nil, fmt.Errorf("NodePool %s: requirement %s: %w", pool.Name, r.Key, err)
			}
			if r.Key == corev1.LabelTopologyZone {
				zones = req
			} else {
				capacityTypes = req
			}
		default:
			labelReqs = append(labelReqs, r.NodeSelectorRequirement)
		}
	}
	reqs, err := scheduling.NewRequirements(labelReqs...)
	if err != nil {
		return nil, fmt.Errorf("NodePool %s: requirements: %w", pool.Name, err)
	}
	var out []kwok.InstanceTypeOptions
	for _, it := range cat.Types() {
		if reqs.MatchLabels(it.Labels) != nil {
			continue
		}
		_, alloc := it.ResourcesWith(settings)
		if alloc.NVIDIAGPU+alloc.AMDGPU+alloc.Neuron+alloc.NeuronCore > 0 || alloc.MilliCPU <= 0 || alloc.MemoryBytes <= 0 {
			continue
		}
		cpu := resource.NewMilliQuantity(alloc.MilliCPU, resource.DecimalSI)
		cpu.Add(kwokKubeReserved[corev1.ResourceCPU])
		mem := resource.NewQuantity(alloc.MemoryBytes, resource.BinarySI)
		mem.Add(kwokKubeReserved[corev1.ResourceMemory])
		o := kwok.InstanceTypeOptions{
			Name:             it.Name,
			Architecture:     it.Labels[corev1.LabelArchStable],
			OperatingSystems: []corev1.OSName{corev1.OSName(it.Labels[corev1.LabelOSStable])},
			Resources: corev1.ResourceList{corev1.ResourceCPU: *cpu, corev1.ResourceMemory: *mem,
				corev1.ResourcePods: *resource.NewQuantity(alloc.Pods, resource.DecimalSI)},
		}
		for _, off := range it.Offerings {
			if !off.Available || off.CapacityType == "reserved" ||
				(capacityTypes != nil && !capacityTypes.Has(off.CapacityType)) || (zones != nil && !zones.Has(off.Zone)) {
				continue
			}
			ko := kwok.KWOKOffering{Requirements: []corev1.NodeSelectorRequirement{
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{off.CapacityType}},
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{off.Zone}},
			}}
			ko.Price, ko.Available = off.PricePerHour, true
			o.Offerings = append(o.Offerings, ko)
		}
		if len(o.Offerings) > 0 {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("NodePool %s: no instance type of the catalog satisfies its requirements", pool.Name)
	}
	return json.MarshalIndent(out, "", " ")
}
