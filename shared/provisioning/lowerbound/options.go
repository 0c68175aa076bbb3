package lowerbound

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Source is what OptionsFor reads: one NodePool over a catalog.
type Source struct {
	Catalog  *catalog.Catalog
	NodePool *apisv1.NodePool
	// Settings are the settings the pool's nodes boot with (the edge's node settings of its
	// NodeClass: image family, kubelet block, ephemeral volume); the zero value means the defaults.
	Settings catalog.NodeSettings
	// DaemonSets whose pods run on the pool's nodes take their requests off every node, with
	// the defaults their namespace's LimitRanges give at admission.
	DaemonSets  []*appsv1.DaemonSet
	LimitRanges []*corev1.LimitRange
	// Unavailable reports offerings marked unavailable (ICE); nil means none are.
	Unavailable func(instanceType, zone, capacityType, scope string) bool
}

// offeringKeys are decided per offering, not per instance type.
var offeringKeys = map[string]bool{
	corev1.LabelTopologyZone:   true,
	apisv1.LabelCapacityType:   true,
	corev1.LabelTopologyRegion: true,
}

// OptionsFor lists the options the NodePool allows: every catalog type whose labels its
// requirements accept and that keeps an available offering in the zones and capacity types it
// allows, priced at the cheapest such offering (USD per hour), with allocatable under the
// NodeClass's kubelet settings minus the requests of the DaemonSets that surely run on it
// (they tolerate the pool's taints and their node affinity matches the type's labels in every
// allowed offering). It leans towards more options and more room wherever it is unsure (labels
// the type does not define, NodePool limits and minValues are ignored), which keeps Compute a
// lower bound. Errors name the field: a nil catalog or NodePool, or a requirement that cannot
// be parsed or never be met.
func OptionsFor(s Source) ([]Option, error) {
	if s.Catalog == nil {
		return nil, fmt.Errorf("catalog: required")
	}
	if s.NodePool == nil {
		return nil, fmt.Errorf("nodePool: required")
	}
	np := s.NodePool
	nsrs := make([]corev1.NodeSelectorRequirement, 0, len(np.Spec.Template.Spec.Requirements))
	for _, r := range np.Spec.Template.Spec.Requirements {
		nsrs = append(nsrs, r.NodeSelectorRequirement)
	}
	reqs, err := scheduling.NewRequirements(nsrs...)
	if err != nil {
		return nil, fmt.Errorf("nodePool %q: spec.template.spec.requirements: %w", np.Name, err)
	}
	poolLabels := map[string]string{apisv1.LabelNodePool: np.Name}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		poolLabels[k] = v
	}
	reqs = reqs.Intersect(scheduling.FromLabels(poolLabels))
	if bad := reqs.Unsatisfiable(); bad != nil {
		return nil, fmt.Errorf("nodePool %q: spec.template.spec.requirements: %s can never be met", np.Name, bad)
	}
	if _, ok := reqs[apisv1.LabelCapacityType]; !ok { // Karpenter's default: on-demand
		reqs = reqs.Intersect(scheduling.Requirements{apisv1.LabelCapacityType: scheduling.MustRequirement(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, apisv1.CapacityTypeOnDemand)})
	}
	for _, k := range reqs.Keys() {
		if v, ok := reqs[k].Single(); ok && !offeringKeys[k] {
			poolLabels[k] = v
		}
	}
	if rr := reqs[corev1.LabelTopologyRegion]; rr != nil && s.Catalog.Region != "" && !rr.Has(s.Catalog.Region) {
		return nil, nil
	}
	daemons := compileDaemons(s.DaemonSets, s.LimitRanges, np.Spec.Template.Spec.Taints)
	zr, cr := reqs[corev1.LabelTopologyZone], reqs[apisv1.LabelCapacityType]
	var out []Option
	for _, it := range s.Catalog.Types() {
		if !typeAllowed(reqs, it) {
			continue
		}
		var allowed []catalog.Offering
		for _, o := range it.Offerings {
			if !o.Available || (zr != nil && !zr.Has(o.Zone)) || (cr != nil && !cr.Has(o.CapacityType)) {
				continue
			}
			if s.Unavailable != nil && s.Unavailable(it.Name, o.Zone, o.CapacityType, s.Settings.CapacityScope) {
				continue
			}
			allowed = append(allowed, o)
		}
		if len(allowed) == 0 {
			continue
		}
		price := allowed[0].PricePerHour
		for _, o := range allowed[1:] {
			price = min(price, o.PricePerHour)
		}
		_, a := it.ResourcesWith(s.Settings)
		alloc := scheduling.FromList(a.List())
		base := make(map[string]string, len(it.Labels)+len(poolLabels)+3)
		for k, v := range it.Labels {
			base[k] = v
		}
		for k, v := range poolLabels {
			base[k] = v
		}
		for _, d := range daemons {
			if d.runsOnAll(base, allowed, s.Catalog.Region) {
				alloc = alloc.Sub(d.requests)
			}
		}
		out = append(out, Option{Name: it.Name, Allocatable: clamp(alloc), PricePerHour: price})
	}
	return out, nil
}

// typeAllowed checks the requirements on the type's own labels. A key the type does not carry
// refuses it only when it is a well-known instance-type key (the node would lack the label);
// other keys (custom labels, the pool's own) are left to the pods, which keeps more options.
func typeAllowed(reqs scheduling.Requirements, it *catalog.InstanceType) bool {
	for k, r := range reqs {
		if offeringKeys[k] {
			continue
		}
		if v, ok := it.Labels[k]; ok {
			if !r.Has(v) {
				return false
			}
			continue
		}
		if isTypeKey(k) && !r.AbsentOK() {
			return false
		}
	}
	return true
}

func isTypeKey(k string) bool {
	switch k {
	case corev1.LabelArchStable, corev1.LabelOSStable, corev1.LabelInstanceTypeStable, corev1.LabelWindowsBuild:
		return true
	}
	return strings.HasPrefix(k, "karpenter.k8s.aws/instance-")
}

// daemon is a DaemonSet that tolerates the pool's taints.
type daemon struct {
	requests scheduling.Resources
	alts     []scheduling.Requirements
}

func compileDaemons(dss []*appsv1.DaemonSet, lrs []*corev1.LimitRange, taints []corev1.Taint) []daemon {
	var out []daemon
	for _, ds := range dss {
		pod := &corev1.Pod{Spec: scheduling.ApplyLimitRangeDefaults(ds.Spec.Template.Spec, scheduling.LimitRangesIn(lrs, ds.Namespace))}
		if scheduling.UntoleratedTaint(pod.Spec.Tolerations, taints) != nil {
			continue
		}
		alts, err := scheduling.PodNodeRequirements(pod)
		if err != nil || len(alts) == 0 {
			continue // cannot run anywhere: no overhead (more room keeps the bound valid)
		}
		out = append(out, daemon{requests: scheduling.PodRequests(pod), alts: alts})
	}
	return out
}

// runsOnAll reports whether the DaemonSet runs on a node of these labels whichever allowed
// offering (zone, capacity type) the node is bought in.
func (d *daemon) runsOnAll(base map[string]string, offerings []catalog.Offering, region string) bool {
	usesOfferingKeys := false
	for _, alt := range d.alts {
		for k := range alt {
			usesOfferingKeys = usesOfferingKeys || offeringKeys[k]
		}
	}
	if !usesOfferingKeys {
		return d.matches(base)
	}
	labels := make(map[string]string, len(base)+3)
	for k, v := range base {
		labels[k] = v
	}
	if region != "" {
		labels[corev1.LabelTopologyRegion] = region
	}
	for _, o := range offerings {
		labels[corev1.LabelTopologyZone] = o.Zone
		labels[apisv1.LabelCapacityType] = o.CapacityType
		if !d.matches(labels) {
			return false
		}
	}
	return true
}

func (d *daemon) matches(labels map[string]string) bool {
	for _, alt := range d.alts {
		if alt.MatchLabels(labels) == nil {
			return true
		}
	}
	return false
}

// Requests returns the effective requests of pods (scheduling.PodRequests), the input Compute
// takes.
func Requests(pods []*corev1.Pod) []scheduling.Resources {
	out := make([]scheduling.Resources, len(pods))
	for i, p := range pods {
		out[i] = scheduling.PodRequests(p)
	}
	return out
}
