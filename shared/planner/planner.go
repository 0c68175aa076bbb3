// Package planner turns a set of Kubernetes manifests (or a dump of a live cluster) into what
// the functions decide on: the cluster snapshot, and the solver's input built from it. It is the
// one path `dovetail plan` and the scenario suite (testdata/scenarios) share: manifests →
// Snapshot → Input → Solve.
package planner

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provreq"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// SnapshotCluster is the cluster name a snapshot built from manifests carries.
const SnapshotCluster = "plan"

// Snapshot builds the snapshot the agent would publish for the manifests' cluster, dated at:
// the pods of Set.ExpandPods (with the defaults their namespace's LimitRanges give, as the API
// server's LimitRanger would before any scheduler sees them; a pod already admitted has its
// requests and is unchanged) sorted into pending pods (unbound, not finished, not being deleted,
// not a DaemonSet's: those wait for their own node) and pods bound to a node (spec.nodeName,
// not finished); NodePools, NodeClasses, NodeClaims, NodeOverlays, Nodes, DaemonSets, LimitRanges, PDBs,
// ProvisioningRequests and PodTemplates as read; claims from Set.ExpandPVCs (documents, StatefulSet volumeClaimTemplates, ephemeral
// volumes, default StorageClass), PersistentVolumes and StorageClasses as read.
//
// A pod bound to a node the manifests do not hold (a dump taken while a node was being removed,
// or one that lists pods but not nodes) is what the kube-controller-manager's PodGC deletes: a
// controller's pod is recreated unbound, so it is planned as pending; a bare pod is gone for good
// and left out. OrphanWarning says so in one line.
func Snapshot(set *manifests.Set, at time.Time) (*events.Snapshot, error) {
	snap := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: SnapshotCluster, Revision: 1,
		Time: metav1.NewTime(at), Complete: true}
	nodes := map[string]bool{}
	for _, n := range set.Nodes {
		nodes[n.Name] = true
		snap.Nodes = append(snap.Nodes, *n)
	}
	for _, p := range set.ExpandPods() {
		if scheduling.IsTerminal(p) {
			continue
		}
		p.Spec = scheduling.ApplyLimitRangeDefaults(p.Spec, scheduling.LimitRangesIn(set.LimitRanges, p.Namespace))
		switch {
		case p.Spec.NodeName == "" && (p.DeletionTimestamp != nil || scheduling.IsDaemonSetPod(p)):
		case p.Spec.NodeName == "":
			snap.PendingPods = append(snap.PendingPods, *p)
		case !nodes[p.Spec.NodeName]:
			if recreated(p) {
				p.Spec.NodeName = ""
				p.Status = corev1.PodStatus{Phase: corev1.PodPending}
				snap.PendingPods = append(snap.PendingPods, *p)
			}
		default:
			snap.Pods = append(snap.Pods, *p)
		}
	}
	for _, d := range set.DaemonSets {
		snap.DaemonSets = append(snap.DaemonSets, *d)
	}
	for _, lr := range set.LimitRanges {
		snap.LimitRanges = append(snap.LimitRanges, *lr)
	}
	for _, p := range set.PDBs {
		snap.PDBs = append(snap.PDBs, *p)
	}
	for _, np := range set.NodePools {
		if danglingRef(set, np) {
			continue // launches nothing, as Karpenter's NodeClassReady=False pool (DanglingNodeClassWarnings)
		}
		snap.NodePools = append(snap.NodePools, *np)
	}
	snap.NodeClasses = append(snap.NodeClasses, set.NodeClasses...)
	for _, nc := range set.NodeClaims {
		snap.NodeClaims = append(snap.NodeClaims, *nc)
	}
	for _, o := range set.NodeOverlays {
		snap.NodeOverlays = append(snap.NodeOverlays, *o)
	}
	snap.Commitments = set.Commitments
	for _, pr := range set.ProvisioningRequests {
		snap.ProvisioningRequests = append(snap.ProvisioningRequests, *pr)
	}
	for _, t := range set.PodTemplates {
		snap.PodTemplates = append(snap.PodTemplates, *t)
	}
	for _, c := range set.ExpandPVCs() {
		snap.PVCs = append(snap.PVCs, *c)
	}
	for _, pv := range set.PVs {
		snap.PVs = append(snap.PVs, *pv)
	}
	for _, sc := range set.StorageClasses {
		snap.StorageClasses = append(snap.StorageClasses, *sc)
	}
	return snap, nil
}

// danglingRef reports whether np's nodeClassRef names a NodeClass the input does not hold while
// it holds others. Input with no NodeClass at all (a NodePool and workloads, the usual shape of a
// manifest set or a bug report) is planned as before, with the pools' default node settings: the
// user left the classes out, not the cluster; a live dump or a set that carries classes but not
// this one is what Karpenter sees as NodeClassReady=False.
func danglingRef(set *manifests.Set, np *apisv1.NodePool) bool {
	ref := np.Spec.Template.Spec.NodeClassRef
	return len(set.NodeClasses) > 0 && ref != nil && ref.Name != "" && apisv1.FindNodeClass(set.NodeClasses, ref).IsZero()
}

// DanglingNodeClassWarnings names each NodePool whose nodeClassRef names a NodeClass not in
// the input while the input holds other NodeClasses (danglingRef). Karpenter sets such a
// NodePool's NodeClassReady condition False (its NodeClass is not found) and provisions nothing
// from a NodePool that is not Ready, so Snapshot leaves it out and pods only it could take are
// unschedulable.
func DanglingNodeClassWarnings(set *manifests.Set) []string {
	var out []string
	for _, np := range set.NodePools {
		if danglingRef(set, np) {
			ref := np.Spec.Template.Spec.NodeClassRef
			out = append(out, fmt.Sprintf("NodePool %s: spec.template.spec.nodeClassRef names %s %s, which is not in the input: NodeClassReady=False, so it launches nothing (left out of the plan)",
				np.Name, orDefault(ref.Kind, "NodeClass"), ref.Name))
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Warnings are the lines `dovetail plan` prints about the input before planning: pods bound to
// missing nodes (OrphanWarning), workloads in an ownerReference cycle (each planned as if it had
// no owner: manifests.Set.OwnerCycles) and NodePools whose NodeClass is missing
// (DanglingNodeClassWarnings).
func Warnings(set *manifests.Set) []string {
	var out []string
	if w := OrphanWarning(set); w != "" {
		out = append(out, w)
	}
	if c := set.OwnerCycles(); len(c) > 0 {
		out = append(out, fmt.Sprintf("%d workload(s) whose ownerReferences form a cycle, each planned with its own replicas as if it had no owner: %s",
			len(c), strings.Join(c, ", ")))
	}
	return append(out, DanglingNodeClassWarnings(set)...)
}

// recreated reports whether a pod PodGC deletes off a missing node comes back unbound: its
// controller (not a DaemonSet, whose pod is for that node only) recreates it, unless it was being
// deleted already.
func recreated(p *corev1.Pod) bool {
	return metav1.GetControllerOf(p) != nil && p.DeletionTimestamp == nil && !scheduling.IsDaemonSetPod(p)
}

// OrphanWarning returns one line naming the pods bound to nodes the manifests do not hold and
// what Snapshot does with them, or "" when there are none.
func OrphanWarning(set *manifests.Set) string {
	nodes := map[string]bool{}
	for _, n := range set.Nodes {
		nodes[n.Name] = true
	}
	var pending, gone []string
	for _, p := range set.Pods {
		if p.Spec.NodeName == "" || nodes[p.Spec.NodeName] || scheduling.IsTerminal(p) {
			continue
		}
		ref := p.Namespace + "/" + p.Name + " on " + p.Spec.NodeName
		if recreated(p) {
			pending = append(pending, ref)
		} else {
			gone = append(gone, ref)
		}
	}
	if len(pending)+len(gone) == 0 {
		return ""
	}
	const show = 5
	list := func(refs []string) string {
		if len(refs) > show {
			return strings.Join(refs[:show], ", ") + fmt.Sprintf(" and %d more", len(refs)-show)
		}
		return strings.Join(refs, ", ")
	}
	msg := fmt.Sprintf("%d pod(s) bound to nodes not in the input (PodGC deletes them)", len(pending)+len(gone))
	if len(pending) > 0 {
		msg += fmt.Sprintf("; planned as pending, their controllers recreate them: %s", list(pending))
	}
	if len(gone) > 0 {
		msg += fmt.Sprintf("; left out, nothing recreates them: %s", list(gone))
	}
	return msg
}

// Input builds the solver's input from manifests (provisioning.InputFromSnapshot over
// Snapshot), planning allocatable with the cloud provider's node settings rule (settings, from
// the edge). The free instances of the EC2NodeClasses' capacity reservations come from their
// apisv1.AnnotationReservationCounts (the status carries none). Pods consuming a
// ProvisioningRequest are held back (provreq.HoldBack), as the provision function holds them.
// Its errors are Snapshot's and a malformed reservation-count annotation.
func Input(set *manifests.Set, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc) (provisioning.Input, error) {
	in, _, err := inputAt(set, cat, settings, time.Time{})
	return in, err
}

// inputAt is Input on the snapshot dated at, with the consumers it held back.
func inputAt(set *manifests.Set, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc, at time.Time) (provisioning.Input, []provreq.Hold, error) {
	if _, err := provisioning.ReservationCountsFromAnnotations(set.NodeClasses); err != nil {
		return provisioning.Input{}, nil, err
	}
	snap, err := Snapshot(set, at)
	if err != nil {
		return provisioning.Input{}, nil, err
	}
	var held []provreq.Hold
	snap.PendingPods, held = provreq.HoldBack(snap)
	return provisioning.InputFromSnapshot(snap, cat, settings), held, nil
}

// Plan is Input followed by provisioning.Solve under Karpenter's default policies; it also
// returns the input it solved.
func Plan(set *manifests.Set, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc) (*provisioning.Plan, provisioning.Input, error) {
	return PlanWith(set, cat, settings, provisioning.Policies{})
}

// PlanWith is Plan under the operator's scheduling policies (--min-values-policy,
// --preference-policy).
func PlanWith(set *manifests.Set, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc, pol provisioning.Policies) (*provisioning.Plan, provisioning.Input, error) {
	plan, in, _, err := PlanAt(set, cat, settings, pol, time.Time{})
	return plan, in, err
}

// PlanAt is PlanWith on the snapshot dated at (a ProvisioningRequest's booking window reads
// it), and also returns the pods held back as consumers of ProvisioningRequests, in the
// snapshot's pending order.
func PlanAt(set *manifests.Set, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc, pol provisioning.Policies, at time.Time) (*provisioning.Plan, provisioning.Input, []provreq.Hold, error) {
	in, held, err := inputAt(set, cat, settings, at)
	if err != nil {
		return nil, in, nil, err
	}
	in.Policies = pol
	plan, err := provisioning.Solve(in)
	return plan, in, held, err
}
