package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// UnavailableOfferingsConfigMap is the ConfigMap, in the agent's namespace, that stores
// unavailable-offering marks so stateless functions find them in the next snapshot.
const UnavailableOfferingsConfigMap = "dovetail-unavailable-offerings"

// indexPodsByNode indexes the pod cache by spec.nodeName. The fake clientset ignores field
// selectors, and a drain must not list every pod of the cluster, so pods of a node are read
// from this index instead of a spec.nodeName field selector.
const indexPodsByNode = "spec.nodeName"

// PendingPodFunc is called (from an informer goroutine) with "namespace/name" whenever a pod is
// added or updated and IsProvisionable holds for it. It must not block for long.
type PendingPodFunc func(key string)

// WatcherOptions configures a Watcher.
type WatcherOptions struct {
	// Namespace is the agent's namespace, where the unavailable-offerings ConfigMap lives.
	Namespace string
	// Clock gives the revision base at construction (Unix nanoseconds); defaults to the real clock.
	Clock clock.PassiveClock
	// OnPendingPod, if set, is called for every event of a provisionable pod.
	OnPendingPod PendingPodFunc
	// OnPodReady, if set, is called when an update turns a pod's PodReady condition True, with
	// the condition's lastTransitionTime (pods already ready when first listed are not reported).
	OnPodReady func(pod *corev1.Pod, readyAt time.Time)
	// SyncTimeout bounds Start's wait for the initial lists (default 2 minutes).
	SyncTimeout time.Duration
	// NodeClassKind is the NodeClass kind of the cluster's cloud: EC2NodeClass (default) or
	// AKSNodeClass. Only that CRD is watched: a cluster has the other cloud's CRD no more than
	// its RBAC grants it, and an informer on a missing resource never syncs.
	NodeClassKind string
}

// Watcher runs the informers Dovetail's decisions need: Pods, Nodes, DaemonSets,
// PodDisruptionBudgets, PersistentVolumeClaims, PersistentVolumes, StorageClasses,
// VolumeAttachments (a terminating node waits for its own to go), the agent's
// ConfigMap, and the Karpenter CRDs NodePool, NodeClaim, the NodeClass of
// WatcherOptions.NodeClassKind and, when the cluster serves it, NodeOverlay (karpenter.sh/v1alpha1)
// through the dynamic client. Every informer event bumps its Revisions.
type Watcher struct {
	opts      WatcherOptions
	revisions *Revisions

	factory   informers.SharedInformerFactory
	cmFactory informers.SharedInformerFactory
	// commitFactory watches the one commitments ConfigMap (apisv1.CommitmentsConfigMap): a field
	// selector takes one name, so it is a factory of its own.
	commitFactory informers.SharedInformerFactory
	dynamic       dynamicinformer.DynamicSharedInformerFactory
	dyn           dynamic.Interface

	pods, nodes, daemonSets, pdbs, configMaps cache.SharedIndexInformer
	pvcs, pvs, storageClasses, limitRanges    cache.SharedIndexInformer
	volumeAttachments                         cache.SharedIndexInformer
	nodePools, nodeClaims, nodeClasses        cache.SharedIndexInformer
	// nodeOverlays is nil until Start found the NodeOverlay CRD served (Start only).
	nodeOverlays cache.SharedIndexInformer
	// provReqs and podTemplates are nil until Start found the ProvisioningRequest CRD served.
	provReqs, podTemplates cache.SharedIndexInformer
	commitments            cache.SharedIndexInformer
}

// NewWatcher builds the informers (not started). kube and dyn are typically a real clientset and
// dynamic client, or client-go's fakes in tests.
func NewWatcher(kube kubernetes.Interface, dyn dynamic.Interface, opts WatcherOptions) (*Watcher, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("WatcherOptions.Namespace: must name the agent's namespace")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 2 * time.Minute
	}
	w := &Watcher{opts: opts, revisions: NewRevisions(opts.Clock.Now().UnixNano()), dyn: dyn}
	// Resync 0: no periodic re-delivery, so every event is a real change.
	w.factory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripManagedFields))
	w.cmFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(opts.Namespace),
		informers.WithTransform(stripManagedFields),
		// Only our ConfigMap (RBAC grants no more); filtered again in code, since fakes ignore it.
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", UnavailableOfferingsConfigMap).String()
		}))
	w.commitFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(opts.Namespace),
		informers.WithTransform(stripManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", apisv1.CommitmentsConfigMap).String()
		}))
	w.dynamic = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)

	w.pods = w.factory.Core().V1().Pods().Informer()
	if err := w.pods.SetTransform(trimPod); err != nil {
		return nil, fmt.Errorf("set pod informer transform: %w", err)
	}
	w.nodes = w.factory.Core().V1().Nodes().Informer()
	w.daemonSets = w.factory.Apps().V1().DaemonSets().Informer()
	w.pdbs = w.factory.Policy().V1().PodDisruptionBudgets().Informer()
	w.configMaps = w.cmFactory.Core().V1().ConfigMaps().Informer()
	w.commitments = w.commitFactory.Core().V1().ConfigMaps().Informer()
	w.pvcs = w.factory.Core().V1().PersistentVolumeClaims().Informer()
	w.pvs = w.factory.Core().V1().PersistentVolumes().Informer()
	w.storageClasses = w.factory.Storage().V1().StorageClasses().Informer()
	w.limitRanges = w.factory.Core().V1().LimitRanges().Informer()
	w.volumeAttachments = w.factory.Storage().V1().VolumeAttachments().Informer()
	w.nodePools = w.dynamic.ForResource(NodePoolGVR).Informer()
	w.nodeClaims = w.dynamic.ForResource(NodeClaimGVR).Informer()
	ncGVR, err := NodeClassGVR(opts.NodeClassKind)
	if err != nil {
		return nil, fmt.Errorf("WatcherOptions.NodeClassKind: %w", err)
	}
	if opts.NodeClassKind == "" {
		w.opts.NodeClassKind = apisv1.KindEC2NodeClass
	}
	w.nodeClasses = w.dynamic.ForResource(ncGVR).Informer()
	for _, inf := range []cache.SharedIndexInformer{w.nodePools, w.nodeClaims, w.nodeClasses} {
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return nil, fmt.Errorf("set informer transform: %w", err)
		}
	}

	if err := w.pods.AddIndexers(cache.Indexers{indexPodsByNode: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{pod.Spec.NodeName}, nil
	}}); err != nil {
		return nil, fmt.Errorf("add pod index: %w", err)
	}

	if _, err := w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.onPod(nil, obj) },
		UpdateFunc: func(old, obj any) { w.onPod(old, obj) },
		DeleteFunc: func(obj any) { w.onDelete(KindPod, obj) },
	}); err != nil {
		return nil, fmt.Errorf("add pod handler: %w", err)
	}
	for kind, inf := range map[string]cache.SharedIndexInformer{
		KindNode: w.nodes, KindDaemonSet: w.daemonSets, KindPodDisruptionBudget: w.pdbs,
		KindConfigMap: w.configMaps, KindNodePool: w.nodePools, KindNodeClaim: w.nodeClaims,
		KindNodeClass: w.nodeClasses, KindPVC: w.pvcs, KindPV: w.pvs, KindStorageClass: w.storageClasses,
		KindLimitRange: w.limitRanges, KindVolumeAttachment: w.volumeAttachments,
	} {
		if err := w.track(kind, inf); err != nil {
			return nil, err
		}
	}
	// The commitments ConfigMap, by name (the API server applies the field selector; fake
	// clients do not, so the name is checked again here).
	if _, err := w.commitments.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			cm, ok := obj.(*corev1.ConfigMap)
			return ok && cm.Name == apisv1.CommitmentsConfigMap
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.onChange(KindCommitments, obj, OpAdd) },
			UpdateFunc: func(_, obj any) { w.onChange(KindCommitments, obj, OpUpdate) },
			DeleteFunc: func(obj any) { w.onDelete(KindCommitments, obj) },
		},
	}); err != nil {
		return nil, fmt.Errorf("add %s handler: %w", KindCommitments, err)
	}
	return w, nil
}

// track bumps the revisions of kind on every event of inf.
func (w *Watcher) track(kind string, inf cache.SharedIndexInformer) error {
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.onChange(kind, obj, OpAdd) },
		UpdateFunc: func(old, obj any) {
			w.onChange(kind, obj, OpUpdate)
			if lifecycleRelevant(kind, old, obj) {
				w.revisions.Notice(kind)
			}
		},
		DeleteFunc: func(obj any) { w.onDelete(kind, obj) },
	}); err != nil {
		return fmt.Errorf("add %s handler: %w", kind, err)
	}
	return nil
}

// watchOverlays adds the NodeOverlay informer when the API server serves the resource. The CRD
// is alpha and optional (Karpenter's chart installs it, a cluster set up from older Karpenter
// CRDs lacks it): an informer on a resource that is not served would never sync and hold the
// agent's start, so 404 means none, as `dovetail plan --kubeconfig` reads it (StateResources).
// Any other error (403: RBAC) fails the start. Installing the CRD later takes an agent restart.
func (w *Watcher) watchOverlays(ctx context.Context) error {
	_, err := w.dyn.Resource(NodeOverlayGVR).List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("probe %s: %w", NodeOverlayGVR.GroupResource(), err)
	}
	inf := w.dynamic.ForResource(NodeOverlayGVR).Informer()
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("set informer transform: %w", err)
	}
	if err := w.track(KindNodeOverlay, inf); err != nil {
		return err
	}
	w.nodeOverlays = inf
	return nil
}

// watchProvisioningRequests adds the ProvisioningRequest informer, and the PodTemplate
// informer its pod sets are read from, when the API server serves Cluster Autoscaler's CRD: it
// is optional (a cluster without batch workloads lacks it), so 404 means none, as for
// NodeOverlays; any other error (403: RBAC) fails the start. PodTemplates are watched only then:
// without ProvisioningRequests nothing reads them.
func (w *Watcher) watchProvisioningRequests(ctx context.Context) error {
	_, err := w.dyn.Resource(ProvisioningRequestGVR).List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("probe %s: %w", ProvisioningRequestGVR.GroupResource(), err)
	}
	inf := w.dynamic.ForResource(ProvisioningRequestGVR).Informer()
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("set informer transform: %w", err)
	}
	if err := w.track(KindProvisioningRequest, inf); err != nil {
		return err
	}
	pt := w.factory.Core().V1().PodTemplates().Informer()
	if err := w.track(KindPodTemplate, pt); err != nil {
		return err
	}
	w.provReqs, w.podTemplates = inf, pt
	return nil
}

// WatchesProvisioningRequests reports whether Start found ProvisioningRequests served and
// watches them.
func (w *Watcher) WatchesProvisioningRequests() bool { return w.provReqs != nil }

// WatchesNodeOverlays reports whether Start found NodeOverlays served and watches them.
func (w *Watcher) WatchesNodeOverlays() bool { return w.nodeOverlays != nil }

// trimPod is the pod informer's transform: stripManagedFields, and the parts of a pod that no
// decision reads, which every snapshot would otherwise carry for every pod, pending and bound
// (docs/scale.md, "Eighth pass": at 10,000 pods the snapshot was 30 MB of JSON, and dropping
// these parts cut its decoding by 23 % and the memo's copy by 31 %). What the solver,
// the disruption rules, quarantine, drain and the commands read stays: metadata, the scheduling
// fields of the spec (node name and selector, affinity, tolerations, spread constraints,
// priority, overhead, runtime class, scheduling gates, host network and ports), each
// container's name, image, resources, ports and restart policy, the volumes that claim, attach
// or name storage, and the status. Dropped:
//   - per container (init, regular and ephemeral): command, args, working directory, env,
//     volume mounts and devices, probes, lifecycle hooks, security context, termination
//     message settings, pull policy, stdin and TTY;
//   - the volumes whose content the kubelet writes on the node (projected, configMap, secret,
//     downwardAPI): node-local, never attached, with no topology and no capacity;
//   - the spec's image pull secrets, security context, DNS config and host aliases;
//   - the status's pod and host IPs.
//
// The agent never writes a pod from its cache (NominatePods patches the tolerations it read),
// so nothing dropped here can be lost on the API server.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return stripManagedFields(obj)
	}
	pod.ManagedFields = nil
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			trimContainer(&list[i])
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		trimContainer((*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	vols := pod.Spec.Volumes[:0]
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil && v.ConfigMap == nil && v.Secret == nil && v.DownwardAPI == nil {
			vols = append(vols, v)
		}
	}
	clear(pod.Spec.Volumes[len(vols):])
	if pod.Spec.Volumes = vols; len(vols) == 0 {
		pod.Spec.Volumes = nil
	}
	pod.Spec.ImagePullSecrets, pod.Spec.SecurityContext, pod.Spec.DNSConfig, pod.Spec.HostAliases = nil, nil, nil, nil
	pod.Status.PodIP, pod.Status.PodIPs, pod.Status.HostIP, pod.Status.HostIPs = "", nil, "", nil
	return pod, nil
}

// trimContainer keeps what trimPod says a container keeps.
func trimContainer(c *corev1.Container) {
	*c = corev1.Container{Name: c.Name, Image: c.Image, Ports: c.Ports, Resources: c.Resources,
		ResizePolicy: c.ResizePolicy, RestartPolicy: c.RestartPolicy, RestartPolicyRules: c.RestartPolicyRules}
}

// stripManagedFields drops metadata.managedFields: large, never needed by a decision, and it
// would bloat every snapshot.
func stripManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// Start starts every informer, running until ctx ends, and waits until their caches are synced
// (at most SyncTimeout). An error names the informers that did not sync (typically a missing CRD
// or missing RBAC).
func (w *Watcher) Start(ctx context.Context) error {
	if err := w.watchOverlays(ctx); err != nil {
		return err
	}
	if err := w.watchProvisioningRequests(ctx); err != nil {
		return err
	}
	w.factory.Start(ctx.Done())
	w.cmFactory.Start(ctx.Done())
	w.commitFactory.Start(ctx.Done())
	w.dynamic.Start(ctx.Done())
	ctx, cancel := context.WithTimeout(ctx, w.opts.SyncTimeout)
	defer cancel()

	var unsynced []string
	for typ, ok := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			unsynced = append(unsynced, typ.String())
		}
	}
	for typ, ok := range w.cmFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			unsynced = append(unsynced, "configmap "+typ.String())
		}
	}
	for typ, ok := range w.commitFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			unsynced = append(unsynced, "configmap "+apisv1.CommitmentsConfigMap+" "+typ.String())
		}
	}
	for gvr, ok := range w.dynamic.WaitForCacheSync(ctx.Done()) {
		if !ok {
			unsynced = append(unsynced, gvr.String())
		}
	}
	if len(unsynced) > 0 {
		sort.Strings(unsynced)
		return fmt.Errorf("informer caches not synced (CRDs installed? RBAC?): %s", strings.Join(unsynced, ", "))
	}
	return nil
}

// Shutdown stops the informers and waits for their goroutines; call after ctx of Start ended.
func (w *Watcher) Shutdown() {
	w.factory.Shutdown()
	w.cmFactory.Shutdown()
	w.commitFactory.Shutdown()
	w.dynamic.Shutdown()
}

// Revisions returns the watcher's change tracker.
func (w *Watcher) Revisions() *Revisions { return w.revisions }

// Revision returns the current revision.
func (w *Watcher) Revision() int64 { return w.revisions.Current() }

// ChangedSince reports whether the object (a Kind* constant and "namespace/name" or "name") was
// added, updated or deleted after revision rev. See Revisions.ChangedSince.
func (w *Watcher) ChangedSince(kind, key string, rev int64) bool {
	return w.revisions.ChangedSince(kind, key, rev)
}

// CreatedSince reports whether the object was (re)created after revision rev.
func (w *Watcher) CreatedSince(kind, key string, rev int64) bool {
	return w.revisions.CreatedSince(kind, key, rev)
}

// NodePodsChangedSince reports whether a pod (not DaemonSet, mirror or terminal) became bound to
// the node after revision rev.
func (w *Watcher) NodePodsChangedSince(node string, rev int64) bool {
	return w.revisions.NodePodsChangedSince(node, rev)
}

// Node returns the cached Node (shared: do not modify) or nil.
func (w *Watcher) Node(name string) *corev1.Node {
	obj, ok, err := w.nodes.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	return n
}

// NodeClaim returns the cached NodeClaim converted to its Dovetail type, or nil when absent.
func (w *Watcher) NodeClaim(name string) (*apisv1.NodeClaim, error) {
	obj, ok, err := w.nodeClaims.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("NodeClaim %s: cache holds %T", name, obj)
	}
	nc := &apisv1.NodeClaim{}
	if err := FromUnstructured(u, nc); err != nil {
		return nil, fmt.Errorf("NodeClaim %s: %w", name, err)
	}
	return nc, nil
}

// PodsOnNode returns the cached pods bound to the node, sorted by namespace/name (shared: do not
// modify).
func (w *Watcher) PodsOnNode(node string) []*corev1.Pod {
	objs, err := w.pods.GetIndexer().ByIndex(indexPodsByNode, node)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return podKey(out[i]) < podKey(out[j]) })
	return out
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func (w *Watcher) onPod(oldObj, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	op := OpUpdate
	if oldObj == nil {
		op = OpAdd
	}
	rev := w.revisions.Bump(KindPod, podKey(pod), op)
	if countsAsNewOnNode(pod) {
		old, _ := oldObj.(*corev1.Pod)
		if old == nil || old.Spec.NodeName != pod.Spec.NodeName {
			w.revisions.PodBound(pod.Spec.NodeName, rev)
		}
	}
	if w.opts.OnPendingPod != nil && IsProvisionable(pod) {
		w.opts.OnPendingPod(podKey(pod))
	}
	if old, ok := oldObj.(*corev1.Pod); ok && w.opts.OnPodReady != nil {
		if _, was := podReadyAt(old); !was {
			if at, now := podReadyAt(pod); now {
				w.opts.OnPodReady(pod, at)
			}
		}
	}
}

// podReadyAt reports whether the pod's PodReady condition is True, and since when.
func podReadyAt(p *corev1.Pod) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time, c.Status == corev1.ConditionTrue
		}
	}
	return time.Time{}, false
}

func (w *Watcher) onChange(kind string, obj any, op Op) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		w.revisions.Bump(kind, key, op)
	}
}

// lifecycleRelevant reports whether an update can move a NodeClaim's lifecycle on: any NodeClaim,
// NodeClass, NodePool or NodeOverlay update (a status written: a class turned Ready; an
// overlay's spec, which its status follows), and a Node update other
// than a status heartbeat (labels, annotations, taints,
// finalizers, deletion, spec, readiness or allocatable changed).
func lifecycleRelevant(kind string, oldObj, obj any) bool {
	switch kind {
	case KindNodeClaim, KindNodeClass, KindNodePool, KindNodeOverlay:
		return true
	case KindNode:
		o, ok1 := oldObj.(*corev1.Node)
		n, ok2 := obj.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Annotations, n.Annotations) ||
			!equality.Semantic.DeepEqual(o.Finalizers, n.Finalizers) || !equality.Semantic.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) ||
			!equality.Semantic.DeepEqual(o.Spec, n.Spec) || nodeReady(o) != nodeReady(n) ||
			!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable)
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *Watcher) onDelete(kind string, obj any) {
	// DeletionHandlingMetaNamespaceKeyFunc unwraps DeletedFinalStateUnknown tombstones.
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		w.revisions.Bump(kind, key, OpDelete)
	}
}

// listTyped returns the store's objects of type T sorted by namespace/name.
func listTyped[T any](store cache.Store) []*T {
	items := store.List()
	type keyed struct {
		key string
		obj *T
	}
	ks := make([]keyed, 0, len(items))
	for _, o := range items {
		t, ok := o.(*T)
		if !ok {
			continue
		}
		key, err := cache.MetaNamespaceKeyFunc(o)
		if err != nil {
			continue
		}
		ks = append(ks, keyed{key, t})
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].key < ks[j].key })
	out := make([]*T, len(ks))
	for i, k := range ks {
		out[i] = k.obj
	}
	return out
}

// stores groups the informers' stores for the snapshot builder.
type stores struct {
	pods, nodes, daemonSets, pdbs, configMaps cache.Store
	commitments                               cache.Store
	pvcs, pvs, storageClasses, limitRanges    cache.Store
	volumeAttachments                         cache.Store
	nodePools, nodeClaims, nodeClasses        cache.Store
	nodeOverlays                              cache.Store // nil: not served
	provReqs, podTemplates                    cache.Store // nil: not served
	nodeClassKind                             string
}

func (w *Watcher) stores() stores {
	var overlays cache.Store
	if w.nodeOverlays != nil {
		overlays = w.nodeOverlays.GetStore()
	}
	var provReqs, podTemplates cache.Store
	if w.provReqs != nil {
		provReqs, podTemplates = w.provReqs.GetStore(), w.podTemplates.GetStore()
	}
	return stores{nodeOverlays: overlays, provReqs: provReqs, podTemplates: podTemplates,
		pods: w.pods.GetStore(), nodes: w.nodes.GetStore(), daemonSets: w.daemonSets.GetStore(),
		pdbs: w.pdbs.GetStore(), configMaps: w.configMaps.GetStore(), commitments: w.commitments.GetStore(),
		pvcs: w.pvcs.GetStore(), pvs: w.pvs.GetStore(), storageClasses: w.storageClasses.GetStore(),
		limitRanges: w.limitRanges.GetStore(), volumeAttachments: w.volumeAttachments.GetStore(),
		nodePools: w.nodePools.GetStore(), nodeClaims: w.nodeClaims.GetStore(), nodeClasses: w.nodeClasses.GetStore(), nodeClassKind: w.opts.NodeClassKind,
	}
}

// Pod returns the cached pod namespace/name, or nil when absent (shared: do not modify).
func (w *Watcher) Pod(namespace, name string) *corev1.Pod {
	obj, ok, err := w.pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*corev1.Pod)
	return p
}
