package launch

import (
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// DefaultInFlightWindow is how long after its launch a tagged instance without a NodeClaim counts
// as in flight (its decision's commands not applied yet); past it the instance is an orphan.
const DefaultInFlightWindow = 10 * time.Minute

// AnnotationFromCloud marks a NodeClaim InFlight rebuilt from a cloud instance: it exists only in
// the decision that rebuilt it, never as a command.
const AnnotationFromCloud = "dovetail.dev/in-flight-from-cloud"

// InFlight returns, as NodeClaims, the instances launched for the cluster that the snapshot
// does not show yet: a decision launches before the agent applies its CreateNodeClaim commands,
// so a snapshot taken in between lists the pending pods without the capacity already bought for
// them, and a decision on it would buy it again. The cloud's tags are the state (DESIGN,
// invariant 1): the solver packs pending pods onto these claims before it opens new ones.
//
// An instance counts when it is pending or running, carries the NodeClaim and NodePool tags, no
// NodeClaim or Node of the snapshot names it, its NodePool is in the snapshot, it was launched
// less than window before now (older ones are orphans, the provision function's to collect),
// and it was not launched on revision (a redelivered decision's own launches are found again
// through their client tokens, and must be, so that their commands are published). Each claim
// carries what the launch knew without the plan: the NodePool's template labels and
// single-valued requirements, the offering's labels, capacity and allocatable from cat, the
// template's taints. Pod-specific labels of the original plan are not known, so a pod that
// needs one is planned elsewhere: the error is an extra node, never a missing one.
func InFlight(insts []cloud.Instance, snap *events.Snapshot, cat *catalog.Catalog, revision int64, now time.Time, window time.Duration) []apisv1.NodeClaim {
	known := map[string]bool{}
	for i := range snap.NodeClaims {
		known[snap.NodeClaims[i].Name] = true
		if id := snap.NodeClaims[i].Status.ProviderID; id != "" {
			known[id] = true
		}
	}
	for i := range snap.Nodes {
		if id := snap.Nodes[i].Spec.ProviderID; id != "" {
			known[id] = true
		}
	}
	pools := map[string]*apisv1.NodePool{}
	for i := range snap.NodePools {
		pools[snap.NodePools[i].Name] = &snap.NodePools[i]
	}
	rev := strconv.FormatInt(revision, 10)
	var out []apisv1.NodeClaim
	for _, inst := range insts {
		name, pool := inst.Tags[apisv1.TagNodeClaim], pools[inst.Tags[apisv1.TagNodePool]]
		switch {
		case inst.State != cloud.StatePending && inst.State != cloud.StateRunning,
			name == "" || pool == nil || known[name] || known[inst.ProviderID],
			inst.Tags[apisv1.TagSnapshotRevision] == rev,
			now.Sub(inst.LaunchTime) >= window:
			continue
		}
		out = append(out, fromInstance(name, pool, inst, cat))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// fromInstance rebuilds the NodeClaim a launch recorded, from its pool and its instance.
func fromInstance(name string, pool *apisv1.NodePool, inst cloud.Instance, cat *catalog.Catalog) apisv1.NodeClaim {
	tmpl := pool.Spec.Template
	labels := map[string]string{}
	for k, v := range tmpl.ObjectMeta.Labels {
		labels[k] = v
	}
	for _, r := range tmpl.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	labels[apisv1.LabelNodePool] = pool.Name
	nc := &apisv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: apisv1.GroupVersion, Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.NewTime(inst.LaunchTime),
			Annotations: map[string]string{AnnotationFromCloud: "true"}},
		Spec: apisv1.NodeClaimSpec{Taints: tmpl.Spec.Taints, StartupTaints: tmpl.Spec.StartupTaints, NodeClassRef: tmpl.Spec.NodeClassRef,
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
				Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{inst.InstanceType}}}}},
	}
	(&Launcher{Catalog: cat}).record(nc, &inst)
	return *nc
}
