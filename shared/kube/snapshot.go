package kube

import (
	"fmt"
	"log/slog"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// SnapshotBuilder turns the Watcher's caches into an events.Snapshot.
type SnapshotBuilder struct {
	watcher   *Watcher
	cluster   string
	namespace string
	clock     clock.PassiveClock
	// Logger receives objects left out of a snapshot (nil: slog.Default()).
	Logger *slog.Logger
	// Facts, when set, gives the cluster facts last discovered (DiscoverClusterFacts) for
	// Snapshot.ClusterFacts; it must not block (the agent keeps them refreshed).
	Facts func() *events.ClusterFacts
	// afterRevision, in tests, runs between reading the revision and the caches.
	afterRevision func()
}

// NewSnapshotBuilder returns a builder for the cluster's snapshots; clk stamps Snapshot.Time and
// expires unavailable-offering marks (nil: real clock).
func NewSnapshotBuilder(w *Watcher, cluster string, clk clock.PassiveClock) *SnapshotBuilder {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &SnapshotBuilder{watcher: w, cluster: cluster, namespace: w.opts.Namespace, clock: clk}
}

// Build copies the caches into a new Snapshot: pending pods (IsProvisionable), all nodes, bound
// non-terminal pods (IsBoundActive), DaemonSets, PDBs, the volumes of those pods (see
// volumesFor), every StorageClass, NodePools, EC2NodeClasses, NodeClaims, NodeOverlays and unexpired
// unavailable-offering marks, each list sorted by namespace/name (marks by instance type,
// zone, capacity type) so equal cluster states give equal snapshots.
//
// The revision is read before the caches, so a change racing with Build is counted as after the
// snapshot: a command made from it will see that change as newer and be checked against it
// (conservative, never the other way round).
//
// An error means a NodeClaim could not be converted to its Dovetail type (field path and reason).
// A malformed NodePool, EC2NodeClass, NodeOverlay or unavailable-offering mark is skipped and
// logged.
func (b *SnapshotBuilder) Build() (*events.Snapshot, error) {
	rev := b.watcher.Revision()
	now := b.clock.Now()
	if b.afterRevision != nil {
		b.afterRevision()
	}
	st := b.watcher.stores()
	snap := &events.Snapshot{
		SchemaVersion: events.SnapshotSchemaVersion,
		Cluster:       b.cluster,
		Revision:      rev,
		Time:          metav1.NewTime(now),
		// The builder serves only after the watcher's caches synced (Watcher.Start).
		Complete: true,
	}
	// Pods the lifecycle function nominated to the node planned for them stay pending pods: their
	// nomination is Dovetail's hint, not a preemption (which IsProvisionable leaves alone).
	ours := plannedNominations(st)
	for _, p := range listTyped[corev1.Pod](st.pods) {
		switch {
		case IsProvisionable(p) || (p.Status.NominatedNodeName != "" && ours[p.Namespace+"/"+p.Name] == p.Status.NominatedNodeName && isProvisionableIgnoringNomination(p)):
			snap.PendingPods = append(snap.PendingPods, *p.DeepCopy())
		case IsBoundActive(p):
			snap.Pods = append(snap.Pods, *p.DeepCopy())
		}
	}
	for _, n := range listTyped[corev1.Node](st.nodes) {
		// A Node the informer's store holds before its event handler counted it (client-go
		// updates the store first) was created after rev, and every command naming it on this
		// snapshot would be refused as such (Applier.checkNode). Left out, it shows in the next
		// snapshot, which the handler's count triggers. make scale (N = 1,000) lost a node's
		// registration that way: the lifecycle's RegisterNode was refused, and its re-sends,
		// under the same ID, were deduplicated.
		if b.watcher.CreatedSince(KindNode, n.Name, rev) {
			continue
		}
		snap.Nodes = append(snap.Nodes, *n.DeepCopy())
	}
	for _, d := range listTyped[appsv1.DaemonSet](st.daemonSets) {
		snap.DaemonSets = append(snap.DaemonSets, *d.DeepCopy())
	}
	for _, lr := range listTyped[corev1.LimitRange](st.limitRanges) {
		snap.LimitRanges = append(snap.LimitRanges, *lr.DeepCopy())
	}
	for _, p := range listTyped[policyv1.PodDisruptionBudget](st.pdbs) {
		snap.PDBs = append(snap.PDBs, *p.DeepCopy())
	}
	snap.PVCs, snap.PVs = volumesFor(st, snap.PendingPods, snap.Pods)
	for _, sc := range listTyped[storagev1.StorageClass](st.storageClasses) {
		snap.StorageClasses = append(snap.StorageClasses, *sc.DeepCopy())
	}
	snap.VolumeAttachments = terminatingAttachments(st, snap.Nodes)
	var err error
	// A NodePool or NodeClass that does not convert is left out (and logged): it cannot be used,
	// and the others still can. A NodeClaim that does not convert fails the build: leaving
	// in-flight capacity out would make the next decision launch it again.
	snap.NodePools, _ = convertAll[apisv1.NodePool](b.log(), st.nodePools, KindNodePool, true)
	if st.nodeClassKind == apisv1.KindAKSNodeClass {
		aksClasses, _ := convertAll[apisv1.AKSNodeClass](b.log(), st.nodeClasses, apisv1.KindAKSNodeClass, true)
		for i := range aksClasses {
			snap.NodeClasses = append(snap.NodeClasses, apisv1.NodeClass{AKS: &aksClasses[i]})
		}
	} else {
		ec2Classes, _ := convertAll[apisv1.EC2NodeClass](b.log(), st.nodeClasses, apisv1.KindEC2NodeClass, true)
		for i := range ec2Classes {
			snap.NodeClasses = append(snap.NodeClasses, apisv1.NodeClass{EC2: &ec2Classes[i]})
		}
	}
	if snap.NodeClaims, err = convertAll[apisv1.NodeClaim](b.log(), st.nodeClaims, KindNodeClaim, false); err != nil {
		return nil, err
	}
	// An overlay that does not convert is left out (and logged) like a NodePool: it cannot apply.
	if st.nodeOverlays != nil {
		snap.NodeOverlays, _ = convertAll[apisv1.NodeOverlay](b.log(), st.nodeOverlays, KindNodeOverlay, true)
	}
	if st.provReqs != nil {
		snap.ProvisioningRequests, snap.PodTemplates = provisioningRequests(b.log(), st)
	}
	if obj, ok, _ := st.configMaps.GetByKey(b.namespace + "/" + UnavailableOfferingsConfigMap); ok {
		cm, _ := obj.(*corev1.ConfigMap)
		marks, errs := decodeOfferingMarks(cm, now)
		for _, e := range errs {
			b.log().Error("skipping malformed unavailable-offering mark", "err", e)
		}
		snap.UnavailableOfferings = marks
	}
	snap.Commitments = b.commitments(st)
	if b.Facts != nil {
		if f := b.Facts(); f != nil {
			c := *f
			snap.ClusterFacts = &c
		}
	}
	return snap, nil
}

// convertAll converts the store's unstructured objects (sorted by name) into T. With skipBad, an
// object that fails is logged and left out; otherwise the first failure is returned.
func convertAll[T any](log *slog.Logger, store cache.Store, kind string, skipBad bool) ([]T, error) {
	objs := listTyped[unstructured.Unstructured](store)
	out := make([]T, 0, len(objs))
	for _, u := range objs {
		var t T
		if err := FromUnstructured(u, &t); err != nil {
			err = fmt.Errorf("%s %s: %w", kind, u.GetName(), err)
			if !skipBad {
				return nil, err
			}
			log.Error("leaving object out of the snapshot", "err", err)
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// FromUnstructured converts a dynamic-client object into a typed struct (NodePool, NodeClaim,
// EC2NodeClass) with runtime.DefaultUnstructuredConverter; the error names the failing field.
func FromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), into)
}

// ToUnstructured converts a typed object into a dynamic-client object with apiVersion and kind set.
func ToUnstructured(obj any, apiVersion, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, nil
}

func (b *SnapshotBuilder) log() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.Default()
}

// volumesFor returns the PersistentVolumeClaims the pods refer to (persistentVolumeClaim volumes,
// and generic ephemeral volumes through their "<pod>-<volume>" claim), and the PersistentVolumes
// bound or pre-bound (claimRef) to those claims plus every unbound Available PV (kube-scheduler may bind a
// WaitForFirstConsumer claim to one of them, so its topology matters). Claims and volumes that
// no snapshot pod can use are left out: they only make the snapshot bigger. Both lists are
// sorted by namespace/name; a missing claim is simply absent (the solver reports the pod).
func volumesFor(st stores, podLists ...[]corev1.Pod) ([]corev1.PersistentVolumeClaim, []corev1.PersistentVolume) {
	wanted := map[string]bool{}
	for _, pods := range podLists {
		for i := range pods {
			p := &pods[i]
			for _, v := range p.Spec.Volumes {
				switch {
				case v.PersistentVolumeClaim != nil:
					wanted[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName] = true
				case v.Ephemeral != nil:
					wanted[p.Namespace+"/"+p.Name+"-"+v.Name] = true
				}
			}
		}
	}
	var pvcs []corev1.PersistentVolumeClaim
	boundPV := map[string]bool{}
	if len(wanted) > 0 {
		for _, c := range listTyped[corev1.PersistentVolumeClaim](st.pvcs) {
			if wanted[c.Namespace+"/"+c.Name] {
				pvcs = append(pvcs, *c.DeepCopy())
				if c.Spec.VolumeName != "" {
					boundPV[c.Spec.VolumeName] = true
				}
			}
		}
	}
	var pvs []corev1.PersistentVolume
	for _, v := range listTyped[corev1.PersistentVolume](st.pvs) {
		preBound := v.Spec.ClaimRef != nil && wanted[v.Spec.ClaimRef.Namespace+"/"+v.Spec.ClaimRef.Name]
		if boundPV[v.Name] || preBound || (v.Spec.ClaimRef == nil && v.Status.Phase == corev1.VolumeAvailable) {
			pvs = append(pvs, *v.DeepCopy())
		}
	}
	return pvcs, pvs
}

// plannedNominations maps "namespace/name" to the node a NodeClaim's planned pods
// (apisv1.AnnotationPlannedPods) were meant for: its status.nodeName, or the Node whose
// providerID is the NodeClaim's.
func plannedNominations(st stores) map[string]string {
	nodeOf := map[string]string{}
	for _, n := range listTyped[corev1.Node](st.nodes) {
		if n.Spec.ProviderID != "" {
			nodeOf[n.Spec.ProviderID] = n.Name
		}
	}
	out := map[string]string{}
	for _, obj := range st.nodeClaims.List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		list := u.GetAnnotations()[apisv1.AnnotationPlannedPods]
		if list == "" {
			continue
		}
		node, _, _ := unstructured.NestedString(u.Object, "status", "nodeName")
		if node == "" {
			pid, _, _ := unstructured.NestedString(u.Object, "status", "providerID")
			node = nodeOf[pid]
		}
		if node == "" {
			continue
		}
		for _, key := range strings.Split(list, ",") {
			out[key] = node
		}
	}
	return out
}

// terminatingAttachments are the VolumeAttachments of the nodes a termination may wait on: nodes
// being deleted or tainted karpenter.sh/disrupted (a NodeClaim's deletion taints its node
// first). Other nodes' attachments decide nothing and would only grow the snapshot.
func terminatingAttachments(st stores, nodes []corev1.Node) []storagev1.VolumeAttachment {
	leaving := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		if n.DeletionTimestamp != nil {
			leaving[n.Name] = true
			continue
		}
		for _, t := range n.Spec.Taints {
			if t.Key == apisv1.TaintKeyDisrupted {
				leaving[n.Name] = true
			}
		}
	}
	var out []storagev1.VolumeAttachment
	for _, va := range listTyped[storagev1.VolumeAttachment](st.volumeAttachments) {
		if leaving[va.Spec.NodeName] {
			out = append(out, *va.DeepCopy())
		}
	}
	return out
}
