package provisioning

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// capacityAliases are the labels whose value on a node of the pool follows the offering's
// capacity type (label → value → capacity type), by the pool's NodeClass: on an AKSNodeClass,
// kubernetes.azure.com/scalesetpriority and kubernetes.azure.com/priority
// (catalog.AKSCapacityTypeLabels); none elsewhere, so an EC2 pool still refuses a pod that
// requires them.
func capacityAliases(nc apisv1.NodeClass) map[string]map[string]string {
	if nc.AKS != nil {
		return catalog.AKSCapacityTypeLabels
	}
	return nil
}

// withCapacityAliases narrows karpenter.sh/capacity-type to what each alias requirement allows
// (a capacity type stays when one of its alias values satisfies the requirement: In [spot] keeps
// spot, NotIn [spot] keeps on-demand, DoesNotExist keeps none, as no offering of the provider
// lacks the label) and keeps the alias requirement itself, so a single value labels the node.
// Requirements without an alias key are returned as they are.
func withCapacityAliases(reqs scheduling.Requirements, aliases map[string]map[string]string) scheduling.Requirements {
	out := reqs
	for key, values := range aliases {
		r, ok := reqs[key]
		if !ok {
			continue
		}
		var cts []string
		for v, ct := range values {
			if r.Has(v) {
				cts = append(cts, ct)
			}
		}
		sort.Strings(cts)
		// In of no value (DoesNotExist, or only unknown values) is a requirement nothing meets.
		ct := scheduling.MustRequirement(apisv1.LabelCapacityType, corev1.NodeSelectorOpIn, cts...)
		out = out.Intersect(scheduling.Requirements{apisv1.LabelCapacityType: ct})
	}
	return out
}
