//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/events"
	lifecyclefn "github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/planner"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provisioning/scenariotest"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// scenarioNamespace is the harness's agent namespace (the unavailable-offerings ConfigMap).
const scenarioNamespace = "dovetail-system"

// notExpressible lists the scenarios whose input cannot be built as cluster objects in this
// control plane, with the reason. Every other testdata/scenarios case runs.
var notExpressible = map[string]string{}

// knownDisagreements are the scenarios where kube-scheduler does not do what the plan over the
// manifests says, with what was found. They are reported (with the scheduler's doing) and do
// not fail the test; any other disagreement does.
var knownDisagreements = map[string]string{}

// TestScenariosOnKubeScheduler runs the scenario suite (testdata/scenarios) through the real
// kube-scheduler: for each case, one after the other in one control plane, the scenario's objects
// are created (controllers make the pods), Dovetail's provision function plans on the agent's
// snapshot of the cluster and launches the planned NodeClaims into the fake cloud, whose
// instances register Nodes as their kubelets would (kwok keeps them Ready); the lifecycle
// function registers them (nominating the planned pods and keeping each node for them with the
// dovetail.dev/planned taint until they are bound), a stand-in for the node's daemon removes the
// startup taints, and kube-scheduler binds. The case agrees when every pod the plan placed is
// bound onto the node the plan chose (replicas of one controller are interchangeable: see
// placementAgrees) and every pod the plan called unschedulable is still Pending once every
// planned taint is gone.
func TestScenariosOnKubeScheduler(t *testing.T) {
	if _, _, _, err := (&realcluster.Options{}).Binaries(); err != nil {
		t.Fatalf("the e2e suite needs the control-plane binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	root, err := realcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "testdata", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	// DOVETAIL_SCENARIO=<regexp> runs the scenarios whose name it matches.
	if only := os.Getenv("DOVETAIL_SCENARIO"); only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			t.Fatalf("DOVETAIL_SCENARIO: %v", err)
		}
		files = slices.DeleteFunc(files, func(f string) bool { return !re.MatchString(strings.TrimSuffix(filepath.Base(f), ".yaml")) })
	}
	cp, err := realcluster.Start(ctx, realcluster.Options{Logf: t.Logf, Dir: os.Getenv("DOVETAIL_E2E_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if err := cp.ApplyFiles(ctx, filepath.Join(root, "infra", "crds")); err != nil {
		t.Fatal(err)
	}
	h, err := newScenarioHarness(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()

	agree, ran, suiteStart := 0, 0, time.Now()
	var skipped, disagreed []string
	for _, f := range files {
		s, err := scenariotest.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if why, ok := notExpressible[s.Name]; ok {
			skipped = append(skipped, s.Name+": "+why)
			continue
		}
		ran++
		begin := time.Now()
		fails, err := h.run(ctx, t, s)
		if err != nil {
			fails = append(fails, err.Error())
		}
		if cerr := h.cleanup(ctx); cerr != nil {
			t.Fatalf("%s: cleanup: %v", s.Name, cerr)
		}
		if len(fails) == 0 {
			agree++
			t.Logf("%s: agrees (%s)", s.Name, time.Since(begin).Round(100*time.Millisecond))
			continue
		}
		disagreed = append(disagreed, s.Name)
		report := t.Errorf
		if why, known := knownDisagreements[s.Name]; known {
			report = t.Logf
			t.Logf("%s: known disagreement: %s", s.Name, why)
		}
		for _, f := range fails {
			report("%s: %s", s.Name, f)
		}
	}
	t.Logf("scenarios on kube-scheduler: %d of %d agree (%s); disagree: %v", agree, ran, time.Since(suiteStart).Round(time.Second), disagreed)
	for _, s := range skipped {
		t.Logf("not expressible as cluster objects: %s", s)
	}
}

// scenarioHarness holds what lives across scenarios: the clients, the agent's watcher and
// applier (what the agent runs), one fake cloud per scenario.
type scenarioHarness struct {
	cp      *realcluster.ControlPlane
	kc      kubernetes.Interface
	dc      dynamic.Interface
	watcher *kube.Watcher
	applier *kube.Applier
	builder *kube.SnapshotBuilder
	cat     *catalog.Catalog
	codec   events.Codec
	stopW   context.CancelFunc
	log     *slog.Logger
	seq     int
	// inflight are the manifest NodeClaims whose Nodes register once the plan is made.
	inflight []inflightNode
}

func newScenarioHarness(ctx context.Context, cp *realcluster.ControlPlane) (*scenarioHarness, error) {
	kc, err := cp.Clientset()
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scenarioNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("DOVETAIL_SCENARIO_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w, err := kube.NewWatcher(kc, dc, kube.WatcherOptions{Namespace: scenarioNamespace})
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	if err := w.Start(wctx); err != nil {
		stop()
		return nil, err
	}
	return &scenarioHarness{cp: cp, kc: kc, dc: dc, watcher: w, stopW: stop, log: log, cat: catalog.MustAWS(),
		applier: kube.NewApplier(kc, dc, w, kube.ApplierOptions{Namespace: scenarioNamespace, Logger: log}),
		builder: kube.NewSnapshotBuilder(w, "scenarios", nil), codec: events.Codec{Blobs: &events.MemoryBlobStore{}}}, nil
}

func (h *scenarioHarness) stop() {
	h.stopW()
	h.watcher.Shutdown()
}

// Publish applies each command as the agent does (decode, Applier.Apply); refusals and
// incomplete drains are acknowledged, as the agent acknowledges them.
func (h *scenarioHarness) Publish(ctx context.Context, _ string, _ string, data []byte) error {
	env, err := events.Decode(data)
	if err != nil {
		return err
	}
	cmd, err := h.codec.Command(ctx, env)
	if err != nil {
		return err
	}
	err = h.applier.Apply(kube.WithOrigin(ctx, env.Component), cmd)
	var refused *kube.RefusedError
	var incomplete *kube.DrainIncompleteError
	if errors.As(err, &refused) || errors.As(err, &incomplete) {
		h.log.Info("command not applied", "kind", cmd.Kind, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", cmd.Kind, cmd.ID, err)
	}
	return nil
}

// RegisterNode creates the Node a booted instance's kubelet registers, and its CSINode. The Node
// carries the EBS CSI driver's zone label as well: the driver's node plugin reports the zone
// under topology.ebs.csi.aws.com/zone and topology.kubernetes.io/zone (aws-ebs-csi-driver
// pkg/driver/node.go NodeGetInfo), and the kubelet copies the reported topology onto the Node
// when the plugin registers (kubelet pkg/volume/csi/nodeinfomanager). kube-scheduler's
// VolumeBinding filter matches a volume's node affinity and a class's allowedTopologies on it.
func (h *scenarioHarness) RegisterNode(ctx context.Context, node *corev1.Node) error {
	if zone := node.Labels[corev1.LabelTopologyZone]; zone != "" {
		node = node.DeepCopy()
		node.Labels[scheduling.LabelEBSCSIZone] = zone
	}
	_, err := h.kc.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return h.csiNode(ctx, node)
}

// ebsDriver is the AWS EBS CSI driver's name; the scenarios' StorageClasses provision with it.
const ebsDriver = "ebs.csi.aws.com"

// csiNode creates the node's CSINode as its kubelet does once the EBS CSI node plugin has
// registered: the driver with the node's zone as its topology and the attach limit the driver
// computes (aws-ebs-csi-driver, pkg/driver/node.go getVolumesLimit): a Nitro instance's 28
// attachment slots less its primary network interface, its root volume and one slot per
// instance-store NVMe disk (the catalog knows their total size, not their count: one disk is
// assumed when it has any), 39 on Xen. The kube-scheduler's NodeVolumeLimits filter counts a
// node's EBS volumes against it.
func (h *scenarioHarness) csiNode(ctx context.Context, node *corev1.Node) error {
	limit := int32(28 - 1 - 1)
	if it := h.cat.Get(node.Labels[corev1.LabelInstanceTypeStable]); it != nil {
		if it.Labels[apisv1.LabelInstanceHypervisor] == "xen" {
			limit = 39
		} else if v := it.Labels[catalog.LabelInstanceLocalNVME]; v != "" && v != "0" {
			limit--
		}
	}
	id := node.Name
	if _, inst, err := cloud.ParseAWSProviderID(node.Spec.ProviderID); err == nil {
		id = inst
	}
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node.Name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: ebsDriver, NodeID: id,
			TopologyKeys: []string{scheduling.LabelEBSCSIZone, corev1.LabelTopologyZone}, Allocatable: &storagev1.VolumeNodeResources{Count: &limit}}}}}
	_, err := h.kc.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// provisionVolumes plays the EBS CSI driver's external-provisioner for WaitForFirstConsumer
// claims: once kube-scheduler has picked a node (the volume.kubernetes.io/selected-node
// annotation), a volume is created in that node's zone (a PersistentVolume with that zone as
// its node affinity, pre-bound to the claim; kube-controller-manager's PV controller completes
// the binding and kube-scheduler then binds the pod). Claims of an Immediate class are left
// unbound: the scenarios describe the moment before their volume exists.
func (h *scenarioHarness) provisionVolumes(ctx context.Context) error {
	pvcs, err := h.kc.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range pvcs.Items {
		node := c.Annotations["volume.kubernetes.io/selected-node"]
		if c.Spec.VolumeName != "" || node == "" || c.Spec.StorageClassName == nil {
			continue
		}
		sc, err := h.kc.StorageV1().StorageClasses().Get(ctx, *c.Spec.StorageClassName, metav1.GetOptions{})
		if err != nil || sc.Provisioner != ebsDriver {
			continue
		}
		n, err := h.kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			continue
		}
		zone := n.Labels[corev1.LabelTopologyZone]
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(c.UID), Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": ebsDriver}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
				AccessModes:                   c.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              sc.Name,
				VolumeMode:                    c.Spec.VolumeMode,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: ebsDriver,
					VolumeHandle: "vol-" + string(c.UID)[:8], FSType: "ext4"}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}},
			},
		}
		if _, err := h.kc.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("provisioning %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return nil
}

// placement is where the plan put one pod.
type placement struct {
	node      string // existing node, or the Node of a launched NodeClaim once registered
	nodeClaim string // launched NodeClaim ("" for an existing node)
}

// run plays one scenario and returns its disagreements.
func (h *scenarioHarness) run(ctx context.Context, t *testing.T, s *scenariotest.Scenario) ([]string, error) {
	h.seq++
	set, err := s.Set()
	if err != nil {
		return nil, err
	}
	offline, offIn, err := planner.Plan(set, h.cat, cloud.NodeSettingsFor)
	if err != nil {
		return nil, fmt.Errorf("offline plan: %w", err)
	}
	cluster := "scenarios"
	fc := fake.New(fake.Options{Catalog: h.cat, Cluster: cluster, Registrar: h, Logger: h.log})
	if err := reservations(set, fc); err != nil {
		return nil, err
	}
	if err := h.apply(ctx, set, fc); err != nil {
		return nil, fmt.Errorf("creating the scenario's objects: %w", err)
	}
	want := len(offIn.Pods) + len(offIn.BoundPods)
	snap, err := h.snapshotWith(ctx, want)
	if err != nil {
		return nil, err
	}
	fails := h.prebound(snap, set, offline)
	prov := &provision.Handler{Cluster: cluster, Catalog: h.cat, NodeSettings: cloud.NodeSettingsFor, Provider: fc, Publisher: h,
		Codec: h.codec, Log: h.log}
	d, err := prov.Decide(ctx, snap)
	if err != nil {
		return nil, fmt.Errorf("provision decision: %w", err)
	}
	if len(d.Failures) > 0 {
		fails = append(fails, "launches refused: "+strings.Join(d.Failures, "; "))
	}
	// The live input is the scenario's: the same number of NodeClaims and unschedulable pods as
	// the plan over the manifests (pod names differ: controllers name their pods).
	if len(d.Launched) != len(offline.NodeClaims) || len(d.Unschedulable) != len(offline.Unschedulable) {
		fails = append(fails, fmt.Sprintf("live plan differs from the manifests' plan: %d NodeClaims and %d unschedulable, want %d and %d",
			len(d.Launched), len(d.Unschedulable), len(offline.NodeClaims), len(offline.Unschedulable)))
	}
	planned := map[string]placement{}
	for _, l := range d.Launched {
		for _, p := range l.Pods {
			planned[p] = placement{nodeClaim: l.NodeClaim.Name}
		}
	}
	for _, e := range d.Existing {
		for _, p := range e.Pods {
			planned[p.Namespace+"/"+p.Name] = placement{node: e.Name}
		}
	}
	unsched := map[string]string{}
	for _, u := range d.Unschedulable {
		unsched[u.Pod.Namespace+"/"+u.Pod.Name] = u.Reason
	}
	if err := h.settle(ctx, fc, planned); err != nil {
		fails = append(fails, err.Error())
	}
	return append(fails, h.verdict(ctx, planned, unsched)...), nil
}

// snapshotWith waits until the watcher's snapshot holds want pods (pending and bound, DaemonSet
// pods aside) with every StatefulSet's pods there, and returns it.
func (h *scenarioHarness) snapshotWith(ctx context.Context, want int) (*events.Snapshot, error) {
	deadline := time.Now().Add(60 * time.Second)
	var got int
	for {
		snap, err := h.builder.Build()
		if err != nil {
			return nil, err
		}
		got = len(snap.PendingPods)
		for _, p := range snap.Pods {
			if !isDaemonSetPod(&p) {
				got++
			}
		}
		if got == want {
			// One more beat for volumes and the like to reach the caches.
			time.Sleep(200 * time.Millisecond)
			return h.builder.Build()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the cluster has %d pods after 60 s, the scenario %d", got, want)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func isDaemonSetPod(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// settle boots the instances, runs the lifecycle function on fresh snapshots and plays each
// node's startup-taint daemon until every planned pod is bound and no node keeps a planned taint
// (then waits a few seconds more, so a pod the plan called unschedulable has had its chance), or
// 90 s pass.
func (h *scenarioHarness) settle(ctx context.Context, fc *fake.Cloud, planned map[string]placement) error {
	lc := &lifecyclefn.Handler{Cluster: "scenarios", Provider: fc, Publisher: h, Codec: h.codec, Log: h.log}
	deadline := time.Now().Add(90 * time.Second)
	var quietSince time.Time
	if err := h.registerInflight(ctx); err != nil {
		return err
	}
	for {
		if err := fc.Tick(ctx); err != nil {
			return fmt.Errorf("fake cloud: %w", err)
		}
		snap, err := h.builder.Build()
		if err != nil {
			return err
		}
		if _, err := lc.Decide(ctx, snap); err != nil {
			return fmt.Errorf("lifecycle decision: %w", err)
		}
		if err := h.startupTaintDaemon(ctx); err != nil {
			return err
		}
		if err := h.provisionVolumes(ctx); err != nil {
			return err
		}
		done, err := h.allPlacedAndOpen(ctx, planned)
		if err != nil {
			return err
		}
		switch {
		case done && quietSince.IsZero():
			quietSince = time.Now()
		case !done:
			quietSince = time.Time{}
		case time.Since(quietSince) > quietPeriod:
			return nil
		}
		if time.Now().After(deadline) {
			return nil // the verdict says what is missing
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// quietPeriod is how long every planned pod must stay bound with every node open before the
// verdict: kube-scheduler retries an unschedulable pod within a second of a node update (the
// taint removal that opened the node is one), so a pod the plan called unschedulable that
// kube-scheduler could place is bound by then.
const quietPeriod = 3 * time.Second

// allPlacedAndOpen reports whether every planned pod is bound and no node has the planned taint.
func (h *scenarioHarness) allPlacedAndOpen(ctx context.Context, planned map[string]placement) (bool, error) {
	pods, err := h.kc.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	bound := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound[p.Namespace+"/"+p.Name] = true
		}
	}
	for k := range planned {
		if !bound[k] {
			return false, nil
		}
	}
	nodes, err := h.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, n := range nodes.Items {
		if hasTaint(&n, apisv1.TaintKeyPlanned) || hasTaint(&n, apisv1.TaintKeyUnregistered) {
			return false, nil
		}
	}
	return true, nil
}

// startupTaintDaemon removes a registered node's startup taints (its NodeClaim's
// spec.startupTaints), as the DaemonSet they wait for (a CNI agent, say) does once it runs.
func (h *scenarioHarness) startupTaintDaemon(ctx context.Context) error {
	list, err := h.dc.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		var nc apisv1.NodeClaim
		if err := kube.FromUnstructured(&list.Items[i], &nc); err != nil {
			return err
		}
		if nc.Status.NodeName == "" || len(nc.Spec.StartupTaints) == 0 {
			continue
		}
		node, err := h.kc.CoreV1().Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if node.Labels[apisv1.LabelNodeRegistered] != "true" {
			continue
		}
		keep := node.Spec.Taints[:0:0]
		for _, t := range node.Spec.Taints {
			startup := false
			for _, s := range nc.Spec.StartupTaints {
				startup = startup || (s.Key == t.Key && s.Effect == t.Effect)
			}
			if !startup {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(node.Spec.Taints) {
			continue
		}
		node.Spec.Taints = keep
		if _, err := h.kc.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// verdict compares where kube-scheduler bound the pods with the plan.
//
// What agrees: every pod the plan placed is bound, and on every node the pods bound there (of
// those the plan placed) are the ones the plan put there, up to replicas of one controller:
// pods of one ReplicaSet, Job or StatefulSet without volume claims have one pod template, so
// swapping two of them between nodes changes no node's load, labels or constraints (the plan is
// symmetric in them) and is accepted. A StatefulSet pod with volume claims, or a bare Pod, is
// itself. Every pod the plan called unschedulable must still be unbound.
func (h *scenarioHarness) verdict(ctx context.Context, planned map[string]placement, unsched map[string]string) []string {
	var fails []string
	pods, err := h.kc.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	byKey := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byKey[p.Namespace+"/"+p.Name] = p
	}
	claimNode := map[string]string{}
	list, err := h.dc.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	for i := range list.Items {
		var nc apisv1.NodeClaim
		if err := kube.FromUnstructured(&list.Items[i], &nc); err == nil {
			claimNode[nc.Name] = nc.Status.NodeName
		}
	}
	// class counts per node: planned and actual.
	want, got := map[string]map[string]int{}, map[string]map[string]int{}
	add := func(m map[string]map[string]int, node, class string) {
		if m[node] == nil {
			m[node] = map[string]int{}
		}
		m[node][class]++
	}
	for _, k := range sortedKeys(planned) {
		pl := planned[k]
		node := pl.node
		if n, ok := claimNode[node]; ok && n != "" {
			node = n // an in-flight NodeClaim the plan placed the pod on: its Node now
		}
		if pl.nodeClaim != "" {
			node = claimNode[pl.nodeClaim]
			if node == "" {
				fails = append(fails, fmt.Sprintf("pod %s: planned onto NodeClaim %s, which has no node", k, pl.nodeClaim))
				continue
			}
		}
		p := byKey[k]
		if p == nil {
			fails = append(fails, fmt.Sprintf("pod %s: planned onto %s, gone", k, node))
			continue
		}
		if p.Spec.NodeName == "" {
			fails = append(fails, fmt.Sprintf("pod %s: planned onto %s, still pending: %s", k, node, schedulerSays(ctx, h.kc, p)))
			continue
		}
		add(want, node, podClass(p))
		add(got, p.Spec.NodeName, podClass(p))
	}
	for _, node := range sortedKeys(union(want, got)) {
		w, g := want[node], got[node]
		for _, c := range sortedKeys(union(w, g)) {
			if w[c] != g[c] {
				fails = append(fails, fmt.Sprintf("node %s: %d pods of %s bound, the plan put %d there (%s)", node, g[c], c, w[c], boundOn(pods.Items, node)))
			}
		}
	}
	for _, k := range sortedKeys(unsched) {
		p := byKey[k]
		if p != nil && p.Spec.NodeName != "" {
			fails = append(fails, fmt.Sprintf("pod %s: unschedulable in the plan (%s), bound to %s", k, unsched[k], p.Spec.NodeName))
		}
	}
	return fails
}

// podClass names the pods interchangeable with p: its workload's (a Deployment's ReplicaSet
// pods by the Deployment, as the manifests' own expansion names them), or p itself.
func podClass(p *corev1.Pod) string {
	ref := metav1.GetControllerOf(p)
	if ref == nil || (ref.Kind == "StatefulSet" && hasClaims(p)) {
		return "pod " + p.Namespace + "/" + p.Name
	}
	name := ref.Name
	if h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ref.Kind == "ReplicaSet" && h != "" {
		name = strings.TrimSuffix(name, "-"+h)
	}
	return "workload " + p.Namespace + "/" + name
}

func hasClaims(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

func boundOn(pods []corev1.Pod, node string) string {
	var names []string
	for _, p := range pods {
		if p.Spec.NodeName == node {
			names = append(names, p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(names)
	return "bound there: " + strings.Join(names, ", ")
}

// schedulerSays is the scheduler's last word on a pending pod: its PodScheduled condition.
func schedulerSays(ctx context.Context, kc kubernetes.Interface, p *corev1.Pod) string {
	if q, err := kc.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
		p = q
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	}
	return "no PodScheduled condition (the scheduler has not looked at it)"
}

func union[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// apply creates the scenario's objects in dependency order: namespaces, LimitRanges (admission
// reads them), StorageClasses, PersistentVolumes and claims, NodeClasses (with the status the
// lifecycle function would resolve: an instance profile), NodePools, Nodes (with their status),
// NodeClaims (with their status; one without a Node gets its instance in the fake cloud, which
// registers it), DaemonSets, PDBs, workloads and Pods. A StatefulSet is created with
// podManagementPolicy Parallel: the scenario, like `dovetail plan`, has all its replicas
// pending at once.
func (h *scenarioHarness) apply(ctx context.Context, set *manifests.Set, fc *fake.Cloud) error {
	for _, lr := range set.LimitRanges {
		if err := h.ensureNamespace(ctx, lr.Namespace); err != nil {
			return err
		}
		if _, err := h.kc.CoreV1().LimitRanges(lr.Namespace).Create(ctx, lr.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("limitrange %s/%s: %w", lr.Namespace, lr.Name, err)
		}
	}
	for _, sc := range set.StorageClasses {
		if _, err := h.kc.StorageV1().StorageClasses().Create(ctx, sc.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("storageclass %s: %w", sc.Name, err)
		}
	}
	for _, pv := range set.PVs {
		if _, err := h.kc.CoreV1().PersistentVolumes().Create(ctx, pv.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("persistentvolume %s: %w", pv.Name, err)
		}
	}
	for _, c := range set.PVCs {
		if err := h.ensureNamespace(ctx, c.Namespace); err != nil {
			return err
		}
		if _, err := h.kc.CoreV1().PersistentVolumeClaims(c.Namespace).Create(ctx, c.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("persistentvolumeclaim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	for _, w := range set.Workloads {
		if sts, ok := w.Object.(*appsv1.StatefulSet); ok {
			sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		}
	}
	if err := h.runtimeClasses(ctx, set); err != nil {
		return err
	}
	// First the cluster as it stood: capacity, DaemonSets and running pods, their DaemonSet pods
	// in place; then the pending pods, so kube-scheduler never sees a node emptier than the
	// scenario's.
	standing, pending := *set, &manifests.Set{Namespaces: set.Namespaces, Workloads: set.Workloads}
	standing.Workloads, standing.Pods = nil, nil
	for _, p := range set.Pods {
		if p.Spec.NodeName != "" {
			standing.Pods = append(standing.Pods, p)
		} else {
			pending.Pods = append(pending.Pods, p)
		}
	}
	c := &localdev.Cluster{Kube: h.kc, Dynamic: h.dc}
	if _, err := c.Apply(ctx, &standing); err != nil {
		return err
	}
	for _, n := range set.Nodes {
		if err := h.nodeStatus(ctx, n); err != nil {
			return err
		}
		if err := h.csiNode(ctx, n); err != nil {
			return err
		}
	}
	for _, nc := range set.NodeClasses {
		if err := h.nodeClassStatus(ctx, nc); err != nil {
			return err
		}
	}
	for _, nc := range set.NodeClaims {
		if err := h.nodeClaim(ctx, nc, fc); err != nil {
			return fmt.Errorf("nodeclaim %s: %w", nc.Name, err)
		}
	}
	if err := h.daemonSetsPlaced(ctx); err != nil {
		return err
	}
	_, err := c.Apply(ctx, pending)
	return err
}

func (h *scenarioHarness) ensureNamespace(ctx context.Context, ns string) error {
	if ns == "" {
		return nil
	}
	_, err := h.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// nodeStatus writes a manifest Node's status (capacity defaults to allocatable) through the
// status subresource; kwok then keeps it Ready.
func (h *scenarioHarness) nodeStatus(ctx context.Context, want *corev1.Node) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := h.kc.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Allocatable = want.Status.Allocatable
		n.Status.Capacity = want.Status.Capacity
		if n.Status.Capacity == nil {
			n.Status.Capacity = want.Status.Allocatable
		}
		_, err = h.kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// nodeClassStatus writes the manifest's status with the instance profile the lifecycle function
// would resolve for spec.role (the fake cloud boots no node without an identity).
func (h *scenarioHarness) nodeClassStatus(ctx context.Context, nc apisv1.NodeClass) error {
	if nc.EC2 == nil {
		return nil
	}
	st := nc.EC2.Status.DeepCopy()
	if st.InstanceProfile == "" {
		st.InstanceProfile = "scenarios-profile"
	}
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	_, err = h.dc.Resource(kube.EC2NodeClassGVR).Patch(ctx, nc.EC2.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// nodeClaim creates a manifest NodeClaim with its status. One whose Node the manifests hold is
// launched and registered already; one without is in flight: its instance runs in the fake cloud
// and its Node registers after the provision decision (settle), as a booting instance's would.
func (h *scenarioHarness) nodeClaim(ctx context.Context, nc *apisv1.NodeClaim, fc *fake.Cloud) error {
	// A manifest NodeClaim stands for one Dovetail launched before the scenario's decision, so it
	// carries the ownership mark the agent writes at creation (shared/kube/ownership.go): without
	// it the agent refuses, rightly, to register, untaint or nominate onto its Node. The mark is
	// the agent's, not in the launch's user data, so the Node registers without it.
	marked := nc.DeepCopy()
	if marked.Labels == nil {
		marked.Labels = map[string]string{}
	}
	marked.Labels[apisv1.LabelManagedBy] = apisv1.ManagedByAgent
	u, err := kube.ToUnstructured(marked, apisv1.GroupVersion, "NodeClaim")
	if err != nil {
		return err
	}
	delete(u.Object, "status")
	if _, err := h.dc.Resource(kube.NodeClaimGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return err
	}
	st := nc.Status.DeepCopy()
	if st.ProviderID == "" {
		zone := nc.Labels[corev1.LabelTopologyZone]
		if zone == "" {
			zone = "us-east-1a"
		}
		id := fmt.Sprintf("i-%017x", 0xabc000+h.seq*16+len(h.inflight))
		inst := cloud.Instance{ID: id, InstanceType: nc.Labels[corev1.LabelInstanceTypeStable], Zone: zone,
			CapacityType: nc.Labels[apisv1.LabelCapacityType], CapacityReservationID: nc.Labels[apisv1.LabelCapacityReservationID],
			Tags: map[string]string{apisv1.TagCluster: "scenarios", apisv1.TagNodeClaim: nc.Name}}
		if err := fc.AddInstance(inst); err != nil {
			return err
		}
		st.ProviderID = cloud.AWSProviderID(zone, id)
		h.inflight = append(h.inflight, inflightNode{claim: nc.DeepCopy(), providerID: st.ProviderID, inst: inst})
	}
	st.Conditions = append(st.Conditions, metav1.Condition{Type: apisv1.ConditionLaunched, Status: metav1.ConditionTrue,
		Reason: "Launched", LastTransitionTime: metav1.Now()})
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	_, err = h.dc.Resource(kube.NodeClaimGVR).Patch(ctx, nc.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// inflightNode is a manifest NodeClaim's instance whose Node has not registered yet.
type inflightNode struct {
	claim      *apisv1.NodeClaim
	providerID string
	inst       cloud.Instance
}

// registerInflight registers the Nodes of the in-flight NodeClaims as their kubelets would: the
// NodeClaim's labels and taints, its startup taints and karpenter.sh/unregistered.
func (h *scenarioHarness) registerInflight(ctx context.Context) error {
	for _, f := range h.inflight {
		it := h.cat.Get(f.inst.InstanceType)
		if it == nil {
			return fmt.Errorf("nodeclaim %s: instance type %q is not in the catalog", f.claim.Name, f.inst.InstanceType)
		}
		inst := f.inst
		inst.ProviderID = f.providerID
		taints := append(append(append([]corev1.Taint(nil), f.claim.Spec.Taints...), f.claim.Spec.StartupTaints...),
			corev1.Taint{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute})
		node, err := cloud.NodeFor(it, inst, cloud.NodeSpec{Name: "inflight-" + f.claim.Name, Region: "us-east-1",
			Labels: f.claim.Labels, Taints: taints, Now: time.Now()})
		if err != nil {
			return err
		}
		if err := h.RegisterNode(ctx, node); err != nil {
			return err
		}
	}
	h.inflight = nil
	return nil
}

// reservations gives the fake cloud the NodeClasses' capacity reservations (status) with the
// counts of their annotation: total instances (else the free count) of which the in-flight
// NodeClaims' instances take their share.
func reservations(set *manifests.Set, fc *fake.Cloud) error {
	counts, err := provisioning.ReservationCountsFromAnnotations(set.NodeClasses)
	if err != nil {
		return err
	}
	for _, nc := range set.NodeClasses {
		if nc.EC2 == nil {
			continue
		}
		for _, r := range nc.EC2.Status.CapacityReservations {
			c, ok := counts[r.ID]
			if !ok {
				continue
			}
			total := c.Total
			if total == 0 {
				total = c.Available
			}
			if err := fc.AddCapacityReservation(fake.CapacityReservation{ID: r.ID, InstanceType: r.InstanceType, Zone: r.AvailabilityZone,
				OwnerID: r.OwnerID, Type: r.ReservationType, MatchCriteria: r.InstanceMatchCriteria, Total: total}); err != nil {
				return fmt.Errorf("reservation %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

// cleanup deletes what a scenario made (workloads, pods, claims, nodes, Karpenter objects,
// volumes) and waits until it is gone, so the next scenario starts from an empty cluster.
func (h *scenarioHarness) cleanup(ctx context.Context) error {
	h.inflight = nil
	nss, err := h.kc.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	all := metav1.ListOptions{}
	for _, ns := range nss.Items {
		n := ns.Name
		if n == "kube-public" || n == "kube-node-lease" {
			continue
		}
		errs := []error{
			h.kc.AppsV1().Deployments(n).DeleteCollection(ctx, now, all),
			h.kc.AppsV1().StatefulSets(n).DeleteCollection(ctx, now, all),
			h.kc.AppsV1().ReplicaSets(n).DeleteCollection(ctx, now, all),
			h.kc.AppsV1().DaemonSets(n).DeleteCollection(ctx, now, all),
			h.kc.BatchV1().Jobs(n).DeleteCollection(ctx, now, all),
			h.kc.BatchV1().CronJobs(n).DeleteCollection(ctx, now, all),
			h.kc.PolicyV1().PodDisruptionBudgets(n).DeleteCollection(ctx, now, all),
			h.kc.CoreV1().LimitRanges(n).DeleteCollection(ctx, now, all),
			h.kc.CoreV1().Pods(n).DeleteCollection(ctx, now, all),
			h.kc.CoreV1().PersistentVolumeClaims(n).DeleteCollection(ctx, now, all),
		}
		if n == scenarioNamespace {
			errs = append(errs, h.kc.CoreV1().ConfigMaps(n).DeleteCollection(ctx, now, all))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	for _, gvr := range []schema.GroupVersionResource{kube.NodeClaimGVR, kube.NodePoolGVR, kube.EC2NodeClassGVR} {
		if err := h.dc.Resource(gvr).DeleteCollection(ctx, now, all); err != nil {
			return err
		}
	}
	if err := errors.Join(h.kc.CoreV1().Nodes().DeleteCollection(ctx, now, all),
		h.kc.StorageV1().CSINodes().DeleteCollection(ctx, now, all),
		h.kc.NodeV1().RuntimeClasses().DeleteCollection(ctx, now, all),
		h.kc.CoreV1().PersistentVolumes().DeleteCollection(ctx, now, all),
		h.kc.StorageV1().StorageClasses().DeleteCollection(ctx, now, all)); err != nil {
		return err
	}
	// Finalizers (karpenter.sh/termination on NodeClaims and Nodes, volume protection) would
	// hold the objects: nothing runs their termination here, so they are dropped.
	return waitGone(ctx, h.dropFinalizers)
}

// dropFinalizers removes the finalizers of every object left and reports how many remain.
func (h *scenarioHarness) dropFinalizers(ctx context.Context) (int, error) {
	left := 0
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	for _, gvr := range []schema.GroupVersionResource{kube.NodeClaimGVR, kube.NodePoolGVR, kube.EC2NodeClassGVR} {
		l, err := h.dc.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for _, u := range l.Items {
			left++
			if _, err := h.dc.Resource(gvr).Patch(ctx, u.GetName(), types.MergePatchType, unfinalize, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
		}
	}
	nodes, err := h.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, n := range nodes.Items {
		left++
		if _, err := h.kc.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, unfinalize, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	pvcs, err := h.kc.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, c := range pvcs.Items {
		left++
		if _, err := h.kc.CoreV1().PersistentVolumeClaims(c.Namespace).Patch(ctx, c.Name, types.MergePatchType, unfinalize, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	pvs, err := h.kc.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, v := range pvs.Items {
		left++
		if _, err := h.kc.CoreV1().PersistentVolumes().Patch(ctx, v.Name, types.MergePatchType, unfinalize, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	pods, err := h.kc.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	left += len(pods.Items)
	return left, nil
}

// waitGone polls until nothing is left (60 s at most).
func waitGone(ctx context.Context, left func(context.Context) (int, error)) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := left(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d objects still there after 60 s", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// runtimeClasses creates the RuntimeClass each pod names, with the overhead the pod carries: the
// scenarios write the pod as the RuntimeClass admission plugin leaves it (spec.overhead filled
// in), and that plugin refuses a pod whose overhead differs from its class's.
func (h *scenarioHarness) runtimeClasses(ctx context.Context, set *manifests.Set) error {
	seen := map[string]bool{}
	for _, p := range set.ExpandPods() {
		name := p.Spec.RuntimeClassName
		if name == nil || seen[*name] {
			continue
		}
		seen[*name] = true
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: *name}, Handler: *name}
		if len(p.Spec.Overhead) > 0 {
			rc.Overhead = &nodev1.Overhead{PodFixed: p.Spec.Overhead}
		}
		if _, err := h.kc.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("runtimeclass %s: %w", *name, err)
		}
	}
	return nil
}

// daemonSetsPlaced waits (30 s at most) until every DaemonSet has a pod bound on each existing
// node it targets (its node selector and required node affinity match, its tolerations cover
// the node's taints): a plan made, or a pending pod bound, before they are there would not see
// their host ports or requests on those nodes.
func (h *scenarioHarness) daemonSetsPlaced(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, err := h.daemonPodsBound(ctx)
		if err != nil {
			return err
		}
		if done || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (h *scenarioHarness) daemonPodsBound(ctx context.Context) (bool, error) {
	dss, err := h.kc.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil || len(dss.Items) == 0 {
		return err == nil, err
	}
	nodes, err := h.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	pods, err := h.kc.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	bound := map[types.UID]map[string]bool{}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "DaemonSet" && p.Spec.NodeName != "" {
			if bound[ref.UID] == nil {
				bound[ref.UID] = map[string]bool{}
			}
			bound[ref.UID][p.Spec.NodeName] = true
		}
	}
	for _, ds := range dss.Items {
		alts, err := scheduling.PodNodeRequirements(&corev1.Pod{Spec: ds.Spec.Template.Spec})
		if err != nil {
			return false, err
		}
		// The DaemonSet controller gives its pods tolerations of the node.kubernetes.io/ taints
		// (not-ready, unreachable, the pressures, unschedulable): a node that just joined still
		// has not-ready.
		tols := append(slices.Clone(ds.Spec.Template.Spec.Tolerations), corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists},
			corev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists},
			corev1.Toleration{Key: "node.kubernetes.io/unschedulable", Operator: corev1.TolerationOpExists})
		for _, n := range nodes.Items {
			if !slices.ContainsFunc(alts, func(r scheduling.Requirements) bool { return r.MatchLabels(n.Labels) == nil }) ||
				scheduling.UntoleratedTaint(tols, n.Spec.Taints) != nil {
				continue
			}
			if !bound[ds.UID][n.Name] {
				return false, nil
			}
		}
	}
	return true, nil
}

// prebound compares the pods kube-scheduler bound before any plan (the scenario lists them as
// pending, but an existing node had room for them as kube-scheduler counts it) with where the
// plan over the manifests puts them: per workload and existing node, the same count.
func (h *scenarioHarness) prebound(snap *events.Snapshot, set *manifests.Set, offline *provisioning.Plan) []string {
	running := map[string]bool{}
	for _, p := range set.Pods {
		if p.Spec.NodeName != "" {
			running[p.Namespace+"/"+p.Name] = true
		}
	}
	got := map[string]map[string]int{}
	any := false
	for i := range snap.Pods {
		p := &snap.Pods[i]
		if isDaemonSetPod(p) || running[p.Namespace+"/"+p.Name] {
			continue
		}
		any = true
		if got[p.Spec.NodeName] == nil {
			got[p.Spec.NodeName] = map[string]int{}
		}
		got[p.Spec.NodeName][podClass(p)]++
	}
	if !any {
		return nil
	}
	want := map[string]map[string]int{}
	for _, e := range offline.ExistingNodes {
		for _, p := range e.Pods {
			if want[e.Name] == nil {
				want[e.Name] = map[string]int{}
			}
			want[e.Name][offlineClass(p)]++
		}
	}
	var fails []string
	for node := range got {
		for c, n := range got[node] {
			if want[node][c] < n {
				fails = append(fails, fmt.Sprintf("kube-scheduler bound %d pods of %s to node %s before any plan (they fit it as kube-scheduler counts); the plan over the manifests puts %d there: %s",
					n, c, node, want[node][c], planSummary(offline)))
			}
		}
	}
	sort.Strings(fails)
	return fails
}

// offlineClass is podClass for a pod of the manifests' expansion (owned by its workload).
func offlineClass(p *corev1.Pod) string {
	ref := metav1.GetControllerOf(p)
	if ref == nil || (ref.Kind == "StatefulSet" && hasClaims(p)) {
		return "pod " + p.Namespace + "/" + p.Name
	}
	return "workload " + p.Namespace + "/" + ref.Name
}

func planSummary(plan *provisioning.Plan) string {
	var parts []string
	for i, nc := range plan.NodeClaims {
		var names []string
		for _, p := range nc.Pods {
			names = append(names, p.Name)
		}
		parts = append(parts, fmt.Sprintf("NodeClaim #%d (%s): %s", i, nc.Offerings[0].Zone, strings.Join(names, ",")))
	}
	for _, e := range plan.ExistingNodes {
		var names []string
		for _, p := range e.Pods {
			names = append(names, p.Name)
		}
		parts = append(parts, fmt.Sprintf("node %s: %s", e.Name, strings.Join(names, ",")))
	}
	return strings.Join(parts, "; ")
}
