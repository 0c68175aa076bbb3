package provisioning

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Zone labels: keys whose value a node takes from its zone, as its NodeClass's discovery gives
// them (catalog.NodeSettings.ZoneLabels; on EC2 topology.k8s.aws/zone-id). A requirement on such
// a key is planned as the zone requirement it implies, so every stage that filters offerings by
// zone honours it; the requirement itself stays on the NodeClaim, as Karpenter's does.

// indexZoneLabels turns the settings' zone → key → value map into the pool's key → zone → value.
func (p *pool) indexZoneLabels(byZone map[string]map[string]string) {
	for zone, labels := range byZone {
		for k, v := range labels {
			if p.zoneLabels == nil {
				p.zoneLabels = map[string]map[string]string{}
			}
			if p.zoneLabels[k] == nil {
				p.zoneLabels[k] = map[string]string{}
			}
			p.zoneLabels[k][zone] = v
		}
	}
}

// isZoneLabel reports whether key is one of the pool's zone labels.
func (p *pool) isZoneLabel(key string) bool { return p.zoneLabels[key] != nil }

// withZones returns reqs narrowed by the zones its zone-label requirements allow: for a
// requirement a node without the label fails (In, Exists), the zones whose value it allows; for
// one that allows absence (NotIn, DoesNotExist), every zone but those whose value it refuses.
// reqs is returned unchanged when it has no zone-label key.
func (p *pool) withZones(reqs scheduling.Requirements) scheduling.Requirements {
	if len(p.zoneLabels) == 0 {
		return reqs
	}
	for key, byZone := range p.zoneLabels {
		r := reqs[key]
		if r == nil {
			continue
		}
		zones := make([]string, 0, len(byZone))
		for zone, v := range byZone {
			if r.Has(v) != r.AbsentOK() {
				zones = append(zones, zone)
			}
		}
		sort.Strings(zones)
		op := corev1.NodeSelectorOpIn
		if r.AbsentOK() {
			op = corev1.NodeSelectorOpNotIn
		}
		reqs = reqs.Intersect(scheduling.Requirements{corev1.LabelTopologyZone: scheduling.MustRequirement(corev1.LabelTopologyZone, op, zones...)})
	}
	return reqs
}

// zoneLabelOf is the value of a zone label key in a zone ("" when the zone has none).
func (p *pool) zoneLabelOf(key, zone string) string { return p.zoneLabels[key][zone] }
