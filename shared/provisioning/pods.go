package provisioning

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// ResourceAttachableVolumes counts a pod's persistent volumes against a node's attach limit (the
// resource name the in-tree EBS plugin reported in node allocatable).
const ResourceAttachableVolumes corev1.ResourceName = "attachable-volumes-aws-ebs"

// EBS volume attach limits when a node reports none: the aws-ebs-csi-driver defaults
// (defaultMaxEBSNitroVolumes = 25 for Nitro instances, whose attachments are shared with ENIs
// and instance-store volumes; defaultMaxEBSVolumes = 39 for Xen instances).
const (
	AttachLimitNitro = 25
	AttachLimitXen   = 39
)

// prefKind names a preference that can be relaxed. Preferences are relaxed in this order, one
// at a time, only while the pod cannot be placed: preferred pod affinity terms, preferred pod
// anti-affinity terms, preferred node affinity terms, ScheduleAnyway topology spreads, and last
// untolerated PreferNoSchedule taints (Karpenter's order). Within a kind the lowest weight goes
// first, so the preferences the user weighted most are kept longest (Karpenter drops the
// heaviest first; keeping it seemed the better reading of "weight").
type prefKind int

const (
	prefPodAffinity prefKind = iota
	prefPodAnti
	prefNodeAffinity
	prefSpread
	prefNoSchedule
)

type pref struct {
	kind   prefKind
	weight int32
	index  int // into cons (pod affinity/anti/spread) or prefTerms (node affinity)
}

// podInfo is a pending pod compiled once.
type podInfo struct {
	pod      *corev1.Pod
	key      string
	requests scheduling.Resources
	ports    []scheduling.HostPort

	baseAlts  []scheduling.Requirements // required node affinity × nodeSelector × volume topology
	prefTerms []scheduling.Requirements // preferred node affinity terms
	cons      []constraint              // all topology constraints, required and preferred
	prefs     []pref                    // relaxation order
	relaxed   int                       // how many prefs are dropped

	// Derived by activate from the above and relaxed.
	alts      []scheduling.Requirements
	active    []constraint
	strictPNS bool
	sig       string
	err       error
	// compat caches the solver's compatibility per pool for sig (cleared by activate).
	compat []*podPool
	// groups are the topology groups that count the pod (its labels and namespace never change,
	// and every group exists before placement starts), computed once by solver.groupsOf.
	groups    []*group
	groupsSet bool
	// keys caches topology.countedKeys for the active constraints (cleared by activate).
	keys    []string
	keysSet bool

	// Per placement attempt (prepare): what the topology allows, computed once because counts
	// only change when a pod is placed.
	views   []domainView
	inv     map[string]map[string]bool
	invHost []*group // hostname groups whose required anti-affinity selects this pod
}

// domainView is one active non-hostname constraint's allowed domains for the current attempt.
type domainView struct {
	c             *constraint
	vals, exclude map[string]bool
	all           bool
	// binVals are a spread's allowed domains for an existing node: counted over the domains of
	// the nodes there are (kube-scheduler's), not the pools' empty zones.
	binVals map[string]bool
}

// volumeIndex resolves a pod's PVCs.
type volumeIndex struct {
	pvcs    map[string]*corev1.PersistentVolumeClaim
	pvs     map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
}

func newVolumeIndex(in *Input) *volumeIndex {
	v := &volumeIndex{pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	for _, c := range in.PVCs {
		v.pvcs[namespaceOf(&corev1.Pod{ObjectMeta: c.ObjectMeta})+"/"+c.Name] = c
	}
	for _, pv := range in.PVs {
		v.pvs[pv.Name] = pv
	}
	for _, sc := range in.StorageClasses {
		v.classes[sc.Name] = sc
	}
	return v
}

// topologyOf returns the node requirement alternatives a pod's volumes impose and how many
// attachable volumes it uses: a bound PVC follows its PV's required node affinity; an unbound PVC
// of a WaitForFirstConsumer class follows the class's allowedTopologies; an unbound PVC of an
// Immediate class must bind first. Generic ephemeral volumes behave like an unbound PVC of
// their class.
func (v *volumeIndex) topologyOf(pod *corev1.Pod) (alts [][]scheduling.Requirements, count int64, err error) {
	ns := namespaceOf(pod)
	for i, vol := range pod.Spec.Volumes {
		var class string
		var pvName string
		switch {
		case vol.PersistentVolumeClaim != nil:
			pvc := v.pvcs[ns+"/"+vol.PersistentVolumeClaim.ClaimName]
			if pvc == nil {
				return nil, 0, fmt.Errorf("spec.volumes[%d]: persistentvolumeclaim %q not found", i, vol.PersistentVolumeClaim.ClaimName)
			}
			pvName = pvc.Spec.VolumeName
			if pvc.Spec.StorageClassName != nil {
				class = *pvc.Spec.StorageClassName
			}
		case vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil:
			if sc := vol.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName; sc != nil {
				class = *sc
			}
		default:
			continue
		}
		count++
		if pvName != "" {
			pv := v.pvs[pvName]
			if pv == nil {
				return nil, 0, fmt.Errorf("spec.volumes[%d]: persistentvolume %q not found", i, pvName)
			}
			if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
				terms, err := selectorTerms(pv.Spec.NodeAffinity.Required.NodeSelectorTerms)
				if err != nil {
					return nil, 0, fmt.Errorf("persistentvolume %s: spec.nodeAffinity: %w", pv.Name, err)
				}
				alts = append(alts, terms)
			}
			continue
		}
		sc := v.classes[class]
		if sc == nil {
			// No class known: nothing constrains the volume's topology (the default class's
			// provisioner decides); the pod still uses an attachment.
			continue
		}
		if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate {
			return nil, 0, fmt.Errorf("spec.volumes[%d]: volume is not bound yet and storageclass %q binds Immediately; the pod waits for the volume, not for a node", i, sc.Name)
		}
		if len(sc.AllowedTopologies) > 0 {
			var terms []scheduling.Requirements
			for _, t := range sc.AllowedTopologies {
				rs := scheduling.Requirements{}
				for _, e := range t.MatchLabelExpressions {
					k, vs := scheduling.Normalize(e.Key, e.Values)
					rs.Add(scheduling.MustRequirement(k, corev1.NodeSelectorOpIn, vs...))
				}
				terms = append(terms, rs)
			}
			alts = append(alts, terms)
		}
	}
	return alts, count, nil
}

func selectorTerms(terms []corev1.NodeSelectorTerm) ([]scheduling.Requirements, error) {
	var out []scheduling.Requirements
	for _, t := range terms {
		rs, err := scheduling.NewRequirements(t.MatchExpressions...)
		if err != nil {
			return nil, err
		}
		out = append(out, rs)
	}
	return out, nil
}

// compilePod fills pi (zero) for pod, creating the topology groups its constraints need, and
// returns it.
// Under PreferencesIgnore (ignorePrefs) the pod's preferred node affinity, preferred pod
// (anti-)affinity and ScheduleAnyway spreads are not compiled at all; only the PreferNoSchedule
// step is left to relax.
func compilePod(pi *podInfo, pod *corev1.Pod, memo *scheduling.RequestMemo, topo *topology, vols *volumeIndex, ignorePrefs bool) *podInfo {
	// Field by field: pi is zero, and copying a whole podInfo literal in costs write barriers.
	pi.pod, pi.key, pi.requests, pi.ports = pod, podKey(pod), memo.Requests(pod), scheduling.PodHostPorts(pod)
	fail := func(err error) *podInfo {
		pi.err = fmt.Errorf("invalid pod %s: %w", pi.key, err)
		pi.activate()
		return pi
	}
	if err := scheduling.ValidatePodResources(&pod.Spec); err != nil {
		return fail(err)
	}
	if scheduling.HasDRARequirements(pod) {
		pi.err = scheduling.ErrDRANotSupported
		pi.activate()
		return pi
	}
	alts, err := scheduling.PodNodeRequirements(pod)
	if err != nil {
		return fail(err)
	}
	if len(alts) == 0 {
		pi.err = fmt.Errorf("required node affinity has no satisfiable term")
	}
	volAlts, nvol, err := vols.topologyOf(pod)
	if err != nil {
		pi.err = err
		pi.activate()
		return pi
	}
	for _, va := range volAlts {
		var next []scheduling.Requirements
		for _, a := range alts {
			for _, b := range va {
				if m := a.Intersect(b); m.Unsatisfiable() == nil {
					next = append(next, m)
				}
			}
		}
		alts = next
	}
	if len(volAlts) > 0 && len(alts) == 0 && pi.err == nil {
		pi.err = fmt.Errorf("the node affinity of the pod and of its volumes cannot be met together")
	}
	if nvol > 0 {
		pi.requests = pi.requests.Add(scheduling.Resources{Scalar: map[corev1.ResourceName]int64{ResourceAttachableVolumes: nvol}})
	}
	pi.baseAlts = alts
	if na := pod.Spec.Affinity; na != nil && na.NodeAffinity != nil && !ignorePrefs {
		for i, w := range na.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			rs, err := scheduling.NewRequirements(w.Preference.MatchExpressions...)
			if err != nil {
				return fail(fmt.Errorf("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d]: %w", i, err))
			}
			pi.prefs = append(pi.prefs, pref{kind: prefNodeAffinity, weight: w.Weight, index: len(pi.prefTerms)})
			pi.prefTerms = append(pi.prefTerms, rs)
		}
	}
	cons, err := topo.compileConstraints(pod, ignorePrefs)
	if err != nil {
		return fail(err)
	}
	pi.cons = cons
	for i, c := range cons {
		if !c.preferred {
			continue
		}
		k := prefSpread
		switch c.kind {
		case kindAffinity:
			k = prefPodAffinity
		case kindAnti:
			k = prefPodAnti
		}
		pi.prefs = append(pi.prefs, pref{kind: k, weight: c.weight, index: i})
	}
	pi.prefs = append(pi.prefs, pref{kind: prefNoSchedule})
	slices.SortStableFunc(pi.prefs, func(a, b pref) int {
		if a.kind != b.kind {
			return cmp.Compare(a.kind, b.kind)
		}
		return cmp.Compare(a.weight, b.weight)
	})
	pi.activate()
	return pi
}

// canRelax reports whether a preference is left to drop.
func (p *podInfo) canRelax() bool { return p.err == nil && p.relaxed < len(p.prefs) }

// relax drops the next preference.
func (p *podInfo) relax() {
	p.relaxed++
	p.activate()
}

// activate derives the active alternatives, constraints and signature from the relax level.
func (p *podInfo) activate() {
	dropped := map[pref]bool{}
	for _, pr := range p.prefs[:p.relaxed] {
		dropped[pr] = true
	}
	p.strictPNS = true
	var prefReqs scheduling.Requirements
	for _, pr := range p.prefs {
		switch {
		case pr.kind == prefNoSchedule:
			p.strictPNS = !dropped[pr]
		case pr.kind == prefNodeAffinity && !dropped[pr]:
			if prefReqs == nil {
				prefReqs = scheduling.Requirements{}
			}
			prefReqs = prefReqs.Intersect(p.prefTerms[pr.index])
		}
	}
	p.alts = p.baseAlts
	if prefReqs != nil {
		p.alts = make([]scheduling.Requirements, 0, len(p.baseAlts))
		for _, a := range p.baseAlts {
			p.alts = append(p.alts, a.Intersect(prefReqs))
		}
	}
	droppedCons := map[int]bool{}
	for _, pr := range p.prefs[:p.relaxed] {
		if pr.kind == prefPodAffinity || pr.kind == prefPodAnti || pr.kind == prefSpread {
			droppedCons[pr.index] = true
		}
	}
	if len(droppedCons) == 0 {
		p.active = p.cons // nothing dropped (the rule, not the exception): active is only read
	} else {
		p.active = make([]constraint, 0, len(p.cons))
		for i, c := range p.cons {
			if !droppedCons[i] {
				p.active = append(p.active, c)
			}
		}
	}
	p.sig = signature(p.pod, p.alts, p.strictPNS)
	p.compat = nil
	p.keys, p.keysSet = nil, false
}

// untolerated returns the first taint that blocks the pod at its relax level.
func (p *podInfo) untolerated(taints []corev1.Taint) *corev1.Taint {
	return scheduling.UntoleratedTaintStrict(p.pod.Spec.Tolerations, taints, p.strictPNS)
}

// signature identifies pods that schedule alike (same node requirements, tolerations and
// PreferNoSchedule strictness), so their compatibility with a pool is computed once.
func signature(pod *corev1.Pod, alts []scheduling.Requirements, strictPNS bool) string {
	var b strings.Builder
	for _, a := range alts {
		b.WriteString(a.String())
		b.WriteByte('|')
	}
	b.WriteByte('#')
	for _, t := range pod.Spec.Tolerations {
		fmt.Fprintf(&b, "%s,%s,%s,%s;", t.Key, t.Operator, t.Value, t.Effect)
	}
	if strictPNS {
		b.WriteString("#pns")
	}
	return b.String()
}
